package dev.ferrite.dir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.journal.VolumeShutdownException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Input at and past the table API's edges that {@link TableTest} does not try: a closed volume, a table
 * of another volume, reversed ranges, keys of exactly 1 and 1024 bytes, empty values, a commit over a
 * dropped table. Each refusal is its exact exception, and the tables are the same afterwards, key for key
 * (also after a remount), and check clean.
 */
class TableInputTest {
    private static final byte[] K = TableTest.b("k");

    /** Every table's name and entries, hex, to compare before and after a refused call. */
    static Map<String, List<String>> contents(Volume v) {
        Map<String, List<String>> all = new TreeMap<>();
        for (String name : v.tables().list()) {
            try (Table t = v.tables().open(name)) {
                List<String> entries = new ArrayList<>();
                TableCursor c = t.cursor();
                while (c.next()) {
                    entries.add(HexFormat.of().formatHex(c.key()) + "=" + HexFormat.of().formatHex(c.value()));
                }
                all.put(name, entries);
            }
        }
        return all;
    }

    private static <T extends Throwable> T refused(Class<T> type, Executable call, Volume v, Map<String, List<String>> before) {
        T e = assertThrows(type, call::run);
        if (before != null) {
            assertEquals(before, contents(v), "the refused call changed the tables: " + e.getMessage());
        }
        return e;
    }

    private interface Executable {
        void run() throws Throwable;
    }

    @Test
    void everyCallOnAClosedVolumeIsVolumeShutdownAndChangesNothing() {
        MemoryDevice dev = VolumeFixtures.formatted();
        Map<String, List<String>> before;
        Volume v = Volume.open(dev, VolumeFixtures.OPTIONS);
        Tables tables = v.tables();
        Table t = tables.create("t");
        t.put(K, TableTest.b("v"));
        tables.create("u").close();
        WriteTransaction tx = v.begin(Durability.NONE);
        tx.put(t, TableTest.b("pending"), TableTest.b("p"));
        TableCursor c = t.cursor();
        Table dropped = tables.create("dropped");
        dropped.put(K, TableTest.b("d"));
        tables.drop("dropped"); // freed by the next mount's orphan recovery: the handle outlives the volume
        before = contents(v);
        v.close();

        List<Executable> calls = List.of(
                v::tables, v::begin, () -> v.begin(Durability.ASYNC),
                () -> tables.create("x"), () -> tables.open("t"), () -> tables.openOrCreate("y"), tables::list,
                () -> tables.exists("t"), () -> tables.drop("u"), () -> tables.rename("u", "w"),
                () -> tables.begin(Durability.SYNC),
                () -> t.get(K), () -> t.get(MemorySegment.ofArray(K), MemorySegment.ofArray(new byte[8])),
                () -> t.containsKey(K), t::cursor, () -> t.prefix(K, true), t::count, t::countEstimate, t::stats,
                () -> t.put(K, TableTest.b("w")), () -> t.putIfAbsent(TableTest.b("n"), TableTest.b("w")),
                () -> t.delete(K), () -> t.deleteRange(null, null), c::next,
                () -> tx.put(t, TableTest.b("more"), TableTest.b("m")), () -> tx.get(t, K), tx::commit, t::close, dropped::close);
        for (int i = 0; i < calls.size(); i++) {
            int n = i;
            VolumeShutdownException e = assertThrows(VolumeShutdownException.class, () -> calls.get(n).run(), "call #" + n);
            assertTrue(e.getMessage() != null && !e.getMessage().isEmpty(), "call #" + n + " names why");
        }
        try (Volume again = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            assertEquals(before, contents(again), "the calls after the close changed nothing");
            VolumeFixtures.assertChecked(again.namespace());
        }
    }

    private interface TwoVolumes {
        void run(Volume v, Volume w, Table mine, Table theirs);
    }

