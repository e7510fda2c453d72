package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.JournalStats;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.internal.OffHeap;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Shadow buffers: sized to what was logged, reused by context parity, bounded, never lost. */
@ExtendWith(TestSeed.class)
class ShadowPoolTest {
    static final int BS = 4096;

    @Test
    void aResetMakesEveryBufferOfItsParityFreeAgain() {
        try (ShadowPool pool = new ShadowPool(BS, 1L << 20)) {
            List<CilSlot> first = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                first.add(acquire(pool, 0, 64 * (1 + i % 64)));
            }
            CilSlot other = acquire(pool, 1, 64);
            long resident = pool.residentBytes();
            pool.reset(0);
            for (int i = 0; i < 100; i++) {
                CilSlot again = acquire(pool, 0, 64 * (1 + i % 64));
                assertSame(first.get(i).slab, again.slab, "buffer " + i + " was not reused");
                assertEquals(first.get(i).at, again.at, "buffer " + i + " was not reused");
                assertTrue(again.capacity >= 64 * (1 + i % 64) && again.capacity < 2 * 64 * (1 + i % 64));
            }
            assertEquals(resident, pool.residentBytes(), "nothing new allocated for the same demand");
            CilSlot next = acquire(pool, 1, 64);
            assertTrue(next.slab != other.slab || next.at != other.at, "parity 1 was not reset: its buffer is still in use");
        }
    }

    /**
     * Buffers of one region across its slabs (the first and each doubling) lie inside their slabs and apart,
     * in small pages (a first slab of 64 KiB) and in huge ones (a first slab of 2 MiB).
     */
    @Test
    void buffersAcrossSlabsNeverOverlap() {
        // 1,024 buffers of 64 B in the first 64 KiB slab, then slabs of 1,024, 2,048, 4,096
        buffersAcrossSlabsNeverOverlap(new ShadowPool(BS, 1L << 20), 5000);
        // 32,768 in the first 2 MiB slab, then slabs of 32,768, 65,536, 131,072
        buffersAcrossSlabsNeverOverlap(new ShadowPool(BS, 1L << 30), 5 * 32768);
    }

    /**
     * A pool that may keep a huge page for each region of a parity starts a region with one, so that its
     * shadows lie in huge pages; a smaller pool starts with 64 KiB, as one huge page per region would pass
     * what it may keep.
     */
    @Test
    void aRegionStartsWithAHugePageOnlyWhereThePoolMayKeepOnePerRegion() {
        try (ShadowPool small = new ShadowPool(BS, 8 * OffHeap.HUGE_PAGE - 1); ShadowPool large = new ShadowPool(BS, 8 * OffHeap.HUGE_PAGE)) {
            acquire(small, 0, 64);
            acquire(large, 0, 64);
            assertEquals(64 * 1024, small.residentBytes());
            assertEquals(OffHeap.HUGE_PAGE, large.residentBytes());
        }
    }

    private static void buffersAcrossSlabsNeverOverlap(ShadowPool shadows, int n) {
        try (ShadowPool pool = shadows) {
            int bytes = 64;
            List<CilSlot> slots = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                CilSlot s = acquire(pool, 0, bytes);
                assertTrue(s.at >= 0 && s.at + s.capacity <= s.slab.byteSize(), "buffer " + i + " at " + s.at + " of a slab of " + s.slab.byteSize());
                for (long b = 0; b < s.capacity; b += 8) {
                    s.slab.set(ValueLayout.JAVA_LONG_UNALIGNED, s.at + b, i);
                }
                slots.add(s);
            }
            for (int i = 0; i < n; i++) {
                CilSlot s = slots.get(i);
                for (long b = 0; b < s.capacity; b += 8) {
                    assertEquals(i, s.slab.get(ValueLayout.JAVA_LONG_UNALIGNED, s.at + b), "buffer " + i + " overwritten");
                }
            }
        }
    }

    @Test
    void aResetAfterAPeakFreesTheParityBeyondTheBound() {
        try (ShadowPool pool = new ShadowPool(BS, 256 * 1024)) {
            acquire(pool, 1, 64);
            long parity1 = pool.residentBytes();
            for (int i = 0; i < 1000; i++) {
                acquire(pool, 0, BS);
            }
            assertTrue(pool.residentBytes() >= 1000L * BS + parity1, "resident " + pool.residentBytes());
            pool.reset(0);
            assertEquals(parity1, pool.residentBytes(), "the peak of parity 0 was not freed");
            for (int i = 0; i < 10; i++) {
                acquire(pool, 0, BS);
            }
            pool.reset(0);
            assertTrue(pool.residentBytes() <= 256 * 1024 + parity1, "resident " + pool.residentBytes());
        }
    }

    /**
     * A buffer is its slab and offset, no object of its own: the first acquires of a million small
     * buffers allocate only what growing their region takes (a view per buffer was 40-odd bytes each), and
     * the acquire that doubles the region to two million about nothing (making a view of every new buffer
     * there cost its committer tens of milliseconds).
     */
    @Test
    void acquiringAndGrowingAllocateNoObjectPerBuffer() throws ReflectiveOperationException {
        int chunk = 1 << DirtyMap.chunkShift(BS);
        try (ShadowPool pool = new ShadowPool(BS, 1L << 30)) {
            CilSlot slot = new CilSlot();
            long before = allocatedBytes();
            for (int i = 0; i < (1 << 20); i++) {
                pool.acquire(0, chunk, slot);
            }
            long firstUses = allocatedBytes() - before;
            assertTrue(firstUses < 64 * 1024, firstUses + " bytes allocated by a million acquires");
            long resident = pool.residentBytes();
            before = allocatedBytes();
            pool.acquire(0, chunk, slot); // buffer 2^20: the region doubles
            long allocated = allocatedBytes() - before;
            assertEquals(2 * resident, pool.residentBytes(), "the region doubled");
            assertEquals(chunk, slot.capacity);
            assertTrue(allocated < 64 * 1024, allocated + " bytes allocated by the acquire that grew the region");
        }
    }

    private static CilSlot acquire(ShadowPool pool, int parity, int bytes) {
        CilSlot s = new CilSlot();
        pool.acquire(parity, bytes, s);
        return s;
    }

    /** Bytes this thread has allocated (through the JDK's extension, which this module does not read). */
    private static long allocatedBytes() throws ReflectiveOperationException {
        Object mx = java.lang.management.ManagementFactory.getThreadMXBean();
        return (Long) Class.forName("com.sun.management.ThreadMXBean").getMethod("getCurrentThreadAllocatedBytes").invoke(mx);
    }

    /** Packing and repacking a shadow as relogs add chunks in any order, then writing its op, gives the image's bytes. */
    @Test
    void packedShadowsFollowGrowingRelogs() {
        long seed = TestSeed.get(21);
        Random rnd = new Random(seed);
        int chunkShift = DirtyMap.chunkShift(BS);
        try (Arena arena = Arena.ofConfined(); ShadowPool pool = new ShadowPool(BS, 1L << 20)) {
            MemorySegment image = arena.allocate(BS);
            MemorySegment op = arena.allocate(2L * BS);
            for (int round = 0; round < 200; round++) {
                pool.reset(0);
                long logged = 0, loggedHigh = 0;
                CilSlot shadow = null;
                for (int relog = 0; relog < 6; relog++) {
                    int off = rnd.nextInt(BS - 1), len = 1 + rnd.nextInt(Math.min(BS - off, 700));
                    for (int b = off; b < off + len; b++) {
                        image.set(ValueLayout.JAVA_BYTE, b, (byte) rnd.nextInt());
                    }
                    long dirty = DirtyMap.low(off, len, chunkShift), dirtyHigh = DirtyMap.high(off, len, chunkShift);
                    long union = logged | dirty, unionHigh = loggedHigh | dirtyHigh;
                    int size = DirtyMap.packedSize(union, unionHigh, chunkShift);
                    if (shadow == null) {
                        shadow = acquire(pool, 0, size);
                    } else if (union != logged || unionHigh != loggedHigh) {
                        CilSlot to = size <= shadow.capacity ? shadow : acquire(pool, 0, size);
                        DirtyMap.repack(logged, loggedHigh, union, unionHigh, chunkShift, shadow.slab, shadow.at, to.slab, to.at);
                        shadow = to;
                    }
                    DirtyMap.pack(dirty, dirtyHigh, union, unionHigh, chunkShift, image, shadow.slab, shadow.at);
                    logged = union;
                    loggedHigh = unionHigh;
                    int opSize = DirtyMap.writeOp(op, 0, 1, 0, 9, logged, loggedHigh, logged, loggedHigh, chunkShift, shadow.slab, shadow.at);
                    int runs = DirtyMap.runs(logged, loggedHigh);
                    long data = LogRecordFormat.opDataStart(runs);
                    for (int r = 0; r < runs; r++) {
                        int ro = LogRecordFormat.rangeOffset(op, 0, r), rl = LogRecordFormat.rangeLength(op, 0, r);
                        assertEquals(-1, image.asSlice(ro, rl).mismatch(op.asSlice(data, rl)),
                                "seed " + seed + ", round " + round + ", relog " + relog + ": range [" + ro + ", +" + rl + ")");
                        data += rl;
                    }
                    assertEquals(LogRecordFormat.opSize(runs, DirtyMap.packedSize(logged, loggedHigh, chunkShift)), opSize);
                }
            }
        }
    }

    /**
     * Checkpoints of more than 65,536 small items, over and over: the shadows hold what was logged (a
     * chunk per item, not a block), and reusing them allocates nothing more from the second round on.
     */
    @Test
    void repeatedCheckpointsOfManySmallItemsKeepShadowMemoryBounded() {
        int bs = 1024;
        int items = 70_000;
        LogGeometry g = new LogGeometry(items, 32_768);
        try (MemoryDevice dev = MemoryDevice.create(items + 32_768, bs); Arena arena = Arena.ofShared()) {
            Journal.format(dev, g);
            JournalOptions options = JournalOptions.defaults().withPushThreshold(8L << 20); // one context per round
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, options, rep)) {
                TestItem[] pool = new TestItem[items];
                for (int i = 0; i < items; i++) {
                    pool[i] = new TestItem(i, bs, arena);
                }
                long[] resident = new long[4];
                for (int round = 0; round < resident.length; round++) {
                    for (int first = 0; first < items; first += 1000) {
                        Transaction tx = j.begin(Reservation.items(1000));
                        int end = Math.min(items, first + 1000);
                        for (int i = first; i < end; i++) {
                            pool[i].lock.lock();
                        }
                        long seq;
                        try {
                            for (int i = first; i < end; i++) {
                                pool[i].add(tx, 0, 1);
                            }
                            seq = tx.commit();
                        } finally {
                            for (int i = first; i < end; i++) {
                                pool[i].lock.unlock();
                            }
                        }
                        j.throttle(seq);
                    }
                    j.quiesce();
                    resident[round] = j.stats().shadowBytes();
                    JournalStats s = j.stats();
                    assertTrue(s.checkpointItems() >= (round + 1L) * items, s.toString());
                }
                String all = Arrays.toString(resident) + "; " + j.stats();
                // a chunk per item per parity, with room for the size classes and slab doubling
                long bound = 2L * 4 * items * (bs / DirtyMap.CHUNKS);
                assertTrue(Arrays.stream(resident).max().orElseThrow() <= bound,
                        "shadows larger than what was logged (" + bound + " bytes): " + all);
                // rounds land in contexts of either parity (empty contexts come between): each parity grows
                // once to the same size, and from then on every round reuses it
                assertTrue(Arrays.stream(resident).distinct().count() <= 2
                        && Arrays.stream(resident).allMatch(r -> r == resident[0] || r == 2 * resident[0]),
                        "shadow memory grew from round to round: " + all);
            }
            MemorySegment blk = arena.allocate(bs, BlockDevice.BUFFER_ALIGNMENT);
            dev.read(items - 1, blk);
            assertEquals(4, TestItem.blockCounter(blk, 0));
        }
    }
}
