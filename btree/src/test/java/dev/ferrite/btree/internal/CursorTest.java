package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;

import dev.ferrite.io.testkit.TestSeed;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Cursors whose reads keep failing validation, though nothing changes: another thread locks leaves and
 * lets them go unchanged (as the AIL does to write them home). Each failed read makes the cursor find
 * its place again by the last key it returned, so that key must be exactly what it returned, whatever
 * the failed read copied. Keys shrink along each leaf, so a copy over a longer key would leave a wrong
 * tail behind and the cursor would skip a key.
 */
@ExtendWith(TestSeed.class)
class CursorTest {
    private static final long SEED = TestSeed.get(0x5EED_C0C5L);

    @Test
    void resumesFromTheKeyItReturned() throws Exception {
        try (ProbeDevice device = new ProbeDevice(4096, 4096); Store s = Store.format(device, 512, 512L * 4096)) {
            BTree tree = s.tree;
            List<byte[]> keys = new ArrayList<>();
            for (int i = 0; i < 3000; i++) {
                byte[] k = Arrays.copyOf(Keys.ofLong(i), 8 + 10 - i % 10);
                Arrays.fill(k, 8, k.length, (byte) 'x');
                keys.add(k);
                tree.put(k, new byte[] {(byte) i});
            }
            AtomicBoolean stop = new AtomicBoolean();
            Thread disturber = Thread.ofPlatform().name("leaf-locker").start(() -> {
                Random rnd = new Random(SEED);
                while (!stop.get()) {
                    BTree.Seen leaf = Cursor.leafFor(tree, MemorySegment.ofArray(keys.get(rnd.nextInt(keys.size()))), false);
                    if (leaf.buffer().tryUpgrade(leaf.version())) {
                        for (int spin = 0; spin < 50; spin++) {
                            Thread.onSpinWait();
                        }
                        leaf.buffer().unlockUnchanged();
                    }
                }
            });
            try {
                long deadline = System.nanoTime() + 1_000_000_000L;
                for (int round = 0; round < 200 && System.nanoTime() < deadline; round++) {
                    boolean reverse = round % 2 == 1;
                    Cursor c = tree.cursor(null, reverse);
                    for (int i = 0; i < keys.size(); i++) {
                        byte[] expected = keys.get(reverse ? keys.size() - 1 - i : i);
                        assertTrue(c.next(), "round " + round + ": the scan ended after " + i + " keys");
                        assertEquals(HexFormat.of().formatHex(expected), HexFormat.of().formatHex(c.key()),
                                "round " + round + ", key " + i + " (seed " + SEED + ")");
                    }
                    assertFalse(c.next());
                }
            } finally {
                stop.set(true);
                disturber.join();
            }
        }
    }

    /**
     * A move to a sibling takes the buffer the last move from that leaf went to ({@link Buffer#sibling})
     * only while it is the block the link names and not obsolete: after splits put new leaves between
     * leaves an earlier scan moved across, and merges freed some (their blocks allocated again), every
     * scan, forward and in reverse, returns the tree's keys and values exactly. With the block left
     * unchecked a reverse scan took the leaf a forward one had moved to: "CorruptionException: B-tree node
     * at block 1088 is corrupt: its keys do not lie below those of the leaf linking to it".
     */
    @Test
    void movesFollowTheLinksNotTheLeavesAnEarlierScanMovedTo() {
        try (ProbeDevice device = new ProbeDevice(8192, 4096); Store s = Store.format(device, 1024, 4096L * 4096)) {
            BTree tree = s.tree;
            NavigableMap<byte[], byte[]> model = new TreeMap<>(Keys::compare);
            Random rnd = new Random(SEED);
            for (int i = 0; i < 4000; i += 2) {
                put(tree, model, i, 0);
            }
            for (int round = 0; round < 12; round++) {
                String where = "round " + round + " (seed " + SEED + ")";
                scan(tree, model, false, where);
                scan(tree, model, true, where);
                int from = rnd.nextInt(3600);
                if (round % 3 == 2) { // merges: their leaves' blocks are freed
                    for (int i = from; i < from + 400; i++) {
                        if (model.remove(Keys.ofLong(i)) != null) {
                            tree.delete(Keys.ofLong(i));
                        }
                    }
                } else { // splits: new leaves between ones the scans moved across
                    for (int i = from; i < from + 400; i++) {
                        put(tree, model, i, round);
                    }
                }
            }
            scan(tree, model, false, "last");
            scan(tree, model, true, "last");
        }
    }

    private static void put(BTree tree, Map<byte[], byte[]> model, int i, int round) {
        byte[] v = new byte[100];
        Arrays.fill(v, (byte) (i + round));
        tree.put(Keys.ofLong(i), v);
        model.put(Keys.ofLong(i), v);
    }

    private static void scan(BTree tree, NavigableMap<byte[], byte[]> model, boolean reverse, String where) {
        try (Cursor c = tree.cursor(null, reverse)) {
            for (Map.Entry<byte[], byte[]> e : (reverse ? model.descendingMap() : model).entrySet()) {
                assertTrue(c.next(), where + ": the scan (reverse " + reverse + ") ended before key " + HexFormat.of().formatHex(e.getKey()));
                assertEquals(HexFormat.of().formatHex(e.getKey()), HexFormat.of().formatHex(c.key()), where + ", reverse " + reverse);
                assertArrayEquals(e.getValue(), c.value(), where);
            }
            assertFalse(c.next(), where + ": more keys");
        }
    }
}
