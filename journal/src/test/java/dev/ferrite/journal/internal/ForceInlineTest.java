package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A force that finds the log idle writes its checkpoint on the forcing thread; forces that find it busy
 * are written by the push thread once the log is free again, grouped. A forcer puts a checkpoint of a few
 * items into the AIL itself when the AIL is due it next; otherwise the force returns once its flush has,
 * before the checkpoint's items are handed to the AIL, which the log I/O thread does soon after on its
 * own, all it finds in one publish.
 */
class ForceInlineTest {
    static final int BS = 4096;
    static final LogGeometry G = new LogGeometry(1000, 64);

    static long commit(Journal j, TestItem it, int slot) {
        it.lock.lock();
        try {
            Transaction tx = j.begin(Reservation.items(1));
            it.add(tx, slot, 1);
            return tx.commit();
        } finally {
            it.lock.unlock();
        }
    }

    /**
     * Commits a change to each of {@code items} in one transaction: with more than
     * {@link LogWriter#INSERT_HERE_MAX} of them, a forcer writing the checkpoint leaves its AIL hand-off to
     * the log I/O thread rather than inserting the items itself.
     */
    static long commitAll(Journal j, TestItem[] items, int slot) {
        Transaction tx = j.begin(Reservation.items(items.length));
        for (TestItem it : items) {
            it.lock.lock();
        }
        try {
            for (TestItem it : items) {
                it.add(tx, slot, 1);
            }
            return tx.commit();
        } finally {
            for (TestItem it : items) {
                it.lock.unlock();
            }
        }
    }

