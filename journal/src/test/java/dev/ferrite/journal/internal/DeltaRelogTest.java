package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.journal.testkit.TestItem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Delta relogging: a checkpoint logs only the chunks an item changed in it, the item keeps its place in
 * the AIL at its first checkpoint since home so the tail cannot pass a delta the home block lacks, and
 * recovery composes the deltas; an item that holds the tail and cannot go home is relogged whole once,
 * which moves it on.
 */
@ExtendWith(TestSeed.class)
class DeltaRelogTest {
    static final int BS = 4096;
    static final int CHUNK = BS / DirtyMap.CHUNKS;

    /** What recovery handed the replayer for one block: each op's ranges as "offset+length", and its LSN. */
    record Op(long lsn, List<String> ranges, boolean zeroed) {
    }

    /** What recovering a crash copy gave: the ops replayed for one block, the report, the block as recovered. */
    record Recovered(List<Op> ops, RecoveryReport report, MemorySegment block) {
    }

    /** Recovers a copy of {@code device} as a crash now would leave it, watching the ops of block {@code home}. */
    private static Recovered recoverCopy(MemoryDevice device, LogGeometry g, long home, Arena arena) {
        List<Op> ops = new ArrayList<>();
        try (MemoryDevice crashed = device.copy("crashed"); TestReplayer inner = new TestReplayer(crashed)) {
            Replayer watching = new Replayer() {
                @Override
                public boolean replay(ReplayItem item) {
                    if (item.home() == home) {
                        List<String> r = new ArrayList<>();
                        for (int i = 0; i < item.rangeCount(); i++) {
                            r.add(item.rangeOffset(i) + "+" + item.rangeLength(i));
                        }
                        ops.add(new Op(item.lsn(), r, item.zeroed()));
                    }
                    return inner.replay(item);
                }

                @Override
                public void finish() {
                    inner.finish();
                }
            };
            RecoveryReport report;
            try (Journal j = Journal.open(crashed, g, JournalOptions.defaults(), watching)) {
                report = j.recovery();
            }
            MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            crashed.read(home, block);
            return new Recovered(ops, report, block);
        }
    }

    interface Body {
        void run(MemoryDevice dev, Journal j, Arena arena);
    }

    /** Runs {@code body} on a journal just formatted and opened in {@code g} of a fresh device. */
    private static void withJournal(LogGeometry g, int deviceBlocks, Body body) {
        try (MemoryDevice dev = MemoryDevice.create(deviceBlocks, BS); Arena arena = Arena.ofShared()) {
            Journal.format(dev, g);
            try (TestReplayer rep = new TestReplayer(dev); Journal j = Journal.open(dev, g, JournalOptions.defaults(), rep)) {
                body.run(dev, j, arena);
            }
        }
    }

    private static long commit(Journal j, TestItem it, int counter) {
        Transaction tx = j.begin(Reservation.items(1));
        it.lock.lock();
        try {
            it.add(tx, counter, 1);
            return tx.commit();
        } finally {
            it.lock.unlock();
        }
    }

    /** Forces {@code it}'s last commit and waits until its checkpoint is in the AIL (which unpins it). */
    private static void forceIntoAil(Journal j, LogItem it, long seq) {
        j.force(seq);
        await(() -> !it.isPinned(), it + " did not reach the AIL");
    }

    @Test
    void anItemReloggedInThreeCheckpointsLogsEachOnesChunksKeepsItsPlaceAndHoldsTheTail() {
        LogGeometry g = new LogGeometry(512, 64);
        withJournal(g, 1024, (dev, j, arena) -> {
            TestItem x = new TestItem(3, BS, arena);
            TestItem y = new TestItem(4, BS, arena);
            TestItem z = new TestItem(5, BS, arena);
            forceIntoAil(j, y, commit(j, y, 0));
            long first = Lsn.NONE;
            for (int k = 0; k < 3; k++) {
                forceIntoAil(j, x, commit(j, x, k));
                if (k == 0) {
                    first = x.lsn();
                }
                assertEquals(first, x.lsn(), "after checkpoint " + k + ", the item keeps its first checkpoint's place");
            }
            assertTrue(first > y.lsn());
            // x is busy (a transaction holds it, reentrantly, to the end): writing everything home takes
            // y, and the tail stops at x
            long movesBefore = j.stats().tailMoves();
            LogItem held = x;
            x.lock.lock();
            try {
                j.writeBackAll();
                await(() -> y.isClean() && j.stats().tailMoves() > movesBefore, "y went home and the tail moved");
                assertEquals(LogItem.RELOG_DELTA, held.wholeRelog,
                        "busy in the newest quarter of the log, x is not asked to relog whole");
                for (int k = 0; k < 14; k++) { // x's place falls more than a quarter of the log behind (a block each)
                    forceIntoAil(j, z, commit(j, z, k % 7));
                }
                j.writeBackAll();
                await(() -> z.isClean() && held.wholeRelog == LogItem.RELOG_ASKED, "z went home and x was asked to relog whole");
                Recovered r = recoverCopy(dev, g, x.home(), arena);
                assertEquals(first, r.report().tailLsn(), "the tail stopped at the item's first checkpoint: " + r.report());
                assertEquals(List.of(List.of("0+" + CHUNK), List.of(TestItem.SPACING + "+" + CHUNK),
                        List.of(2 * TestItem.SPACING + "+" + CHUNK)), r.ops().stream().map(Op::ranges).toList(),
                        "each checkpoint logged only the chunk it changed");
                for (int c = 0; c < 3; c++) {
                    assertEquals(1, TestItem.blockCounter(r.block(), c), "counter " + c + ": the deltas compose");
                }
                // asked, x's next commit logs it whole and moves it on
                forceIntoAil(j, x, commit(j, x, 3));
                assertTrue(x.lsn() > first, "relogged whole, the item moved on in the AIL");
                r = recoverCopy(dev, g, x.home(), arena);
                Op last = r.ops().getLast();
                assertEquals(x.lsn(), last.lsn());
                assertEquals(List.of("0+" + CHUNK, TestItem.SPACING + "+" + CHUNK, 2 * TestItem.SPACING + "+" + CHUNK,
                        3 * TestItem.SPACING + "+" + CHUNK), last.ranges(), "the whole relog carries every chunk since home");
                for (int c = 0; c < 4; c++) {
                    assertEquals(1, TestItem.blockCounter(r.block(), c), "counter " + c);
                }
            } finally {
                x.lock.unlock();
            }
        });
    }

