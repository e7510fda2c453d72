package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class AilTest {
    static final int BS = 4096;

    Arena arena;
    RecordingDevice dev;
    Ail ail;
    final List<long[]> tailMoves = new ArrayList<>();
    /** For each tail move: the recording's event count when it was asked for. */
    final List<Integer> tailMoveEvents = new ArrayList<>();
    final AtomicInteger checkpointRequests = new AtomicInteger();

    @BeforeEach
    void setUp() {
        arena = Arena.ofShared();
        dev = RecordingDevice.wrap(MemoryDevice.create(256, BS));
        start(dev, 64);
    }

    /** A fresh AIL on {@code device} writing items home early past {@code relogChunks} (64: never). */
    private void start(BlockDevice device, int relogChunks) {
        ail = new Ail(device, 64, 16, relogChunks, 64, Lsn.of(1, 0), 1, (lsn, seq) -> {
            synchronized (tailMoves) {
                tailMoves.add(new long[] {lsn, seq});
                tailMoveEvents.add(dev.eventCount());
            }
        }, checkpointRequests::incrementAndGet, t -> { });
        ail.start();
    }

    @AfterEach
    void tearDown() {
        ail.close();
        dev.close();
        arena.close();
    }

    private TestItem[] items(int n) {
        TestItem[] it = new TestItem[n];
        for (int i = 0; i < n; i++) {
            it[i] = new TestItem(10 + i, BS, arena);
        }
        return it;
    }

    /** As the log writer does: items are pinned by their commit, then published once durable. */
    private void publish(long lsn, long seq, long endLsn, TestItem... items) {
        for (LogItem it : items) {
            it.pin();
        }
        ail.publish(items, items.length, lsn, seq, endLsn);
    }

    /** As the log writer does for a checkpoint that logs {@code items} whole (all but their deltas). */
    private static void whole(long seq, TestItem... items) {
        for (LogItem it : items) {
            it.loggedWholeIn(seq);
        }
    }

    @Test
    void batchesAreInsertedInLsnOrderAndWholeRelogsMoveForward() {
        TestItem[] it = items(5);
        publish(Lsn.of(1, 0), 1, Lsn.of(1, 5), it[0], it[1], it[2], it[4]);
        whole(2, it[1]);
        publish(Lsn.of(1, 5), 2, Lsn.of(1, 9), it[3], it[1], it[4]);
        await(() -> ail.size() == 5 && !it[1].isPinned() && !it[4].isPinned());
        assertEquals(List.of(it[0], it[2], it[4], it[3], it[1]), ail.items());
        assertEquals(Lsn.of(1, 5), it[1].lsn(), "an item relogged whole moves to its newest checkpoint");
        assertEquals(Lsn.of(1, 0), it[4].lsn(), "an item relogged with its delta keeps its first checkpoint");
        assertEquals(Lsn.of(1, 0), it[0].lsn());
        for (TestItem t : it) {
            assertFalse(t.isPinned(), "insertion unpins");
        }
        assertTrue(ail.insertBatches.sum() >= 1 && ail.insertBatches.sum() <= 2);
        assertEquals(7, ail.insertedItems.sum());
    }

    @Test
    void tailMovesOnlyAfterWriteBackIsFlushed() {
        TestItem[] it = items(4);
        publish(Lsn.of(1, 0), 1, Lsn.of(1, 5), it[0], it[1], it[2]);
        whole(2, it[1]);
        publish(Lsn.of(1, 5), 2, Lsn.of(1, 9), it[3], it[1]);
        await(() -> ail.size() == 4);
        ail.pushTo(Lsn.of(1, 0));
        await(() -> tailMovesSize() == 1);
        long[] move = tailMoves.getFirst();
        assertEquals(Lsn.of(1, 5), move[0], "the oldest item left is at the second checkpoint");
        assertEquals(2, move[1]);
        assertEquals(List.of(it[3], it[1]), ail.items());
        // items 0 and 2 went home, and a flush followed their writes before the tail was moved
        int at = tailMoveEvents.getFirst();
        int lastFlush = -1;
        List<Long> written = new ArrayList<>();
        for (int e = 0; e < at; e++) {
            RecordingDevice.Event ev = dev.event(e);
            if (ev.kind() == RecordingDevice.Event.Kind.FLUSH) {
                lastFlush = e;
            } else {
                written.add(ev.block());
                assertTrue(e < at, "write after tail move");
            }
        }
        assertEquals(List.of(10L, 12L), written, "written home in block order, item 1 (relogged) not yet");
        assertEquals(at - 1, lastFlush, "a flush is the last thing before the tail moves");
    }

    /** Holds every batch submitted until released. */
    static final class GatedDevice extends ForwardingDevice {
        final CountDownLatch submitted = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);

        GatedDevice(BlockDevice inner) {
            super(inner);
        }

        @Override
        public void submit(IoBatch batch) {
            submitted.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            super.submit(batch);
        }
    }

    @Test
    void anItemReloggedWhileItsWriteBackIsInFlightStaysListedAtItsNewerCopy() throws Exception {
        ail.close();
        GatedDevice gated = new GatedDevice(dev);
        start(gated, 64);
        TestItem[] it = items(2);
        publish(Lsn.of(1, 0), 1, Lsn.of(1, 5), it[0], it[1]);
        await(() -> ail.size() == 2 && !it[0].isPinned() && !it[1].isPinned());
        ail.pushTo(Lsn.of(1, 0));
        gated.submitted.await(); // both snapshotted, their write in flight
        whole(2, it[0]); // changed meanwhile: its first relog since the snapshot logs it whole
        publish(Lsn.of(1, 5), 2, Lsn.of(1, 9), it[0]);
        await(() -> !it[0].isPinned());
        assertEquals(Lsn.of(1, 5), it[0].lsn(), "the whole relog moved it on");
        gated.release.countDown();
        await(() -> ail.size() == 1 && tailMovesSize() == 1);
        assertEquals(List.of(it[0]), ail.items(), "home lacks its newer copy: it stays listed");
        assertEquals(Lsn.of(1, 5), tailMoves.getLast()[0], "the tail stops at the newer copy");
        assertTrue(it[1].isClean());
    }

    @Test
    void pinnedItemsStayAndAskForACheckpoint() {
        TestItem[] it = items(2);
        publish(Lsn.of(1, 0), 1, Lsn.of(1, 3), it[0], it[1]);
        await(() -> ail.size() == 2 && !it[0].isPinned());
        LogItem first = it[0]; // the test kit's item, seen as the journal sees it
        first.pin(); // committed again into a CIL context that is not durable yet
        ail.pushTo(Lsn.of(1, 0));
        await(() -> checkpointRequests.get() > 0 && ail.size() == 1);
        assertEquals(List.of(it[0]), ail.items());
        assertTrue(tailMovesSize() == 0 || tailMoves.getLast()[0] == Lsn.of(1, 0), "tail cannot pass the pinned item");
        first.unpin();
    }

    @Test
    void lockedItemsAreSkippedUntilFree() throws Exception {
        TestItem[] it = items(2);
        publish(Lsn.of(1, 0), 1, Lsn.of(1, 3), it[0], it[1]);
        await(() -> ail.size() == 2 && !it[1].isPinned());
        CountDownLatch locked = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Thread holder = new Thread(() -> {
            it[0].lock.lock(); // a transaction is changing item 0
            try {
                locked.countDown();
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                it[0].lock.unlock();
            }
        });
        holder.start();
        locked.await();
        ail.pushTo(Lsn.of(1, 0));
        await(() -> ail.size() == 1);
        assertEquals(List.of(it[0]), ail.items(), "the locked item stays");
        assertEquals(0, tailMovesSize(), "and holds the tail");
        release.countDown();
        holder.join();
        await(() -> ail.size() == 0 && tailMovesSize() == 1); // the pusher retries while stuck
        assertEquals(Lsn.of(1, 3), tailMoves.getLast()[0]);
    }

    @Test
    void staleItemsAreDroppedNotWritten() {
        TestItem[] it = items(2);
        publish(Lsn.of(1, 0), 1, Lsn.of(1, 3), it[0], it[1]);
        await(() -> ail.size() == 2 && !it[1].isPinned());
        assertFalse(it[0].isClean());
        it[0].stale = true; // its block was freed
        int eventsBefore = dev.eventCount();
        ail.pushAllAndWait(1, TimeUnit.SECONDS.toNanos(10));
        assertEquals(0, ail.size());
        assertEquals(1, ail.droppedStale.sum());
        for (int e = eventsBefore; e < dev.eventCount(); e++) {
            RecordingDevice.Event ev = dev.event(e);
            assertTrue(ev.kind() != RecordingDevice.Event.Kind.WRITE || ev.block() != it[0].home(),
                    "a freed block's item was written home: " + ev);
        }
        assertTrue(it[1].isClean() && it[0].isClean());
    }

    @Test
    void emptyAilMovesTheTailToTheEndOfTheLastCheckpoint() {
        TestItem[] it = items(1);
        publish(Lsn.of(1, 0), 1, Lsn.of(1, 3), it[0]);
        await(() -> ail.size() == 1);
        ail.pushAllAndWait(1, TimeUnit.SECONDS.toNanos(10));
        assertEquals(0, ail.size());
        assertEquals(Lsn.of(1, 3), tailMoves.getLast()[0]);
        assertEquals(2, tailMoves.getLast()[1], "the next checkpoint's sequence");
    }

    @Test
    void itemsPastTheRelogLimitGoHomeWithoutAPush() {
        ail.close();
        start(dev, DirtyMap.CHUNKS / 2);
        TestItem[] it = items(4);
        LogItem[] logged = it; // the test kit's items, seen as the journal sees them
        logged[0].loggedMap = -1L;             // logged whole, as a split does
        logged[0].loggedMapHigh = -1L;
        logged[1].loggedMap = -1L;             // half the block: at the limit, not past it
        logged[2].loggedMap = -1L;             // past it, but busy: a transaction holds its lock
        logged[2].loggedMapHigh = 3L;
        logged[3].loggedMap = 1L;
        it[0].image().set(ValueLayout.JAVA_LONG, TestItem.offset(1), 42);
        it[2].lock.lock();
        try {
            publish(Lsn.of(1, 0), 1, Lsn.of(1, 5), it);
            await(() -> ail.size() == 3 && ail.writtenEarly.sum() == 1);
        } finally {
            it[2].lock.unlock();
        }
        assertEquals(List.of(it[1], it[2], it[3]), ail.items(), "only the heavy, free item went home");
        assertEquals(0, logged[0].loggedMap | logged[0].loggedMapHigh, "its next relog starts afresh");
        assertEquals(3L, logged[2].loggedMapHigh, "the busy one waits for the push or its next relog");
        assertTrue(it[0].isClean());
        MemorySegment home = arena.allocate(BS, 4096);
        dev.read(it[0].home(), home);
        assertEquals(42, home.get(ValueLayout.JAVA_LONG, TestItem.offset(1)));
        assertEquals(Lsn.of(1, 0), TestItem.blockLsn(home));
        assertEquals(0, checkpointRequests.get());
        assertEquals(0, tailMovesSize(), "the tail stays: items of the same checkpoint remain");
        ail.pushAllAndWait(1, TimeUnit.SECONDS.toNanos(10));
        assertEquals(0, ail.size());
    }

    @Test
    void aCheckpointArrivingOutOfOrderStopsTheAil() {
        TestItem[] it = items(2);
        publish(Lsn.of(1, 0), 1, Lsn.of(1, 3), it[0]);
        publish(Lsn.of(1, 6), 3, Lsn.of(1, 9), it[1]); // checkpoint 2 never came
        await(() -> ail.failure() != null);
        assertTrue(ail.failure().getMessage().contains("checkpoint 3 reached the AIL where checkpoint 2 was due"),
                ail.failure().getMessage());
        assertEquals(List.of(it[0]), ail.items(), "nothing of the stray checkpoint is listed");
    }

    /**
     * Issue 21: writing an item home allocates nothing on the pusher once warm (the snapshot slot's
     * segment is made once, and the checksum reuses the thread's CRC32C and buffer views; before, a
     * CRC32C, slices and views per item, about 300 bytes). Each round publishes the AIL's batch of items
     * again and pushes them all home; the best of the measured rounds must stay under 16 bytes an item
     * (the test's own tail-move callback runs on the pusher too).
     */
    @Test
    void writeBackAllocatesNothingPerItemOnceWarm() throws Exception {
        ail.close();
        MemoryDevice plain = MemoryDevice.create(256, BS); // the recording device copies each write
        start(plain, 64);
        try {
            measureWriteBack();
        } finally {
            ail.close();
            plain.close();
            start(dev, 64); // for tearDown
        }
    }

    private void measureWriteBack() throws ReflectiveOperationException {
        TestItem[] it = items(16);
        int warmUp = 200, rounds = warmUp + 100;
        double best = Double.MAX_VALUE;
        long measuredFrom = 0, writtenFrom = 0;
        for (int r = 0; r < rounds; r++) {
            if (r >= warmUp && (r - warmUp) % 20 == 0) {
                measuredFrom = pusherAllocatedBytes();
                writtenFrom = ail.writtenBack.sum();
            }
            long lsn = Lsn.of(1 + r / 16, r % 16 * 4);
            publish(lsn, r + 1, Lsn.of(1 + r / 16, r % 16 * 4 + 3), it);
            await(() -> ail.size() == it.length && !it[it.length - 1].isPinned());
            ail.pushTo(lsn);
            await(() -> ail.size() == 0);
            if (r >= warmUp && (r - warmUp) % 20 == 19) {
                best = Math.min(best, (double) (pusherAllocatedBytes() - measuredFrom) / (ail.writtenBack.sum() - writtenFrom));
            }
        }
        System.out.println("write-back: " + best + " bytes allocated by the pusher per item");
        assertTrue(best < 16, "write-back: " + best + " bytes allocated by the pusher per item written home, expected under 16");
    }

    /** Bytes the AIL's pusher thread has allocated (the test's one AIL: tearDown closes each). */
    private static long pusherAllocatedBytes() throws ReflectiveOperationException {
        Object mx = ManagementFactory.getThreadMXBean();
        Method bytes = Class.forName("com.sun.management.ThreadMXBean").getMethod("getThreadAllocatedBytes", long.class);
        long sum = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals("ferrite-ail-pusher")) {
                sum += (Long) bytes.invoke(mx, t.threadId());
            }
        }
        return sum;
    }

    private int tailMovesSize() {
        synchronized (tailMoves) {
            return tailMoves.size();
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
