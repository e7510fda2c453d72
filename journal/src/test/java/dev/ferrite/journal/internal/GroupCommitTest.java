package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.JournalStats;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Group commit: forcers whose commits missed the checkpoint in flight all wait for it and then share one
 * more checkpoint, written by one of them, so that however many force at once the log writes and flushes
 * twice; and each returns only once its own commit would survive a crash.
 */
class GroupCommitTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(1000, 256);
    static final int FORCERS = 8;

    @Test
    void forcersMissingTheCheckpointInFlightShareTheNextAndEachReturnsDurable() throws Exception {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            RecordingDevice rec = RecordingDevice.wrap(base);
            CilTest.SlowFlushDevice dev = new CilTest.SlowFlushDevice(rec, 0);
            int[] flushesAtReturn = new int[FORCERS];
            try (rec) {
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem first = new TestItem(100, BS, arena);
                TestItem[] items = new TestItem[FORCERS];
                for (int i = 0; i < FORCERS; i++) {
                    items[i] = new TestItem(101 + i, BS, arena);
                }
                JournalStats before = j.stats();
                long flushesBefore = dev.flushes.get();
                CountDownLatch firstFlush = new CountDownLatch(1), secondFlush = new CountDownLatch(1);
                dev.gate = firstFlush;
                long firstSeq = ForceInlineTest.commit(j, first, 0);
                Thread inFlight = new Thread(() -> j.force(firstSeq), "first");
                inFlight.start();
                // its checkpoint written, its flush waiting at the gate (which it read before waiting)
                while (dev.flushes.get() == flushesBefore || inFlight.getState() != Thread.State.TIMED_WAITING) {
                    assertTrue(inFlight.isAlive(), "the first force returned with its flush held");
                    Thread.onSpinWait();
                }
                dev.gate = secondFlush; // for the flushes after the one held now
                AtomicReference<Throwable> failure = new AtomicReference<>();
                AtomicInteger returned = new AtomicInteger();
                Thread[] forcers = new Thread[FORCERS];
                for (int i = 0; i < FORCERS; i++) {
                    int n = i;
                    forcers[i] = new Thread(() -> {
                        try {
                            j.force(ForceInlineTest.commit(j, items[n], 0));
                            flushesAtReturn[n] = rec.flushCount();
                            returned.incrementAndGet();
                        } catch (Throwable t) {
                            failure.compareAndSet(null, t);
                        }
                    }, "forcer-" + i);
                    forcers[i].start();
                }
                for (Thread t : forcers) { // every one committed and waits: its commit is in no checkpoint yet
                    while (t.getState() != Thread.State.WAITING) {
                        assertTrue(t.isAlive(), "a force returned while the checkpoint before it was held in its flush");
                        Thread.onSpinWait();
                    }
                }
                firstFlush.countDown();
                while (dev.flushes.get() < flushesBefore + 2) { // the next checkpoint written, its flush held
                    assertTrue(failure.get() == null && returned.get() == 0,
                            "a force returned before the checkpoint holding its commit was written: " + failure.get());
                    Thread.onSpinWait();
                }
                assertEquals(0, returned.get(), "a force returned while the flush of the checkpoint holding its commit was held");
                secondFlush.countDown();
                inFlight.join(TimeUnit.SECONDS.toMillis(10));
                for (Thread t : forcers) {
                    t.join(TimeUnit.SECONDS.toMillis(10));
                    assertFalse(t.isAlive(), t.getName() + " never returned");
                }
                if (failure.get() != null) {
                    throw new AssertionError(failure.get());
                }
                JournalStats after = j.stats();
                assertEquals(2, after.checkpoints() - before.checkpoints(), "checkpoints for 1 + " + FORCERS + " forces");
                assertEquals(2, dev.flushes.get() - flushesBefore, "flushes for 1 + " + FORCERS + " forces: " + dev.flushThreads);
            }
            // the crash just after the last flush each forcer had seen return recovers its commit
            for (int i = 0; i < FORCERS; i++) {
                try (MemoryDevice image = rec.materialize(rec.crashAfterFlush(flushesAtReturn[i] - 1));
                     Arena reads = Arena.ofConfined()) {
                    try (TestReplayer rep = new TestReplayer(image); Journal j = Journal.open(image, G, JournalOptions.defaults(), rep)) {
                        assertTrue(j.recovery().checkpointsReplayed() > 0, "forcer-" + i + ": nothing to replay");
                    }
                    MemorySegment home = reads.allocate(BS, 4096);
                    image.read(101 + i, home);
                    assertEquals(1, TestItem.blockCounter(home, 0), "forcer-" + i + "'s commit, forced, lost in a crash after flush "
                            + (flushesAtReturn[i] - 1));
                }
            }
            }
        }
    }
}