    private static final List<String> CHUNKS_0_TO_2 = List.of("0+" + CHUNK, TestItem.SPACING + "+" + CHUNK,
            2 * TestItem.SPACING + "+" + CHUNK);

    /** Asked for a whole relog between two commits of one checkpoint, the delta of the first turns whole. */
    @Test
    void aDeltaTurnedWholeWithinItsCheckpointCarriesEveryChunkSinceHome() {
        LogGeometry g = new LogGeometry(512, 256);
        withJournal(g, 1024, (dev, j, arena) -> {
            TestItem x = new TestItem(3, BS, arena);
            forceIntoAil(j, x, commit(j, x, 0));
            long first = x.lsn();
            commit(j, x, 1); // a delta: counter 1's chunk
            ((LogItem) x).wholeRelog = LogItem.RELOG_ASKED; // as the AIL asks of an item holding the tail
            forceIntoAil(j, x, commit(j, x, 2));
            assertTrue(x.lsn() > first, "logged whole, the item moved on");
            Recovered r = recoverCopy(dev, g, x.home(), arena);
            assertEquals(List.of("0+" + CHUNK), r.ops().getFirst().ranges());
            assertEquals(CHUNKS_0_TO_2, r.ops().getLast().ranges(), "every chunk since home, in the second checkpoint");
            for (int c = 0; c < 3; c++) {
                assertEquals(1, TestItem.blockCounter(r.block(), c), "counter " + c);
            }
        });
    }

    /**
     * Commits scattered over a block, new chunks below and above the ones already in the checkpoint, until
     * the shadow outgrows packing and is spread over the block: each checkpoint still logs exactly the
     * chunks changed in it, and recovery rebuilds the block.
     */
    @Test
    void aShadowSpreadOverItsBlockLogsTheSameChunks() {
        long seed = TestSeed.get(11);
        Random rnd = new Random(seed);
        LogGeometry g = new LogGeometry(512, 256);
        withJournal(g, 1024, (dev, j, arena) -> {
            TestItem x = new TestItem(3, BS, arena);
            MemorySegment expect = arena.allocate(BS);
            x.lock.lock(); // busy, x stays out of write-back: every checkpoint's op reaches recovery
            for (int checkpoint = 0; checkpoint < 3; checkpoint++) {
                boolean[] chunks = new boolean[DirtyMap.CHUNKS];
                long seq = 0;
                for (int k = 0; k < 60; k++) {
                    int off = TestItem.DATA_OFF + 8 * rnd.nextInt((BS - TestItem.DATA_OFF) / 8);
                    long v = rnd.nextLong();
                    Transaction tx = j.begin(Reservation.items(1));
                    x.image().set(ValueLayout.JAVA_LONG_UNALIGNED, off, v);
                    tx.log(x, off, 8);
                    seq = tx.commit();
                    expect.set(ValueLayout.JAVA_LONG_UNALIGNED, off, v);
                    chunks[off / CHUNK] = true;
                }
                forceIntoAil(j, x, seq);
                Recovered r = recoverCopy(dev, g, x.home(), arena);
                List<String> runs = new ArrayList<>();
                for (int c = 0; c < chunks.length; c++) {
                    int start = c;
                    while (c < chunks.length && chunks[c]) {
                        c++;
                    }
                    if (c > start) {
                        runs.add(start * CHUNK + "+" + (c - start) * CHUNK);
                    }
                }
                String where = "seed " + seed + ", checkpoint " + checkpoint;
                assertEquals(runs, r.ops().getLast().ranges(), where + ": the chunks changed in it");
                assertEquals(-1, expect.asSlice(TestItem.DATA_OFF).mismatch(r.block().asSlice(TestItem.DATA_OFF)),
                        where + ": the block as committed");
            }
            x.lock.unlock();
        });
    }

