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
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            AllocationGroup ag = v.group(0);
            int n = 40;
            long[] b = new long[n];
            for (int i = 0; i < n; i++) {
                b[i] = change(v, ag, "allocation " + i, false, txn -> {
                    assertEquals(AllocOutcome.DONE, ag.allocClaiming(txn, 4));
                    return ag.allocatedBlock(txn);
                });
                int k = i;
                assertTrue(i == 0 || b[i] == b[i - 1] + 4, () -> "from the head of one free extent: " + b[k - 1] + ", then " + b[k]);
            }
            long looks = ag.space.aroundLooks;
            for (int i = 0; i < 20; i++) {
                int k = i;
                change(v, ag, "free " + i, false, txn -> free(ag, txn, b[k]));
            }
            assertEquals(looks + 1, ag.space.aroundLooks, "20 frees side by side, one look for the first");
            long taken = change(v, ag, "an allocation between", false, txn -> {
                assertEquals(AllocOutcome.DONE, ag.allocClaiming(txn, 4));
                return ag.allocatedBlock(txn);
            });
            change(v, ag, "free 20", false, txn -> free(ag, txn, b[20]));
            assertEquals(looks + 2, ag.space.aroundLooks, "the trees changed since the last free: looked again");
            for (int i = n - 1; i > 20; i--) { // from the last down: each ends where the last free began
                int k = i;
                change(v, ag, "free " + i, false, txn -> free(ag, txn, b[k]));
            }
            // the first of them lies between the extent free 20 left and the free space after the allocations
            assertEquals(looks + 2 + (n - 22), ag.space.aroundLooks, "frees in descending order look each time after the first");
            change(v, ag, "the allocation's free", false, txn -> free(ag, txn, taken));
            assertSound(v);
        }
    }

    /**
     * Frees in ascending order with allocated blocks between them (a drain's or a group's sorted frees of
     * scattered values) know their neighbours too: each lies between the free extent the last one left
     * and the free extent after it, with nothing free between those two. One look for 20 such frees where
     * each looked; the frees that then fill the gaps join both neighbours, and the trees end as they would.
     */
    @Test
    void sortedFreesWithAllocatedBlocksBetweenKnowTheirNeighbours() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            AllocationGroup ag = v.group(0);
            int n = 40;
            long[] b = new long[n];
            for (int i = 0; i < n; i++) {
                b[i] = change(v, ag, "allocation " + i, false, txn -> {
                    assertEquals(AllocOutcome.DONE, ag.allocClaiming(txn, 4));
                    return ag.allocatedBlock(txn);
                });
                int k = i;
                assertTrue(i == 0 || b[i] == b[i - 1] + 4, () -> "from the head of one free extent: " + b[k - 1] + ", then " + b[k]);
            }
            long looks = ag.space.aroundLooks;
            for (int i = 0; i < n; i += 2) {
                int k = i;
                change(v, ag, "free " + i, false, txn -> free(ag, txn, b[k]));
            }
            assertEquals(looks + 1, ag.space.aroundLooks, "20 sorted frees with allocated blocks between, one look for the first");
            for (int i = 1; i < n; i += 2) {
                int k = i;
                change(v, ag, "free " + i, false, txn -> free(ag, txn, b[k]));
            }
            assertSound(v);
        }
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
