package dev.ferrite.perf.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferrite.io.internal.OffHeap;

/**
 * Fresh memory as a store's measured phase finds it, made the same for every target: on a virtual machine
 * whose host takes back the guest's free memory (virtio-balloon free page reporting, as this project's VMs
 * do: every 2 MiB block free for a second or two), the first touch of such memory costs the hypervisor
 * about 9 µs per 4 KiB page, against a fortieth of that for memory freed a moment ago, which the kernel
 * hands out first. A store that fills 256 MiB of new memory in its insert (16 KiB values into a cache, a
 * tmpfs file's pages) then ran in one regime or the other by chance: which blocks the kernel gave it, and
 * whether a wait before the phase (the JIT's settling, another target's phase) had let the host take them.
 * {@link #warm} touches and frees memory just before a phase, so that what the phase takes next is backed.
 */
final class HostMemory {
    /** The most touched for one phase: a second or so where the host had taken it all back. */
    static final long MAX_WARM = 1L << 30;

    private HostMemory() {
    }

    /**
     * Memory a phase writing {@code bytes} of values may take fresh: twice them (a store's cache and its
     * file, or a log and its tree) and 64 MiB for the rest (the heap's churn, the trees), at most {@link #MAX_WARM}.
     */
    static long forValues(long bytes) {
        return Math.min(MAX_WARM, 2 * bytes + (64L << 20));
    }

    /**
     * Touches {@code bytes} of new memory (in huge pages where the kernel has them, as the kernel's free
     * lists hold it) and gives it back at once: the kernel hands these pages out first to the allocations
     * that follow, the host still backing them. Best effort: a kernel that cannot populate only costs the time.
     */
    static void warm(long bytes) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = OffHeap.reserveHuge(bytes, arena);
            for (long at = 0; at < bytes; at += OffHeap.HUGE_PAGE) {
                OffHeap.populate(m.asSlice(at, Math.min(OffHeap.HUGE_PAGE, bytes - at)));
            }
        }
    }
}
