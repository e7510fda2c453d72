package dev.ferrite.dir;

import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferrite.btree.internal.BTreeNodeFormat;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.io.internal.OnDisk.U16;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The superblock's wide-cells feature: the format sets it, and then a table keeps a value in its tree
 * while the key and the value take {@link Table#MAX_INLINE_ENTRY} bytes or less (a 1 KiB value beside a
 * 16-byte key), and only longer ones out of line; a volume formatted without it (by code that refuses a
 * leaf value over 960 bytes as damage) keeps values of over {@link Table#MAX_INLINE} bytes out of line,
 * no leaf holding a longer value, and keeps the feature clear, so that such code can still read it.
 */
class WideCellsFeatureTest {
    /** Where a node keeps its count and a leaf its slot base, as BTreeNodeFormat lays them out. */
    private static final int COUNT = 34, BASE = 56, SLOTS = 72;
    private static final int KEYS = 300;

    @Test
    void aFormattedVolumeKeepsValuesThatShareACellWithTheirKeyInline() {
        try (MemoryDevice dev = VolumeFixtures.formatted()) {
            assertEquals(SuperblockFormat.INCOMPAT_WIDE_CELLS, wide(dev), "set by the format");
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                long free = TableExtentTest.spare(v);
                fill(t);
                byte[] k16 = key(0);
                assertEquals(TableValueFormat.INLINE, t.storedValue(k16)[0], "a 1 KiB value beside a 16-byte key");
                AtomicInteger besides = new AtomicInteger();
                v.tables().onApply = besides::incrementAndGet;
                t.put(k16, value(0, new Random(0)));
                v.tables().onApply = null;
                assertEquals(1, besides.get(), "the put applied beside the table's other single writes (not as a group holding the table)");
                byte[] longest = new byte[Table.MAX_INLINE_ENTRY - k16.length];
                t.put(k16, longest);
                assertEquals(TableValueFormat.INLINE, t.storedValue(k16)[0], "the longest value beside it");
                byte[] longKey = new byte[Table.MAX_KEY];
                Arrays.fill(longKey, (byte) 'L');
                t.put(longKey, new byte[Table.MAX_INLINE]);
                assertEquals(TableValueFormat.INLINE, t.storedValue(longKey)[0], "the longest value beside the longest key");
                t.put(longKey, new byte[Table.MAX_INLINE + 1]);
                assertEquals(TableValueFormat.EXTENT, t.storedValue(longKey)[0], "one byte more beside the longest key");
                t.put(k16, new byte[longest.length + 1]);
                assertEquals(TableValueFormat.EXTENT, t.storedValue(k16)[0], "one byte more than a cell takes");
                try (WriteTransaction tx = v.tables().begin(Durability.NONE)) { // a group decides the same
                    tx.put(t, key(1), new byte[longest.length]);
                    tx.put(t, key(2), new byte[longest.length + 1]);
                    tx.put(t, key(3), new byte[longest.length]);
                    tx.commit();
                }
                assertEquals(TableValueFormat.INLINE, t.storedValue(key(1))[0]);
                assertEquals(TableValueFormat.EXTENT, t.storedValue(key(2))[0]);
                assertEquals(TableValueFormat.INLINE, t.storedValue(key(3))[0]);
                t.put(k16, new byte[1024]); // back in the tree: the extent's blocks freed
                t.delete(longKey);
                for (int i = 1; i <= 3; i++) {
                    t.put(key(i), new byte[1024]);
                }
                assertTrue(free - TableExtentTest.spare(v) < KEYS / 2, "the values take blocks of their own: "
                        + (free - TableExtentTest.spare(v)) + " blocks for " + KEYS + " keys");
                assertEquals(0, t.stats().extentValues());
            }
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
                check(t);
                VolumeFixtures.assertChecked(v.namespace());
            }
            assertEquals(SuperblockFormat.INCOMPAT_WIDE_CELLS, wide(dev), "kept");
            assertTrue(longestLeafValue(dev) > BTreeNodeFormat.MAX_VALUE, "no leaf holds a value over 960 bytes");
        }
    }

    @Test
    void aVolumeFormattedWithoutItKeepsLongerValuesOutOfLine() {
        try (MemoryDevice dev = VolumeFixtures.formattedNarrow()) {
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                fill(t);
                assertEquals(TableValueFormat.EXTENT, t.storedValue(key(0))[0], "a 1 KiB value");
                assertEquals(KEYS, t.stats().extentValues());
                t.put(key(0), new byte[Table.MAX_INLINE]);
                assertEquals(TableValueFormat.INLINE, t.storedValue(key(0))[0], "the longest inline value");
                t.put(key(0), new byte[Table.MAX_INLINE + 1]);
                assertEquals(TableValueFormat.EXTENT, t.storedValue(key(0))[0], "one byte more");
                t.put(key(0), new byte[1024]);
            }
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
                check(t);
                VolumeFixtures.assertChecked(v.namespace());
            }
            assertEquals(0, wide(dev), "a mount sets no feature");
            assertTrue(longestLeafValue(dev) <= BTreeNodeFormat.MAX_VALUE, "a leaf holds a value of " + longestLeafValue(dev) + " bytes");
        }
    }

    /** A tree of a volume without the feature refuses a cell wider than it allows, as the code before it did. */
    @Test
    void aVolumeWithoutItRefusesAWideLeafAsDamage() {
        try (MemoryDevice dev = VolumeFixtures.formatted()) {
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                fill(t);
            }
            VolumeFixtures.setIncompat(dev, VolumeFixtures.incompat(dev) & ~SuperblockFormat.INCOMPAT_WIDE_CELLS);
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
                dev.ferrite.io.CorruptionException e = assertThrows(dev.ferrite.io.CorruptionException.class, () -> t.get(key(KEYS / 2)));
                assertTrue(e.getMessage().contains("values up to " + BTreeNodeFormat.MAX_VALUE), e.getMessage());
            }
        }
    }

    /** {@link #KEYS} 16-byte keys with 1 KiB values, in random order: leaves split and hold two to three values each. */
    private static void fill(Table t) {
        Random rnd = new Random(1984);
        for (int i = 0; i < KEYS; i++) {
            int k = (int) ((i * 7919L) % KEYS);
            t.put(key(k), value(k, rnd));
        }
        for (int i = 0; i < KEYS; i += 5) {
            t.delete(key(i));
        }
        for (int i = 0; i < KEYS; i += 5) {
            t.put(key(i), value(i, rnd));
        }
    }

    /** Reads every value back through get and a cursor. */
    private static void check(Table t) {
        int n = 0;
        try (TableCursor c = t.cursor()) {
            while (c.next()) {
                byte[] k = c.key();
                byte[] v = t.get(k);
                assertArrayEquals(v, c.value(), new String(k));
                assertEquals(1024, v.length, new String(k));
                n++;
            }
        }
        assertEquals(KEYS, n);
    }

    private static byte[] key(int i) {
        return String.format("key-%012d", i).getBytes();
    }

    /** 1 KiB: the key's number, then random bytes. */
    private static byte[] value(int k, Random rnd) {
        byte[] v = new byte[1024];
        rnd.nextBytes(v);
        v[0] = (byte) k;
        return v;
    }

    /** The longest value any B-tree leaf on the device holds. */
    private static int longestLeafValue(MemoryDevice dev) {
        int[] longest = {0};
        VolumeFixtures.forEachLeaf(dev, b -> {
            int base = Short.toUnsignedInt(b.get(U16, BASE));
            base = base == 0 ? SLOTS : base;
            for (int i = 0, count = Short.toUnsignedInt(b.get(U16, COUNT)); i < count; i++) {
                int cell = Short.toUnsignedInt(b.get(U16, base + 8L * i));
                longest[0] = Math.max(longest[0], Short.toUnsignedInt(b.get(U16, cell + 2L)));
            }
        });
        return longest[0];
    }

    private static long wide(BlockDevice dev) {
        return VolumeFixtures.incompat(dev) & SuperblockFormat.INCOMPAT_WIDE_CELLS;
    }
}
