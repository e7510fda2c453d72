package dev.ferrite.btree.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.function.BiConsumer;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.internal.OnDisk;
import dev.ferrite.io.testkit.RecordingDevice.Event;
import dev.ferrite.io.testkit.RecordingDevice;
import org.junit.jupiter.api.Test;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Damaged blocks under a tree at rest: a leaf and an interior node of a three-level tree are damaged
 * on the device (bytes flipped, zeroed, replaced by another block or by another tree's node), then the
 * store is reopened. Every read that reaches a damaged block fails with a {@link CorruptionException}
 * naming it, a write that needs one fails the same way without harming the journal, everything else
 * reads and writes as before, and nothing is ever written to the damaged blocks.
 */
class BTreeCorruptionTest {
    static final int BS = 4096;
    static final int LOG_BLOCKS = 256;
    static final long CACHE_BYTES = 1L << 20;
    static final int KEYS = 1500;

    /** The tree at rest: its contents, and for each node block its level and the keys below it. */
    record Layout(TreeMap<byte[], byte[]> model, Map<Long, Integer> levels, Map<Long, List<byte[]>> keysUnder) {
        /** A node of the level, the {@code n}-th in key order (negative: from the end). */
        long node(int level, int n) {
            List<Long> at = levels.entrySet().stream().filter(e -> e.getValue() == level).map(Map.Entry::getKey).toList();
            return at.get(n < 0 ? at.size() + n : n);
        }

        boolean under(long node, byte[] key) {
            return keysUnder.get(node).stream().anyMatch(k -> Keys.compare(k, key) == 0);
        }
    }

    @Test
    void flippedBytesInALeafAndAnInteriorNode() {
        damageAndCheck((b, image) -> {
            int at = BS / 2 + (int) (b % 1000);
            image.set(JAVA_BYTE, at, (byte) ~image.get(JAVA_BYTE, at));
        });
    }

    @Test
    void zeroedBlocks() {
        damageAndCheck((b, image) -> image.fill((byte) 0));
    }

    /** Misdirected writes: each block holds a sound node, but of another block (leaf) or another tree (interior). */
    @Test
    void blocksOfAnotherPlaceOrAnotherTree() {
        damageAndCheck((b, image) -> {
            if (BTreeNodeFormat.isLeaf(image)) {
                image.set(OnDisk.U64, BlockHeaderFormat.BLOCK_OFF, b + 1); // its neighbour on the device
            } else {
                image.set(OnDisk.U64, BlockHeaderFormat.OWNER_OFF, Store.TREE_ID + 1);
            }
            BlockHeaderFormat.stamp(image, BlockHeaderFormat.lsn(image)); // a valid checksum all the same
        });
    }

    // ------------------------------------------------------------------ the scenario

    /**
     * Builds the tree, damages the second interior node of level one and a leaf under the last one with
     * {@code damage} (given the block number and its image), reopens and checks.
     */
    private void damageAndCheck(BiConsumer<Long, MemorySegment> damage) {
        try (MemoryDevice dev = MemoryDevice.create(1 + LOG_BLOCKS + 1 + 2048, BS)) {
            Layout layout = build(dev);
            long interior = layout.node(1, 1);
            long leaf = layout.node(0, -3);
            assertFalse(layout.under(interior, layout.keysUnder().get(leaf).getFirst()));
            byte[] before;
            try (Arena arena = Arena.ofConfined()) {
                for (long b : new long[] {interior, leaf}) {
                    MemorySegment image = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                    dev.read(b, image);
                    damage.accept(b, image);
                    dev.write(b, image);
                }
                before = blocks(dev, arena, interior, leaf);
            }
            RecordingDevice rec = RecordingDevice.wrap(dev);
            try (Store s = Store.open(rec, LOG_BLOCKS, CACHE_BYTES)) {
                checkReads(s, layout, interior, leaf);
                checkWrites(s, layout, interior, leaf);
                assertNull(s.cache.lookup(leaf), "the damaged leaf stays out of the cache");
                assertNull(s.cache.lookup(interior), "the damaged interior node stays out of the cache");
            }
            for (Event e : rec.events()) {
                if (e.kind() == Event.Kind.WRITE) {
                    for (long b : new long[] {interior, leaf}) {
                        assertFalse(e.block() <= b && b < e.block() + e.blockCount(), e + " writes damaged block " + b);
                    }
                }
            }
            try (Arena arena = Arena.ofConfined()) {
                assertArrayEquals(before, blocks(dev, arena, interior, leaf), "the damaged blocks changed");
            }
        }
    }

    /** Gets of every key, and scans: those reaching a damaged block fail naming it; all others read as before. */
    private static void checkReads(Store s, Layout layout, long interior, long leaf) {
        for (Map.Entry<byte[], byte[]> e : layout.model().entrySet()) {
            byte[] k = e.getKey();
            long damaged = layout.under(interior, k) ? interior : layout.under(leaf, k) ? leaf : -1;
            if (damaged < 0) {
                assertArrayEquals(e.getValue(), s.tree.get(k), () -> "key " + Contents.hex(k));
            } else {
                assertCorrupt(damaged, () -> s.tree.get(k));
            }
        }
        // a forward scan goes along the leaves, past the interior node, up to the damaged leaf
        Cursor c = s.tree.cursor(null, false);
        for (byte[] k : layout.model().headMap(layout.keysUnder().get(leaf).getFirst(), false).keySet()) {
            assertTrue(c.next());
            assertArrayEquals(k, c.key());
        }
        assertCorrupt(leaf, c::next);
        // so does a reverse scan from the end
        Cursor r = s.tree.cursor(null, true);
        for (byte[] k : layout.model().descendingMap().headMap(layout.keysUnder().get(leaf).getLast(), false).keySet()) {
            assertTrue(r.next());
            assertArrayEquals(k, r.key());
        }
        assertCorrupt(leaf, r::next);
        // a scan from a key under the interior node descends through it
        byte[] from = layout.keysUnder().get(interior).get(3);
        assertCorrupt(interior, () -> s.tree.cursor(from, true).next());
    }

    /**
     * Writes away from the damage work; a put into the damaged leaf, or through the damaged interior
     * node, fails without changing anything, and the journal stays up.
     */
    private static void checkWrites(Store s, Layout layout, long interior, long leaf) {
        TreeMap<byte[], byte[]> model = layout.model();
        List<byte[]> elsewhere = new ArrayList<>();
        for (byte[] k : model.keySet()) {
            if (!layout.under(interior, k) && !layout.under(leaf, k)) {
                elsewhere.add(k);
            }
        }
        for (int i = 0; i < elsewhere.size(); i += 7) {
            byte[] k = elsewhere.get(i);
            byte[] v = ("new " + i).getBytes();
            s.tree.put(k, v);
            assertArrayEquals(v, s.tree.get(k));
        }
        for (long damaged : new long[] {leaf, interior}) {
            byte[] k = layout.keysUnder().get(damaged).get(1);
            assertCorrupt(damaged, () -> s.tree.put(k, new byte[10]));
            assertCorrupt(damaged, () -> s.tree.delete(k));
        }
        // the leaf left of the damaged one, under the same parent: it cannot split (the new leaf's right
        // neighbour would be the damaged one), nor merge with its right sibling
        long left = layout.node(0, -4);
        List<byte[]> leftKeys = layout.keysUnder().get(left);
        assertTrue(layout.under(layout.node(1, -1), leftKeys.getFirst()), "the neighbours have different parents");
        byte[] last = leftKeys.getLast();
        List<byte[]> added = new ArrayList<>(); // the puts that fitted before the split came
        assertCorrupt(leaf, () -> {
            for (int i = 0; i < 20; i++) {
                byte[] k = Arrays.copyOf(last, last.length + 1);
                k[last.length] = (byte) i;
                s.tree.put(k, new byte[BTreeNodeFormat.MAX_VALUE]);
                added.add(k);
            }
        });
        added.addAll(leftKeys);
        assertCorrupt(leaf, () -> {
            for (byte[] k : added) {
                s.tree.delete(k);
            }
        });
        assertFalse(s.journal.isShutdown(), "a failed write shut the journal down");
        s.journal.forceAll();
    }

    private static void assertCorrupt(long block, org.junit.jupiter.api.function.Executable read) {
        CorruptionException e = assertThrows(CorruptionException.class, read);
        assertEquals(block, e.block(), e.getMessage());
        assertTrue(e.getMessage().contains("block " + block), e.getMessage());
    }

    private static byte[] blocks(MemoryDevice dev, Arena arena, long... blocks) {
        MemorySegment all = arena.allocate((long) BS * blocks.length, BlockDevice.BUFFER_ALIGNMENT);
        for (int i = 0; i < blocks.length; i++) {
            dev.read(blocks[i], all.asSlice((long) i * BS, BS));
        }
        return all.toArray(JAVA_BYTE);
    }

    // ------------------------------------------------------------------ the tree

    /** A closed store with a three-level tree of {@link #KEYS} keys, and where its nodes are. */
    private static Layout build(MemoryDevice dev) {
        TreeMap<byte[], byte[]> model = Contents.empty();
        Random rnd = new Random(3);
        try (Store s = Store.format(dev, LOG_BLOCKS, CACHE_BYTES)) {
            for (int i = 0; i < KEYS; i++) {
                byte[] k = new byte[104];
                Arrays.fill(k, 0, 100, (byte) 'c');
                int n = rnd.nextInt();
                k[100] = (byte) (n >>> 24);
                k[101] = (byte) (n >>> 16);
                k[102] = (byte) (n >>> 8);
                k[103] = (byte) n;
                model.put(k, Contents.random(rnd, 50, 150));
                s.tree.put(k, model.get(k));
            }
            assertEquals(3, s.tree.height());
            LinkedHashMap<Long, Integer> levels = s.nodes();
            Map<Long, List<byte[]>> keysUnder = new LinkedHashMap<>();
            for (long b : levels.keySet()) {
                keysUnder.put(b, keysUnder(s.tree, b));
            }
            return new Layout(model, levels, keysUnder);
        }
    }

    private static List<byte[]> keysUnder(BTree tree, long block) {
        MemorySegment n = tree.node(block).data();
        List<byte[]> keys = new ArrayList<>();
        if (BTreeNodeFormat.isLeaf(n)) {
            for (int i = 0, c = BTreeNodeFormat.count(n); i < c; i++) {
                keys.add(BTreeNodeFormat.key(n, i).toArray(JAVA_BYTE));
            }
        } else {
            for (int i = -1, c = BTreeNodeFormat.count(n); i < c; i++) {
                keys.addAll(keysUnder(tree, BTreeNodeFormat.childAt(n, i)));
            }
        }
        return keys;
    }
}
