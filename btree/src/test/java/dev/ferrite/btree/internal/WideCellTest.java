package dev.ferrite.btree.internal;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_ENTRY;
import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_KEY;
import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_VALUE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Leaf cells bounded by key and value together ({@link BTreeNodeFormat#MAX_ENTRY}): the largest cells (a
 * 1 KiB key beside a 960-byte value, a short key beside a value of nearly 2 KiB) inserted in ascending,
 * descending and random order, alone, interleaved with tiny cells or of random sizes; then every value
 * replaced by one of another size (cells that grow and shrink in place), a reopen, and deletes down to an
 * empty tree (merges at every level). The checker runs throughout and the contents are compared with a
 * model; a split that found no point dividing the cells would throw.
 */
@ExtendWith(TestSeed.class)
class WideCellTest {
    private static final long SEED = TestSeed.get(0x1984L);
    private static final int BS = 4096;
    private static final int LOG_BLOCKS = 1024;
    private static final long CACHE_BYTES = 256L * BS;
    private static final int ENTRIES = 500;

    enum Order { ASCENDING, DESCENDING, RANDOM }

    enum Mix {
        /** Every cell the largest: keys of 1 KiB or of 1 to 24 bytes, each with the longest value it leaves room for. */
        LARGEST,
        /** The largest cells and tiny ones (1 to 3-byte keys, values of up to 8 bytes) taking turns. */
        INTERLEAVED,
        /** Keys and values of any size a cell takes. */
        RANDOM_SIZES
    }

    static Stream<Arguments> cases() {
        List<Arguments> list = new ArrayList<>();
        for (Order o : Order.values()) {
            for (Mix m : Mix.values()) {
                list.add(Arguments.of(o, m));
            }
        }
        return list.stream();
    }

    /** The split argument: a cell with its slot is at most half of what a node holds after its header, so any full node plus one cell splits in two. */
    @Test
    void theLargestCellIsAtMostHalfANode() {
        int largest = BTreeNodeFormat.SLOT + BTreeNodeFormat.LEAF_CELL_HEADER + MAX_ENTRY;
        assertTrue(2 * largest <= BS - BTreeNodeFormat.SLOTS, largest + "-byte cells, two of them do not fit a node");
        assertEquals(MAX_VALUE, BTreeNodeFormat.maxValue(MAX_KEY, true), "the longest key leaves the value bound of narrow trees");
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("cases")
    void largestCellsSplitAndMerge(Order order, Mix mix) {
        long seed = SEED + order.ordinal() * 3L + mix.ordinal();
        String where = order + " " + mix + " with -Dferrite.seed=" + SEED + " (case seed " + seed + ")";
        Random rnd = new Random(seed);
        TreeMap<byte[], byte[]> model = entries(rnd, mix);
        List<byte[]> keys = new ArrayList<>(model.keySet());
        if (order == Order.DESCENDING) {
            Collections.reverse(keys);
        } else if (order == Order.RANDOM) {
            Collections.shuffle(keys, rnd);
        }
        try (MemoryDevice dev = MemoryDevice.create(1 + LOG_BLOCKS + 1 + 4096, BS)) {
            try (Store s = Store.format(dev, LOG_BLOCKS, CACHE_BYTES)) {
                TreeMap<byte[], byte[]> in = Contents.empty();
                for (int i = 0; i < keys.size(); i++) {
                    byte[] k = keys.get(i);
                    s.tree.put(k, model.get(k));
                    in.put(k, model.get(k));
                    if (i % 50 == 49) {
                        checked(s, in, where + ", after " + (i + 1) + " puts");
                    }
                }
                assertTrue(s.tree.height() >= 3, where + ": the tree grew to height " + s.tree.height() + " only");
                checked(s, model, where + ", all put");
                Collections.shuffle(keys, rnd);
                for (byte[] k : keys) { // the largest become tiny and the tiny the largest: cells grow and shrink in place
                    byte[] v = model.get(k).length > 8 ? Contents.random(rnd, 0, 8) : largestValue(rnd, k.length);
                    s.tree.put(k, v);
                    model.put(k, v);
                }
                checked(s, model, where + ", every value replaced");
            }
            try (Store s = Store.open(dev, LOG_BLOCKS, CACHE_BYTES)) {
                checked(s, model, where + ", reopened");
                if (order == Order.RANDOM) {
                    Collections.shuffle(keys, rnd);
                }
                for (int i = 0; i < keys.size(); i++) {
                    assertTrue(s.tree.delete(keys.get(i)) >= 0, where + ": delete " + i + " found no key");
                    model.remove(keys.get(i));
                    if (i % 50 == 49) {
                        checked(s, model, where + ", after " + (i + 1) + " deletes");
                    }
                }
                checked(s, model, where + ", all deleted");
                assertEquals(1, s.tree.height(), where + ": an empty tree is a lone leaf");
            }
        }
    }

    /**
     * A tree whose cache bounds values alone (code from before wide cells, or a volume formatted before
     * them) refuses as damage a leaf it reads that holds a value over {@link BTreeNodeFormat#MAX_VALUE}:
     * the reason such volumes need a feature bit of their own.
     */
    @Test
    void aNarrowCacheRefusesAWideLeaf() {
        try (MemoryDevice dev = MemoryDevice.create(1 + LOG_BLOCKS + 1 + 1024, BS)) {
            Random rnd = new Random(SEED);
            try (Store s = Store.format(dev, LOG_BLOCKS, CACHE_BYTES)) {
                for (int i = 0; i < 40; i++) {
                    s.tree.put(new byte[] {(byte) i}, largestValue(rnd, 1));
                }
                assertTrue(s.tree.height() >= 2, "the leaves are below the root");
            }
            try (Store s = Store.open(dev, LOG_BLOCKS, CACHE_BYTES)) {
                s.cache.wideCells(false);
                CorruptionException e = assertThrows(CorruptionException.class, () -> s.tree.get(new byte[] {7}));
                assertTrue(e.getMessage().contains("a value of " + (MAX_ENTRY - 1) + " (keys 1 to " + MAX_KEY
                        + " bytes and at least the 0 shared, values up to " + MAX_VALUE + ")"), e.getMessage());
            }
            try (Store s = Store.open(dev, LOG_BLOCKS, CACHE_BYTES)) {
                TreeCheck c = s.tree.check();
                assertTrue(c.ok(), c.toString());
                assertEquals(40, c.keys());
            }
        }
    }

    /** The model: {@link #ENTRIES} distinct keys with values of the mix. */
    private static TreeMap<byte[], byte[]> entries(Random rnd, Mix mix) {
        TreeMap<byte[], byte[]> m = Contents.empty();
        while (m.size() < ENTRIES) {
            boolean tiny = mix == Mix.INTERLEAVED && m.size() % 2 == 1;
            byte[] k;
            byte[] v;
            if (tiny) {
                k = Contents.random(rnd, 1, 3);
                v = Contents.random(rnd, 0, 8);
            } else if (mix == Mix.RANDOM_SIZES) {
                k = rnd.nextInt(4) == 0 ? longKey(rnd) : Contents.random(rnd, 1, 64);
                v = Contents.random(rnd, 0, MAX_ENTRY - k.length);
            } else {
                k = rnd.nextBoolean() ? longKey(rnd) : Contents.random(rnd, 1, 24);
                v = largestValue(rnd, k.length);
            }
            m.putIfAbsent(k, v);
        }
        return m;
    }

    /** A key of {@link BTreeNodeFormat#MAX_KEY} bytes, distinct in its first and last bytes: separators as long as keys get. */
    private static byte[] longKey(Random rnd) {
        byte[] k = new byte[MAX_KEY];
        k[0] = (byte) rnd.nextInt(256);
        for (int i = MAX_KEY - 4; i < MAX_KEY; i++) {
            k[i] = (byte) rnd.nextInt(256);
        }
        return k;
    }

    /** The longest value a key of {@code keyLength} bytes leaves room for in a cell. */
    private static byte[] largestValue(Random rnd, int keyLength) {
        byte[] v = new byte[MAX_ENTRY - keyLength];
        rnd.nextBytes(v);
        return v;
    }

    private static void checked(Store s, TreeMap<byte[], byte[]> model, String where) {
        TreeCheck c = s.tree.check();
        assertTrue(c.ok(), () -> where + ": " + c);
        assertEquals(model.size(), c.keys(), where + ": keys counted");
        TreeMap<byte[], byte[]> got = s.contents();
        Contents.assertEqual(model, got, where);
        for (Map.Entry<byte[], byte[]> e : model.entrySet()) {
            if (e.getValue().length > MAX_VALUE) {
                assertTrue(java.util.Arrays.equals(e.getValue(), s.tree.get(e.getKey())), where + ": get of a wide value");
                break;
            }
        }
    }
}
