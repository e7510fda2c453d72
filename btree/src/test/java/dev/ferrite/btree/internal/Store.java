package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.TreeMap;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.journal.internal.Journal;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.internal.LogGeometry;

/**
 * A device laid out for tree tests: block 0 reserved, the log, the allocator's bitmaps, then the blocks
 * it hands out. {@link #format} writes a fresh store with one tree; {@link #open} recovers and reopens.
 */
final class Store implements AutoCloseable {
    static final long LOG_START = 1;
    static final long TREE_ID = 42;

    final BlockDevice device;
    final LogGeometry log;
    final long bitmapStart;
    final long dataStart;
    final long dataBlocks;
    final Journal journal;
    final BufferCache cache;
    final BitmapAllocator allocator;
    final BTree tree;

    private Store(BlockDevice device, int logBlocks, long cacheBytes, JournalOptions options, boolean format) {
        this.device = device;
        this.log = new LogGeometry(LOG_START, logBlocks);
        this.bitmapStart = LOG_START + logBlocks;
        long rest = device.blockCount() - bitmapStart;
        int bitmaps = BitmapAllocator.bitmapBlocks(device.blockSize(), rest);
        this.dataStart = bitmapStart + bitmaps;
        this.dataBlocks = device.blockCount() - dataStart;
        if (format) {
            Journal.format(device, log);
        }
        try (BufferReplayer replayer = new BufferReplayer(device)) {
            this.journal = Journal.open(device, log, options, replayer);
        }
        this.cache = new BufferCache(device, journal, cacheBytes);
        if (format) {
            try (Txn txn = Txn.begin(cache, bitmaps + BTree.CREATE_ITEMS + 1)) {
                allocator = BitmapAllocator.format(txn, bitmapStart, dataStart, dataBlocks, 0);
                tree = BTree.create(txn, allocator, TREE_ID);
                txn.commit();
            }
            journal.forceAll();
        } else {
            allocator = BitmapAllocator.open(cache, bitmapStart, dataStart, dataBlocks, 0);
            tree = BTree.open(cache, allocator, dataStart, TREE_ID);
        }
    }

    static Store format(BlockDevice device, int logBlocks, long cacheBytes) {
        return new Store(device, logBlocks, cacheBytes, JournalOptions.defaults(), true);
    }

    static Store open(BlockDevice device, int logBlocks, long cacheBytes) {
        return new Store(device, logBlocks, cacheBytes, JournalOptions.defaults(), false);
    }

    static Store open(BlockDevice device, int logBlocks, long cacheBytes, JournalOptions options) {
        return new Store(device, logBlocks, cacheBytes, options, false);
    }

    /** Every key and value, by a forward cursor (call while nothing changes the tree). */
    TreeMap<byte[], byte[]> contents() {
        TreeMap<byte[], byte[]> m = Contents.empty();
        Cursor c = tree.cursor(null, false);
        while (c.next()) {
            m.put(c.key(), c.value());
        }
        return m;
    }

    /** Every node block of the tree with its level, parents before children, in key order (call while quiet). */
    LinkedHashMap<Long, Integer> nodes() {
        LinkedHashMap<Long, Integer> nodes = new LinkedHashMap<>();
        collect(BTreeHeaderFormat.root(tree.header().data()), nodes);
        return nodes;
    }

    private void collect(long block, LinkedHashMap<Long, Integer> nodes) {
        MemorySegment n = tree.node(block).data();
        nodes.put(block, BTreeNodeFormat.level(n));
        if (!BTreeNodeFormat.isLeaf(n)) {
            for (int i = -1, c = BTreeNodeFormat.count(n); i < c; i++) {
                collect(BTreeNodeFormat.childAt(n, i), nodes);
            }
        }
    }

    /** Closes the journal (writing everything home) and the cache, not the device. */
    @Override
    public void close() {
        journal.close();
        cache.close();
    }
}
