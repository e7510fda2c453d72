package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;

import dev.ferrite.io.testkit.TestSeed;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_ENTRY;
import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_KEY;
import static dev.ferrite.btree.internal.BTreeNodeFormat.MAX_VALUE;

/**
 * Model-based tests: random sequences of puts, conditional puts, deletes, point reads, range cursors both
 * ways from random places, first/last key and the count estimate, run against the tree and against a
 * {@link TreeMap} ordered by {@link Keys#compare(byte[], byte[])}, every result compared. Writes run one
 * per transaction or several (ascending keys) in one. After every batch the checker must pass and count
 * the model's keys; the tree is drained to empty midway (merges down to a lone root leaf), reopened after
 * a clean close and after a power cut (recovery replays the log), and compared in full after each.
 *
 * <p>Each case runs from its own seed, printed on failure; {@code -Dferrite.seed=N} makes N the first seed
 * of every shape.
 */
@ExtendWith(TestSeed.class)
class BTreeModelTest {
    private static final long SEED = TestSeed.get(0x5EED_B7EEL);
    private static final int BLOCK_SIZE = 4096;
    private static final long DEVICE_BLOCKS = 16384;
    private static final int LOG_BLOCKS = 2048;
    private static final long CACHE_BYTES = 512L * BLOCK_SIZE;
    /** Most writes one multi-operation transaction makes. */
    private static final int MAX_TXN_OPS = 16;

    /** Key and value sizes a run draws from. */
    enum Shape {
        /** One-byte keys: 256 of them, so the tree fills, empties and refills the same few leaves. */
        TINY,
        /** Short keys over a few byte values (0x00, 0xff, ...): shared prefixes and unsigned order edges. */
        SHORT,
        /** 1 KiB keys differing only near the end, values of the largest size: two per leaf, a deep tree. */
        HUGE,
        /** All lengths, from one byte to the largest keys and values. */
        MIXED,
        /** Short keys (1 to 24 bytes), half of them with the longest value their key leaves room for, a fifth over 960 bytes, the rest tiny. */
        WIDE
    }

    /** Each shape from seeds {@code SEED}, {@code SEED + 1}, ...: a failing case reruns first with its own seed. */
    static Stream<Arguments> cases(int seeds) {
        List<Arguments> list = new ArrayList<>();
        for (Shape shape : Shape.values()) {
            for (int i = 0; i < seeds; i++) {
                list.add(Arguments.of(shape, SEED + i));
            }
        }
        return list.stream();
    }

    static Stream<Arguments> cases() {
        return cases(2);
    }

    @ParameterizedTest(name = "{0} seed {1}")
    @MethodSource("cases")
    void matchesModel(Shape shape, long seed) {
        new Run(shape, seed, shape == Shape.HUGE ? 1500 : 2500).run();
    }

    static Stream<Arguments> stressCases() {
        return cases(3);
    }

    @Tag("stress")
    @ParameterizedTest(name = "{0} seed {1}")
    @MethodSource("stressCases")
    void matchesModelLong(Shape shape, long seed) {
        // HUGE and WIDE fit about two keys a leaf: a longer run of WIDE's grows past the device (NoSpaceException at ~27k keys)
        new Run(shape, seed, shape == Shape.HUGE ? 30_000 : shape == Shape.WIDE ? 15_000 : 60_000).run();
    }

    /** One randomized run: a device, a store on it, the model, and the operations applied to both. */
    private static final class Run {
        private static final byte[] ALPHABET = {0x00, 0x01, 0x41, 0x42, 0x7f, (byte) 0x80, (byte) 0xfe, (byte) 0xff};

        final Shape shape;
        final long seed;
        final int ops;
        final Random rnd;
        final NavigableMap<byte[], byte[]> model = new TreeMap<>(Keys::compare);
        ProbeDevice device;
        Store store;
        BTree tree;
        int step;
        int maxHeight;
        int maxKeys;
        long writes, reads, reopens;

        Run(Shape shape, long seed, int ops) {
            this.shape = shape;
            this.seed = seed;
            this.ops = ops;
            this.rnd = new Random(seed);
        }

        String where() {
            return shape + " run with -Dferrite.seed=" + seed + ", step " + step + ", " + model.size() + " keys";
        }

        void run() {
            device = new ProbeDevice(DEVICE_BLOCKS, BLOCK_SIZE);
            try {
                store = Store.format(device, LOG_BLOCKS, CACHE_BYTES);
                tree = store.tree;
                drive();
                store.close();
                store = null;
                System.out.println(where() + ": " + writes + " writes, " + reads + " reads, up to " + maxKeys
                        + " keys and height " + maxHeight + ", " + reopens + " reopens");
            } catch (AssertionError | RuntimeException e) {
                throw new AssertionError(where() + " failed: " + e, e);
            } finally {
                if (store != null) {
                    store.journal.close();
                    store.cache.close();
                }
                device.close();
            }
        }