    /** A roll logs its items whole: its holder may keep them locked while the next step waits for log space. */
    @Test
    void aRollLogsItsItemsWholeSoTheyMoveOn() {
        LogGeometry g = new LogGeometry(512, 256);
        withJournal(g, 1024, (dev, j, arena) -> {
            TestItem x = new TestItem(3, BS, arena);
            forceIntoAil(j, x, commit(j, x, 0));
            forceIntoAil(j, x, commit(j, x, 1));
            long first = x.lsn();
            Transaction tx = j.begin(Reservation.permanent(1, 2));
            x.lock.lock();
            try {
                x.add(tx, 2, 1);
                long seq = tx.roll();
                j.force(seq);
                await(() -> x.lsn() > first, "the rolled item moved on in the AIL");
                tx.commit();
            } finally {
                x.lock.unlock();
            }
            Recovered r = recoverCopy(dev, g, x.home(), arena);
            assertEquals(CHUNKS_0_TO_2, r.ops().getLast().ranges(), "the roll logged every chunk since home");
        });
    }

    /**
     * A block the AIL always finds locked (as a hot leaf's lock is taken by one transaction after another),
     * so it can never go home: the same bytes and checksum as a {@link TestItem}, whose replayer rebuilds it.
     */
    static final class HotItem extends LogItem {
        final MemorySegment image;
        final TestItem twin;
        volatile boolean hot = true;

        HotItem(long home, Arena arena) {
            super(home, TestItem.TYPE);
            twin = new TestItem(home, BS, arena);
            image = twin.image();
        }

        @Override
        protected MemorySegment image() {
            return image;
        }

        @Override
        protected boolean tryLock() {
            return !hot && twin.lock.tryLock();
        }

        @Override
        protected void unlock() {
            twin.lock.unlock();
        }

        @Override
        protected void stamp(MemorySegment copy, long lsn) {
            twin.stamp(copy, lsn);
        }
    }

    /**
     * Every transaction changes one block the AIL can never write home and a filler, in a log of 128
     * blocks: the AIL has the hot block relogged whole before it could hold the tail with the log full,
     * the log goes around many times, and a crash then recovers every change. Each transaction waits for
     * its checkpoint to reach the AIL (a real hot block's transactions would let the AIL catch up, and
     * write it home, once they wait for log space; this one's never do).
     */
    @Test
    void aContinuouslyHotBlockDoesNotFillTheLog() {
        LogGeometry g = new LogGeometry(1024, 128);
        int fillers = 24;
        int transactions = 1400; // a forced checkpoint takes 1 log block (an inline record): ~10 times around the log
        withJournal(g, 2048, (dev, j, arena) -> {
            HotItem hot = new HotItem(3, arena);
            TestItem[] filler = new TestItem[fillers];
            for (int i = 0; i < fillers; i++) {
                filler[i] = new TestItem(10 + i, BS, arena);
            }
            try {
                assertTimeoutPreemptively(Duration.ofSeconds(30), () -> {
                    for (int t = 0; t < transactions; t++) {
                        Transaction tx = j.begin(Reservation.items(2));
                        TestItem f = filler[t % fillers];
                        long seq;
                        hot.twin.lock.lock();
                        f.lock.lock();
                        try {
                            long off = TestItem.offset(t % 7);
                            hot.image.set(ValueLayout.JAVA_LONG_UNALIGNED, off,
                                    hot.image.get(ValueLayout.JAVA_LONG_UNALIGNED, off) + 1);
                            tx.log(hot, (int) off, 8);
                            f.add(tx, t % 7, 1);
                            seq = tx.commit();
                        } finally {
                            f.lock.unlock();
                            hot.twin.lock.unlock();
                        }
                        forceIntoAil(j, hot, seq);
                    }
                }, () -> "the log filled up behind the hot block (at " + Lsn.toString(hot.lsn()) + ", last logged at "
                        + Lsn.toString(hot.lastLsn) + ", whole relog " + hot.wholeRelog + "): " + j.diagnostics());
            } finally {
                hot.hot = false; // lets close() write it home
            }
            assertTrue(j.stats().checkpointBytes() > 9L * g.blocks() * BS, "the log went around: " + j.stats());
            Recovered r = recoverCopy(dev, g, hot.home(), arena);
            for (int c = 0; c < 7; c++) {
                assertEquals((transactions + 6 - c) / 7, TestItem.blockCounter(r.block(), c),
                        "hot counter " + c + " after recovery: " + r.report());
            }
        });
    }

    private static void await(BooleanSupplier condition, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, what + ": not within 10 s");
            Thread.onSpinWait();
        }
    }
}
