package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link BTree#replace} and {@link BTree#delete(Txn, MemorySegment, MemorySegment)} hand back the value
 * they replace or delete, read in their own descent, against a sorted map: values of changing lengths,
 * so that replacements happen in place, by moving the cell, by splitting the leaf, and deletes with and
 * without merges.
 */
@ExtendWith(TestSeed.class)
class BTreePriorValueTest {
    private static final long SEED = TestSeed.get(11);

    @Test
    void replaceAndDeleteReturnTheValueTheKeyHadJustBefore() {
        Random rnd = new Random(SEED);
        TreeMap<Long, byte[]> model = new TreeMap<>();
        MemorySegment prior = MemorySegment.ofArray(new byte[BTreeNodeFormat.MAX_VALUE]);
        int tallest = 0;
        try (MemoryDevice dev = MemoryDevice.create(16_384, 4096); Store s = Store.format(dev, 2048, 8L << 20)) {
            for (int step = 0; step < 30_000; step++) {
                long k = rnd.nextInt(3_000);
                String what = "step " + step + " key " + k + " (seed " + SEED + ")";
                byte[] want = model.get(k);
                int found;
                try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                    MemorySegment key = MemorySegment.ofArray(Keys.ofLong(k));
                    if (rnd.nextInt(3) == 0) {
                        found = s.tree.delete(txn, key, prior);
                        model.remove(k);
                    } else {
                        byte[] v = new byte[rnd.nextInt(rnd.nextInt(8) == 0 ? 900 : 40)];
                        rnd.nextBytes(v);
                        found = s.tree.replace(txn, key, MemorySegment.ofArray(v), prior);
                        model.put(k, v);
                    }
                    txn.commit();
                }
                tallest = Math.max(tallest, s.tree.height());
                if (want == null) {
                    assertEquals(-1, found, what);
                } else {
                    assertEquals(want.length, found, what);
                    assertArrayEquals(want, prior.asSlice(0, found).toArray(ValueLayout.JAVA_BYTE), what);
                }
            }
            for (var e : model.entrySet()) {
                assertTrue(Arrays.equals(e.getValue(), s.tree.get(Keys.ofLong(e.getKey()))), "key " + e.getKey());
            }
            // then every key deleted, in random order: leaves merge until the root is a leaf again
            Long[] keys = model.keySet().toArray(new Long[0]);
            Collections.shuffle(Arrays.asList(keys), rnd);
            for (long k : keys) {
                try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                    int found = s.tree.delete(txn, MemorySegment.ofArray(Keys.ofLong(k)), prior);
                    txn.commit();
                    byte[] want = model.remove(k);
                    assertEquals(want.length, found, "delete of key " + k + " (seed " + SEED + ")");
                    assertArrayEquals(want, prior.asSlice(0, found).toArray(ValueLayout.JAVA_BYTE), "delete of key " + k);
                }
            }
            assertTrue(tallest >= 2 && s.tree.height() == 1, "the tree grew to " + tallest + " levels and shrank to " + s.tree.height());
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
        }
    }

    /**
     * {@link BTree#deleteIf} deletes only what its check allows, looking at the value in the delete's own
     * descent: a refused key stays with its value and the transaction ends holding nothing; allowed ones
     * go, with and without merges.
     */
    @Test
    void deleteIfChangesNothingWhereItsCheckRefuses() {
        Random rnd = new Random(SEED);
        TreeMap<Long, byte[]> model = new TreeMap<>();
        MemorySegment prior = MemorySegment.ofArray(new byte[BTreeNodeFormat.MAX_VALUE]);
        try (MemoryDevice dev = MemoryDevice.create(16_384, 4096); Store s = Store.format(dev, 2048, 8L << 20)) {
            fill(s, rnd, model, 1);
            int tallest = s.tree.height();
            Long[] keys = model.keySet().toArray(new Long[0]);
            Collections.shuffle(Arrays.asList(keys), rnd);
            for (long k : keys) {
                byte[] want = model.get(k);
                try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                    int found = s.tree.deleteIf(txn, MemorySegment.ofArray(Keys.ofLong(k)), prior,
                            (value, length) -> length == want.length && value.get(ValueLayout.JAVA_BYTE, 0) != 0);
                    if (want[0] == 0) {
                        assertEquals(BTree.REFUSED, found, "key " + k);
                        assertEquals(0, txn.held(), "refused: nothing held");
                        continue; // the transaction ends without a commit
                    }
                    txn.commit();
                    assertEquals(want.length, found, "key " + k);
                    model.remove(k);
                }
            }
            assertTreeIs(s, model);
            assertTrue(tallest >= 2, "the tree grew to " + tallest + " levels");
            assertEquals(1_000, model.size(), "the refused keys stay");
        }
    }

    /**
     * {@link BTree#replaceIf} replaces only what its check allows, handing it the value in the put's own
     * descent: a refused key keeps its value and the transaction ends holding nothing; allowed ones take
     * their new values, longer ones splitting leaves, and absent keys are put without a check.
     */
    @Test
    void replaceIfChangesNothingWhereItsCheckRefuses() {
        Random rnd = new Random(SEED);
        TreeMap<Long, byte[]> model = new TreeMap<>();
        MemorySegment prior = MemorySegment.ofArray(new byte[BTreeNodeFormat.MAX_VALUE]);
        try (MemoryDevice dev = MemoryDevice.create(16_384, 4096); Store s = Store.format(dev, 2048, 8L << 20)) {
            fill(s, rnd, model, 2);
            List<Long> keys = new ArrayList<>();
            for (long k = 0; k < 3_000; k++) {
                keys.add(k); // the odd ones absent
            }
            Collections.shuffle(keys, rnd);
            int refused = 0;
            for (long k : keys) {
                byte[] want = model.get(k);
                byte[] next = new byte[1 + rnd.nextInt(200)];
                rnd.nextBytes(next);
                next[0] = 1;
                try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                    int found = s.tree.replaceIf(txn, MemorySegment.ofArray(Keys.ofLong(k)), MemorySegment.ofArray(next), prior,
                            (value, length) -> length == want.length && value.get(ValueLayout.JAVA_BYTE, 0) != 0);
                    if (want != null && want[0] == 0) {
                        assertEquals(BTree.REFUSED, found, "key " + k);
                        assertEquals(0, txn.held(), "refused: nothing held");
                        refused++;
                        continue; // the transaction ends without a commit
                    }
                    txn.commit();
                    assertEquals(want == null ? -1 : want.length, found, "key " + k);
                    if (want != null) {
                        assertArrayEquals(want, prior.asSlice(0, found).toArray(ValueLayout.JAVA_BYTE), "key " + k + "'s prior value");
                    }
                    model.put(k, next);
                }
            }
            assertTreeIs(s, model);
            assertEquals(500, refused, "keys refused");
            assertTrue(s.tree.height() >= 2, "the tree grew to " + s.tree.height() + " levels");
        }
    }

    /** Puts keys 0 to 2,999 (every {@code step}th) with short random values, a third of them starting with 0, in {@code s} and {@code model}. */
    private static void fill(Store s, Random rnd, TreeMap<Long, byte[]> model, int step) {
        for (long k = 0; k < 3_000; k += step) {
            byte[] v = new byte[1 + rnd.nextInt(40)];
            rnd.nextBytes(v);
            v[0] = (byte) (k % 3); // refused: values starting with 0
            try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                s.tree.put(txn, MemorySegment.ofArray(Keys.ofLong(k)), MemorySegment.ofArray(v));
                txn.commit();
            }
            model.put(k, v);
        }
    }

    /** Keys 0 to 2,999 of {@code s}'s tree hold {@code model}'s values (absent where it has none), and the tree checks clean. */
    private static void assertTreeIs(Store s, TreeMap<Long, byte[]> model) {
        for (long k = 0; k < 3_000; k++) {
            assertArrayEquals(model.get(k), s.tree.get(Keys.ofLong(k)), "key " + k);
        }
        TreeCheck c = s.tree.check();
        assertTrue(c.ok(), c.toString());
    }
}
