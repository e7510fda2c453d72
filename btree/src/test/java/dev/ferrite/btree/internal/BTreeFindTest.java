package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link BTree#find} and {@link BTree#findAround} against a sorted map, outside transactions and inside one that holds changed nodes. */
@ExtendWith(TestSeed.class)
class BTreeFindTest {
    private static final long SEED = TestSeed.get(7);

    @Test
    void exactCeilingAndFloorMatchASortedMap() {
        Random rnd = new Random(SEED);
        TreeMap<Long, Long> model = new TreeMap<>();
        try (MemoryDevice dev = MemoryDevice.create(8192, 4096); Store s = Store.format(dev, 1024, 8L << 20)) {
            for (int i = 0; i < 6000; i++) {
                long k = rnd.nextInt(100_000) * 2L;
                s.tree.put(Keys.ofLong(k), Keys.ofLong(k + 1));
                model.put(k, k + 1);
            }
            probe(s.tree, null, model, rnd);
            // inside a transaction that holds the leaves it changed
            try (Txn txn = Txn.begin(s.cache, 4 * s.tree.reservation())) {
                for (int i = 0; i < 3; i++) {
                    long k = rnd.nextInt(100_000) * 2L + 1;
                    s.tree.put(txn, MemorySegment.ofArray(Keys.ofLong(k)), MemorySegment.ofArray(Keys.ofLong(k + 1)));
                    model.put(k, k + 1);
                }
                probe(s.tree, txn, model, rnd);
                txn.commit();
            }
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
        }
    }

    private static void probe(BTree tree, Txn txn, TreeMap<Long, Long> model, Random rnd) {
        MemorySegment key = MemorySegment.ofArray(new byte[8]);
        MemorySegment value = MemorySegment.ofArray(new byte[8]);
        for (int i = 0; i < 3000; i++) {
            long q = rnd.nextInt(200_010) - 5;
            for (BTree.Match m : BTree.Match.values()) {
                Map.Entry<Long, Long> want = switch (m) {
                    case EXACT -> model.containsKey(q) ? Map.entry(q, model.get(q)) : null;
                    case CEILING -> model.ceilingEntry(q);
                    case FLOOR -> model.floorEntry(q);
                };
                long found = tree.find(txn, MemorySegment.ofArray(Keys.ofLong(q)), m, key, value);
                expect(want, found, key, value, m + " " + q + " (seed " + SEED + ")");
            }
            MemorySegment ceilingKey = MemorySegment.ofArray(new byte[8]);
            MemorySegment ceilingValue = MemorySegment.ofArray(new byte[8]);
            long[] around = new long[2];
            tree.findAround(txn, MemorySegment.ofArray(Keys.ofLong(q)), key, value, ceilingKey, ceilingValue, around);
            expect(model.floorEntry(q), around[0], key, value, "around's floor " + q + " (seed " + SEED + ")");
            expect(model.ceilingEntry(q), around[1], ceilingKey, ceilingValue, "around's ceiling " + q + " (seed " + SEED + ")");
        }
    }

    private static void expect(Map.Entry<Long, Long> want, long found, MemorySegment key, MemorySegment value, String what) {
        if (want == null) {
            assertEquals(-1, found, what);
        } else {
            assertEquals(8, BTree.foundKeyLength(found), what);
            assertEquals(8, BTree.foundValueLength(found), what);
            assertEquals(want.getKey(), Keys.getLong(key, 0), what);
            assertEquals(want.getValue(), Keys.getLong(value, 0), what);
        }
    }
}
