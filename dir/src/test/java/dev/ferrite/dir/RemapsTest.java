package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntConsumer;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Copies on write of one cloned file by writers finishing together commit their remaps in shared
 * transactions ({@link Remaps}): behind the inode's lock, behind a held remap turn in a tree file, and
 * from many random writers of disjoint and overlapping ranges, whose blocks end as a model says, the
 * source unchanged, every count right (the checker) and every block back once both files are deleted.
 */
@ExtendWith(TestSeed.class)
class RemapsTest extends FileTestBase {
    private static final long SEED = TestSeed.get(0x5E3A);
    /**
     * A log with room for a dozen steps in one transaction: a step reserves about 160 log items (0.7 MB), and
     * a batch's transaction takes at most an eighth of the log, so the fixtures' 4 MiB log carries one.
     */
    private static final VolumeOptions OPTIONS = VolumeFixtures.OPTIONS.withLogBlocks(12_288);

    @Override
    VolumeOptions options() {
        return OPTIONS;
    }

    /** Device writes take this long while set: copies on write then overlap in flight, as on a real device. */
    private volatile long writeNanos;

    @Override
    BlockDevice device(MemoryDevice formatted) {
        return new ForwardingDevice(formatted) {
            @Override
            public void write(long block, MemorySegment src) {
                long nanos = writeNanos;
                if (nanos > 0) {
                    LockSupport.parkNanos(nanos);
                }
                super.write(block, src);
            }
        };
    }

    @Override
    MemoryDevice formatted() {
        MemoryDevice d = MemoryDevice.create(4 * VolumeFixtures.BLOCKS, BS);
        Volume.format(d, OPTIONS);
        return d;
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

    private void assertGen(Handle f, int block, int gen) {
        MemorySegment in = buffer(1);
        assertEquals(BS, ns.read(f, (long) block * BS, in));
        assertStamped(in, (long) block * BS, gen);
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
     * Sixteen writers copy on write into a clone of a file in several extents, one to eight blocks at
     * random places, direct (a buffered write would make every direct one wait for the file's write-back
     * lock), on a device whose writes take 0.2 ms, while
     * another thread holds the remap turn 1 ms in 2, so that remaps pile up in batches: in the first half of the file each write
     * holds the test's locks of its blocks, so each block ends holding the last write to it; in the second
     * half writes overlap freely, so each block ends holding one of the writes to it. Then the source is
     * unchanged, the checker is clean, the remaps took fewer transactions than there were remaps, and once both
     * files are deleted every block is free again.
     */
    @Test
    void manyWritersOfDisjointAndOverlappingRangesMatchTheModel() throws Exception {
        int blocks = 768, writers = 16, writes = 150, half = blocks / 2;
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
        writeNanos = 200_000;
        int[] last = new int[blocks];
        Arrays.fill(last, 1);
        ReentrantLock[] locks = new ReentrantLock[half];
        Arrays.setAll(locks, k -> new ReentrantLock());
        AtomicLongArray wrote = new AtomicLongArray(blocks); // second half: a bit per writer that wrote the block
        Combining.Queue<Remaps.Request> q = ns.files.cow.remaps.queue(b.inode);
        AtomicInteger running = new AtomicInteger(writers);
        runThreads(writers + 1, "remap-random", (me, mine) -> {
            if (me == writers) { // holds the turn 1 ms in 2, so that batches of every shape pile up behind it
                while (running.get() > 0) {
                    if (q.tryTurn()) {
                        LockSupport.parkNanos(1_000_000);
                        q.endTurn();
                    }
                    LockSupport.parkNanos(1_000_000);
                }
                return;
            }
            Random rnd = new Random(SEED * 31 + me);
            for (int n = 0; n < writes; n++) {
                int len = 1 + rnd.nextInt(rnd.nextInt(4) == 0 ? 8 : 2), gen = 2 + writers * n + me;
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
            running.decrementAndGet();
        });
        writeNanos = 0;
        CopyOnWriteStats cow = v.copyOnWriteStats().since(before);
        String where = "seed " + SEED + ", " + cow;
        assertTrue(cow.remaps() > blocks / 2, where);
        assertTrue(cow.remapTransactions() < cow.remaps(), where);
        MemorySegment in = buffer(1);
        for (int blk = 0; blk < blocks; blk++) {
            ns.read(b, (long) blk * BS, in);
            int gen = (int) (in.get(U64, 0) & 0xFFFF);
            if (blk < half) {
                assertEquals(last[blk], gen, "block " + blk + " of the clone (" + where + ")");
                assertStamped(in, (long) blk * BS, last[blk]);
            } else {
                assertStamped(in, (long) blk * BS, gen);
                assertTrue(gen == 1 ? wrote.get(blk) == 0 : (wrote.get(blk) & 1L << (gen - 2) % writers) != 0,
                        "block " + blk + " of the clone holds generation " + gen + ", which no write to it had (" + where + ")");
            }
            ns.read(a, (long) blk * BS, in);
            assertStamped(in, (long) blk * BS, 1);
        }
        VolumeFixtures.assertChecked(ns);
        a.close();
        b.close();
        ns.unlink(root, "a");
        ns.unlink(root, "b");
        for (int part = 0; part < 4; part++) {
            ns.unlink(root, "gap" + part);
        }
        assertEquals(empty, free(), "free blocks with both files deleted (" + where + ")");
    }
}
