package dev.ferrite.btree.internal;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Destroying a tree: every block goes back to the allocator, and the reads a cold tree needs never
 * stall the writers and readers of another tree sharing the allocator.
 */
class BTreeDestroyTest {
    private static final int LOG_BLOCKS = 1024;
    private static final long CACHE_BYTES = 2L << 20;
    private static final long OTHER_ID = 43;

    private static byte[] key(int i) {
        return ("key-%06d".formatted(i) + "-".repeat(40)).getBytes(StandardCharsets.US_ASCII);
    }

    /**
     * A destroy reading its tree's leaves from a slow device (one read held at a gate) while another
     * tree of the same allocator splits leaves and is read: the other tree's writer and reader finish
     * while the read is still held. A destroy that freed blocks as it went held the allocator's bitmap
     * across its next read, so the writer waited for the bitmap holding its leaf, and the reader for
     * the leaf.
     */
    @Test
    void aDestroyWaitingForTheDeviceStallsNoWriterOrReaderOfAnotherTree() throws Exception {
        ProbeDevice device = new ProbeDevice(16384, 4096);
        long otherHeader;
        long leftmostLeaf;
        int treeBlocks;
        try (Store s = Store.format(device, LOG_BLOCKS, CACHE_BYTES)) {
            for (int i = 0; i < 1500; i++) {
                s.tree.put(key(i), new byte[20]);
            }
            try (Txn txn = Txn.begin(s.cache, BTree.CREATE_ITEMS + 2)) {
                BTree other = BTree.create(txn, s.allocator, OTHER_ID);
                otherHeader = other.headerBlock();
                txn.commit();
            }
            LinkedHashMap<Long, Integer> nodes = s.nodes();
            assertTrue(s.tree.height() >= 2, "the tree must have interior nodes");
            leftmostLeaf = nodes.entrySet().stream().filter(e -> e.getValue() == 0).findFirst().orElseThrow().getKey();
            treeBlocks = nodes.size() + 1;
        }
        // reopened: nothing of the tree is cached, so the destroy reads every node
        try (Store s = Store.open(device, LOG_BLOCKS, CACHE_BYTES)) {
            BTree other = BTree.open(s.cache, s.allocator, otherHeader, OTHER_ID);
            other.put(key(0), new byte[] {1});
            device.closeGate(leftmostLeaf);
            CompletableFuture<Integer> destroyed = CompletableFuture.supplyAsync(() -> {
                try (Txn txn = Txn.begin(s.cache, treeBlocks + 8)) {
                    int n = s.tree.destroy(txn);
                    txn.commit();
                    return n;
                }
            }, r -> Thread.ofPlatform().name("destroyer").start(r));
            try {
                device.awaitGate();
            } catch (AssertionError e) {
                destroyed.join(); // says why it never got there
                throw e;
            }
            CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
                for (int i = 1; i < 400; i++) { // several leaf splits, each allocating
                    other.put(key(i), new byte[20]);
                }
            }, r -> Thread.ofPlatform().name("writer").start(r));
            CompletableFuture<Void> reader = CompletableFuture.runAsync(() -> {
                while (!writer.isDone()) {
                    assertArrayEquals(new byte[] {1}, other.get(key(0)));
                }
            }, r -> Thread.ofPlatform().name("reader").start(r));
            try {
                writer.get(20, TimeUnit.SECONDS);
                reader.get(20, TimeUnit.SECONDS);
                assertFalse(destroyed.isDone(), "the destroy's read is still held");
            } finally {
                device.openGate();
            }
            int freed = destroyed.get(30, TimeUnit.SECONDS);
            TreeCheck c = other.check();
            assertTrue(c.ok(), c.toString());
            assertEquals(400, c.keys());
            assertTrue(other.height() >= 2, "the other tree split");
            assertEquals(treeBlocks, freed, "blocks freed");
            long[] otherBlocks = new long[1];
            TreeWalk.blocks(other, b -> otherBlocks[0]++);
            assertEquals(s.dataBlocks - otherBlocks[0], s.allocator.freeBlocks(), "blocks free once only the other tree is left");
        }
    }
}
