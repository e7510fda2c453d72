package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What node changes mark dirty for the log (the journal logs 64-byte chunks of a 4 KiB block): a node
 * rewritten in place or built in a new block (split, compaction, merge, borrow, a new tree) is logged
 * without the free gap between its slots and its cells, a delete logs the slots from the removed one up,
 * and an insert its header fields, the slots from its position up and its cell. Checked on the
 * transaction's dirty map before commit, through random puts and deletes that split, compact and merge.
 * {@code -Dferrite.seed=N} picks the operations.
 */
@ExtendWith(TestSeed.class)
class NodeLogRangesTest {
    private static final long SEED = TestSeed.get(21);
    private static final int BS = 4096;
    private static final int CHUNK = BS / 64;

    /** Chunks lying wholly inside the node's free gap. */
    private static long gapChunks(MemorySegment n) {
        int first = (BTreeNodeFormat.slotsEnd(n) + CHUNK - 1) / CHUNK;
        int end = BTreeNodeFormat.cellStart(n) / CHUNK;
        long map = 0;
        for (int c = first; c < end; c++) {
            map |= 1L << c;
        }
        return map;
    }

    private static void assertGapClean(Buffer b, String where) {
        long logged = b.txDirty & gapChunks(b.data());
        assertEquals(0, logged, where + ": block " + b.block() + " logs chunks of its free gap [" + BTreeNodeFormat.slotsEnd(b.data())
                + ", " + BTreeNodeFormat.cellStart(b.data()) + "): 0x" + Long.toHexString(logged) + " (seed " + SEED + ")");
    }

    @Test
    void restructuringNodesLogsNoFreeGap() {
        Random rnd = new Random(SEED);
        try (MemoryDevice dev = MemoryDevice.create(16384, BS); Store s = Store.format(dev, 2048, 16L << 20)) {
            TreeMap<byte[], byte[]> model = Contents.empty();
            List<byte[]> keys = new ArrayList<>();
            int splits = 0, merges = 0, compactions = 0;
            for (int op = 0; op < 6000; op++) {
                boolean grow = op < 3000 ? rnd.nextInt(4) != 0 : rnd.nextInt(3) == 0;
                Map<Long, Integer> before = s.nodes();
                long garbage = 0;
                for (long block : before.keySet()) {
                    garbage += BTreeNodeFormat.garbage(s.tree.node(block).data());
                }
                try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                    String what;
                    if (grow || keys.isEmpty()) {
                        byte[] k = Keys.ofLong(rnd.nextLong()), v = Contents.random(rnd, 20, 200);
                        s.tree.put(txn, MemorySegment.ofArray(k), MemorySegment.ofArray(v));
                        model.put(k, v);
                        keys.add(k);
                        what = "put #" + op;
                    } else {
                        byte[] k = keys.remove(rnd.nextInt(keys.size()));
                        assertTrue(s.tree.delete(txn, MemorySegment.ofArray(k)));
                        model.remove(k);
                        what = "delete #" + op;
                    }
                    Map<Long, Integer> after = s.nodes();
                    long garbageAfter = 0;
                    for (long block : after.keySet()) {
                        Buffer b = s.tree.node(block);
                        garbageAfter += BTreeNodeFormat.garbage(b.data());
                        assertGapClean(b, what);
                    }
                    splits += after.size() > before.size() ? 1 : 0;
                    merges += after.size() < before.size() ? 1 : 0;
                    compactions += grow && garbageAfter < garbage && after.size() == before.size() ? 1 : 0;
                    txn.commit();
                }
            }
            assertTrue(splits > 20 && merges > 20 && compactions > 5,
                    splits + " splits, " + merges + " merges, " + compactions + " compactions (seed " + SEED + ")");
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), c.toString());
            Contents.assertEqual(model, s.contents(), "seed " + SEED);
        }
    }

    @Test
    void insertAndDeleteLogTheirSlotsAndCellOnly() {
        try (MemoryDevice dev = MemoryDevice.create(16384, BS); Store s = Store.format(dev, 2048, 16L << 20)) {
            for (int i = 0; i < 20; i++) {
                s.tree.put(Keys.ofLong(i * 10L), new byte[100]);
            }
            Buffer leaf = s.tree.node(BTreeHeaderFormat.root(s.tree.header().data()));
            try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                s.tree.put(txn, MemorySegment.ofArray(Keys.ofLong(155)), MemorySegment.ofArray(new byte[100])); // slot 16
                MemorySegment n = leaf.data();
                int cell = BTreeNodeFormat.slot(n, 16);
                long expected = 1L | chunks(BTreeNodeFormat.SLOTS + 16 * BTreeNodeFormat.SLOT, BTreeNodeFormat.slotsEnd(n))
                        | chunks(cell, cell + BTreeNodeFormat.cellSize(n, 16) - BTreeNodeFormat.SLOT);
                assertEquals(Long.toHexString(expected), Long.toHexString(leaf.txDirty), "insert at slot 16");
                txn.commit();
            }
            try (Txn txn = Txn.begin(s.cache, s.tree.reservation())) {
                assertTrue(s.tree.delete(txn, MemorySegment.ofArray(Keys.ofLong(180))));   // slot 19 of 21
                long expected = 1L | chunks(BTreeNodeFormat.SLOTS + 19 * BTreeNodeFormat.SLOT, BTreeNodeFormat.slotsEnd(leaf.data()));
                assertEquals(Long.toHexString(expected), Long.toHexString(leaf.txDirty), "delete of slot 19");
                txn.commit();
            }
        }
    }

    @Test
    void aNewTreeLogsItsSetBytesOnly() {
        try (MemoryDevice dev = MemoryDevice.create(16384, BS); Store s = Store.format(dev, 2048, 16L << 20);
             Txn txn = Txn.begin(s.cache, BTree.CREATE_ITEMS)) {
            BTree t = BTree.create(txn, s.allocator, Store.TREE_ID + 1);
            Buffer header = t.header();
            Buffer root = t.node(BTreeHeaderFormat.root(header.data()));
            assertEquals("1", Long.toHexString(header.txDirty), "the new tree's header block");
            assertEquals("3", Long.toHexString(root.txDirty), "the new tree's root: its header and empty slot array");
            txn.commit();
        }
    }

    /** Chunks covering {@code [from, to)}. */
    private static long chunks(int from, int to) {
        long map = 0;
        for (int c = from / CHUNK; c <= (to - 1) / CHUNK; c++) {
            map |= 1L << c;
        }
        return map;
    }
}
