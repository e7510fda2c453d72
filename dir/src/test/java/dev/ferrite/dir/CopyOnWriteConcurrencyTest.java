package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Copies on write into one cloned file from many threads ({@link CopyOnWrite} under the shared I/O lock
 * and {@link BlockRanges}): writes of disjoint ranges do not wait for each other, a write waits for a
 * read of its range that looks at the old blocks, and random writers beside readers leave each block its
 * last write, the source unchanged and every count right (the checker, at the end).
 */
@ExtendWith(TestSeed.class)
class CopyOnWriteConcurrencyTest extends FileTestBase {
    private static final long SEED = TestSeed.get(0xC0C0);
    /** How long an operation that must not wait for the held I/O may take. */
    private static final long PROMPT_SECONDS = 10;
    /** The generation whose data write {@link GatedDevice} holds. */
    private static final int HELD = 0x7777;
    private GatedDevice gated;
    /** A thread per task: the common pool may have one, which the held I/O would keep. */
    private final ExecutorService threads = Executors.newCachedThreadPool();

    /** Holds the first write of generation {@link #HELD} data, or the first read of {@link #gatedRead}, until {@link #release} opens. */
    static final class GatedDevice extends ForwardingDevice {
        volatile boolean holdWrite;
        volatile long gatedRead = -1;
        final CountDownLatch entered = new CountDownLatch(1), release = new CountDownLatch(1);

        GatedDevice(BlockDevice inner) {
            super(inner);
        }

        @Override
        public void write(long block, MemorySegment src) {
            if (holdWrite && (src.get(U64, 0) & 0xFFFF) == HELD) {
                holdWrite = false;
                hold();
            }
            super.write(block, src);
        }

        @Override
        public void read(long block, MemorySegment dst) {
            if (block == gatedRead) {
                gatedRead = -1;
                hold();
            }
            super.read(block, dst);
        }

