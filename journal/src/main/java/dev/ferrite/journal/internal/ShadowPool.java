package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferrite.io.internal.OffHeap;

/**
 * Off-heap buffers holding the CIL's copy of each logged item (its shadow) until the item's checkpoint
 * is formatted. A shadow holds only the logged chunks, packed, so it is sized to what was logged (in
 * power-of-two classes from one chunk to a whole block), not to the block.
 *
 * <p>Buffers come from regions, one per context parity and size class, each a growing list of slabs
 * (the first of 64 KiB, or of one huge page in a pool that may keep a huge page per region anyway, each
 * later one doubling the region). Every shadow of a context has the context's parity, and contexts of
 * one parity never overlap (context k + 2 is created only once k is formatted), so
 * a region needs no per-buffer free list: a committer takes the next index with one atomic increment
 * (lock-free, and allocation-free once the region has grown to the peak), and once context k is
 * formatted the push thread {@link #reset}s its parity, making
 * every buffer of it free again. No buffer is ever lost. A reset also bounds what the pool keeps: when a
 * parity holds more than {@code retainBytes} (after a peak), its slabs are freed and the next context of
 * that parity grows them again to what it needs.
 *
 * <p>A buffer is named by its slab and its offset there, not by a segment of its own: a view per buffer
 * (made on the buffer's first use, and kept) was one more object per commit for the committer to reach,
 * in a cache line of its own that a relog of a leaf met cold; the slabs are a few objects every
 * committer uses. Growing a region maps a slab and nothing else (when a region made a view of every new
 * buffer as it doubled, the committer that grew a region of small buffers past a million made a million
 * views at once, 23–70 ms of its CPU).
 *
 * <p>Huge pages: a checkpoint's shadows are tens of megabytes that its commits touch in no order (a leaf
 * relogged a thousand commits after its last copy), so in 4 KiB pages nearly every copy into a shadow
 * missed the TLB, a nested page walk on a virtual machine: the copies of 100–600 bytes were 20% of a
 * 1-thread put's samples. A pool whose {@code retainBytes} covers a huge page for each region of a parity
 * starts every region with one ({@link OffHeap#reserveHuge}), so all its slabs are huge pages; a small
 * pool keeps 64 KiB slabs in small pages, as one huge page per region would pass what it may keep.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class ShadowPool implements AutoCloseable {
    /** First slab of a region in small pages; each later one doubles the region. */
    private static final int SMALL_SLAB_BYTES = 64 * 1024;
    /** Size classes, one chunk to a whole block, doubling: regions per parity. */
    private static final int CLASSES = 8;
    private static final MemorySegment[] NO_SLABS = new MemorySegment[0];

    /** One parity's buffers of one size. Grown under its own monitor; indexes handed out lock-free. */
    private static final class Region {
        final int bufferBytes;
        /** The first slab's bytes: {@link #SMALL_SLAB_BYTES} or a huge page; every later slab is at least as large. */
        final int firstSlabBytes;
        /** Buffers in the first slab, a power of two; slab k > 0 holds buffers [first << (k - 1), first << k). */
        final int firstShift;
        final AtomicInteger next = new AtomicInteger();
        /** How many buffers the slabs hold. */
        volatile int capacity;
        /**
         * The slabs' memory: changed under this region's monitor (before {@link #capacity}), read without it
         * by each acquire (never while its parity is reset: contexts of one parity never overlap).
         */
        volatile MemorySegment[] slabs = NO_SLABS;
        /** Guarded by this region's monitor: holds every slab, unmapped together (one closing of a shared arena). */
        Arena arena;
        long bytes;

        Region(int bufferBytes, int firstSlabBytes) {
            this.bufferBytes = bufferBytes;
            this.firstSlabBytes = firstSlabBytes;
            this.firstShift = Integer.numberOfTrailingZeros(Math.max(1, firstSlabBytes / bufferBytes));
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
        int firstSlabBytes = retainBytes >= CLASSES * OffHeap.HUGE_PAGE ? (int) OffHeap.HUGE_PAGE : SMALL_SLAB_BYTES;
        this.regions = new Region[2][CLASSES];
        for (int p = 0; p < 2; p++) {
            for (int c = 0; c < CLASSES; c++) {
                regions[p][c] = new Region(1 << (chunkShift + c), firstSlabBytes);
            }
        }
    }

    /**
     * Gives {@code slot} a buffer of at least {@code bytes} (a multiple of the chunk size) for a context of
     * {@code parity}: its slab, its offset there and its size ({@link CilSlot#slab}).
     */
    void acquire(int parity, int bytes, CilSlot slot) {
        int chunks = bytes >>> chunkShift;
        Region r = regions[parity][chunks <= 1 ? 0 : 64 - Long.numberOfLeadingZeros(chunks - 1)];
        int i = r.next.getAndIncrement();
        if (i >= r.capacity) {
            grow(r, i);
        }
        int k = 32 - Integer.numberOfLeadingZeros(i >>> r.firstShift); // 0 in the first slab, else the slab whose doubling holds i
        long at = k == 0 ? i : i - (1L << (r.firstShift + k - 1));
        slot.slab = r.slabs[k]; // read after capacity, which the grow wrote after slabs
        slot.at = at * r.bufferBytes;
        slot.capacity = r.bufferBytes;
    }

    /** Maps slabs until the region holds buffer {@code i}. */
    private void grow(Region r, int i) {
        synchronized (r) {
            while (r.capacity <= i) {
                int n = r.capacity;
                long slabBytes = Math.max(r.firstSlabBytes, (long) n * r.bufferBytes);
                if (r.arena == null) {
                    r.arena = Arena.ofShared();
                }
                // mapped, not zeroed here: pages fault in as shadows fill them (zeroing up front stalled
                // the committer that grew, and the region's others on this monitor)
                MemorySegment[] slabs = Arrays.copyOf(r.slabs, r.slabs.length + 1);
                slabs[slabs.length - 1] = r.firstSlabBytes >= OffHeap.HUGE_PAGE ? OffHeap.reserveHuge(slabBytes, r.arena)
                        : OffHeap.reserve(slabBytes, r.arena);
                r.slabs = slabs;
                r.bytes += slabBytes;
                resident.addAndGet(slabBytes);
                r.capacity = n + (int) (slabBytes / r.bufferBytes);
            }
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
            r.slabs = NO_SLABS;
            r.capacity = 0;
            if (r.arena != null) {
                r.arena.close();
                r.arena = null;
            }
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
