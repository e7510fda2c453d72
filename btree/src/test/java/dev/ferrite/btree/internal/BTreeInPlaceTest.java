package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link BTree#putIfAbsentUnlessSplitting} and {@link BTree#deleteUnlessMerging} change a tree only in
 * place: against a sorted map, an insert or delete tried that way either takes no block from the allocator
 * and gives none back, or answers WOULD_SPLIT / WOULD_MERGE with the tree unchanged, and then goes the
 * whole way ({@link BTree#putIfAbsent}, {@link BTree#delete}), which does split and merge. Keys grow and
 * then shrink the tree over several levels.
 */
@ExtendWith(TestSeed.class)
class BTreeInPlaceTest {
    private static final long SEED = TestSeed.get(23);

    @Test
    void insertsAndDeletesInPlaceTakeAndGiveNoBlocks() {
        Random rnd = new Random(SEED);
        TreeMap<Long, byte[]> model = new TreeMap<>();
        int splits = 0, merges = 0, tallest = 0;
        try (MemoryDevice dev = MemoryDevice.create(16_384, 4096); Store s = Store.format(dev, 2048, 8L << 20)) {
            for (int step = 0; step < 40_000; step++) {
                boolean grow = step < 20_000 ? rnd.nextInt(4) != 0 : rnd.nextInt(4) == 0;
                long k = rnd.nextInt(6_000);
                String what = "step " + step + " key " + k + " (seed " + SEED + ")";
                MemorySegment key = MemorySegment.ofArray(Keys.ofLong(k));
                byte[] v = new byte[1 + rnd.nextInt(60)];
                rnd.nextBytes(v);
                long free = s.allocator.freeBlocks();
                int got;
                try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                    got = grow ? s.tree.putIfAbsentUnlessSplitting(txn, key, MemorySegment.ofArray(v))
                            : s.tree.deleteUnlessMerging(txn, key);
                    txn.commit();
                }
                assertEquals(free, s.allocator.freeBlocks(), "an in-place change took or gave blocks at " + what);
                byte[] had = model.get(k);
                if (got == BTree.WOULD_SPLIT || got == BTree.WOULD_MERGE) {
                    assertEquals(grow ? BTree.WOULD_SPLIT : BTree.WOULD_MERGE, got, what);
                    assertTrue(Arrays.equals(had, s.tree.get(Keys.ofLong(k))), "the refused change changed the key at " + what);
                    try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                        if (grow) {
                            assertTrue(s.tree.putIfAbsent(txn, key, MemorySegment.ofArray(v)), what);
                            splits++;
                        } else {
                            assertTrue(s.tree.delete(txn, key), what);
                            merges++;
                        }
                        txn.commit();
                    }
                } else {
                    assertEquals(had == null ? -1 : had.length, got, what);
                }
                if (grow && had == null) {
                    model.put(k, v);
                } else if (!grow) {
                    model.remove(k);
                }
                tallest = Math.max(tallest, s.tree.height());
            }
            for (var e : model.entrySet()) {
                assertTrue(Arrays.equals(e.getValue(), s.tree.get(Keys.ofLong(e.getKey()))), "key " + e.getKey() + " (seed " + SEED + ")");
            }
            assertTrue(tallest >= 2 && splits > 0 && merges > 0,
                    "the tree grew to " + tallest + " levels, " + splits + " inserts split, " + merges + " deletes merged");
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
        }
    }
}