        private void hold() {
            entered.countDown();
            try {
                assertTrue(release.await(60, TimeUnit.SECONDS), "the held I/O was never released");
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
    }

    @AfterEach
    void stopThreads() {
        gated.release.countDown(); // a failed test's held I/O too, so the volume closes
        threads.shutdown();
    }

    @Override
    BlockDevice device(MemoryDevice formatted) {
        return gated = new GatedDevice(formatted);
    }

    private void assertGen(Handle f, int block, int gen) {
        MemorySegment in = buffer(1);
        assertEquals(BS, ns.read(f, (long) block * BS, in));
        assertStamped(in, (long) block * BS, gen);
    }

    @Test
    void copiesOnWriteOfDisjointRangesOfOneFileDoNotWaitForEachOther() throws Exception {
        try (Handle a = written("a", 16, 1); Handle b = ns.create(root, "b", 0644, true)) {
            ns.cloneRange(a, 0, b, 0, 0);
            gated.holdWrite = true;
            Future<?> held = threads.submit(() -> ns.write(b, 2L * BS, stamped(2L * BS, 2, HELD)));
            assertTrue(gated.entered.await(PROMPT_SECONDS, TimeUnit.SECONDS), "the copy on write reached the device");
            // another range's copy on write, and a read beside it, while the first one's data write is held
            threads.submit(() -> ns.write(b, 9L * BS, stamped(9L * BS, 1, 3))).get(PROMPT_SECONDS, TimeUnit.SECONDS);
            threads.submit(() -> assertGen(b, 9, 3)).get(PROMPT_SECONDS, TimeUnit.SECONDS);
            Future<?> overlapping = threads.submit(() -> ns.write(b, 3L * BS, stamped(3L * BS, 1, 4)));
            assertFalse(waitsOut(overlapping), "a copy on write of an overlapping range went ahead of the held one");
            gated.release.countDown();
            held.get(PROMPT_SECONDS, TimeUnit.SECONDS);
            overlapping.get(PROMPT_SECONDS, TimeUnit.SECONDS);
            assertGen(b, 2, HELD);
            assertGen(b, 3, 4);
            for (int blk = 0; blk < 16; blk++) {
                assertGen(a, blk, 1);
            }
        }
    }

    @Test
    void aCopyOnWriteWaitsForAReadOfItsOldBlocks() throws Exception {
        try (Handle a = written("a", 16, 1); Handle b = ns.create(root, "b", 0644, true)) {
            ns.cloneRange(a, 0, b, 0, 0);
            FileExtent e = ns.extents(b, 5L * BS, BS).getFirst();
            gated.gatedRead = (e.deviceOffset() + 5L * BS - e.offset()) / BS;
            Future<?> read = threads.submit(() -> assertGen(b, 5, 1));
            assertTrue(gated.entered.await(PROMPT_SECONDS, TimeUnit.SECONDS), "the read reached the device");
            Future<?> write = threads.submit(() -> ns.write(b, 5L * BS, stamped(5L * BS, 1, 2)));
            // remapped meanwhile, the old block could be another file's to write in place before the read
            assertFalse(waitsOut(write), "a copy on write let go of a block a read was reading");
            threads.submit(() -> ns.write(b, 6L * BS, stamped(6L * BS, 1, 3))).get(PROMPT_SECONDS, TimeUnit.SECONDS);
            gated.release.countDown();
            read.get(PROMPT_SECONDS, TimeUnit.SECONDS);
            write.get(PROMPT_SECONDS, TimeUnit.SECONDS);
            assertGen(b, 5, 2);
            assertGen(b, 6, 3);
            assertGen(a, 5, 1);
        }
    }

    /** Whether {@code f} finishes within a second (it should not: it waits for the held I/O). */
    private static boolean waitsOut(Future<?> f) throws Exception {
        try {
            f.get(1, TimeUnit.SECONDS);
            return true;
        } catch (java.util.concurrent.TimeoutException e) {
            return false;
        }
    }

    /**
     * Writers copy on write into a clone of a file, direct, one to four blocks at random places: in the
     * first half of the file each write holds the test's locks of its blocks, so each block ends holding
     * the last write to it; in the second half writes overlap freely, so each block ends holding one of
     * the writes to it whole. Readers meanwhile read random ranges of both files: the source reads as it
     * was, the clone's blocks each as some write to that block (never another block's bytes, as a block
     * freed under the read and reused would). Fixed seeds; the checker counts every block at the end.
     */
    @Test
    void writersOfDisjointAndOverlappingRangesOfACloneBesideReaders() throws InterruptedException {
        int blocks = 512, writers = 6, readers = 2, writes = 400, half = blocks / 2;
        Handle a = written("a", blocks, 1), b = ns.create(root, "b", 0644, true);
        ns.cloneRange(a, 0, b, 0, 0);
        long start = free();
        int[] last = new int[blocks];
        Arrays.fill(last, 1);
        ReentrantLock[] locks = new ReentrantLock[half];
        Arrays.setAll(locks, k -> new ReentrantLock());
        // per block of the second half: a bit per writer that wrote it, and whether the start generation may remain
        AtomicLongArray wrote = new AtomicLongArray(blocks);
        AtomicBoolean done = new AtomicBoolean();
        AtomicInteger running = new AtomicInteger(writers);
        runThreads(writers + readers, "cow-writers", (me, mine) -> {
            Random rnd = new Random(SEED * 31 + me);
            if (me < writers) { // generations 2 + writers * n + me: the writer is gen - 2 mod writers
                try {
                    for (int n = 0; n < writes; n++) {
                        int len = 1 + rnd.nextInt(4), gen = 2 + writers * n + me;
                        boolean modelled = rnd.nextBoolean();
                        int blk = modelled ? rnd.nextInt(half - len + 1) : half + rnd.nextInt(half - len + 1);
                        MemorySegment m = mine.allocate((long) len * BS, BlockDevice.BUFFER_ALIGNMENT);
                        for (long w = 0; w < m.byteSize(); w += 8) {
                            m.set(U64, w, ((long) blk * BS + w) << 16 | gen);
                        }
                        if (modelled) {
                            for (int k = blk; k < blk + len; k++) {
                                locks[k].lock();
                            }
                            try {
                                ns.write(b, (long) blk * BS, m);
                                for (int k = blk; k < blk + len; k++) {
                                    last[k] = gen;
                                }
                            } finally {
                                for (int k = blk; k < blk + len; k++) {
                                    locks[k].unlock();
                                }
                            }
                        } else {
                            for (int k = blk; k < blk + len; k++) {
                                wrote.getAndAccumulate(k, 1L << me, (x, y) -> x | y);
                            }
                            ns.write(b, (long) blk * BS, m);
                        }
                    }
                } finally {
                    if (running.decrementAndGet() == 0) {
                        done.set(true);
                    }
                }
            } else {
                MemorySegment m = mine.allocate(4L * BS, BlockDevice.BUFFER_ALIGNMENT);
                while (!done.get()) {
                    int len = 1 + rnd.nextInt(4), blk = rnd.nextInt(blocks - len + 1);
                    boolean source = rnd.nextInt(4) == 0;
                    MemorySegment in = m.asSlice(0, (long) len * BS);
                    ns.read(source ? a : b, (long) blk * BS, in);
                    for (long w = 0; w < in.byteSize(); w += 8) {
                        long word = in.get(U64, w), gen = word & 0xFFFF;
                        if (word >>> 16 != (long) blk * BS + w || source && gen != 1) {
                            throw new AssertionError((source ? "the source" : "the clone") + " reads 0x" + Long.toHexString(word)
                                    + " at file offset " + ((long) blk * BS + w) + " (seed " + SEED + ")");
                        }
                    }
                }
            }
        });
        MemorySegment in = buffer(1);
        for (int blk = 0; blk < blocks; blk++) {
            ns.read(b, (long) blk * BS, in);
            int gen = (int) (in.get(U64, 0) & 0xFFFF);
            if (blk < half) {
                assertStamped(in, (long) blk * BS, last[blk]);
            } else {
                assertStamped(in, (long) blk * BS, gen);
                assertTrue(gen == 1 ? wrote.get(blk) == 0 : (wrote.get(blk) & 1L << (gen - 2) % writers) != 0,
                        "block " + blk + " of the clone holds generation " + gen + ", which no write to it had (seed " + SEED + ")");
            }
            ns.read(a, (long) blk * BS, in);
            assertStamped(in, (long) blk * BS, 1);
        }
        VolumeFixtures.assertChecked(ns);
        a.close();
        b.close();
        ns.unlink(root, "b");
        assertEquals(start, free(), "the clone's copies all freed, the source's blocks kept (seed " + SEED + ")");
        ns.unlink(root, "a");
    }
}
