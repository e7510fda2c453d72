package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferrite.io.internal.OffHeap;

/**
 * Off-heap buffers holding the CIL's copy of each logged item (its shadow) until the item's checkpoint
 * is formatted. A shadow holds only the logged chunks, packed, so it is sized to what was logged (in
 * power-of-two classes from one chunk to a whole block), not to the block.
 *
 * <p>Buffers come from regions, one per context parity and size class, each a growing array of slices of
 * slabs. Every shadow of a context has the context's parity, and contexts of one parity never overlap
 * (context k + 2 is created only once k is formatted), so a region needs no per-buffer free list: a
 * committer takes the next index with one atomic increment (lock-free, and allocation-free once the
 * region has grown to the peak), and once context k is formatted the push thread {@link #reset}s its
 * parity, making every buffer of it free again. No buffer is ever lost. A reset also bounds what the pool
 * keeps: when a parity holds more than {@code retainBytes} (after a peak), its slabs are freed and the next
 * context of that parity grows them again to what it needs.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class ShadowPool implements AutoCloseable {
    /** Smallest slab: the first of a region; each later one doubles the region. */
    private static final int MIN_SLAB_BYTES = 64 * 1024;
    private static final MemorySegment[] NONE = new MemorySegment[0];

    /** One parity's buffers of one size. Grown under its own monitor; indexes handed out lock-free. */
    private static final class Region {
        final int bufferBytes;
        final AtomicInteger next = new AtomicInteger();
        volatile MemorySegment[] buffers = NONE;
        /** Guarded by this region's monitor. */
        final List<Arena> slabs = new ArrayList<>();
        long bytes;

        Region(int bufferBytes) {
            this.bufferBytes = bufferBytes;
        }
    }

    private final int chunkShift;
    private final long retainBytes;
    private final Region[][] regions;
    private final AtomicLong resident = new AtomicLong();

    /**
     * @param blockSize   item size: the largest shadow
     * @param retainBytes most bytes one parity keeps across a reset
     */
    public ShadowPool(int blockSize, long retainBytes) {
        this.chunkShift = DirtyMap.chunkShift(blockSize);
        this.retainBytes = retainBytes;
        int classes = 8; // one chunk .. 128 chunks, doubling
        this.regions = new Region[2][classes];
        for (int p = 0; p < 2; p++) {
            for (int c = 0; c < classes; c++) {
                regions[p][c] = new Region(1 << (chunkShift + c));
            }
        }
    }

    /** A buffer of at least {@code bytes} (a multiple of the chunk size) for a context of {@code parity}. */
    MemorySegment acquire(int parity, int bytes) {
        int chunks = bytes >>> chunkShift;
        Region r = regions[parity][chunks <= 1 ? 0 : 64 - Long.numberOfLeadingZeros(chunks - 1)];
        int i = r.next.getAndIncrement();
        MemorySegment[] b = r.buffers;
        return i < b.length ? b[i] : grow(r, i);
    }

    private MemorySegment grow(Region r, int i) {
        synchronized (r) {
            while (r.buffers.length <= i) {
                MemorySegment[] old = r.buffers;
                long slabBytes = Math.max(MIN_SLAB_BYTES, (long) old.length * r.bufferBytes);
                int n = (int) (slabBytes / r.bufferBytes);
                Arena arena = Arena.ofShared();
                // mapped, not zeroed here: growing a region by tens of MiB is then a system call, where
                // zeroing it stalled this committer (and the region's others, on this monitor) for as long
                // as first-touching every page took: 0.1 s for 32 MiB on a VM; pages now fault in as filled
                MemorySegment slab = OffHeap.reserve(slabBytes, arena);
                MemorySegment[] grown = Arrays.copyOf(old, old.length + n);
                for (int k = 0; k < n; k++) {
                    grown[old.length + k] = slab.asSlice((long) k * r.bufferBytes, r.bufferBytes);
                }
                r.slabs.add(arena);
                r.bytes += slabBytes;
                resident.addAndGet(slabBytes);
                r.buffers = grown;
            }
            return r.buffers[i];
        }
    }

    /**
     * Push thread, once the context of {@code parity} is formatted and the next one of that parity not
     * yet created: every buffer of the parity is free again. Frees the parity's slabs if it holds more
     * than the retain bound.
     */
    void reset(int parity) {
        long held = 0;
        for (Region r : regions[parity]) {
            r.next.set(0);
            held += r.bytes;
        }
        if (held > retainBytes) {
            for (Region r : regions[parity]) {
                free(r);
            }
        }
    }

    private void free(Region r) {
        synchronized (r) {
            r.buffers = NONE;
            for (Arena a : r.slabs) {
                a.close();
            }
            r.slabs.clear();
            resident.addAndGet(-r.bytes);
            r.bytes = 0;
        }
    }

    /** Off-heap bytes the pool holds now, in use or free. */
    long residentBytes() {
        return resident.get();
    }

    @Override
    public void close() {
        for (Region[] parity : regions) {
            for (Region r : parity) {
                free(r);
            }
        }
    }
}
