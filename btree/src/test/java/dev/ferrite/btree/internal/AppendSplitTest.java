package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Splits at the tree's right edge: keys inserted in ascending order leave the leaves and interior nodes
 * behind them nearly full (the full node keeps its entries, the new one starts with the new key alone),
 * while random inserts keep the even splits and their usual occupancy; and an appending split logs the
 * new leaf's few used bytes, not two whole blocks. {@code -Dferrite.seed=N} picks the random keys.
 */
@ExtendWith(TestSeed.class)
class AppendSplitTest {
    private static final long SEED = TestSeed.get(17);
    private static final int BS = 4096;

    private static Store store(MemoryDevice dev) {
        return Store.format(dev, 2048, 16L << 20);
    }

    private static byte[] counterKey(int prefix, long i) {
        byte[] k = new byte[prefix + 8];
        Arrays.fill(k, 0, prefix, (byte) 'k');
        System.arraycopy(Keys.ofLong(i), 0, k, prefix, 8);
        return k;
    }

    @Test
    void ascendingInsertsFillTheLeaves() {
        try (MemoryDevice dev = MemoryDevice.create(16384, BS); Store s = store(dev)) {
            TreeMap<byte[], byte[]> model = Contents.empty();
            for (int i = 0; i < 20_000; i++) {
                byte[] k = Keys.ofLong(i), v = new byte[100];
                v[0] = (byte) i;
                s.tree.put(k, v);
                model.put(k, v);
            }
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
            assertTrue(c.leafFill() >= 0.9, "ascending inserts: " + c);
            Contents.assertEqual(model, s.contents(), "ascending inserts");
        }
    }

    /** Long keys with long separators, so that the rightmost interior nodes split too and must stay full. */
    @Test
    void ascendingInsertsFillTheInteriorNodes() {
        try (MemoryDevice dev = MemoryDevice.create(16384, BS); Store s = store(dev)) {
            for (int i = 0; i < 12_000; i++) {
                s.tree.put(counterKey(200, i), new byte[100]);
            }
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
            assertTrue(c.height() >= 3, c.toString());
            assertTrue(c.leafFill() >= 0.9, c.toString());
            // every interior node but the last of its level (the one still filling) is nearly full
            TreeMap<Integer, long[]> perLevel = new TreeMap<>(); // level -> {nodes, bytes of all but the last}
            for (Map.Entry<Long, Integer> e : s.nodes().entrySet()) {
                if (e.getValue() > 0) {
                    long[] l = perLevel.computeIfAbsent(e.getValue(), x -> new long[2]);
                    l[0]++;
                    MemorySegment n = s.tree.node(e.getKey()).data();
                    l[1] += BTreeNodeFormat.used(n, BS);
                }
            }
            for (var e : perLevel.entrySet()) {
                long[] l = e.getValue();
                if (l[0] > 1) { // the rightmost node of the level is the one being filled: leave it out
                    long rightmost = BTreeNodeFormat.used(s.tree.node(rightmostAt(s, e.getKey())).data(), BS);
                    double fill = (double) (l[1] - rightmost) / ((l[0] - 1) * (BS - BTreeNodeFormat.SLOTS));
                    assertTrue(fill >= 0.85, "level " + e.getKey() + ": " + l[0] + " nodes " + Math.round(fill * 100) + "% full; " + c);
                }
            }
            assertTrue(perLevel.get(1)[0] >= 2, c.toString());
        }
    }

    private static long rightmostAt(Store s, int level) {
        long b = BTreeHeaderFormat.root(s.tree.header().data());
        for (;;) {
            MemorySegment n = s.tree.node(b).data();
            if (BTreeNodeFormat.level(n) == level) {
                return b;
            }
            b = BTreeNodeFormat.childAt(n, BTreeNodeFormat.count(n) - 1);
        }
    }

    @Test
    void randomInsertsKeepEvenSplits() {
        Random rnd = new Random(SEED);
        try (MemoryDevice dev = MemoryDevice.create(16384, BS); Store s = store(dev)) {
            for (int i = 0; i < 20_000; i++) {
                s.tree.put(Keys.ofLong(rnd.nextLong()), new byte[100]);
            }
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
            // random inserts into evenly split leaves settle near ln 2 full
            assertTrue(c.leafFill() > 0.62 && c.leafFill() < 0.78, "seed " + SEED + ": " + c);
        }
    }

    /**
     * Values of the largest size inserted in ascending order (a table's medium value's chunks): full leaves,
     * and the log carries little more than the entries themselves, since a split logs the new leaf's used
     * bytes and the old one's link rather than two whole blocks.
     */
    @Test
    void ascendingLargeValuesLogLittleMoreThanTheirBytes() {
        int n = 4000;
        try (MemoryDevice dev = MemoryDevice.create(16384, BS); Store s = store(dev)) {
            byte[] v = new byte[BTreeNodeFormat.MAX_VALUE];
            long before = s.journal.stats().checkpointBytes();
            for (int i = 0; i < n; i++) {
                Arrays.fill(v, (byte) i);
                s.tree.put(counterKey(4, i), v);
            }
            s.journal.forceAll();
            long logged = s.journal.stats().checkpointBytes() - before;
            TreeCheck c = s.tree.check();
            long entries = (long) n * (12 + BTreeNodeFormat.MAX_VALUE);
            assertTrue(logged < 1.3 * entries, logged + " bytes logged for " + entries + " bytes of entries; " + c);
            assertTrue(c.ok(), c.toString());
            assertTrue(c.leafFill() >= 0.95, c.toString());
            for (int i = 0; i < n; i += 97) {
                Arrays.fill(v, (byte) i);
                assertArrayEquals(v, s.tree.get(counterKey(4, i)));
            }
        }
    }
}
