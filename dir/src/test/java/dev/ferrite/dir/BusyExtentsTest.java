package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.ferrite.io.testkit.TestSeed;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Busy data extents: busy from the free until the freeing commit is durable, queried by range. */
@ExtendWith(TestSeed.class)
class BusyExtentsTest {
    private static final long SEED = TestSeed.get(7);

    @Test
    void anExtentIsBusyFromItsFreeUntilItsCommitIsDurable() {
        AtomicLong durable = new AtomicLong(4);
        BusyExtents busy = new BusyExtents(durable::get, () -> -1);
        BusyExtents.Entry e = busy.add(100, 10);
        assertEquals(100, busy.firstBusy(0, 200), "pending: the transaction has not committed yet");
        durable.set(Long.MAX_VALUE - 1);
        assertEquals(105, busy.firstBusy(105, 200), "still pending whatever is durable");
        e.settle(5);
        durable.set(4);
        assertEquals(109, busy.lastBusy(0, 200));
        assertEquals(104, busy.lastBusy(0, 105));
        assertEquals(120, busy.firstBusy(110, 120), "past its end");
        assertEquals(89, busy.lastBusy(90, 100), "before its start");
        durable.set(5);
        assertEquals(200, busy.firstBusy(0, 200), "durable: free for anyone");
        assertEquals(0, busy.size(), "dropped by the query that met it");
    }

    @Test
    void aQueryMeetingADurableEntryDropsEveryDurableEntryAtOnce() {
        AtomicLong durable = new AtomicLong(0);
        BusyExtents busy = new BusyExtents(durable::get, () -> -1);
        for (int i = 0; i < 40; i++) {
            busy.add(10 * i, 4).settle(i % 2 == 0 ? 1 : 2); // under the sweep at 64 entries
        }
        durable.set(1);
        assertEquals(10, busy.firstBusy(0, 1000), "the first still busy");
        assertEquals(20, busy.size(), "the 20 durable ones all went in the query that met the first, those past its answer too");
        assertEquals(393, busy.lastBusy(0, 1000));
        durable.set(2);
        assertEquals(389, busy.lastBusy(390, 400), "the last entry, now durable, met from the end: none busy");
        assertEquals(0, busy.size());
    }

    /**
     * The exact count sweeps only when an entry may have become durable since the last sweep: the durable
     * sequence moved, or an entry was settled or released since (with a sequence durable already). Counted
     * again with neither, it is the count the last sweep left plus the frees since.
     */
    @Test
    void theBusyCountSeesEntriesSettledOrReleasedAfterItsLastSweep() {
        AtomicLong durable = new AtomicLong(10);
        BusyExtents busy = new BusyExtents(durable::get, () -> -1);
        BusyExtents.Entry a = busy.add(100, 4), b = busy.add(200, 8);
        assertEquals(12, busy.busyBlocks(), "both pending");
        a.settle(7); // its commit durable already when it settles
        assertEquals(8, busy.busyBlocks(), "a, settled after the last sweep with a durable sequence, is not busy");
        b.hold(9);
        assertEquals(8, busy.busyBlocks(), "held: busy whatever is durable");
        BusyExtents.Entry c = busy.add(300, 2);
        assertEquals(10, busy.busyBlocks(), "a free since the last sweep counts");
        b.release();
        assertEquals(2, busy.busyBlocks(), "b, released with a durable sequence, is not busy");
        c.settle(11);
        assertEquals(2, busy.busyBlocks(), "c is not durable yet");
        durable.set(11);
        assertEquals(0, busy.busyBlocks(), "the durable sequence moved past c");
    }

    /** The busy block count that keeps an allocation from taking the last free blocks that are not busy. */
    @Test
    void theBlocksCountedBusyFollowFreesUndoesAndDurability() {
        AtomicLong durable = new AtomicLong(0);
        BusyExtents busy = new BusyExtents(durable::get, () -> -1);
        busy.add(10, 4).settle(1);
        BusyExtents.Entry undone = busy.add(20, 6);
        busy.add(40, 8).settle(2);
        assertEquals(18, busy.keptBlocks());
        busy.remove(undone);
        busy.remove(undone);
        assertEquals(12, busy.busyBlocks(), "an undone free's blocks are no longer busy, and go once");
        durable.set(1);
        assertEquals(12, busy.keptBlocks(), "an entry durable but not swept yet still counts");
        assertEquals(8, busy.busyBlocks(), "swept out");
        busy.add(12, 2).settle(3); // blocks the swept entry had, allocated and freed again
        assertEquals(10, busy.keptBlocks());
        durable.set(3);
        assertEquals(0, busy.busyBlocks());
    }