    /** More items than a forcer inserts into the AIL itself. */
    static TestItem[] manyItems(Arena arena, long firstHome) {
        TestItem[] items = new TestItem[LogWriter.INSERT_HERE_MAX + 1];
        for (int i = 0; i < items.length; i++) {
            items[i] = new TestItem(firstHome + i, BS, arena);
        }
        return items;
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

    /**
     * A force on an idle log reuses the CIL context its previous checkpoint formatted: a new one per
     * checkpoint was most of a forced commit's garbage (its per-stripe arrays grow with the CPUs).
     */
    @Test
    void forcedCommitsOnAnIdleLogReuseTheirContexts() throws ReflectiveOperationException {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(base, G, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(100, BS, arena);
                Transaction tx = null;
                Object threads = ManagementFactory.getThreadMXBean();
                Method allocated = Class.forName("com.sun.management.ThreadMXBean").getMethod("getCurrentThreadAllocatedBytes");
                long best = Long.MAX_VALUE;
                for (int round = 0; round < 6; round++) {
                    long before = (Long) allocated.invoke(threads);
                    for (int i = 0; i < 500; i++) {
                        it.lock.lock();
                        try {
                            tx = j.begin(1, tx);
                            it.add(tx, i % 4, 1);
                            j.force(tx.commit());
                        } finally {
                            it.lock.unlock();
                        }
                    }
                    best = Math.min(best, ((Long) allocated.invoke(threads) - before) / 500);
                }
                System.out.println("a forced commit on an idle log: " + best + " bytes allocated on its thread");
                // about 370 bytes now (the checkpoint's record, its views, the transaction); a new context per checkpoint
                // made it about 1,200 with the four stripes of a 2-CPU machine
                assertTrue(best < 900, best + " bytes allocated per forced commit");
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

    @Test
    void aForceOfManyItemsReturnsBeforeItsCheckpointIsHandedToTheAilAndTheTailStillMovesAfterwards() throws Exception {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(base, G, JournalOptions.defaults(), rep)) {
                TestItem[] many = manyItems(arena, 100);
                CountDownLatch reached = new CountDownLatch(1), release = new CountDownLatch(1);
                AtomicReference<String> handingThread = new AtomicReference<>();
                j.writer().beforeHandOff = () -> {
                    handingThread.set(Thread.currentThread().getName());
                    reached.countDown();
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                };
                long seq = commitAll(j, many, 0);
                String forcer;
                try {
                    forcer = CompletableFuture.supplyAsync(() -> {
                        j.force(seq);
                        return Thread.currentThread().getName();
                    }).get(10, TimeUnit.SECONDS);
                } catch (TimeoutException e) {
                    throw new AssertionError("the force did not return while its checkpoint's AIL hand-off was held", e);
                }
                assertTrue(j.durableSeq() >= seq);
                assertTrue(reached.await(10, TimeUnit.SECONDS), "the hand-off never started without another force");
                assertEquals(0, j.stats().ailInsertedItems(), "nothing reached the AIL while the hand-off is held");
                assertEquals("ferrite-log-io", handingThread.get());
                assertNotEquals(forcer, handingThread.get());
                j.writer().beforeHandOff = null;
                release.countDown();
                await(() -> j.stats().ailInsertedItems() == many.length); // without any further force or commit
                long free = j.stats().freeBytes();
                j.quiesce(); // returns once the tail is anchored past the checkpoint
                assertEquals(0, j.stats().ailItems());
                assertTrue(j.stats().freeBytes() > free, "the tail's move returned log space");
                await(() -> j.stats().tailMoves() > 0); // counted just after the move
            }
        }
    }

    @Test
    void handOffsLeftWhileTheLogIoThreadPollsReachTheAilUnwoken() {
        LogGeometry g = new LogGeometry(1000, 1000);
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, g);
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(base, g, JournalOptions.defaults(), rep)) {
                TestItem[] many = manyItems(arena, 100);
                int forces = 20;
                for (int i = 0; i < forces; i++) {
                    j.force(commitAll(j, many, i % 4)); // its own checkpoint, written here, too large to insert here
                    long handedOff = (long) many.length * (i + 1);
                    // no later force carries it: the log I/O thread, polling since the last one or asleep
                    // and woken, hands it to the AIL by itself
                    await(() -> j.stats().ailInsertedItems() == handedOff);
                }
                assertEquals(forces, j.stats().checkpoints());
                j.quiesce();
                assertEquals(0, j.stats().ailItems());
            }
        }
    }

    @Test
    void forcesOutrunningTheHandOffsWaitForRoomAndLoseNone() throws Exception {
        int forces = LogWriter.DEFERRED_MAX + 3;
        // a log with room for every checkpoint while none of them may reach the AIL
        LogGeometry g = new LogGeometry(1000, 24_000);
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(25_000, BS)) {
            Journal.format(base, g);
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(base, g, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(100, BS, arena);
                TestItem[] many = manyItems(arena, 200);
                CountDownLatch reached = new CountDownLatch(1), release = new CountDownLatch(1);
                j.writer().beforeHandOff = () -> {
                    reached.countDown();
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                };
                AtomicInteger done = new AtomicInteger();
                CompletableFuture<Void> forcer = CompletableFuture.runAsync(() -> {
                    // the first checkpoint goes to the log I/O thread (too many items to insert here), where
                    // its hand-off is held; the AIL is due it next, so every later one queues behind it
                    j.force(commitAll(j, many, 0));
                    done.incrementAndGet();
                    for (int i = 1; i < forces; i++) {
                        j.force(commit(j, it, i % 4));
                        done.incrementAndGet();
                    }
                });
                assertTrue(reached.await(10, TimeUnit.SECONDS));
                // the first hand-off is held and a queue's worth waits behind it: the next force waits for room
                await(() -> done.get() == LogWriter.DEFERRED_MAX + 1);
                assertFalse(forcer.isDone(), "a force returned with its hand-off nowhere to go");
                j.writer().beforeHandOff = null;
                release.countDown();
                forcer.get(30, TimeUnit.SECONDS);
                await(() -> j.stats().ailInsertedItems() == forces - 1 + many.length);
                j.quiesce();
                assertEquals(0, j.stats().ailItems());
            }
        }
    }

    @Test
    void handOffsGatheredWhileTheLogIoThreadWasBusyReachTheAilInOneBatch() throws Exception {
        int forces = 2000; // many: handed over one by one, the AIL's consumer would surely wake between them
        LogGeometry g = new LogGeometry(1000, 24_000);
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(25_000, BS)) {
            Journal.format(base, g);
            JournalOptions options = JournalOptions.defaults().withRingSize(4096); // one claim holds them all
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(base, g, options, rep)) {
                TestItem it = new TestItem(100, BS, arena);
                TestItem[] many = manyItems(arena, 200);
                CountDownLatch reached = new CountDownLatch(1), release = new CountDownLatch(1);
                AtomicInteger publishes = new AtomicInteger(); // the hook runs before each publish to the AIL
                j.writer().beforeHandOff = () -> {
                    publishes.incrementAndGet();
                    reached.countDown();
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                };
                j.force(commitAll(j, many, 0)); // too many items to insert here: its hand-off is held in the hook
                assertTrue(reached.await(10, TimeUnit.SECONDS));
                for (int i = 1; i < forces; i++) { // each its own checkpoint, written here, its hand-off queued behind the first
                    j.force(commit(j, it, i % 4));
                }
                assertEquals(forces, j.stats().checkpoints());
                assertEquals(0, j.stats().ailInsertBatches(), "nothing reached the AIL while the hand-off is held");
                release.countDown();
                await(() -> j.stats().ailInsertedItems() == forces - 1 + many.length);
                assertEquals(1, publishes.get(), "the log I/O thread published the " + forces + " checkpoints it found at once");
                assertEquals(1, j.stats().ailInsertBatches(),
                        "the " + forces + " checkpoints waiting for the log I/O thread went to the AIL in one publish, waking its consumer once");
                j.quiesce();
                assertEquals(0, j.stats().ailItems());
            }
        }
    }

    @Test
    void aForcerInsertsItsOwnSmallCheckpointIntoTheAilWithoutAHandOff() {
        LogGeometry g = new LogGeometry(1000, 1000);
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, g);
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(base, g, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(100, BS, arena), other = new TestItem(101, BS, arena);
                AtomicInteger handOffs = new AtomicInteger();
                j.writer().beforeHandOff = handOffs::incrementAndGet;
                int forces = 200;
                for (int i = 0; i < forces; i++) {
                    j.force(commit(j, i % 2 == 0 ? it : other, i % 4));
                    // in the AIL when the force returns: inserted by this thread, no other thread involved
                    assertEquals(i + 1, j.stats().ailInsertedItems(), "force " + i);
                }
                assertEquals(forces, j.stats().checkpoints());
                assertEquals(0, handOffs.get(), "no checkpoint went through the log I/O thread");
                assertEquals(0, j.stats().ailInsertBatches(), "none through the ring: its consumer never woke");
                assertEquals(forces, j.stats().ailForcerInserts());
                j.quiesce();
                assertEquals(0, j.stats().ailItems());
            }
        }
    }

    @Test
    void aCheckpointThatDoesNotWrapIsOnePlainWriteNotABatch() {
        try (Arena arena = Arena.ofShared(); MemoryDevice base = MemoryDevice.create(2048, BS)) {
            Journal.format(base, G);
            AtomicInteger submits = new AtomicInteger(), logWrites = new AtomicInteger();
            BlockDevice dev = new ForwardingDevice(base) {
                @Override
                public void write(long block, MemorySegment src) {
                    if (block >= G.areaStart()) { // a record, not the anchor
                        logWrites.incrementAndGet();
                    }
                    super.write(block, src);
                }

                @Override
                public void submit(IoBatch batch) {
                    submits.incrementAndGet();
                    super.submit(batch);
                }
            };
            try (TestReplayer rep = new TestReplayer(base); Journal j = Journal.open(dev, G, JournalOptions.defaults(), rep)) {
                TestItem it = new TestItem(100, BS, arena);
                int forces = 12; // two blocks each: 24 of the log's 64, no wrap, no push for space
                logWrites.set(0);
                for (int i = 0; i < forces; i++) {
                    j.force(commit(j, it, i % 4));
                }
                assertEquals(forces, j.stats().checkpoints());
                assertEquals(0, submits.get(), "a checkpoint in one piece goes to the device as a lone write (pwrite on a"
                        + " direct device), as the device baseline's does, not through a batch (io_uring)");
                assertEquals(forces, logWrites.get());
            }
        }
    }

    private static void await(BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "condition not reached in 10 s");
            Thread.onSpinWait();
        }
    }
}
