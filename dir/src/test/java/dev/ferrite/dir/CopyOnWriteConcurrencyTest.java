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
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntConsumer;

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
 * read of its range that looks at the old blocks, the remaps of writers finishing together commit in
 * shared transactions ({@link Remaps}), and random writers beside readers leave each block its last
 * write, the source unchanged and every count right (the checker, at the end). On a volume whose log
 * has room for nine steps of a batch in one transaction: a step reserves about 160 log items (0.7 MB)
 * and a transaction at most an eighth of the log, so the fixtures' 4 MiB log carries one.
 */
@ExtendWith(TestSeed.class)
class CopyOnWriteConcurrencyTest extends FileTestBase {
    private static final long SEED = TestSeed.get(0xC0C0);
    /** How long an operation that must not wait for the held I/O may take. */
    private static final long PROMPT_SECONDS = 10;
    /** The generation whose data write {@link GatedDevice} holds. */
    private static final int HELD = 0x7777;
    private static final VolumeOptions OPTIONS = VolumeFixtures.OPTIONS.withLogBlocks(12_288);
    private GatedDevice gated;
    /** A thread per task: the common pool may have one, which the held I/O would keep. */
    private final ExecutorService threads = Executors.newCachedThreadPool();

    /**
     * Holds the first write of generation {@link #HELD} data, or the first read of {@link #gatedRead}, until
     * {@link #release} opens; takes {@link #writeNanos} longer over every write.
     */
    static final class GatedDevice extends ForwardingDevice {
        volatile boolean holdWrite;
        volatile long writeNanos;
        volatile long gatedRead = -1;
        final CountDownLatch entered = new CountDownLatch(1), release = new CountDownLatch(1);

        GatedDevice(BlockDevice inner) {
            super(inner);
        }