    /**
     * Frees after a sync, in block order below the last synced one's (a second pass of deletes over
     * values written again in freed blocks), sweep the durable entries out first, however many, so
     * that they append: the list holds only what is busy, in order.
     */
    @Test
    void aFreeAfterTheLastEntryBecameDurableSweepsThemAllAndAppends() {
        AtomicLong durable = new AtomicLong(0);
        BusyExtents busy = new BusyExtents(durable::get, () -> -1);
        for (int i = 0; i < 1000; i++) {
            busy.add(1000 + 4 * i, 4).settle(1 + i);
        }
        durable.set(1000);
        BusyExtents.Entry e = busy.add(0, 4);
        assertEquals(1, busy.size(), "the 1,000 durable entries swept at the first free after them");
        busy.add(4, 4);
        busy.add(12, 4);
        assertEquals(3, busy.size());
        assertEquals(0, busy.firstBusy(0, 100));
        assertEquals(12, busy.firstBusy(8, 100), "in order: appended after the pending ones");
        e.settle(1001);
        durable.set(1001);
        assertEquals(4, busy.firstBusy(0, 100));
    }

    /**
     * Single writes' frees of adjacent blocks, each settled with the context commits go to now, make one
     * entry between them (values deleted one at a time in the order they were written: one entry, not one
     * a delete); it is pending again until the later free settles it, and busy until that is durable. No
     * join across a checkpoint's start (the earlier free would stay busy a checkpoint longer), with a group's
     * free (which may be taken back or held), or with a free still pending.
     */
    @Test
    void adjacentSingleFreesOfTheCurrentContextShareOneEntry() {
        AtomicLong durable = new AtomicLong(0), current = new AtomicLong(5);
        BusyExtents busy = new BusyExtents(durable::get, current::get);
        BusyExtents.Entry a = busy.addJoining(100, 4);
        BusyExtents.Entry pendingNext = busy.addJoining(104, 4);
        assertEquals(2, busy.size(), "a still pending: not joined");
        a.settle(5);
        pendingNext.settle(5);
        for (int i = 0; i < 1000; i++) {
            BusyExtents.Entry e = busy.addJoining(108 + 4 * i, 4);
            assertEquals(pendingNext, e, "joined the entry ending where it starts");
            assertEquals(107 + 4 * (i + 1), busy.lastBusy(0, 10_000), "pending");
            e.settle(5);
        }
        assertEquals(2, busy.size(), "a thousand frees, no more entries");
        assertEquals(4008, busy.busyBlocks());
        current.set(6); // a checkpoint started: the next commit is in a later one
        BusyExtents.Entry later = busy.addJoining(4108, 4);
        assertEquals(3, busy.size(), "not joined across a checkpoint's start");
        later.settle(6);
        busy.add(4112, 4).settle(6);
        assertEquals(4, busy.size(), "a group's free has an entry of its own");
        busy.addJoining(4116, 4).settle(6);
        assertEquals(5, busy.size(), "and none joins it");
        durable.set(5);
        assertEquals(4108, busy.firstBusy(0, 10_000), "the joined entries durable with their context");
        durable.set(6);
        assertEquals(10_000, busy.firstBusy(0, 10_000));
        assertEquals(0, busy.size());
    }

