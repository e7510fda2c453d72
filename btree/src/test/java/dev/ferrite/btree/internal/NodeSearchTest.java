package dev.ferrite.btree.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;

import dev.ferrite.io.testkit.TestSeed;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Node search (and whether a node's keys span a key) against a linear scan, on keys made to defeat its
 * shortcuts (short, zero bytes, long shared prefixes), in nodes whose prefix was computed and then
 * shortened by later inserts.
 */
@ExtendWith(TestSeed.class)
class NodeSearchTest {
    private static final long SEED = TestSeed.get(7);
    private static final int BLOCK = 4096;

    @Test
    void searchAgreesWithLinearScan() {
        Random rnd = new Random(SEED);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment leaf = arena.allocate(BLOCK);
            MemorySegment interior = arena.allocate(BLOCK);
            for (int round = 0; round < 300; round++) {
                byte[] prefix = randomKey(rnd, rnd.nextInt(4) == 0 ? 0 : rnd.nextInt(14));
                TreeSet<byte[]> keys = new TreeSet<>(Keys::compare);
                int target = 1 + rnd.nextInt(60);
                while (keys.size() < target) {
                    keys.add(variant(rnd, prefix));
                }
                BTreeNodeFormat.init(leaf, 0, BLOCK);
                BTreeNodeFormat.init(interior, 1, BLOCK);
                byte[][] sorted = keys.toArray(byte[][]::new);
                // some keys in order, then the node rebuilt (its prefix recomputed), then the rest where they
                // fall: keys outside the prefix shorten it
                List<byte[]> first = new ArrayList<>(), later = new ArrayList<>();
                for (byte[] k : sorted) {
                    (rnd.nextInt(3) == 0 ? later : first).add(k);
                }
                for (int i = 0; i < first.size(); i++) {
                    MemorySegment k = MemorySegment.ofArray(first.get(i));
                    BTreeNodeFormat.insertLeaf(leaf, i, k, MemorySegment.ofArray(new byte[3]));
                    BTreeNodeFormat.insertInterior(interior, i, k, 100 + i);
                }
                BTreeNodeFormat.refreshPrefix(leaf);
                BTreeNodeFormat.refreshPrefix(interior);
                TreeSet<byte[]> present = new TreeSet<>(Keys::compare);
                present.addAll(first);
                Collections.shuffle(later, rnd);
                for (byte[] k : later) {
                    int at = present.headSet(k).size();
                    present.add(k);
                    BTreeNodeFormat.insertLeaf(leaf, at, MemorySegment.ofArray(k), MemorySegment.ofArray(new byte[3]));
                    BTreeNodeFormat.insertInterior(interior, at, MemorySegment.ofArray(k), 100 + at);
                }
                for (MemorySegment n : new MemorySegment[] {leaf, interior}) {
                    for (int i = 0; i < sorted.length; i++) {
                        String where = "seed " + SEED + ", round " + round + ", slot " + i;
                        assertTrue(BTreeNodeFormat.sharesPrefix(n, i), where);
                        assertEquals(BTreeNodeFormat.computedHead(n, i), BTreeNodeFormat.slotHead(n, i), where);
                    }
                }
                for (int probe = 0; probe < 200; probe++) {
                    byte[] k = probe % 3 == 0 ? sorted[rnd.nextInt(sorted.length)] : variant(rnd, prefix);
                    int expected = linear(sorted, k);
                    String where = "seed " + SEED + ", round " + round + ", key " + java.util.HexFormat.of().formatHex(k);
                    assertEquals(expected, BTreeNodeFormat.search(leaf, MemorySegment.ofArray(k)), "leaf, " + where);
                    assertEquals(expected, BTreeNodeFormat.search(interior, MemorySegment.ofArray(k)), "interior, " + where);
                    boolean spanned = expected >= 0 || -expected - 1 > 0 && -expected - 1 < sorted.length;
                    assertEquals(spanned, BTreeNodeFormat.spans(leaf, MemorySegment.ofArray(k)), "leaf spans, " + where);
                    assertEquals(spanned, BTreeNodeFormat.spans(interior, MemorySegment.ofArray(k)), "interior spans, " + where);
                }
            }
        }
    }

    /**
     * Compaction keeps the heads it does not need to rewrite: after deletes that leave the prefix as it
     * was, and after deletes of the keys that had shortened it (the survivors share more, so every head
     * is rewritten), each head is its key's, the prefix is all the survivors share, and search agrees
     * with a linear scan.
     */
    @Test
    void compactionLeavesHeadsRight() {
        Random rnd = new Random(SEED);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment scratch = arena.allocate(BLOCK);
            int grown = 0, kept = 0;
            for (int round = 0; round < 300; round++) {
                MemorySegment n = arena.allocate(BLOCK);
                BTreeNodeFormat.init(n, rnd.nextInt(3) == 0 ? 1 : 0, BLOCK);
                byte[] prefix = randomKey(rnd, 2 + rnd.nextInt(8));
                TreeSet<byte[]> keys = new TreeSet<>(Keys::compare), outliers = new TreeSet<>(Keys::compare);
                for (int target = 2 + rnd.nextInt(40); keys.size() < target; ) {
                    keys.add(variant(rnd, prefix));
                }
                for (byte[] k : keys) {
                    put(n, keys.headSet(k).size(), k);
                }
                BTreeNodeFormat.refreshPrefix(n);
                for (int o = rnd.nextInt(3); o > 0; o--) { // keys that shorten the prefix as they arrive
                    byte[] k = randomKey(rnd, 1 + rnd.nextInt(12));
                    if (keys.add(k)) {
                        outliers.add(k);
                        put(n, keys.headSet(k).size(), k);
                    }
                }
                boolean dropOutliers = rnd.nextBoolean();
                for (byte[] k : (dropOutliers ? outliers : keys).toArray(byte[][]::new)) {
                    if ((dropOutliers || rnd.nextInt(3) == 0) && keys.size() > 1) {
                        BTreeNodeFormat.remove(n, keys.headSet(k).size(), rnd.nextBoolean());
                        keys.remove(k);
                    }
                }
                int skip = BTreeNodeFormat.skip(n);
                BTreeNodeFormat.compact(n, BLOCK, scratch, rnd.nextInt(200));
                if (BTreeNodeFormat.skip(n) > skip) {
                    grown++;
                } else {
                    kept++;
                }
                byte[][] sorted = keys.toArray(byte[][]::new);
                byte[] first = sorted[0], last = sorted[sorted.length - 1];
                int shared = 0;
                while (shared < Math.min(8, Math.min(first.length, last.length)) && first[shared] == last[shared]) {
                    shared++;
                }
                String where = "seed " + SEED + ", round " + round;
                assertEquals(shared, BTreeNodeFormat.skip(n), where);
                assertEquals(0, BTreeNodeFormat.garbage(n), where);
                for (int i = 0; i < sorted.length; i++) {
                    assertTrue(BTreeNodeFormat.sharesPrefix(n, i), where + ", slot " + i);
                    assertEquals(BTreeNodeFormat.computedHead(n, i), BTreeNodeFormat.slotHead(n, i), where + ", slot " + i);
                    assertEquals(0, Keys.compare(sorted[i], BTreeNodeFormat.key(n, i).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)), where);
                }
                for (int probe = 0; probe < 50; probe++) {
                    byte[] k = probe % 3 == 0 ? sorted[rnd.nextInt(sorted.length)] : variant(rnd, prefix);
                    assertEquals(linear(sorted, k), BTreeNodeFormat.search(n, MemorySegment.ofArray(k)), where);
                }
            }
            assertTrue(grown > 20 && kept > 20, grown + " compactions lengthened the prefix, " + kept + " kept it (seed " + SEED + ")");
        }
    }

    /** Inserts {@code k} at {@code pos} of leaf or interior node {@code n}. */
    private static void put(MemorySegment n, int pos, byte[] k) {
        if (BTreeNodeFormat.isLeaf(n)) {
            BTreeNodeFormat.insertLeaf(n, pos, MemorySegment.ofArray(k), MemorySegment.ofArray(new byte[3]));
        } else {
            BTreeNodeFormat.insertInterior(n, pos, MemorySegment.ofArray(k), 100 + pos);
        }
    }

    private static int linear(byte[][] sorted, byte[] k) {
        for (int i = 0; i < sorted.length; i++) {
            int c = Keys.compare(sorted[i], k);
            if (c == 0) {
                return i;
            }
            if (c > 0) {
                return -(i + 1);
            }
        }
        return -(sorted.length + 1);
    }

    /** The prefix, cut short or extended by a few bytes drawn mostly from {0, 1, 0xFF}. */
    private static byte[] variant(Random rnd, byte[] prefix) {
        int keep = rnd.nextInt(5) == 0 ? rnd.nextInt(prefix.length + 1) : prefix.length;
        byte[] tail = randomKey(rnd, rnd.nextInt(rnd.nextBoolean() ? 4 : 20));
        int len = Math.max(1, keep + tail.length);
        byte[] k = new byte[len];
        System.arraycopy(prefix, 0, k, 0, Math.min(keep, len));
        System.arraycopy(tail, 0, k, keep, Math.min(tail.length, len - keep));
        return k;
    }

    private static byte[] randomKey(Random rnd, int len) {
        byte[] k = new byte[len];
        for (int i = 0; i < len; i++) {
            int r = rnd.nextInt(4);
            k[i] = r == 0 ? 0 : r == 1 ? 1 : r == 2 ? (byte) 0xFF : (byte) rnd.nextInt(256);
        }
        return k;
    }
}
