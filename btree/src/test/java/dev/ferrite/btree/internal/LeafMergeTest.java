package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
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
 * (sparse, and the checker finds the tree sound), and every key deleted still frees every leaf but one.
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
}
