package dev.ferrite.journal.internal;

import dev.ferrite.journal.VolumeShutdownException;

import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.JournalStats;
import dev.ferrite.journal.ReservationExceededException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CilTest {
    static final int BS = 4096;

    @Test
    void anItemRelogggedManyTimesIsWrittenOncePerCheckpoint() {
        try (MemoryDevice dev = MemoryDevice.create(1024, BS); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(512, 256);
            Journal.format(dev, g);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                TestItem item = new TestItem(3, BS, arena);
                for (int i = 0; i < 200; i++) {
                    Transaction tx = j.begin(Reservation.items(1));
                    item.lock.lock();
                    try {
                        item.add(tx, i % 8, 1);
                        tx.commit();
                    } finally {
                        item.lock.unlock();
                    }
                }
                j.forceAll();
                JournalStats s = j.stats();
                assertEquals(1, s.checkpoints(), s.toString());
                assertEquals(1, s.checkpointItems(), "200 relogs, one copy in the checkpoint: " + s);
                assertEquals(200, s.commits());
            }
        }
    }

    @Test
    void exceedingTheReservationIsCaughtAndShutsTheJournalDown() {
        try (MemoryDevice dev = MemoryDevice.create(1024, BS); Arena arena = Arena.ofShared();
             TestReplayer rep = new TestReplayer(dev)) {
            LogGeometry g = new LogGeometry(512, 256);
            Journal.format(dev, g);
            try (Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                TestItem a = new TestItem(1, BS, arena), b = new TestItem(2, BS, arena);
                Transaction tx = j.begin(Reservation.items(1));
                a.lock.lock();
                b.lock.lock();
                try {
                    a.add(tx, 0, 1);
                    ReservationExceededException e = assertThrows(ReservationExceededException.class, () -> b.add(tx, 0, 1));
                    assertTrue(e.getMessage().contains("room for 1 items"), e.getMessage());
                    // a's change is in memory but can no longer be logged: cancelling shuts the journal down
                    IllegalStateException c = assertThrows(IllegalStateException.class, tx::cancel);
                    assertTrue(c.getMessage().contains("shut down"), c.getMessage());
                } finally {
                    b.lock.unlock();
                    a.lock.unlock();
                }
                assertTrue(j.isShutdown());
                assertThrows(VolumeShutdownException.class, () -> j.begin(Reservation.items(1)));
            }
        }
    }

    /** Commits from many threads that force at once share device flushes (group commit). */
    @Test
    void concurrentForcesShareFlushes() throws Exception {
        int threads = 16;
        int perThread = 40;
        try (SlowFlushDevice dev = new SlowFlushDevice(MemoryDevice.create(2048, BS), 2); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(1024, 1024);
            Journal.format(dev, g);
            long flushesBefore = dev.flushes.get();
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                long flushesAtOpen = dev.flushes.get();
                List<Thread> ts = new ArrayList<>();
                CountDownLatch start = new CountDownLatch(1);
                AtomicReference<Throwable> err = new AtomicReference<>();
                for (int t = 0; t < threads; t++) {
                    TestItem item = new TestItem(t, BS, arena);
                    Thread th = new Thread(() -> {
                        try {
                            start.await();
                            for (int i = 0; i < perThread; i++) {
                                Transaction tx = j.begin(Reservation.items(1));
                                long seq;
                                item.lock.lock();
                                try {
                                    item.add(tx, 0, 1);
                                    seq = tx.commit();
                                } finally {
                                    item.lock.unlock();
                                }
                                j.force(seq);
                                assertTrue(j.durableSeq() >= seq);
                            }
                        } catch (Throwable e) {
                            err.compareAndSet(null, e);
                        }
                    });
                    ts.add(th);
                    th.start();
                }
                start.countDown();
                for (Thread th : ts) {
                    th.join(TimeUnit.MINUTES.toMillis(2));
                }
                if (err.get() != null) {
                    throw new AssertionError(err.get());
                }
                long flushes = dev.flushes.get() - flushesAtOpen;
                JournalStats s = j.stats();
                long commits = (long) threads * perThread;
                assertEquals(commits, s.commits());
                assertTrue(flushes * 3 <= commits, "group commit should merge forces: " + flushes + " flushes for "
                        + commits + " forced commits; " + s);
                assertTrue(s.checkpointItems() > s.checkpoints(), "checkpoints carry several commits: " + s);
            }
            assertTrue(dev.flushes.get() > flushesBefore);
        }
    }

    /**
     * A committer far faster than the log (each checkpoint's flush takes 20 ms) waits at the CIL's hard
     * limit: checkpoints stay near the push threshold instead of swelling to every item the committer
     * can reach, and every commit is still there after a reopen.
     */
    @Test
    void committersOutrunningTheLogWaitAtTheHardLimit() {
        int items = 512;
        int threshold = 64 * 1024;
        try (SlowFlushDevice dev = new SlowFlushDevice(MemoryDevice.create(8192, BS), 20); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(1024, 4096);
            Journal.format(dev, g);
            JournalOptions options = JournalOptions.defaults().withPushThreshold(threshold);
            int counters = TestItem.counters(BS);
            long[] adds = new long[items];
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, options, rep)) {
                TestItem[] pool = new TestItem[items];
                for (int i = 0; i < items; i++) {
                    pool[i] = new TestItem(i, BS, arena);
                }
                long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(400);
                for (int next = 0; System.nanoTime() < deadline; ) {
                    next = commitEight(j, pool, next, adds);
                }
                j.forceAll();
                JournalStats s = j.stats();
                assertTrue(s.commitThrottles() > 0, "the committer never waited: " + s);
                assertTrue(s.checkpointBytes() / s.checkpoints() < 2L * threshold,
                        "checkpoints should stay near the " + threshold + "-byte threshold: " + s);
            }
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, options, rep)) {
                assertTrue(j.recovery().clean(), j.recovery().toString());
            }
            MemorySegment blk = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            for (int i = 0; i < items; i++) {
                dev.read(i, blk);
                for (int c = 0; c < counters; c++) {
                    assertEquals(adds[i], TestItem.blockCounter(blk, c), "item " + i + " counter " + c);
                }
            }
        }
    }

    /**
     * One transaction over the 8 items of {@code pool} from {@code next} on, adding 1 to every counter of
     * each (a range in every sector: a large op per item) and counting that in {@code adds}; throttled
     * once the items are unlocked, as every committer must be. Returns where the next batch starts.
     */
    private static int commitEight(Journal j, TestItem[] pool, int next, long[] adds) {
        Transaction tx = j.begin(Reservation.items(8));
        long seq;
        TestItem[] batch = new TestItem[8];
        for (int k = 0; k < batch.length; k++, next = (next + 1) % pool.length) {
            batch[k] = pool[next];
            batch[k].lock.lock();
        }
        try {
            for (TestItem it : batch) {
                for (int c = 0; c < TestItem.counters(BS); c++) {
                    it.add(tx, c, 1);
                }
                adds[(int) it.home()]++;
            }
            seq = tx.commit();
        } finally {
            for (TestItem it : batch) {
                it.lock.unlock();
            }
        }
        j.throttle(seq);
        return next;
    }

    /**
     * A committer throttled at the CIL's hard limit (the log device stopped: flushes held at a gate) waits
     * with its items unlocked: a reader of any of them gets its lock at once.
     */
    @Test
    void aThrottledCommitterHoldsNoItemLock() throws Exception {
        int items = 512;
        try (SlowFlushDevice dev = new SlowFlushDevice(MemoryDevice.create(8192, BS), 0); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(1024, 4096);
            Journal.format(dev, g);
            JournalOptions options = JournalOptions.defaults().withPushThreshold(64 * 1024);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, options, rep)) {
                TestItem[] pool = new TestItem[items];
                for (int i = 0; i < items; i++) {
                    pool[i] = new TestItem(i, BS, arena);
                }
                CountDownLatch gate = new CountDownLatch(1);
                dev.gate = gate;
                AtomicBoolean stop = new AtomicBoolean();
                AtomicReference<Throwable> err = new AtomicReference<>();
                Thread committer = new Thread(() -> {
                    try {
                        long[] adds = new long[items];
                        for (int next = 0; !stop.get(); ) {
                            next = commitEight(j, pool, next, adds);
                        }
                    } catch (Throwable e) {
                        err.set(e);
                    }
                }, "committer");
                committer.setDaemon(true);
                committer.start();
                try {
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    while (!(committer.getState() == Thread.State.TIMED_WAITING
                            && LockSupport.getBlocker(committer) instanceof LogWriter)) {
                        assertTrue(System.nanoTime() - deadline < 0 && committer.isAlive(),
                                "the committer never reached the hard limit: " + err.get() + "; " + j.diagnostics());
                        Thread.onSpinWait();
                    }
                    for (TestItem it : pool) {
                        assertTrue(it.lock.tryLock(1, TimeUnit.SECONDS), "item " + it.home()
                                + " stayed locked while its committer was throttled; " + j.diagnostics());
                        it.lock.unlock();
                    }
                } finally {
                    stop.set(true);
                    gate.countDown();
                    committer.join(TimeUnit.SECONDS.toMillis(30));
                }
                assertEquals(null, err.get());
                assertTrue(j.stats().commitThrottles() > 0, j.stats().toString());
            }
        }
    }

    /**
     * The journal's counters split the log's device time between checkpoint writes and flushes (issue 21:
     * on a disk with a volatile cache the flush is most of it), the write's part not the flush's.
     */
    @Test
    void statsSplitTheLogsDeviceTimeBetweenWritesAndFlushes() throws Exception {
        long writeMillis = 20, flushMillis = 100;
        try (SlowFlushDevice dev = new SlowFlushDevice(new ForwardingDevice(MemoryDevice.create(2048, BS)) {
            @Override
            public void write(long block, MemorySegment src) {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(writeMillis));
                super.write(block, src);
            }
        }, flushMillis); Arena arena = Arena.ofShared()) {
            LogGeometry g = new LogGeometry(1024, 512);
            Journal.format(dev, g);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(1, BS, arena);
                JournalStats before = j.stats();
                j.force(ForceInlineTest.commit(j, it, 0));
                JournalStats after = j.stats();
                long written = after.logWriteNanos() - before.logWriteNanos();
                long flushed = after.logFlushNanos() - before.logFlushNanos();
                assertEquals(1, after.checkpoints() - before.checkpoints(), after.toString());
                assertTrue(written >= TimeUnit.MILLISECONDS.toNanos(writeMillis) && written < TimeUnit.MILLISECONDS.toNanos(flushMillis),
                        "a checkpoint's write counted as " + written + " ns");
                assertTrue(flushed >= TimeUnit.MILLISECONDS.toNanos(flushMillis), "its flush counted as " + flushed + " ns");
            }
        }
    }

    /**
     * Delegating device whose flush takes a fixed time, like a real disk's cache flush, and can be held at
     * a gate; it notes which thread issued each flush.
     */
    static final class SlowFlushDevice extends ForwardingDevice {
        final long flushMillis;
        final AtomicLong flushes = new AtomicLong();
        final List<String> flushThreads = new CopyOnWriteArrayList<>();
        /** While set and closed, flushes wait at it. */
        volatile CountDownLatch gate;

        SlowFlushDevice(BlockDevice inner, long flushMillis) {
            super(inner);
            this.flushMillis = flushMillis;
        }

        @Override
        public void flush() {
            flushes.incrementAndGet();
            flushThreads.add(Thread.currentThread().getName());
            try {
                CountDownLatch g = gate;
                if (g != null && !g.await(30, TimeUnit.SECONDS)) {
                    throw new AssertionError("the flush gate stayed closed");
                }
                Thread.sleep(flushMillis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            inner.flush();
        }
    }
}
