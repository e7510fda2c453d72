package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A force that finds the log idle writes its checkpoint on the forcing thread; forces that find it busy
 * are written by the push thread once the log is free again, grouped.
 */
class ForceInlineTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(1000, 64);

    private static long commit(Journal j, TestItem it, int slot) {
        it.lock.lock();
        try {
            Transaction tx = j.begin(Reservation.items(1));
            it.add(tx, slot, 1);
            return tx.commit();
        } finally {
            it.lock.unlock();
        }
    }

    @Test
    void aForceOnAnIdleLogWritesTheCheckpointOnTheForcingThread() {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            CilTest.SlowFlushDevice dev = new CilTest.SlowFlushDevice(base, 0);
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(100, BS, arena);
                for (int round = 0; round < 20; round++) {
                    dev.flushThreads.clear();
                    long seq = commit(j, it, round % 4);
                    j.force(seq);
                    assertTrue(j.durableSeq() >= seq);
                    assertEquals(List.of(Thread.currentThread().getName()), dev.flushThreads, "round " + round);
                }
            }
        }
    }

    @Test
    void forcesMeetingABusyLogAreWrittenByThePushThreadOnceItIsFree() throws Exception {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            RecordingDevice rec = RecordingDevice.wrap(base);
            CilTest.SlowFlushDevice dev = new CilTest.SlowFlushDevice(rec, 0);
            try (rec; TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem a = new TestItem(100, BS, arena), b = new TestItem(101, BS, arena), c = new TestItem(102, BS, arena);
                dev.flushThreads.clear(); // the open's
                rec.stall(RecordingDevice.Op.FLUSH);
                long first = commit(j, a, 0);
                CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> j.force(first));
                while (dev.flushThreads.isEmpty()) { // the first forcer writes its checkpoint and waits in the flush
                    Thread.onSpinWait();
                }
                String inline = dev.flushThreads.getFirst();
                long second = commit(j, b, 0), third = commit(j, c, 0);
                Thread[] others = {new Thread(() -> j.force(second)), new Thread(() -> j.force(third))};
                for (Thread t : others) {
                    t.start();
                }
                for (Thread t : others) { // parked in force: the log was busy, so they wait for the push thread
                    while (t.getState() != Thread.State.WAITING) {
                        assertTrue(t.isAlive(), "a force returned while the first checkpoint's flush was held");
                        Thread.onSpinWait();
                    }
                }
                rec.resume(RecordingDevice.Op.FLUSH);
                writer.get(10, TimeUnit.SECONDS);
                for (Thread t : others) {
                    t.join(TimeUnit.SECONDS.toMillis(10));
                    assertFalse(t.isAlive(), "a force never returned");
                }
                assertTrue(j.durableSeq() >= third);
                assertFalse(inline.startsWith("ferrite-"), "the first force wrote its own checkpoint: " + dev.flushThreads);
                assertEquals(2, dev.flushThreads.size(), "the two later forces share one checkpoint: " + dev.flushThreads);
                assertTrue(dev.flushThreads.get(1).startsWith("ferrite-"), "written by the push thread: " + dev.flushThreads);
            }
        }
    }
}
