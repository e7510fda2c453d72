package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
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

    /** Passes everything to a device, noting the thread of each flush. */
    private static final class FlushThreads implements BlockDevice {
        final BlockDevice inner;
        final List<String> flushes = new CopyOnWriteArrayList<>();

        FlushThreads(BlockDevice inner) {
            this.inner = inner;
        }

        @Override public String name() { return inner.name(); }
        @Override public int blockSize() { return inner.blockSize(); }
        @Override public long blockCount() { return inner.blockCount(); }
        @Override public boolean isReadOnly() { return inner.isReadOnly(); }
        @Override public void read(long block, MemorySegment dst) { inner.read(block, dst); }
        @Override public void write(long block, MemorySegment src) { inner.write(block, src); }
        @Override public void submit(IoBatch batch) { inner.submit(batch); }
        @Override public void discard(long block, long count) { inner.discard(block, count); }
        @Override public void close() { inner.close(); }

        @Override
        public void flush() {
            flushes.add(Thread.currentThread().getName());
            inner.flush();
        }
    }

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
            FlushThreads dev = new FlushThreads(base);
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(100, BS, arena);
                for (int round = 0; round < 20; round++) {
                    dev.flushes.clear();
                    long seq = commit(j, it, round % 4);
                    j.force(seq);
                    assertTrue(j.durableSeq() >= seq);
                    assertEquals(List.of(Thread.currentThread().getName()), dev.flushes, "round " + round);
                }
            }
        }
    }

    @Test
    void forcesMeetingABusyLogAreWrittenByThePushThreadOnceItIsFree() throws Exception {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            RecordingDevice rec = RecordingDevice.wrap(base);
            FlushThreads dev = new FlushThreads(rec);
            try (rec; TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem a = new TestItem(100, BS, arena), b = new TestItem(101, BS, arena), c = new TestItem(102, BS, arena);
                dev.flushes.clear(); // the open's
                rec.stall(RecordingDevice.Op.FLUSH);
                long first = commit(j, a, 0);
                CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> j.force(first));
                while (dev.flushes.isEmpty()) { // the first forcer writes its checkpoint and waits in the flush
                    Thread.onSpinWait();
                }
                String inline = dev.flushes.getFirst();
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
                assertFalse(inline.startsWith("ferrite-"), "the first force wrote its own checkpoint: " + dev.flushes);
                assertEquals(2, dev.flushes.size(), "the two later forces share one checkpoint: " + dev.flushes);
                assertTrue(dev.flushes.get(1).startsWith("ferrite-"), "written by the push thread: " + dev.flushes);
            }
        }
    }
}
