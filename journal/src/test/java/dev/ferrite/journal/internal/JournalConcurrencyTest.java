package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice.CrashState;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Many threads committing transactions over shared items (each transaction: +1 on one counter of two
 * shared items, +1 on the thread's private count item), forcing now and then, against a log small enough
 * that reservations wait and the AIL pushes. Afterwards: exact totals after a clean close, and, from a
 * recording, crash states checked for atomicity (shared counters sum to twice the committed count) and
 * durability (each thread's forced count survives).
 */
@ExtendWith(TestSeed.class)
class JournalConcurrencyTest {
    static final int BS = 4096;
    static final int SHARED = 12;        // shared items at homes 1..SHARED
    static final int COUNT_HOME = 100;   // thread t's count item at COUNT_HOME + t
    static final int COUNTERS = TestItem.counters(BS);

    record Outcome(long[][] increments, long[] committed, List<long[]> acks) {
    }

    /** Runs the workload; acks holds {thread, count, eventCount} for each force that returned (if recording). */
    static Outcome run(BlockDevice dev, LogGeometry g, int threads, int perThread, long seed, RecordingDevice rec) throws Exception {
        long[][] inc = new long[threads][(SHARED + 1) * COUNTERS];
        long[] committed = new long[threads];
        List<long[]> acks = new ArrayList<>();
        try (Arena arena = Arena.ofShared(); TestReplayer rep = new TestReplayer(dev);
             Journal j = Journal.open(dev, g, JournalOptions.defaults().withAilBatch(8), rep)) {
            TestItem[] shared = new TestItem[SHARED + 1];
            for (int i = 1; i <= SHARED; i++) {
                shared[i] = new TestItem(i, BS, arena);
            }
            AtomicReference<Throwable> err = new AtomicReference<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int me = t;
                TestItem mine = new TestItem(COUNT_HOME + t, BS, arena);
                Random rnd = new Random(seed * 1000 + t);
                Thread th = new Thread(() -> {
                    try {
                        start.await();
                        for (int n = 0; n < perThread; n++) {
                            int a = 1 + rnd.nextInt(SHARED);
                            int b = 1 + (a + rnd.nextInt(SHARED - 1)) % SHARED;
                            TestItem lo = shared[Math.min(a, b)], hi = shared[Math.max(a, b)];
                            int c = rnd.nextInt(COUNTERS);
                            Transaction tx = j.begin(Reservation.items(3));
                            long seq;
                            lo.lock.lock();
                            hi.lock.lock();
                            mine.lock.lock();
                            try {
                                lo.add(tx, c, 1);
                                hi.add(tx, c, 1);
                                mine.add(tx, 0, 1);
                                seq = tx.commit();
                            } finally {
                                mine.lock.unlock();
                                hi.lock.unlock();
                                lo.lock.unlock();
                            }
                            inc[me][a * COUNTERS + c]++;
                            inc[me][b * COUNTERS + c]++;
                            committed[me]++;
                            if (rnd.nextInt(8) == 0) {
                                j.force(seq);
                                if (rec != null) {
                                    synchronized (acks) {
                                        acks.add(new long[] {me, committed[me], rec.eventCount()});
                                    }
                                }
                            }
                        }
                    } catch (Throwable e) {
                        err.compareAndSet(null, e);
                    }
                }, "committer-" + t);
                ts.add(th);
                th.start();
            }
            start.countDown();
            for (Thread th : ts) {
                th.join(TimeUnit.MINUTES.toMillis(3));
                assertTrue(!th.isAlive(), "deadlock: " + th.getName() + " still running (seed " + seed + ")");
            }
            if (err.get() != null) {
                throw new AssertionError("seed " + seed, err.get());
            }
        }
        return new Outcome(inc, committed, acks);
    }

    @Test
    void concurrentCommitsOnASmallLogAddUpExactly() throws Exception {
        long seed = TestSeed.get(21);
        int threads = 8;
        try (MemoryDevice dev = MemoryDevice.create(512, BS); Arena arena = Arena.ofConfined()) {
            LogGeometry g = new LogGeometry(256, 96);
            Journal.format(dev, g);
            Outcome o = run(dev, g, threads, 1500, seed, null);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                assertTrue(j.recovery().clean());
            }
            MemorySegment blk = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            for (int i = 1; i <= SHARED; i++) {
                dev.read(i, blk);
                assertTrue(TestItem.blockValid(blk));
                for (int c = 0; c < COUNTERS; c++) {
                    long expected = 0;
                    for (int t = 0; t < threads; t++) {
                        expected += o.increments()[t][i * COUNTERS + c];
                    }
                    assertEquals(expected, TestItem.blockCounter(blk, c), "item " + i + " counter " + c + " (seed " + seed + ")");
                }
            }
            for (int t = 0; t < threads; t++) {
                dev.read(COUNT_HOME + t, blk);
                assertEquals(o.committed()[t], TestItem.blockCounter(blk, 0));
            }
        }
    }

    @Test
    void crashStatesOfAConcurrentWorkloadAreAtomicAndDurable() throws Exception {
        long seed = TestSeed.get(22);
        checkConcurrentCrashes(seed, 4, 150, 250);
    }

    @Test
    @Tag("stress")
    void crashStatesOfALongConcurrentWorkload() throws Exception {
        long seed = TestSeed.get(23);
        checkConcurrentCrashes(seed, 8, 1500, 3000);
    }

    private static void checkConcurrentCrashes(long seed, int threads, int perThread, int samples) throws Exception {
        LogGeometry g = new LogGeometry(256, 80);
        MemoryDevice base = MemoryDevice.create(512, BS);
        Journal.format(base, g);
        try (RecordingDevice rec = RecordingDevice.wrap(base); Arena arena = Arena.ofConfined()) {
            Outcome o = run(rec, g, threads, perThread, seed, rec);
            Random rnd = new Random(seed);
            for (int s = 0; s < samples; s++) {
                int n = rnd.nextInt(rec.eventCount() + 1);
                CrashState state = new CrashState(n);
                if (n < rec.eventCount() && rec.event(n).kind() == RecordingDevice.Event.Kind.WRITE && rnd.nextBoolean()) {
                    BitSet torn = new BitSet();
                    torn.set(0, 1 + rnd.nextInt(rec.event(n).sectorCount()));
                    state = rec.crashTornAt(n, torn);
                }
                String where = "crash state " + state + " (seed " + seed + ")";
                try (MemoryDevice img = rec.materialize(state)) {
                    try (TestReplayer rep = new TestReplayer(img); Journal j = Journal.open(img, g, JournalOptions.defaults(), rep)) {
                        assertTrue(j.recovery().headLsn() != Lsn.NONE);
                    } catch (RuntimeException e) {
                        throw new AssertionError("recovery failed, " + where, e);
                    }
                    MemorySegment blk = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                    long sharedSum = 0;
                    for (int i = 1; i <= SHARED; i++) {
                        img.read(i, blk);
                        assertTrue(TestItem.blockValid(blk), "item " + i + " checksum, " + where);
                        for (int c = 0; c < COUNTERS; c++) {
                            sharedSum += TestItem.blockCounter(blk, c);
                        }
                    }
                    long committed = 0;
                    long[] perThreadCount = new long[threads];
                    for (int t = 0; t < threads; t++) {
                        img.read(COUNT_HOME + t, blk);
                        assertTrue(TestItem.blockValid(blk), "count item " + t + " checksum, " + where);
                        perThreadCount[t] = TestItem.blockCounter(blk, 0);
                        committed += perThreadCount[t];
                    }
                    assertEquals(2 * committed, sharedSum, "a transaction was applied in part, " + where);
                    for (long[] ack : o.acks()) {
                        if (ack[2] <= n) {
                            assertTrue(perThreadCount[(int) ack[0]] >= ack[1], "thread " + ack[0] + " forced "
                                    + ack[1] + " transactions by event " + ack[2] + " but only " + perThreadCount[(int) ack[0]]
                                    + " survived, " + where);
                        }
                    }
                }
            }
        }
    }
}