        private void drive() {
            int drainAt = ops / 2;
            int cleanReopenAt = ops / 3;
            int crashReopenAt = 2 * ops / 3;
            boolean drained = false, cleanReopened = false, crashReopened = false;
            while (step < ops) {
                if (!drained && step >= drainAt) {
                    drain();
                    drained = true;
                } else if (!cleanReopened && step >= cleanReopenAt) {
                    reopen(false);
                    cleanReopened = true;
                } else if (!crashReopened && step >= crashReopenAt) {
                    reopen(true);
                    crashReopened = true;
                }
                batch();
                checkTree();
                if (rnd.nextInt(8) == 0) {
                    compareAll();
                }
            }
            reopen(false);
        }

        /** Some operations, biased to growing the tree early and to shrinking it between the drain and the end. */
        private void batch() {
            int n = 10 + rnd.nextInt(60);
            int phase = (int) (4L * step / ops); // 0, 1: grow; 2: regrow after the drain; 3: shrink
            int putWeight = phase == 3 ? 30 : 80;
            for (int i = 0; i < n && step < ops; i++) {
                int r = rnd.nextInt(100);
                if (r < 20) {
                    txnBatch(phase == 3 ? 40 : 85);
                } else if (r < 65) {
                    int w = rnd.nextInt(100);
                    if (w < putWeight) {
                        put();
                    } else if (w < putWeight + 10) {
                        putIfAbsent();
                    } else {
                        delete();
                    }
                } else {
                    read();
                }
                step++;
            }
        }

        // ------------------------------------------------------------------ writes

        private void put() {
            byte[] k = key(rnd.nextInt(3) == 0);
            byte[] v = value(k.length);
            tree.put(k, v);
            model.put(k, v);
            writes++;
        }

        private void putIfAbsent() {
            byte[] k = key(rnd.nextBoolean());
            byte[] v = value(k.length);
            boolean inserted;
            try (Txn txn = Txn.begin(store.cache, tree.reservation())) {
                inserted = tree.putIfAbsent(txn, MemorySegment.ofArray(k), MemorySegment.ofArray(v));
                txn.commit();
            }
            check(inserted == !model.containsKey(k), "putIfAbsent of " + hex(k) + " returned " + inserted);
            model.putIfAbsent(k, v);
            writes++;
        }

        private void delete() {
            byte[] k = key(rnd.nextInt(4) != 0);
            boolean found = tree.delete(k) >= 0;
            check(found == (model.remove(k) != null), "delete of " + hex(k) + " found " + found);
            writes++;
        }

        /** Several writes of distinct keys in one transaction, in ascending key order as BTree asks. */
        private void txnBatch(int putPercent) {
            TreeMap<byte[], Integer> keys = new TreeMap<>(Keys::compare);
            int n = 2 + rnd.nextInt(MAX_TXN_OPS - 1);
            for (int i = 0; i < n; i++) {
                keys.put(key(rnd.nextInt(3) == 0), rnd.nextInt(100));
            }
            try (Txn txn = Txn.begin(store.cache, keys.size() * (tree.reservation() + 4))) {
                for (Map.Entry<byte[], Integer> e : keys.entrySet()) {
                    byte[] k = e.getKey();
                    MemorySegment ks = MemorySegment.ofArray(k);
                    int op = e.getValue();
                    if (op < putPercent) {
                        byte[] v = value(k.length);
                        boolean fresh = op % 4 == 0
                                ? tree.putIfAbsent(txn, ks, MemorySegment.ofArray(v))
                                : tree.put(txn, ks, MemorySegment.ofArray(v));
                        check(fresh == !model.containsKey(k), "put in a transaction of " + hex(k) + " said new: " + fresh);
                        if (op % 4 == 0) {
                            model.putIfAbsent(k, v);
                        } else {
                            model.put(k, v);
                        }
                    } else {
                        boolean found = tree.delete(txn, ks);
                        check(found == (model.remove(k) != null), "delete in a transaction of " + hex(k) + " found " + found);
                    }
                    writes++;
                }
                txn.commit();
            }
        }