    /** Two volumes, each with a table "t" of the same inode (so a transaction cannot tell them apart by it) holding K. */
    private static void twoVolumes(TwoVolumes body) {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Volume w = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS);
             Table mine = v.tables().create("t"); Table theirs = w.tables().create("t")) {
            assertEquals(mine.inode.ino, theirs.inode.ino);
            theirs.put(K, TableTest.b("theirs"));
            body.run(v, w, mine, theirs);
            VolumeFixtures.assertChecked(v.namespace());
            VolumeFixtures.assertChecked(w.namespace());
        }
    }

    @Test
    void aTransactionRefusesATableOfAnotherVolume() {
        twoVolumes((v, w, mine, theirs) -> {
            Map<String, List<String>> inW = contents(w);
            try (WriteTransaction tx = v.begin()) {
                tx.put(mine, K, TableTest.b("mine"));
                refused(InvalidArgumentException.class, () -> tx.put(theirs, K, TableTest.b("x")), w, inW);
                refused(InvalidArgumentException.class, () -> tx.putIfAbsent(theirs, TableTest.b("new"), TableTest.b("x")), w, inW);
                refused(InvalidArgumentException.class, () -> tx.delete(theirs, K), w, inW);
                refused(InvalidArgumentException.class, () -> tx.deleteRange(theirs, null, null), w, inW);
                assertEquals(1, tx.size(), "the refused calls recorded nothing");
                tx.commit();
            }
            assertArrayEquals(TableTest.b("mine"), mine.get(K));
            assertArrayEquals(TableTest.b("theirs"), theirs.get(K));
            assertEquals(inW, contents(w));
        });
    }

    @Test
    void aTransactionReadRefusesATableOfAnotherVolume() {
        twoVolumes((v, w, mine, theirs) -> {
            try (WriteTransaction tx = v.begin()) {
                tx.put(mine, K, TableTest.b("pending"));
                // else it answers with this transaction's pending change to its own table of the same inode
                refused(InvalidArgumentException.class, () -> tx.get(theirs, K), v, null);
            }
        });
    }

    /**
     * A bad table name is the same NamespaceException whether or not the volume has a catalog yet. Today a
     * volume that never had a table answers open, exists, drop and rename of such a name as if it were a
     * good name that is not there: Tables looks for the catalog before it checks the name.
     */
    @Test
    void aBadNameIsRefusedAlikeWithOrWithoutACatalog() {
        List<String> bad = List.of("a/b", "", "x".repeat(256), "a\0b");
        for (boolean withCatalog : new boolean[] {true, false}) {
            try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS)) {
                Tables tables = v.tables();
                if (withCatalog) {
                    tables.create("t").close();
                }
                Map<String, List<String>> before = contents(v);
                for (String name : bad) {
                    String where = (withCatalog ? "with" : "without") + " a catalog, name of " + name.length() + " chars: ";
                    int errno = name.length() > 255 ? Errno.ENAMETOOLONG : Errno.EINVAL;
                    for (Executable call : List.<Executable>of(() -> tables.open(name), () -> tables.exists(name), () -> tables.drop(name),
                            () -> tables.rename(name, "c"))) {
                        Throwable e = assertThrows(Throwable.class, call::run);
                        assertTrue(e instanceof NamespaceException ne && ne.errno() == errno, where + e);
                    }
                }
                assertEquals(before, contents(v));
            }
        }
    }

    /**
     * A create refused for its name changes nothing: on a volume that never had a table it makes no
     * catalog (making one also sets the superblock's INCOMPAT_TABLES, so that older code refuses the
     * volume). Today the catalog is made before the name is checked.
     */
    @Test
    void aCreateRefusedForItsNameMakesNoCatalog() {
        MemoryDevice dev = VolumeFixtures.formatted();
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            NamespaceException e = assertThrows(NamespaceException.class, () -> v.tables().create("a/b"));
            assertEquals(Errno.EINVAL, e.errno());
            assertEquals(0, v.tables().catalogInode(), "a refused create made the catalog");
        }
    }

    @Test
    void aReversedOrEmptyRangeDeletesNothing() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            for (String k : List.of("a", "b", "c", "d")) {
                t.put(TableTest.b(k), TableTest.b(k));
            }
            Map<String, List<String>> before = contents(v);
            assertEquals(0, t.deleteRange(TableTest.b("c"), TableTest.b("b")));
            assertEquals(0, t.deleteRange(TableTest.b("b"), TableTest.b("b")));
            assertEquals(before, contents(v));
            assertFalse(t.cursor(TableTest.b("c"), TableTest.b("b"), false).next(), "a forward cursor over [c, b)");
            assertFalse(t.cursor(TableTest.b("b"), TableTest.b("c"), true).next(), "a reverse cursor over (c, b]");
            try (WriteTransaction tx = v.begin()) {
                tx.put(t, TableTest.b("b"), TableTest.b("new b"));
                tx.deleteRange(t, TableTest.b("c"), TableTest.b("b"));
                tx.deleteRange(t, TableTest.b("b"), TableTest.b("b"));
                assertArrayEquals(TableTest.b("new b"), tx.get(t, TableTest.b("b")), "an empty range keeps the transaction's own put");
                assertArrayEquals(TableTest.b("c"), tx.get(t, TableTest.b("c")));
                tx.commit();
            }
            assertArrayEquals(TableTest.b("new b"), t.get(TableTest.b("b")));
            assertEquals(4, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void aDoneTransactionRefusesAnEmptyRangeToo() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            WriteTransaction tx = v.begin();
            tx.commit();
            // every other call on a done transaction is TRANSACTION_DONE; so must this one be, however empty its range
            assertEquals(TableException.Kind.TRANSACTION_DONE,
                    assertThrows(TableException.class, () -> tx.deleteRange(t, TableTest.b("b"), TableTest.b("a"))).kind());
        }
    }

    @Test
    void aTransactionRefusesANullTableWhateverTheRange() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); WriteTransaction tx = v.begin()) {
            assertThrows(InvalidArgumentException.class, () -> tx.deleteRange(null, TableTest.b("b"), TableTest.b("a")));
        }
    }

    @Test
    void keysOfOneAndOfMaxBytesWorkEverywhere() {
        MemoryDevice dev = VolumeFixtures.formatted();
        byte[] zero = {0}, ff = {(byte) 0xFF};
        byte[] longFF = new byte[Table.MAX_KEY], longZero = new byte[Table.MAX_KEY], longMid = new byte[Table.MAX_KEY];
        Arrays.fill(longFF, (byte) 0xFF);
        Arrays.fill(longMid, (byte) 0x80);
        byte[] ffThenLong = Arrays.copyOf(ff, 2);
        ffThenLong[1] = 0x01;
        List<byte[]> keys = List.of(zero, longZero, longMid, ff, ffThenLong, longFF); // in unsigned order
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            try (WriteTransaction tx = v.begin()) {
                for (byte[] k : keys) {
                    tx.put(t, k, Arrays.copyOf(k, Math.min(k.length, Table.MAX_INLINE)));
                }
                tx.commit();
            }
            assertFalse(t.putIfAbsent(longFF, TableTest.b("x")));
            assertOrder(keys, t.cursor(), false);
            assertOrder(keys, t.cursor(null, null, true), true);
            assertOrder(keys.subList(3, 6), t.prefix(ff, false), false);
            assertOrder(keys.subList(3, 6), t.prefix(ff, true), true);
            assertOrder(List.of(longFF), t.prefix(longFF, false), false); // a prefix with no successor
            assertOrder(List.of(longFF), t.prefix(longFF, true), true);
            assertOrder(keys.subList(0, 2), t.prefix(zero, false), false);
            assertOrder(keys.subList(1, 5), t.cursor(longZero, longFF, false), false);
            assertOrder(keys.subList(2, 6), t.cursor(longFF, longZero, true), true);
            assertEquals(Table.MAX_INLINE, t.get(MemorySegment.ofArray(longMid), MemorySegment.ofArray(new byte[4])), "the whole length, though 4 bytes fit");
            assertThrows(InvalidArgumentException.class, () -> t.get(MemorySegment.ofArray(new byte[Table.MAX_KEY + 1]), MemorySegment.NULL));
            assertThrows(InvalidArgumentException.class, () -> t.get(MemorySegment.ofArray(new byte[0]), MemorySegment.NULL));
            assertThrows(InvalidArgumentException.class, () -> t.cursor(new byte[Table.MAX_KEY + 1], null, false));
            assertThrows(InvalidArgumentException.class, () -> t.prefix(new byte[0], false));
            assertTrue(t.delete(longZero));
            assertTrue(t.delete(zero));
            assertEquals(2, t.deleteRange(longMid, ffThenLong));
            assertOrder(List.of(ffThenLong, longFF), t.cursor(), false);
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            assertArrayEquals(Arrays.copyOf(longFF, Table.MAX_INLINE), t.get(longFF));
            assertArrayEquals(ffThenLong, t.get(ffThenLong));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    private static void assertOrder(List<byte[]> expected, TableCursor c, boolean reverse) {
        List<byte[]> want = reverse ? expected.reversed() : expected;
        for (byte[] k : want) {
            assertTrue(c.next(), "the cursor ends before a key of " + k.length + " bytes");
            assertArrayEquals(k, c.key());
        }
        assertFalse(c.next(), "the cursor holds more keys");
    }

    /** A value a byte over the maximum is refused before any of it is read: it is a sparse file, mapped, never touched. */
    @Test
    void aValueOverTheMaximumIsRefusedBeforeItIsRead(@TempDir Path dir) throws IOException {
        try (FileChannel ch = FileChannel.open(dir.resolve("big"), StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                     StandardOpenOption.WRITE);
             Arena arena = Arena.ofConfined();
             Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            ch.write(ByteBuffer.wrap(new byte[1]), Table.MAX_VALUE);
            MemorySegment big = ch.map(FileChannel.MapMode.READ_ONLY, 0, Table.MAX_VALUE + 1L, arena);
            t.put(K, TableTest.b("v"));
            Map<String, List<String>> before = contents(v);
            InvalidArgumentException e = refused(InvalidArgumentException.class, () -> t.put(MemorySegment.ofArray(K), big), v, before);
            assertTrue(e.getMessage().contains("a value of " + (Table.MAX_VALUE + 1L) + " bytes; values are at most " + Table.MAX_VALUE),
                    e.getMessage());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void emptyValuesAreValuesNotAbsence() {
        MemoryDevice dev = VolumeFixtures.formatted();
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(TableTest.b("a"), new byte[0]);
            assertTrue(t.putIfAbsent(TableTest.b("b"), new byte[0]));
            assertFalse(t.putIfAbsent(TableTest.b("b"), TableTest.b("not empty")), "an empty value is present");
            try (WriteTransaction tx = v.begin()) {
                tx.put(t, TableTest.b("c"), new byte[0]);
                assertArrayEquals(new byte[0], tx.get(t, TableTest.b("c")));
                assertFalse(tx.putIfAbsent(t, TableTest.b("a"), TableTest.b("x")));
                assertTrue(tx.delete(t, TableTest.b("b")), "the transaction sees the empty value as there");
                tx.commit();
            }
            assertArrayEquals(new byte[0], t.get(TableTest.b("a")));
            assertTrue(t.containsKey(TableTest.b("c")));
            assertEquals(0, t.get(MemorySegment.ofArray(TableTest.b("c")), MemorySegment.ofArray(new byte[8])));
            assertEquals(-1, t.get(MemorySegment.ofArray(TableTest.b("b")), MemorySegment.ofArray(new byte[8])));
            TableCursor c = t.cursor();
            assertTrue(c.next());
            assertEquals(0, c.value().length);
            assertEquals(0, c.valueSegment().byteSize());
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            assertEquals(2, t.count());
            assertArrayEquals(new byte[0], t.get(TableTest.b("c")));
        }
    }

    @Test
    void badArgumentsToATransactionRecordNothing() {
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(K, TableTest.b("v"));
            Map<String, List<String>> before = contents(v);
            refused(InvalidArgumentException.class, () -> v.begin(null), v, before);
            refused(InvalidArgumentException.class, () -> t.withDurability(null), v, before);
            try (WriteTransaction tx = v.begin()) {
                refused(InvalidArgumentException.class, () -> tx.put(null, K, K), v, before);
                refused(InvalidArgumentException.class, () -> tx.put(t, null, K), v, before);
                refused(InvalidArgumentException.class, () -> tx.put(t, K, null), v, before);
                refused(InvalidArgumentException.class, () -> tx.put(t, new byte[0], K), v, before);
                refused(InvalidArgumentException.class, () -> tx.put(t, new byte[Table.MAX_KEY + 1], K), v, before);
                refused(InvalidArgumentException.class, () -> tx.delete(t, new byte[0]), v, before);
                refused(InvalidArgumentException.class, () -> tx.deleteRange(t, new byte[0], null), v, before);
                refused(InvalidArgumentException.class, () -> tx.get(t, null), v, before);
                assertEquals(0, tx.size());
                tx.commit();
            }
            assertEquals(before, contents(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void aCommitOverADroppedTableFailsAndChangesNoTable() {
        MemoryDevice dev = VolumeFixtures.formatted();
        Map<String, List<String>> before;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Table a = v.tables().create("a"), b = v.tables().create("b");
            assertTrue(a.inode.ino < b.inode.ino, "a's changes are applied first, then undone");
            a.put(K, TableTest.b("old"));
            b.put(K, TableTest.b("b"));
            WriteTransaction tx = v.begin();
            tx.put(a, K, TableTest.b("new"));
            tx.put(a, TableTest.b("added"), TableTest.b("x"));
            tx.put(b, K, TableTest.b("new"));
            v.tables().drop("b");
            before = contents(v);
            TableException e = refused(TableException.class, tx::commit, v, before);
            assertEquals(TableException.Kind.TABLE_CLOSED, e.kind());
            assertEquals(TableException.Kind.TRANSACTION_DONE, assertThrows(TableException.class, tx::commit).kind());
            assertArrayEquals(TableTest.b("b"), b.get(K), "the dropped table's handle still reads it");
            b.close();
            a.close();
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            assertEquals(before, contents(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }
}