    @Test
    void freeingBusyBlocksAgainIsABugThatIsReported() {
        AtomicLong durable = new AtomicLong(0);
        BusyExtents busy = new BusyExtents(durable::get, () -> -1);
        busy.add(10, 5).settle(3);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> busy.add(12, 1));
        assertEquals("blocks [12, +1) are freed again while [10, +5) of them are still busy: allocators must skip busy blocks",
                e.getMessage());
        durable.set(3);
        busy.add(12, 1); // durable since: allocated and freed again is fine, the old entry goes
        assertEquals(12, busy.firstBusy(0, 100));
        assertEquals(1, busy.size());
    }

    /** Random frees, commits and forces against a block-by-block model of what is busy. */
    @Test
    void queriesAgreeWithABlockByBlockModel() {
        agreeWithABlockByBlockModel(false, 512, 4);
    }

    /** {@link #queriesAgreeWithABlockByBlockModel} with single frees that join: a joined free's blocks are the new free's. */
    @Test
    void joinedFreesAgreeWithABlockByBlockModel() {
        agreeWithABlockByBlockModel(true, 512, 4);
    }

    /**
     * The model's checks with thousands of entries busy at once, frees far more frequent than durable
     * sequences: the entries fill many chunks, which split as frees land in them and go as sweeps empty them.
     */
    @Test
    void thousandsBusyInManyChunksAgreeWithTheModel() {
        for (boolean joins : new boolean[] {false, true}) {
            int most = agreeWithABlockByBlockModel(joins, 64 * BusyExtents.CHUNK, 200);
            assertTrue(most > 4 * BusyExtents.CHUNK, "seed " + SEED + ", joins " + joins + ": at most " + most + " entries");
        }
    }

    /**
     * Frees taken back one by one in random order from among thousands, each checked with queries that
     * end or start right at its blocks: the first entry of a chunk going must not leave the chunk's search
     * key behind.
     */
    @Test
    void freesTakenBackAnywhereAmongThousandsLeaveEveryNeighbourFound() {
        Random rnd = new Random(SEED);
        BusyExtents busy = new BusyExtents(() -> 0, () -> -1);
        int n = 8 * BusyExtents.CHUNK;
        List<BusyExtents.Entry> entries = new ArrayList<>();
        boolean[] isBusy = new boolean[8 * n + 16];
        for (int i : rnd.ints(0, n).distinct().limit(n).toArray()) {
            entries.add(busy.add(8 * i, 4));
            Arrays.fill(isBusy, 8 * i, 8 * i + 4, true);
        }
        Collections.shuffle(entries, rnd);
        for (BusyExtents.Entry e : entries) {
            busy.remove(e);
            Arrays.fill(isBusy, e.start, e.end(), false);
            for (int[] range : new int[][] {{Math.max(0, e.start - 8), e.start + 1}, {e.start, e.start + 12}}) {
                int first = range[1], last = range[0] - 1;
                for (int b = range[0]; b < range[1]; b++) {
                    if (isBusy[b]) {
                        first = Math.min(first, b);
                        last = b;
                    }
                }
                String where = "seed " + SEED + ", [" + range[0] + ", " + range[1] + ") after [" + e.start + ", +4) went";
                assertEquals(first, busy.firstBusy(range[0], range[1]), where);
                assertEquals(last, busy.lastBusy(range[0], range[1]), where);
            }
        }
        assertEquals(0, busy.size());
    }

    /** Frees ({@code freeWeight} in 6 + freeWeight steps), commits, forces and queries over {@code blocks} blocks. */
    private static int agreeWithABlockByBlockModel(boolean joins, int blocks, int freeWeight) {
        int most = 0;
        Random rnd = new Random(SEED);
        AtomicLong durable = new AtomicLong(0), next = new AtomicLong(1);
        BusyExtents busy = new BusyExtents(durable::get, joins ? next::get : () -> -1);
        long[] freedAt = new long[blocks]; // 0: never freed; Long.MAX_VALUE: pending
        BusyExtents.Entry[] pending = new BusyExtents.Entry[blocks];
        List<BusyExtents.Entry> undoable = new ArrayList<>(); // a group's frees not committed yet
        for (int step = 0; step < 20_000; step++) {
            int r = rnd.nextInt(6 + freeWeight) - freeWeight + 4;
            if (r < 4) { // free a run of blocks no busy block is in (as an allocator leaves them)
                int s = rnd.nextInt(blocks), n = Math.min(1 + rnd.nextInt(8), blocks - s);
                if (busy.firstBusy(s, s + n) == s + n) {
                    boolean single = joins && rnd.nextInt(4) > 0;
                    BusyExtents.Entry e = single ? busy.addJoining(s, n) : busy.add(s, n);
                    most = Math.max(most, busy.size());
                    if (!single) {
                        undoable.add(e);
                    }
                    for (int b = e.start; b < s + n; b++) { // a joined entry's earlier blocks are pending again
                        freedAt[b] = Long.MAX_VALUE;
                        pending[b] = e;
                    }
                    if (single && rnd.nextBoolean()) { // a single write commits at once
                        e.settle(next.get());
                        for (int b = e.start; b < e.end(); b++) {
                            freedAt[b] = next.get();
                        }
                    }
                }
            } else if (r == 6) { // a group takes one of its frees back: the blocks are allocated again
                if (!undoable.isEmpty()) {
                    BusyExtents.Entry e = undoable.remove(rnd.nextInt(undoable.size()));
                    busy.remove(e);
                    for (int b = e.start; b < e.end(); b++) {
                        freedAt[b] = 0;
                        pending[b] = null;
                    }
                }
            } else if (r < 7) { // commit every pending free
                undoable.clear();
                long seq = next.getAndIncrement();
                for (int b = 0; b < blocks; b++) {
                    if (freedAt[b] == Long.MAX_VALUE) {
                        pending[b].settle(seq);
                        freedAt[b] = seq;
                    }
                }
            } else if (r < 8) { // a checkpoint becomes durable
                durable.set(Math.min(next.get() - 1, durable.get() + 1 + rnd.nextInt(2)));
            } else { // ask about a range
                int from = rnd.nextInt(blocks), to = from + 1 + rnd.nextInt(blocks - from);
                int first = to, last = from - 1;
                for (int b = from; b < to; b++) {
                    if (freedAt[b] != 0 && freedAt[b] > durable.get()) {
                        first = Math.min(first, b);
                        last = b;
                    }
                }
                String where = "seed " + SEED + ", joins " + joins + ", step " + step + ", range [" + from + ", " + to + ")";
                assertEquals(first, busy.firstBusy(from, to), where);
                assertEquals(last, busy.lastBusy(from, to), where);
            }
        }
        return most;
    }
}