        /** Deletes every key, singly in random order or in ascending transactions, down to an empty lone leaf. */
        private void drain() {
            List<byte[]> keys = new ArrayList<>(model.keySet());
            boolean inTxns = rnd.nextBoolean();
            if (inTxns) {
                for (int i = 0; i < keys.size(); i += MAX_TXN_OPS) {
                    List<byte[]> chunk = keys.subList(i, Math.min(keys.size(), i + MAX_TXN_OPS));
                    try (Txn txn = Txn.begin(store.cache, chunk.size() * (tree.reservation() + 4))) {
                        for (byte[] k : chunk) {
                            check(tree.delete(txn, MemorySegment.ofArray(k)), "drain: " + hex(k) + " is missing");
                        }
                        txn.commit();
                    }
                }
            } else {
                Collections.shuffle(keys, rnd);
                for (byte[] k : keys) {
                    check(tree.delete(k) >= 0, "drain: " + hex(k) + " is missing");
                }
            }
            writes += keys.size();
            model.clear();
            checkTree();
            check(tree.height() == 1, "drained (" + (inTxns ? "in transactions" : "singly") + ") to height "
                    + tree.height() + ", not a lone leaf");
            check(tree.firstKey() == null && tree.lastKey() == null, "an empty tree has a first or last key");
            check(tree.countEstimate() == 0, "an empty tree estimates " + tree.countEstimate() + " keys");
            check(!tree.cursor(null, false).next() && !tree.cursor(null, true).next(), "an empty tree's cursor moved");
        }

        // ------------------------------------------------------------------ reads

        private void read() {
            reads++;
            int r = rnd.nextInt(100);
            if (r < 45) {
                byte[] k = key(rnd.nextBoolean());
                byte[] got = tree.get(k);
                check(Arrays.equals(got, model.get(k)), "get of " + hex(k) + " returned " + hex(got)
                        + ", expected " + hex(model.get(k)));
            } else if (r < 55) {
                partialGet();
            } else if (r < 90) {
                cursor(rnd.nextBoolean(), rnd.nextInt(10) == 0 ? Integer.MAX_VALUE : 1 + rnd.nextInt(40));
            } else if (r < 95) {
                check(Arrays.equals(tree.firstKey(), model.isEmpty() ? null : model.firstKey()), "firstKey");
                check(Arrays.equals(tree.lastKey(), model.isEmpty() ? null : model.lastKey()), "lastKey");
            } else {
                countEstimate();
            }
        }

        /** get into a buffer that may be too short: it copies what fits and returns the whole length. */
        private void partialGet() {
            byte[] k = key(true);
            byte[] expected = model.get(k);
            byte[] out = new byte[rnd.nextInt(64)];
            int len = tree.get(MemorySegment.ofArray(k), MemorySegment.ofArray(out));
            if (expected == null) {
                check(len == -1, "get of absent " + hex(k) + " returned length " + len);
            } else {
                check(len == expected.length, "get of " + hex(k) + " returned length " + len + ", expected " + expected.length);
                int copied = Math.min(len, out.length);
                check(Arrays.equals(out, 0, copied, expected, 0, copied), "get of " + hex(k) + " copied other bytes");
            }
        }

        /** A cursor from null, a present key or an absent one, compared entry by entry for up to {@code limit} entries. */
        private void cursor(boolean reverse, int limit) {
            int r = rnd.nextInt(4);
            byte[] from = r == 0 ? null : key(r == 1);
            NavigableMap<byte[], byte[]> view = from == null ? model : reverse ? model.headMap(from, true) : model.tailMap(from, true);
            if (reverse) {
                view = view.descendingMap();
            }
            Cursor c = tree.cursor(from, reverse);
            Iterator<Map.Entry<byte[], byte[]>> it = view.entrySet().iterator();
            String what = (reverse ? "reverse" : "forward") + " cursor from " + hex(from);
            for (int i = 0; i < limit; i++) {
                boolean moved = c.next();
                check(moved == it.hasNext(), what + ": entry " + i + (moved ? " is extra" : " is missing"));
                if (!moved) {
                    check(!c.next(), what + ": moved again after the end");
                    return;
                }
                Map.Entry<byte[], byte[]> e = it.next();
                check(Arrays.equals(c.key(), e.getKey()), what + ": entry " + i + " has key " + hex(c.key())
                        + ", expected " + hex(e.getKey()));
                check(Arrays.equals(c.value(), e.getValue()), what + ": entry " + i + " (" + hex(e.getKey()) + ") has another value");
                check(c.keySegment().byteSize() == e.getKey().length, what + ": key segment length");
            }
        }

        /**
         * Exact for a lone leaf; otherwise positive, and the right order of magnitude where every node has
         * about the same fan-out (HUGE: one or two entries a leaf, three or four separators a node).
         */
        private void countEstimate() {
            long estimate = tree.countEstimate();
            int height = tree.height();
            int size = model.size();
            if (height == 1) {
                check(estimate == size, "a lone leaf of " + size + " keys estimates " + estimate);
            } else {
                check(estimate > 0, "a tree of height " + height + " and " + size + " keys estimates " + estimate);
                if (shape == Shape.HUGE) {
                    check(estimate >= size / 8 && estimate <= size * 8L, "a tree of " + size + " keys of one size estimates "
                            + estimate);
                }
            }
        }

