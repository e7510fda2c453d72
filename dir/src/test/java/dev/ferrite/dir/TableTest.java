package dev.ferrite.dir;

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
            tx.commit();
            assertEquals(TableException.Kind.TRANSACTION_DONE, kindOf(() -> tx.put(t, b("k2"), b("v"))));
            assertEquals(TableException.Kind.TRANSACTION_DONE, kindOf(tx::commit));
            t.close();
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
