package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Tables through the public API: the catalog (create, open, list, rename, drop, across remounts), single
 * writes and cursors against a model, write transactions (read their own writes, apply all at once,
 * roll back, refuse what is too large having changed nothing), and precise errors for bad input; every
 * volume checks clean at the end.
 */
@ExtendWith(TestSeed.class)
class TableTest {
    private static final long SEED = TestSeed.get(17);

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static TableException.Kind kindOf(Runnable r) {
        return assertThrows(TableException.class, r::run).kind();
    }

    @Test
    void theCatalogNamesTablesAcrossRemounts() {
        MemoryDevice dev = VolumeFixtures.formatted();
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Tables tables = v.tables();
            assertEquals(List.of(), tables.list());
            try (Table a = tables.create("a"); Table b = tables.create("b")) {
                a.put(b("k"), b("va"));
                b.put(b("k"), b("vb"));
            }
            assertEquals(TableException.Kind.TABLE_EXISTS, kindOf(() -> tables.create("a")));
            assertEquals(TableException.Kind.NO_SUCH_TABLE, kindOf(() -> tables.open("zz")));
            tables.rename("b", "c");
            assertEquals(TableException.Kind.NO_SUCH_TABLE, kindOf(() -> tables.open("b")));
            assertEquals(TableException.Kind.TABLE_EXISTS, kindOf(() -> tables.rename("a", "c")));
            assertEquals(TableException.Kind.NO_SUCH_TABLE, kindOf(() -> tables.rename("nope", "d")));
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Tables tables = v.tables();
            assertEquals(List.of("a", "c"), tables.list().stream().sorted().toList());
            try (Table c = tables.open("c")) {
                assertArrayEquals(b("vb"), c.get(b("k")));
            }
            long free = v.statfs().freeBlocks();
            tables.drop("a");
            assertFalse(tables.exists("a"));
            assertEquals(TableException.Kind.NO_SUCH_TABLE, kindOf(() -> tables.drop("a")));
            assertTrue(v.statfs().freeBlocks() > free, "a dropped table's blocks are free again");
            assertTrue(v.namespace().list("/").isEmpty(), "tables do not show in the namespace");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void badInputIsRefusedPreciselyAndChangesNothing() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            assertThrows(InvalidArgumentException.class, () -> t.put(new byte[0], b("v")));
            assertThrows(InvalidArgumentException.class, () -> t.put(new byte[Table.MAX_KEY + 1], b("v")));
            assertThrows(InvalidArgumentException.class, () -> t.get(null));
            assertThrows(NamespaceException.class, () -> v.tables().create("a/b"));
            assertThrows(NamespaceException.class, () -> v.tables().create(""));
            assertThrows(NamespaceException.class, () -> v.tables().create("x".repeat(256)));
            t.put(new byte[Table.MAX_KEY], new byte[Table.MAX_INLINE]);
            assertEquals(1, t.count());
            WriteTransaction tx = v.begin();
            tx.put(t, b("k"), b("v"));
            assertThrows(InvalidArgumentException.class, () -> tx.containsKey(t, new byte[0]));
            assertThrows(InvalidArgumentException.class, () -> tx.containsKey(t, null));
            assertThrows(InvalidArgumentException.class, () -> tx.containsKey(null, b("k")));
            assertTrue(tx.containsKey(t, b("k")), "its own put");
            tx.commit();
            assertEquals(TableException.Kind.TRANSACTION_DONE, kindOf(() -> tx.put(t, b("k2"), b("v"))));
            assertEquals(TableException.Kind.TRANSACTION_DONE, kindOf(() -> tx.containsKey(t, b("k"))));
            assertEquals(TableException.Kind.TRANSACTION_DONE, kindOf(tx::commit));
            t.close();
            try (WriteTransaction late = v.begin()) {
                assertEquals(TableException.Kind.TABLE_CLOSED, kindOf(() -> late.containsKey(t, b("k"))));
            }
            assertEquals(TableException.Kind.TABLE_CLOSED, kindOf(() -> t.get(b("k"))));
            assertEquals(TableException.Kind.TABLE_CLOSED, kindOf(() -> t.put(b("k"), b("v"))));
            try (Table again = v.tables().open("t")) {
                assertEquals(2, again.count());
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void aDroppedTableRefusesWritesAndIsFreedAtItsLastClose() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS)) {
            long free = v.statfs().freeBlocks();
            Table t = v.tables().create("t");
            for (int i = 0; i < 3000; i++) {
                t.withDurability(Durability.NONE).put(b("key-" + i), new byte[100]);
            }
            v.tables().drop("t");
            assertArrayEquals(new byte[100], t.get(b("key-7")), "its contents stay readable while open");
            assertEquals(TableException.Kind.TABLE_CLOSED, kindOf(() -> t.put(b("x"), b("y"))));
            VolumeFixtures.assertChecked(v.namespace());
            t.close();
            assertEquals(free, v.statfs().freeBlocks());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void singleWritesAndCursorsMatchAModel() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formatted();
        TreeMap<byte[], byte[]> model = new TreeMap<>(Arrays::compareUnsigned);
        for (int round = 0; round < 3; round++) {
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().openOrCreate("m")) {
                t.withDurability(Durability.NONE);
                for (int i = 0; i < 3000; i++) {
                    byte[] k = new byte[1 + rnd.nextInt(3)];
                    rnd.nextBytes(k);
                    int r = rnd.nextInt(10);
                    if (r < 5) {
                        byte[] val = new byte[rnd.nextInt(200)];
                        rnd.nextBytes(val);
                        t.put(k, val);
                        model.put(k, val);
                    } else if (r < 7) {
                        byte[] val = new byte[] {(byte) i};
                        assertEquals(!model.containsKey(k), t.putIfAbsent(k, val));
                        model.putIfAbsent(k, val);
                    } else if (r < 9) {
                        assertEquals(model.remove(k) != null, t.delete(k));
                    } else {
                        byte[] to = new byte[] {(byte) rnd.nextInt(256), (byte) rnd.nextInt(256)};
                        long n = t.deleteRange(k, to);
                        Map<byte[], byte[]> gone = Arrays.compareUnsigned(k, to) < 0 ? model.subMap(k, to) : new TreeMap<>();
                        assertEquals(gone.size(), n);
                        gone.clear();
                    }
                }
                assertSame(model, t);
                byte[] p = {(byte) rnd.nextInt(256)};
                List<byte[]> expected = new ArrayList<>(model.subMap(p, true, Table.successor(p), false).keySet());
                assertKeys(expected, t.prefix(p, false));
                assertKeys(expected.reversed(), t.prefix(p, true));
                assertKeys(new ArrayList<>(model.descendingKeySet()), t.cursor(null, null, true));
                byte[] at = {(byte) rnd.nextInt(256), (byte) rnd.nextInt(256)};
                TableCursor sought = t.cursor();
                sought.next();
                sought.seek(at);
                assertKeys(new ArrayList<>(model.tailMap(at, true).keySet()), sought);
                TableCursor back = t.cursor(null, null, true);
                back.seek(at);
                assertKeys(new ArrayList<>(model.headMap(at, true).descendingKeySet()), back);
                VolumeFixtures.assertChecked(v.namespace());
            }
        }
    }

    private static void assertSame(TreeMap<byte[], byte[]> model, Table t) {
        TableCursor c = t.cursor();
        for (Map.Entry<byte[], byte[]> e : model.entrySet()) {
            assertTrue(c.next(), "the table ends before " + Arrays.toString(e.getKey()));
            assertArrayEquals(e.getKey(), c.key());
            assertArrayEquals(e.getValue(), c.value());
            assertArrayEquals(e.getValue(), t.get(e.getKey()));
        }
        assertFalse(c.next(), "the table holds keys the model does not");
    }

    private static void assertKeys(List<byte[]> expected, TableCursor c) {
        for (byte[] k : expected) {
            assertTrue(c.next());
            assertArrayEquals(k, c.key());
        }
        assertFalse(c.next());
    }

    @Test
    void aTransactionReadsItsOwnWritesAndAppliesThemAtOnce() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Table a = v.tables().create("a"); Table c = v.tables().create("c")) {
            a.put(b("k1"), b("old"));
            a.put(b("k5"), b("five"));
            try (WriteTransaction tx = v.begin()) {
                tx.put(a, b("k1"), b("new"));
                tx.put(c, b("k1"), b("c1"));
                assertFalse(tx.putIfAbsent(a, b("k5"), b("x")));
                assertTrue(tx.delete(a, b("k5")));
                assertTrue(tx.putIfAbsent(a, b("k5"), b("again")));
                tx.put(a, b("k3"), b("three"));
                tx.deleteRange(a, b("k2"), b("k4"));
                tx.put(a, b("k3b"), b("kept"));
                assertArrayEquals(b("new"), tx.get(a, b("k1")));
                assertArrayEquals(b("again"), tx.get(a, b("k5")));
                assertNull(tx.get(a, b("k3")));
                assertArrayEquals(b("old"), a.get(b("k1")), "nothing applied before the commit");
                assertNull(c.get(b("k1")));
                tx.commit();
            }
            assertArrayEquals(b("new"), a.get(b("k1")));
            assertArrayEquals(b("again"), a.get(b("k5")));
            assertNull(a.get(b("k3")));
            assertArrayEquals(b("kept"), a.get(b("k3b")));
            assertArrayEquals(b("c1"), c.get(b("k1")));
            try (WriteTransaction tx = v.begin()) {
                tx.put(a, b("k1"), b("rolled back"));
            }
            assertArrayEquals(b("new"), a.get(b("k1")));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A transaction that only puts keeps its changes in the order made and sorts them at the commit: each
     * key gets its last value, over two tables written in turn, and the commit of one key's many puts is
     * that key's last put. Its keys are shorter than 8 bytes or share their first 6 or 8, which the
     * sort compares first.
     */
    @Test
    void aTransactionOfPutsAppliesEachKeysLastPut() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Table a = v.tables().create("a"); Table c = v.tables().create("c")) {
            Random rnd = new Random(SEED);
            TreeMap<String, String> inA = new TreeMap<>(), inC = new TreeMap<>();
            try (WriteTransaction tx = v.begin()) {
                for (int i = 0; i < 600; i++) {
                    // short keys, keys that share their first 8 bytes, and keys that share 6 (sorted as numbers by 5.5)
                    String k = List.of("k", "eight b.", "six b.").get(rnd.nextInt(3)) + rnd.nextInt(40), value = "v" + i;
                    boolean toA = rnd.nextBoolean();
                    tx.put(toA ? a : c, b(k), b(value));
                    (toA ? inA : inC).put(k, value);
                }
                tx.commit();
            }
            assertEquals(inA, contents(a), "seed " + SEED);
            assertEquals(inC, contents(c), "seed " + SEED);
            try (WriteTransaction tx = v.begin()) {
                for (int i = 0; i < 5; i++) {
                    tx.put(a, b("one"), b("put " + i));
                }
                tx.commit();
            }
            assertArrayEquals(b("put 4"), a.get(b("one")));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * The changes a transaction of puts commits are its keys in unsigned order, each once with its last
     * value: keys of 1 to 12 bytes of 0x00, 0x01, 0x7F, 0x80 and 0xFF, so that many share their first
     * bytes, prefix each other or differ only past the bits the sort compares as numbers.
     */
    @Test
    void aTransactionsChangesAreItsKeysInOrderEachWithItsLastValue() {
        Random rnd = new Random(SEED);
        byte[] alphabet = {0x00, 0x01, 0x7F, (byte) 0x80, (byte) 0xFF};
        WriteTransaction.Writes w = new WriteTransaction.Writes(null);
        TreeMap<byte[], Integer> model = new TreeMap<>(Arrays::compareUnsigned);
        for (int i = 0; i < 5000; i++) {
            byte[] k = new byte[1 + rnd.nextInt(12)];
            for (int j = 0; j < k.length; j++) {
                k[j] = alphabet[j < 5 && rnd.nextInt(4) != 0 ? 1 : rnd.nextInt(alphabet.length)];
            }
            w.add(new WriteTransaction.Op(k, TableCommit.PUT, MemorySegment.ofArray(ByteBuffer.allocate(4).putInt(i).array())));
            model.put(k, i);
        }
        WriteTransaction.Op[] changes = w.changes();
        assertEquals(model.size(), changes.length, "seed " + SEED);
        int i = 0;
        for (Map.Entry<byte[], Integer> e : model.entrySet()) {
            assertArrayEquals(e.getKey(), changes[i].key(), "seed " + SEED + ", change " + i);
            assertEquals(e.getValue(), changes[i].value().asByteBuffer().getInt(), "seed " + SEED + ", change " + i);
            i++;
        }
    }

    /**
     * Random transactions over a few keys, mixing runs of puts (kept in the order made) with reads of the
     * transaction's own changes, deletes, puts if absent and deleted ranges (which file them by key), read
     * and commit as a model of the table says: each key's latest change wins, a delete then put puts, a
     * range deletes the puts made before it and keeps those after.
     */
    @Test
    void aTransactionMixingPutsWithReadsOfItsOwnChangesMatchesAModel() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            Random rnd = new Random(SEED);
            TreeMap<String, String> committed = new TreeMap<>();
            for (int round = 0; round < 60; round++) {
                TreeMap<String, String> view = new TreeMap<>(committed);
                try (WriteTransaction tx = v.begin()) {
                    int changes = 1 + rnd.nextInt(40);
                    for (int i = 0; i < changes; i++) {
                        String k = "k" + rnd.nextInt(24), value = "r" + round + "." + i;
                        int what = rnd.nextInt(20);
                        String seen = "seed " + SEED + ", round " + round + ", change " + i + ", key " + k;
                        if (what < 12) { // mostly puts, in runs
                            tx.put(t, b(k), b(value));
                            view.put(k, value);
                        } else if (what < 14) {
                            assertEquals(view.containsKey(k), tx.delete(t, b(k)), seen);
                            view.remove(k);
                        } else if (what < 16) {
                            assertEquals(!view.containsKey(k), tx.putIfAbsent(t, b(k), b(value)), seen);
                            view.putIfAbsent(k, value);
                        } else if (what < 18) {
                            byte[] got = tx.get(t, b(k));
                            assertEquals(view.get(k), got == null ? null : new String(got, StandardCharsets.UTF_8), seen);
                        } else {
                            String to = "k" + rnd.nextInt(24);
                            tx.deleteRange(t, b(k), b(to));
                            if (k.compareTo(to) < 0) {
                                view.subMap(k, to).clear();
                            }
                        }
                    }
                    if (rnd.nextInt(8) == 0) {
                        continue; // rolled back
                    }
                    tx.commit();
                }
                committed = view;
                assertEquals(committed, contents(t), "seed " + SEED + ", round " + round);
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    private static TreeMap<String, String> contents(Table t) {
        TreeMap<String, String> m = new TreeMap<>();
        try (TableCursor c = t.cursor()) {
            while (c.next()) {
                m.put(new String(c.key(), StandardCharsets.UTF_8), new String(c.value(), StandardCharsets.UTF_8));
            }
        }
        return m;
    }

    /** An ASYNC write becomes durable by itself within the delay; a NONE write waits for someone to force it. */
    @Test
    void anAsyncWriteBecomesDurableWithinItsDelay() throws InterruptedException {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS.withAsyncCommitMillis(5));
             Table t = v.tables().create("t")) {
            long before = v.journal().forceAll();
            t.withDurability(Durability.NONE).put(b("none"), b("v"));
            Thread.sleep(100); // a NONE write must not be forced: nothing to wait for, so a fixed pause
            assertEquals(before, v.journal().durableSeq(), "a NONE write was forced");
            t.withDurability(Durability.ASYNC).put(b("async"), b("v"));
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (v.journal().durableSeq() <= before && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertTrue(v.journal().durableSeq() > before, "the ASYNC write was not made durable within 10 s");
        }
    }

    @Test
    void aTransactionTooLargeForTheLogFailsHavingChangedNothing() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(b("keep"), b("v"));
            WriteTransaction tx = v.begin();
            for (int i = 0; i < 20_000; i++) {
                tx.put(t, b("key-" + i), new byte[200]);
            }
            assertEquals(TableException.Kind.TOO_LARGE, kindOf(tx::commit));
            assertEquals(1, t.count());
            try (WriteTransaction ok = v.begin(Durability.ASYNC)) {
                for (int i = 0; i < 2000; i++) {
                    ok.put(t, b("key-" + i), new byte[200]);
                }
                ok.commit();
            }
            assertEquals(2001, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }
}
