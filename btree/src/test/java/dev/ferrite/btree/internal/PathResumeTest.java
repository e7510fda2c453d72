package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An operation starts at the leaf the thread's previous one ended in, or at a node above it, only when
 * that node is the same tree's, unchanged, and spans the key. Each case here would act on the wrong leaf
 * if one of the three conditions were not checked.
 */
@ExtendWith(TestSeed.class)
class PathResumeTest {
    private static final long SEED = TestSeed.get(5);

    @Test
    void aPathOfAnotherTreeIsNotUsed() {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 8L << 20)) {
            BTree other = twoTrees(s, 2000);
            for (long k = 0; k < 2000; k += 7) {
                assertEquals(k, longOf(s.tree.get(Keys.ofLong(k))));
                assertTrue(other.delete(Keys.ofLong(k)) >= 0, "key " + k + " of the second tree");
                assertEquals(k, longOf(s.tree.get(Keys.ofLong(k))), "the first tree lost key " + k);
                assertNull(other.get(Keys.ofLong(k)));
            }
            assertTrue(s.tree.check().ok(), s.tree.check().toString());
            assertTrue(other.check().ok(), other.check().toString());
        }
    }

    @Test
    void aKeyBeyondTheLeafDescendsAgain() {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 8L << 20)) {
            for (long k = 0; k < 5000; k++) {
                s.tree.put(Keys.ofLong(k * 2), Keys.ofLong(k));
            }
            assertTrue(s.tree.height() >= 2);
            for (long k = 0; k < 5000; k += 97) {
                assertEquals(1, longOf(s.tree.get(Keys.ofLong(2)))); // ends in the leftmost leaf
                assertTrue(s.tree.delete(Keys.ofLong(k * 2)) >= 0, "key " + k * 2 + " in a leaf to the right");
                assertNull(s.tree.get(Keys.ofLong(k * 2)));
                assertEquals(-1, s.tree.delete(Keys.ofLong(k * 2 + 1)), "absent key " + (k * 2 + 1));
            }
            assertTrue(s.tree.check().ok(), s.tree.check().toString());
        }
    }

    @Test
    void aLeafChangedSinceTheLookupIsNotTrusted() throws Exception {
        Random rnd = new Random(SEED);
        TreeMap<Long, Long> model = new TreeMap<>();
        ExecutorService other = Executors.newSingleThreadExecutor();
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096); Store s = Store.format(dev, 1024, 16L << 20)) {
            for (int i = 0; i < 20_000; i++) {
                long k = rnd.nextInt(50_000);
                String what = "op " + i + " key " + k + " (seed " + SEED + ")";
                assertEquals(model.get(k), value(s.tree.get(Keys.ofLong(k))), what);
                // between this thread's lookup and its change, another thread splits, merges or edits that leaf
                long near = k + rnd.nextInt(5) - 2;
                boolean put = rnd.nextBoolean();
                other.submit(() -> put ? s.tree.put(Keys.ofLong(near), Keys.ofLong(near)) : s.tree.delete(Keys.ofLong(near))).get();
                if (put) {
                    model.put(near, near);
                } else {
                    model.remove(near);
                }
                if (rnd.nextBoolean()) {
                    long seq = s.tree.delete(Keys.ofLong(k));
                    assertEquals(model.remove(k) != null, seq >= 0, what);
                } else {
                    s.tree.put(Keys.ofLong(k), Keys.ofLong(i));
                    model.put(k, (long) i);
                }
                assertEquals(model.get(k), value(s.tree.get(Keys.ofLong(k))), what);
            }
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
            assertEquals(model.size(), c.keys(), "keys (seed " + SEED + ")");
        } finally {
            other.shutdown();
        }
    }

    /**
     * A put that must split, and a delete that must merge, plan on the path their first try descended
     * (the same key's): one descent each. Random inserts of 1,000-byte values split a leaf every second
     * insert or so, and random deletes of them empty a leaf about as often; a second descent from the
     * header looked the path's nodes up again, which the cache's hits count, measured against overwrites
     * of the same keys in place (a descent and nothing else).
     */
    @Test
    void splitsAndMergesPlanOnTheirWritesPath() {
        Random rnd = new Random(SEED);
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096); Store s = Store.format(dev, 2048, 32L << 20)) {
            long[] keys = new long[6000];
            byte[] v = new byte[1000];
            for (int i = 0; i < 4000; i++) {
                keys[i] = rnd.nextLong();
                s.tree.put(Keys.ofLong(keys[i]), v);
            }
            int height = s.tree.height();
            long hitsBefore = s.cache.stats().hits();
            for (int i = 0; i < 4000; i++) {
                s.tree.put(Keys.ofLong(keys[i]), v); // in place
            }
            double overwrite = (double) (s.cache.stats().hits() - hitsBefore) / 4000;
            long nodesBefore = s.tree.check().nodes();
            hitsBefore = s.cache.stats().hits();
            for (int i = 4000; i < keys.length; i++) {
                keys[i] = rnd.nextLong();
                s.tree.put(Keys.ofLong(keys[i]), v);
            }
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
            double splits = (double) (c.nodes() - nodesBefore) / 2000;
            double perSplit = ((double) (s.cache.stats().hits() - hitsBefore) / 2000 - overwrite) / splits;
            hitsBefore = s.cache.stats().hits();
            long merges = c.nodes();
            for (long k : keys) {
                assertTrue(s.tree.delete(Keys.ofLong(k)) >= 0);
            }
            c = s.tree.check();
            assertTrue(c.ok(), c.toString());
            double perMerge = ((double) (s.cache.stats().hits() - hitsBefore) / keys.length - overwrite) * keys.length / (merges - c.nodes());
            String what = String.format("seed %d, height %d: a put in place %.2f cache hits, a split %.2f more, a merge %.2f more",
                    SEED, height, overwrite, perSplit, perMerge);
            assertTrue(height >= 3, what);
            // one descent is height + 1 lookups (the root's header too); a split adds its right neighbour
            // and the allocator's blocks (about 4 in all), a merge its partner (about 2); a second descent
            // made these 8.0 and 5.9 at height 3
            assertTrue(perSplit < height + 2, what);
            assertTrue(perMerge < height + 2, what);
        }
    }

    /**
     * Keys a few leaves apart, in ascending order (a commit's sorted keys), each changed in place: the
     * change of a leaf changes its version, and the next key is in another leaf anyway, so the descent
     * resumes at the deepest node above whose separators span the key, instead of at the header: two
     * lookups a put (the leaf, and one a put in place makes besides) where one from the header makes
     * height + 2.
     */
    @Test
    void ascendingKeysAFewLeavesApartResumeAboveTheLeaf() {
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096); Store s = Store.format(dev, 2048, 32L << 20)) {
            byte[] v = new byte[1000];
            int keys = 6000;
            for (long k = 0; k < keys; k++) {
                s.tree.put(Keys.ofLong(k), v);
            }
            int height = s.tree.height();
            long hitsBefore = s.cache.stats().hits();
            int puts = 0;
            for (long k = 0; k < keys; k += 13, puts++) {
                v[0] = (byte) k;
                s.tree.put(Keys.ofLong(k), v); // in place, about three leaves on
            }
            double perPut = (double) (s.cache.stats().hits() - hitsBefore) / puts;
            String what = String.format("height %d: %.2f cache lookups a put", height, perPut);
            assertTrue(height >= 3, what);
            assertTrue(perPut < 2.5, what); // from the header: height + 2 (5.00)
            for (long k = 0; k < keys; k++) {
                assertEquals(k % 13 == 0 ? (byte) k : 0, s.tree.get(Keys.ofLong(k))[0], "key " + k);
            }
        }
    }

    /**
     * Ascending sweeps that insert between the keys and delete them again, splitting and merging leaves
     * and their parents under the paths the sweep resumes from, end as a model says.
     */
    @Test
    void ascendingSweepsThatSplitAndMergeMatchAModel() {
        Random rnd = new Random(SEED);
        TreeMap<Long, Long> model = new TreeMap<>();
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096); Store s = Store.format(dev, 2048, 32L << 20)) {
            byte[] v = new byte[300];
            Keys.putLong(MemorySegment.ofArray(v), 0, 0);
            for (long k = 0; k < 20_000; k += 10) {
                s.tree.put(Keys.ofLong(k), v);
                model.put(k, 0L);
            }
            for (int sweep = 0; sweep < 6; sweep++) {
                for (long k = rnd.nextInt(10); k < 20_000; k += 1 + rnd.nextInt(sweep % 2 == 0 ? 4 : 40)) {
                    String what = "sweep " + sweep + " key " + k + " (seed " + SEED + ")";
                    if (sweep % 2 == 0 || rnd.nextInt(4) == 0) {
                        Keys.putLong(MemorySegment.ofArray(v), 0, k + sweep);
                        s.tree.put(Keys.ofLong(k), v);
                        model.put(k, k + sweep);
                    } else {
                        assertEquals(model.remove(k) != null, s.tree.delete(Keys.ofLong(k)) >= 0, what);
                    }
                    assertEquals(model.get(k), value(s.tree.get(Keys.ofLong(k))), what);
                }
                TreeCheck c = s.tree.check();
                assertTrue(c.ok(), c.toString());
                assertEquals(model.size(), c.keys(), "keys after sweep " + sweep + " (seed " + SEED + ")");
            }
            for (var e : model.entrySet()) {
                assertEquals(e.getValue(), value(s.tree.get(Keys.ofLong(e.getKey()))), "key " + e.getKey() + " (seed " + SEED + ")");
            }
        }
    }

    /**
     * A lookup, then an operation on another tree (a table delete's free through the free-space trees),
     * then the change of the looked-up key: the change starts at the lookup's leaf as if nothing came
     * between (a path per tree a thread works on; one shared path made it descend again from the header).
     */
    @Test
    void aLookupsPathOutlivesAnOperationOnAnotherTree() {
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 8L << 20)) {
            BTree other = twoTrees(s, 6000);
            int height = s.tree.height();
            MemorySegment keyOut = MemorySegment.ofArray(new byte[64]), valueOut = MemorySegment.ofArray(new byte[64]);
            long[] deleteHits = new long[2]; // [0] nothing between, [1] the other tree between
            for (long k = 0; k < 6000; k += 5) {
                for (int between = 0; between < 2; between++) {
                    MemorySegment key = MemorySegment.ofArray(Keys.ofLong(k + between));
                    assertTrue(s.tree.find(null, key, BTree.Match.EXACT, keyOut, valueOut) >= 0);
                    if (between == 1) {
                        assertEquals(-(k + 3), longOf(other.get(Keys.ofLong(k + 3))));
                    }
                    long before = s.cache.stats().hits();
                    assertTrue(s.tree.delete(Keys.ofLong(k + between)) >= 0);
                    deleteHits[between] += s.cache.stats().hits() - before;
                }
            }
            String what = "height " + height + ": cache hits of 1,200 deletes after their lookup, alone " + deleteHits[0]
                    + ", another tree's get between " + deleteHits[1];
            assertTrue(height >= 2, what);
            assertTrue(Math.abs(deleteHits[1] - deleteHits[0]) < 120, what); // a descent again is height + 1 hits more each
            assertTrue(s.tree.check().ok(), s.tree.check().toString());
        }
    }

    /** Makes a second tree beside {@code s}'s and puts keys {@code [0, keys)} in both (the other's values negated); returns it. */
    private static BTree twoTrees(Store s, long keys) {
        BTree other;
        try (Txn txn = Txn.begin(s.cache, BTree.CREATE_ITEMS + 1)) {
            other = BTree.create(txn, s.allocator, Store.TREE_ID + 1);
            txn.commit();
        }
        for (long k = 0; k < keys; k++) {
            s.tree.put(Keys.ofLong(k), Keys.ofLong(k));
            other.put(Keys.ofLong(k), Keys.ofLong(-k));
        }
        return other;
    }

    private static Long value(byte[] v) {
        return v == null ? null : Keys.getLong(MemorySegment.ofArray(v), 0);
    }

    private static long longOf(byte[] v) {
        return Keys.getLong(MemorySegment.ofArray(v), 0);
    }
}