        // ------------------------------------------------------------------ checks

        private void checkTree() {
            TreeCheck c = tree.check();
            check(c.ok(), c.toString());
            check(c.keys() == model.size(), "the checker counts " + c.keys() + " keys");
            check(c.height() == tree.height(), "the checker finds height " + c.height() + ", the header says " + tree.height());
            maxHeight = Math.max(maxHeight, c.height());
            maxKeys = Math.max(maxKeys, model.size());
        }

        /** Every key read back, and a full scan each way. */
        private void compareAll() {
            for (Map.Entry<byte[], byte[]> e : model.entrySet()) {
                check(Arrays.equals(tree.get(e.getKey()), e.getValue()), "get of " + hex(e.getKey()) + " in a full compare");
            }
            cursor(false, Integer.MAX_VALUE);
            cursor(true, Integer.MAX_VALUE);
            Cursor c = tree.cursor(null, false);
            for (byte[] k : model.keySet()) {
                check(c.next() && Arrays.equals(c.key(), k), "full scan at " + hex(k));
            }
            check(!c.next(), "full scan: keys beyond the model's");
        }

        /** Closes cleanly, or forces the log and cuts the power so that opening must replay it; then compares everything. */
        private void reopen(boolean crash) {
            if (crash) {
                store.journal.forceAll();
                device.cutPower();
            }
            store.close();
            store = null;
            device.restorePower();
            store = Store.open(device, LOG_BLOCKS, CACHE_BYTES);
            tree = store.tree;
            reopens++;
            var report = store.journal.recovery();
            check(report.clean() != crash, (crash ? "after a power cut " : "after a clean close ") + report);
            checkTree();
            compareAll();
        }

        // ------------------------------------------------------------------ keys and values

        /** A key of the run's shape; with {@code present}, one the model holds (when it holds any). */
        private byte[] key(boolean present) {
            if (present && !model.isEmpty()) {
                byte[] k = model.ceilingKey(key(false));
                return k != null ? k : model.firstKey();
            }
            return switch (shape) {
                case TINY -> new byte[] {(byte) rnd.nextInt(256)};
                case SHORT -> letters(1 + rnd.nextInt(12));
                case HUGE -> hugeKey();
                case WIDE -> letters(1 + rnd.nextInt(24));
                case MIXED -> {
                    int r = rnd.nextInt(100);
                    int len = r < 35 ? 1 + rnd.nextInt(4) : r < 70 ? 5 + rnd.nextInt(36)
                            : r < 90 ? 41 + rnd.nextInt(MAX_KEY - 41) : MAX_KEY;
                    yield letters(len);
                }
            };
        }

        /** The largest key: a few first bytes, a long shared middle, and a few distinguishing bytes at the end. */
        private byte[] hugeKey() {
            byte[] k = new byte[MAX_KEY];
            Arrays.fill(k, (byte) 'm');
            k[0] = ALPHABET[rnd.nextInt(4)];
            for (int i = MAX_KEY - 6; i < MAX_KEY; i++) {
                k[i] = ALPHABET[rnd.nextInt(4)];
            }
            return k;
        }

        private byte[] letters(int len) {
            byte[] k = new byte[len];
            for (int i = 0; i < len; i++) {
                k[i] = ALPHABET[rnd.nextInt(ALPHABET.length)];
            }
            return k;
        }

        /** A value of the run's shape beside a key of {@code keyLength} bytes; the largest take all the key leaves of a cell. */
        private byte[] value(int keyLength) {
            int r = rnd.nextInt(100);
            int largest = MAX_ENTRY - keyLength;
            int len = switch (shape) {
                case TINY -> r < 10 ? largest : rnd.nextInt(40);
                case SHORT -> rnd.nextInt(100);
                case HUGE -> r < 70 ? largest : rnd.nextInt(largest);
                case MIXED -> r < 60 ? rnd.nextInt(50) : r < 80 ? 50 + rnd.nextInt(450) : r < 90 ? rnd.nextInt(largest) : largest;
                case WIDE -> r < 50 ? largest : r < 70 ? MAX_VALUE + rnd.nextInt(largest - MAX_VALUE) : rnd.nextInt(16);
            };
            byte[] v = new byte[len];
            rnd.nextBytes(v);
            return v;
        }

        private void check(boolean ok, String what) {
            if (!ok) {
                throw new AssertionError(what);
            }
        }

        private static String hex(byte[] b) {
            if (b == null) {
                return "null";
            }
            HexFormat f = HexFormat.of();
            return b.length <= 16 ? f.formatHex(b)
                    : f.formatHex(b, 0, 6) + ".." + f.formatHex(b, b.length - 6, b.length) + " (" + b.length + " bytes)";
        }
    }
}
