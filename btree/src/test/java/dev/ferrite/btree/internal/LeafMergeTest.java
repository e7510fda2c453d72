package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A leaf merges with a sibling only once it holds less than a sixteenth of a node
 * ({@link BTree#LEAF_MERGE_FRACTION}), not at a quarter as interior nodes do: a leaf between the two stays
 * (sparse, and the checker finds the tree sound), and every key deleted still frees every leaf but one. A
 * leaf emptied by a delete leaves the chain beside its left sibling, which takes in no cell and logs only its
 * link; one merged under a sixteenth moves its cells into its left sibling's free gap, which logs only them.
 */
@ExtendWith(TestSeed.class)
class LeafMergeTest {
    private static final long SEED = TestSeed.get(13);
    private static final int CAPACITY = 4096 - BTreeNodeFormat.SLOTS;
    private static final int KEYS = 3000;

    private static byte[] key(int i) {
        return Keys.ofLong(i);
    }

    private static byte[] value(int i) {
        byte[] v = new byte[100];
        v[0] = (byte) i;
        v[1] = (byte) (i >>> 8);
        return v;
    }

    @Test
    void aLeafStaysUntilItHoldsLessThanASixteenthOfANode() {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 16L << 20)) {
            for (int i = 0; i < KEYS; i++) {
                s.tree.put(key(i), value(i));
            }
            for (int i = 0; i < KEYS; i += 2) { // every leaf about half full: a merge always fits
                assertTrue(s.tree.delete(key(i)) >= 0);
            }
            List<Long> leaves = leaves(s);
            assertTrue(leaves.size() >= 8, "leaves: " + leaves.size());
            long leaf = leaves.get(leaves.size() / 2);
            List<byte[]> keys = keysOf(s, leaf);
            int stayedBelowAQuarter = 0;
            for (byte[] k : keys) {
                MemorySegment n = s.tree.node(leaf).data();
                int at = BTreeNodeFormat.search(n, MemorySegment.ofArray(k));
                int after = BTreeNodeFormat.used(n, 4096) - BTreeNodeFormat.cellSize(n, at);
                int before = leaves(s).size();
                assertTrue(s.tree.delete(k) >= 0);
                boolean merged = leaves(s).size() == before - 1;
                String what = "the leaf left with " + after + " bytes (a sixteenth is " + CAPACITY / 16 + ", a quarter "
                        + CAPACITY / 4 + ")";
                assertTrue(s.tree.check().ok(), what + ": " + s.tree.check());
                if (after >= CAPACITY / BTree.LEAF_MERGE_FRACTION) {
                    assertFalse(merged, what + " merged");
                    if (after < CAPACITY / 4) {
                        stayedBelowAQuarter++;
                    }
                } else {
                    assertTrue(merged, what + " did not merge");
                    break;
                }
            }
            assertTrue(stayedBelowAQuarter >= 3, "deletes that left the leaf between a sixteenth and a quarter: " + stayedBelowAQuarter);
        }
    }

    @Test
    void deletingEveryKeyInRandomOrderFreesEveryLeafButOne() {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 16L << 20)) {
            long free = s.allocator.freeBlocks();
            List<Integer> order = new ArrayList<>();
            for (int i = 0; i < KEYS; i++) {
                s.tree.put(key(i), value(i));
                order.add(i);
            }
            Collections.shuffle(order, new Random(SEED));
            for (int done = 0; done < order.size(); done++) {
                int i = order.get(done);
                assertTrue(s.tree.delete(key(i)) >= 0, "key " + i);
                if (done % 500 == 0) {
                    assertTrue(s.tree.check().ok(), "after " + done + " deletes (seed " + SEED + "): " + s.tree.check());
                }
            }
            assertTrue(s.tree.check().ok(), s.tree.check().toString());
            assertEquals(1, s.nodes().size(), "nodes left once every key is gone (seed " + SEED + ")");
            assertEquals(free, s.allocator.freeBlocks(), "free blocks once every key is gone (seed " + SEED + ")");
        }
    }

    private static List<Long> leaves(Store s) {
        List<Long> leaves = new ArrayList<>();
        for (Map.Entry<Long, Integer> e : s.nodes().entrySet()) {
            if (e.getValue() == 0) {
                leaves.add(e.getKey());
            }
        }
        return leaves;
    }

    private static List<byte[]> keysOf(Store s, long leaf) {
        MemorySegment n = s.tree.node(leaf).data();
        List<byte[]> keys = new ArrayList<>();
        for (int i = 0, c = BTreeNodeFormat.count(n); i < c; i++) {
            keys.add(BTreeNodeFormat.key(n, i).toArray(ValueLayout.JAVA_BYTE));
        }
        return keys;
    }

    @Test
    void aLeafUnderASixteenthMovesItsCellsIntoItsLeftSiblingsGap() {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 16L << 20)) {
            List<Integer> order = new ArrayList<>();
            for (int i = 0; i < KEYS; i++) {
                order.add(i);
            }
            Collections.shuffle(order, new Random(SEED)); // leaves split in the middle: free gaps that hold a small leaf's cells
            for (int i : order) {
                s.tree.put(key(i), value(i));
            }
            MemorySegment root = s.tree.node(BTreeHeaderFormat.root(s.tree.header().data())).data();
            assertTrue(!BTreeNodeFormat.isLeaf(root) && BTreeNodeFormat.count(root) >= 4, "a root over several leaves");
            long middle = BTreeNodeFormat.child(root, 1), left = BTreeNodeFormat.child(root, 0), right = BTreeNodeFormat.child(root, 2);
            List<byte[]> keys = keysOf(s, middle);
            int k = 0;
            for (; ; k++) { // down to the last delete that leaves the leaf at a sixteenth or more
                MemorySegment n = s.tree.node(middle).data();
                int at = BTreeNodeFormat.search(n, MemorySegment.ofArray(keys.get(k)));
                if (BTreeNodeFormat.used(n, 4096) - BTreeNodeFormat.cellSize(n, at) < CAPACITY / BTree.LEAF_MERGE_FRACTION) {
                    break;
                }
                assertTrue(s.tree.delete(keys.get(k)) >= 0);
            }
            int leftCells = BTreeNodeFormat.count(s.tree.node(left).data());
            assertTrue(BTreeNodeFormat.freeContiguous(s.tree.node(left).data()) >= CAPACITY / BTree.LEAF_MERGE_FRACTION,
                    "the left sibling's free gap holds the small leaf's cells (seed " + SEED + ")");
            int rightCells = BTreeNodeFormat.count(s.tree.node(right).data());
            try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                assertTrue(s.tree.delete(txn, MemorySegment.ofArray(keys.get(k))));
                assertEquals(-1, s.nodes().getOrDefault(middle, -1), "the small leaf is freed");
                Buffer l = s.tree.node(left);
                assertEquals(leftCells + keys.size() - k - 1, BTreeNodeFormat.count(l.data()), "the left sibling took in its cells");
                assertEquals(rightCells, BTreeNodeFormat.count(s.tree.node(right).data()), "the right sibling kept its own");
                assertEquals(right, BTreeNodeFormat.right(l.data()));
                int chunks = Long.bitCount(l.txDirty) + Long.bitCount(l.txDirtyHigh);
                assertTrue(chunks <= 16, "the left sibling logs its header, slots and new cells, not its old cells: " + chunks + " chunks");
                txn.commit();
            }
            assertTrue(s.tree.check().ok(), s.tree.check().toString());
            for (int i = 0; i < KEYS; i++) {
                int at = i;
                boolean gone = keys.subList(0, k + 1).stream().anyMatch(d -> Arrays.equals(d, key(at)));
                assertEquals(!gone, s.tree.get(key(i)) != null, "key " + i);
            }
        }
    }

    @Test
    void aLeafEmptiedBesideALeftSiblingLogsOnlyTheLinks() {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 16L << 20)) {
            byte[] big = new byte[1000]; // three to a leaf: a leaf empties long before it holds a sixteenth
            for (int i = 0; i < 120; i++) {
                s.tree.put(key(i), big);
            }
            MemorySegment root = s.tree.node(BTreeHeaderFormat.root(s.tree.header().data())).data();
            assertTrue(!BTreeNodeFormat.isLeaf(root) && BTreeNodeFormat.count(root) >= 4, "a root over several leaves");
            long middle = BTreeNodeFormat.child(root, 1); // a left sibling and a right one under the same parent
            long left = BTreeNodeFormat.child(root, 0), right = BTreeNodeFormat.child(root, 2);
            List<byte[]> keys = keysOf(s, middle);
            for (byte[] k : keys.subList(0, keys.size() - 1)) {
                assertTrue(s.tree.delete(k) >= 0);
            }
            int leftCells = BTreeNodeFormat.count(s.tree.node(left).data());
            try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                assertTrue(s.tree.delete(txn, MemorySegment.ofArray(keys.getLast())));
                assertEquals(-1, s.nodes().getOrDefault(middle, -1), "the emptied leaf is freed");
                Buffer l = s.tree.node(left), r = s.tree.node(right);
                assertEquals(leftCells, BTreeNodeFormat.count(l.data()), "the left sibling took in no cell");
                assertEquals(right, BTreeNodeFormat.right(l.data()));
                assertEquals(left, BTreeNodeFormat.left(r.data()));
                assertEquals(1, Long.bitCount(l.txDirty) + Long.bitCount(l.txDirtyHigh), "the left sibling logs one chunk, its link");
                assertEquals(1, Long.bitCount(r.txDirty) + Long.bitCount(r.txDirtyHigh), "the right sibling logs one chunk, its link");
                txn.commit();
            }
            assertTrue(s.tree.check().ok(), s.tree.check().toString());
            for (int i = 0; i < 120; i++) {
                byte[] k = key(i);
                boolean gone = keys.stream().anyMatch(d -> Arrays.equals(d, k));
                assertEquals(!gone, s.tree.get(k) != null, "key " + i);
            }
        }
    }
}