        @Override
        public void write(long block, MemorySegment src) {
            long nanos = writeNanos;
            if (nanos > 0) {
                LockSupport.parkNanos(nanos);
            }
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
    VolumeOptions options() {
        return OPTIONS;
    }

    @Override
    MemoryDevice formatted() {
        MemoryDevice d = MemoryDevice.create(4 * VolumeFixtures.BLOCKS, BS);
        Volume.format(d, OPTIONS);
        return d;
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
     * Six writers copy on write six blocks of a clone (its extents inline) while the test holds the file's
     * inode lock, so that each has staged and written its copy and waits to remap. Once the lock is let go,
     * the six remaps commit in at most two transactions (the turn holder's batch, then all published behind
     * it); before batching, each was a transaction of its own, one after another on that lock.
     */
    @Test
    void remapsOfWritersWaitingOnTheInodeLockShareTransactions() throws Exception {
        int writers = 6;
        try (Handle a = written("a", 16, 1); Handle b = ns.create(root, "b", 0644, true)) {
            ns.cloneRange(a, 0, b, 0, 0);
            MemorySegment[] data = new MemorySegment[writers];
            for (int w = 0; w < writers; w++) {
                data[w] = stamped((2L * w + 1) * BS, 1, 10 + w);
            }
            Throwable[] failed = new Throwable[writers];
            Thread[] ts;
            CopyOnWriteStats before;
            long commits;
            b.inode.lock();
            try {
                ts = start(writers, "remap-writer", failed, w -> ns.write(b, (2L * w + 1) * BS, data[w]));
                awaitParked(ts, null, null); // on the inode's lock, or behind the turn of the writer waiting there
                before = v.copyOnWriteStats();
                commits = v.journalStats().commits();
            } finally {
                b.inode.unlock();
            }
            joinAll(ts, failed);
            CopyOnWriteStats batch = v.copyOnWriteStats().since(before);
            long txns = v.journalStats().commits() - commits;
            assertEquals(writers, batch.remaps(), "remaps");
            assertEquals(txns, batch.remapTransactions(), "transactions besides the remaps");
            assertTrue(txns <= 2, txns + " transactions remapped " + writers + " copies on write that waited together");
            for (int blk = 0; blk < 16; blk++) {
                assertGen(b, blk, blk % 2 == 1 && blk < 2 * writers ? 10 + blk / 2 : 1);
                assertGen(a, blk, 1);
            }
        }
    }

    /**
     * Eight writers copy on write ranges of a clone whose extents are a tree (single blocks apart, two
     * beside each other, two of two blocks) while the test holds the file's remap turn: all eight publish
     * and park, and the next turn commits them in one transaction, a window step each.
     */
    @Test
    void remapsPublishedBehindAHeldTurnCommitInOneTransaction() throws Exception {
        long[][] ranges = {{1, 1}, {7, 1}, {13, 1}, {21, 1}, {59, 1}, {60, 1}, {61, 2}, {63, 2}};
        try (Handle a = written("a", 66, 1); Handle b = ns.create(root, "b", 0644, true)) {
            ns.cloneRange(a, 0, b, 0, 0);
            for (int blk = 0; blk < 58; blk += 2) { // 29 copies apart: more extents than the record holds
                ns.write(b, (long) blk * BS, stamped((long) blk * BS, 1, 2));
            }
            assertEquals(InodeFormat.FORK_TREE, (int) ns.records.readRecord(b.ino(), InodeFormat::fork));
            MemorySegment[] data = new MemorySegment[ranges.length];
            for (int w = 0; w < ranges.length; w++) {
                data[w] = stamped(ranges[w][0] * BS, (int) ranges[w][1], 10 + w);
            }
            Combining.Queue<Remaps.Request> q = ns.files.cow.remaps.queue(b.inode);
            assertTrue(q.tryTurn());
            Throwable[] failed = new Throwable[ranges.length];
            Thread[] ts = start(ranges.length, "remap-held", failed, w -> ns.write(b, ranges[w][0] * BS, data[w]));
            awaitParked(ts, Combining.class, "submit");
            CopyOnWriteStats before = v.copyOnWriteStats();
            long commits = v.journalStats().commits();
            q.endTurn();
            joinAll(ts, failed);
            CopyOnWriteStats batch = v.copyOnWriteStats().since(before);
            assertEquals(new CopyOnWriteStats(ranges.length, 1), batch);
            assertEquals(1, v.journalStats().commits() - commits, "transactions remapping " + ranges.length + " copies on write");
            int[] gen = new int[66];
            Arrays.fill(gen, 1);
            for (int blk = 0; blk < 58; blk += 2) {
                gen[blk] = 2;
            }
            for (int w = 0; w < ranges.length; w++) {
                for (long blk = ranges[w][0]; blk < ranges[w][0] + ranges[w][1]; blk++) {
                    gen[(int) blk] = 10 + w;
                }
            }
            for (int blk = 0; blk < 66; blk++) {
                assertGen(b, blk, gen[blk]);
                assertGen(a, blk, 1);
            }
        }
    }

    /**
     * Writers copy on write into a clone of a file, direct, one to four blocks at random places, beside
     * readers ({@link #writeRandomly}); then the clone's copies are all freed with it.
     */
    @Test
    void writersOfDisjointAndOverlappingRangesOfACloneBesideReaders() throws InterruptedException {
        int blocks = 512;
        Handle a = written("a", blocks, 1), b = ns.create(root, "b", 0644, true);
        ns.cloneRange(a, 0, b, 0, 0);
        long start = free();
        writeRandomly(a, b, blocks, 6, 400, 4, false);
        a.close();
        b.close();
        ns.unlink(root, "b");
        assertEquals(start, free(), "the clone's copies all freed, the source's blocks kept (seed " + SEED + ")");
        ns.unlink(root, "a");
    }

    /**
     * Sixteen writers copy on write into a clone of a file in four extents, one to eight blocks at a time,
     * on a device whose writes take 0.2 ms, while another thread holds the file's remap turn 1 ms in 2, so
     * that remaps of every shape pile up in batches ({@link Remaps}): the blocks end as the model says, the
     * remaps take fewer transactions than there are remaps, and once both files are deleted every block is
     * free again.
     */
    @Test
    void batchedRemapsOfManyWritersOfDisjointAndOverlappingRanges() throws InterruptedException {
        int blocks = 768;
        Handle a = ns.create(root, "a", 0644, true), b = ns.create(root, "b", 0644, true);
        Handle[] gaps = new Handle[4];
        for (int part = 0; part < 4; part++) {
            gaps[part] = ns.create(root, "gap" + part, 0644, true);
        }
        long empty = free();
        for (int part = 0; part < 4; part++) { // four extents, another file's block after each
            ns.write(a, (long) part * (blocks / 4) * BS, stamped((long) part * (blocks / 4) * BS, blocks / 4, 1));
            ns.write(gaps[part], 0, stamped(0, 1, 1));
            gaps[part].close();
        }
        ns.cloneRange(a, 0, b, 0, 0);
        CopyOnWriteStats before = v.copyOnWriteStats();
        gated.writeNanos = 200_000;
        writeRandomly(a, b, blocks, 16, 150, 8, true);
        gated.writeNanos = 0;
        CopyOnWriteStats cow = v.copyOnWriteStats().since(before);
        assertTrue(cow.remaps() > blocks / 8 && cow.remapTransactions() < cow.remaps(), "seed " + SEED + ": " + cow);
        a.close();
        b.close();
        for (String name : new String[] {"a", "b", "gap0", "gap1", "gap2", "gap3"}) {
            ns.unlink(root, name);
        }
        assertEquals(empty, free(), "free blocks with both files deleted (seed " + SEED + ", " + cow + ")");
    }

    /**
     * {@code writers} threads each make {@code writes} direct writes of 1 to {@code longest} blocks at random
     * places of {@code b}, a clone of {@code a}: in the first half of the file each write holds the test's
     * locks of its blocks, so each block ends holding the last write to it; in the second half writes
     * overlap freely, so each block ends holding one of the writes to it whole. Two readers meanwhile read
     * random ranges of both files: the source reads as it was, the clone's blocks each as some write to that
     * block (never another block's bytes, as a block freed under the read and reused would). With
     * {@code holdTurns} another thread holds {@code b}'s remap turn 1 ms in 2. Fixed seeds; the checker
     * counts every block at the end.
     */
    private void writeRandomly(Handle a, Handle b, int blocks, int writers, int writes, int longest, boolean holdTurns)
            throws InterruptedException {
        int readers = 2, half = blocks / 2;
        int[] last = new int[blocks];
        Arrays.fill(last, 1);
        ReentrantLock[] locks = new ReentrantLock[half];
        Arrays.setAll(locks, k -> new ReentrantLock());
        // per block of the second half: a bit per writer that wrote it, and whether the start generation may remain
        AtomicLongArray wrote = new AtomicLongArray(blocks);
        AtomicBoolean done = new AtomicBoolean();
        AtomicInteger running = new AtomicInteger(writers);
        Combining.Queue<Remaps.Request> turn = ns.files.cow.remaps.queue(b.inode);
        runThreads(writers + readers + 1, "cow-writers", (me, mine) -> {
            Random rnd = new Random(SEED * 31 + me);
            if (me < writers) { // generations 2 + writers * n + me: the writer is gen - 2 mod writers
                try {
                    for (int n = 0; n < writes; n++) {
                        int len = 1 + rnd.nextInt(longest), gen = 2 + writers * n + me;
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
            } else if (me == writers + readers) {
                while (holdTurns && !done.get()) {
                    if (turn.tryTurn()) {
                        LockSupport.parkNanos(1_000_000);
                        turn.endTurn();
                    }
                    LockSupport.parkNanos(1_000_000);
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
    }

    /** {@code n} platform threads named {@code name-k} running {@code body(k)}; their failures land in {@code failed}. */
    private static Thread[] start(int n, String name, Throwable[] failed, IntConsumer body) {
        Thread[] ts = new Thread[n];
        for (int k = 0; k < n; k++) {
            int me = k;
            ts[k] = Thread.ofPlatform().name(name + "-" + k).start(() -> {
                try {
                    body.accept(me);
                } catch (Throwable t) {
                    failed[me] = t;
                }
            });
        }
        return ts;
    }

    /** Waits (10 s at most) until every thread of {@code ts} is parked in a method of {@code in} named {@code method}, or anywhere if null. */
    private static void awaitParked(Thread[] ts, Class<?> in, String method) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (Thread t : ts) {
            while (!parked(t, in, method)) {
                assertTrue(System.nanoTime() < deadline, t.getName() + " did not park: " + t.getState() + " "
                        + Arrays.toString(t.getStackTrace()));
                Thread.sleep(1);
            }
        }
    }

    private static boolean parked(Thread t, Class<?> in, String method) {
        if (t.getState() != Thread.State.WAITING) {
            return false;
        }
        if (in == null) {
            return true;
        }
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getClassName().equals(in.getName()) && e.getMethodName().equals(method)) {
                return true;
            }
        }
        return false;
    }

    private static void joinAll(Thread[] ts, Throwable[] failed) throws InterruptedException {
        for (Thread t : ts) {
            t.join(60_000);
            assertTrue(!t.isAlive(), t.getName() + " did not finish");
        }
        for (int k = 0; k < failed.length; k++) {
            if (failed[k] != null) {
                throw new AssertionError("writer " + k + " failed", failed[k]);
            }
        }
    }

}
