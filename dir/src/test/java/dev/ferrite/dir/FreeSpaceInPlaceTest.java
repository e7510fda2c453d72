package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.List;
import java.util.function.ToLongFunction;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.TreeWalk;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertSound;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A table value's allocation (blocks from the head of a free extent) and a free that joins one free
 * neighbour change each free-space tree's entry in place ({@link BTree#replaceInPlace}): a leaf's slot and
 * cell, not its header (count, cell start, dead bytes), as a delete and an insert would.
 */
class FreeSpaceInPlaceTest {
    /** The node header's log chunk (bytes 32 to 63 of a 4 KiB block's 128 chunks): level, count, cell start, garbage. */
    private static final long HEADER_CHUNK = 1L << 1;

    @Test
    void anAllocationAndAFreeJoiningOneNeighbourChangeEntriesInPlace() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            AllocationGroup ag = v.group(0);
            long[] b = new long[4];
            for (int i = 0; i < b.length; i++) {
                b[i] = change(v, ag, "allocation " + i, true, txn -> {
                    assertEquals(AllocOutcome.DONE, ag.allocClaiming(txn, 4));
                    return ag.allocatedBlock(txn);
                });
                int k = i;
                assertTrue(i == 0 || b[i] == b[i - 1] + 4, () -> "from the head of one free extent: " + b[k - 1] + ", then " + b[k]);
            }
            change(v, ag, "a free between two allocated extents", false, txn -> free(ag, txn, b[1]));
            change(v, ag, "a free joining the free extent after it", true, txn -> free(ag, txn, b[0]));
            change(v, ag, "a free joining the free extent before it", true, txn -> free(ag, txn, b[2]));
            change(v, ag, "a free joining both", false, txn -> free(ag, txn, b[3]));
            assertSound(v);
        }
    }

    /**
     * Frees in ascending order, each starting where the free extent the last one left ends (deletes in the
     * order the values were written), find their neighbours without looking them up: the trees have not
     * changed since the last free learned them. A change of the trees in between (an allocation), or a
     * free that joined the extent after it, makes the next one look again. The trees end as they would.
     */
    @Test
    void aFreeWhereTheLastFreeEndedKnowsItsNeighbours() {
        onSideBySide((v, ag, b) -> {
            int n = b.length;
            assertEquals(1, looksFreeing(v, ag, b, 0, 20, 1), "20 frees side by side, one look for the first");
            long taken = change(v, ag, "an allocation between", false, txn -> {
                assertEquals(AllocOutcome.DONE, ag.allocClaiming(txn, 4));
                return ag.allocatedBlock(txn);
            });
            assertEquals(1, looksFreeing(v, ag, b, 20, 21, 1), "the trees changed since the last free: looked again");
            // from the last down, each ending where the last free began; the first of them lies between the
            // extent free 20 left and the free space after the allocations
            assertEquals(n - 22, looksFreeing(v, ag, b, n - 1, 20, -1), "frees in descending order look each time after the first");
            change(v, ag, "the allocation's free", false, txn -> free(ag, txn, taken));
        });
    }

    /**
     * Frees in ascending order with allocated blocks between them (a drain's or a group's sorted frees of
     * scattered values) know their neighbours too: each lies between the free extent the last one left
     * and the free extent after it, with nothing free between those two. One look for 20 such frees where
     * each looked; the frees that then fill the gaps join both neighbours, and the trees end as they would.
     */
    @Test
    void sortedFreesWithAllocatedBlocksBetweenKnowTheirNeighbours() {
        onSideBySide((v, ag, b) -> {
            assertEquals(1, looksFreeing(v, ag, b, 0, b.length, 2), "20 sorted frees with allocated blocks between, one look for the first");
            looksFreeing(v, ag, b, 1, b.length, 2);
        });
    }

    /** What a test does with 40 extents of 4 blocks allocated side by side in group {@code ag}. */
    private interface SideBySide {
        void run(Volume v, AllocationGroup ag, long[] b);
    }

    /**
     * Runs {@code test} on a fresh volume's group 0 with 40 extents of 4 blocks allocated side by side,
     * each in a transaction of its own, from the head of one free extent; then checks the volume.
     */
    private void onSideBySide(SideBySide test) {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            AllocationGroup ag = v.group(0);
            test.run(v, ag, allocateSideBySide(v, ag, 40));
            assertSound(v);
        }
    }

    private long[] allocateSideBySide(Volume v, AllocationGroup ag, int n) {
        long[] b = new long[n];
        for (int i = 0; i < n; i++) {
            b[i] = change(v, ag, "allocation " + i, false, txn -> {
                assertEquals(AllocOutcome.DONE, ag.allocClaiming(txn, 4));
                return ag.allocatedBlock(txn);
            });
            int k = i;
            assertTrue(i == 0 || b[i] == b[i - 1] + 4, () -> "from the head of one free extent: " + b[k - 1] + ", then " + b[k]);
        }
        return b;
    }

    /**
     * Frees {@code b[i]} (4 blocks each), each in a transaction of its own, for {@code i} from {@code from}
     * by {@code step} up to {@code to} (not included); returns the look-ups of neighbours they made.
     */
    private long looksFreeing(Volume v, AllocationGroup ag, long[] b, int from, int to, int step) {
        long looks = ag.space.aroundLooks;
        for (int i = from; step > 0 ? i < to : i > to; i += step) {
            int k = i;
            change(v, ag, "free " + i, false, txn -> free(ag, txn, b[k]));
        }
        return ag.space.aroundLooks - looks;
    }

    /** What the last free made busy, settled once its transaction commits. */
    private BusyExtents.Entry freed;

    private long free(AllocationGroup ag, Txn txn, long block) {
        assertEquals(AllocOutcome.DONE, ag.releaseData(txn, block, 4));
        freed = ag.freedData(txn);
        return block;
    }

    /**
     * Runs {@code op} in a transaction of its own and, if {@code inPlace}, asserts before the commit that
     * it changed both free-space trees without logging any node's header.
     */
    private long change(Volume v, AllocationGroup ag, String what, boolean inPlace, ToLongFunction<Txn> op) {
        if (ag.needsRefill()) {
            ag.refillFreeList();
        }
        try (Txn txn = Txn.begin(v.cache(), ag.blockItems())) {
            long r = op.applyAsLong(txn);
            if (inPlace) {
                for (BTree tree : List.of(ag.space.bno, ag.space.cnt)) {
                    List<Long> blocks = new ArrayList<>();
                    TreeWalk.blocks(tree, blocks::add);
                    boolean changed = false;
                    for (long block : blocks) {
                        Buffer buf = v.cache().cached(block);
                        assertNotNull(buf, "block " + block + " cached");
                        assertEquals(0, buf.txDirty & HEADER_CHUNK, what + " logged the header of node " + block + " of tree " + tree.id());
                        changed |= (buf.txDirty | buf.txDirtyHigh) != 0;
                    }
                    assertTrue(changed, what + " changed tree " + tree.id());
                }
            }
            long seq = txn.commit();
            if (freed != null) {
                freed.settle(seq);
                freed = null;
            }
            return r;
        }
    }
}
