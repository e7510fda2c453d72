package dev.ferrite.perf.bench;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BitmapAllocator;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.BufferReplayer;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.journal.internal.Journal;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.internal.LogGeometry;

/**
 * A device laid out for one B-tree, as benchmarks use it: block 0 reserved, the log, the allocation
 * bitmaps, then the blocks the allocator hands out, up to the end of the device. {@link #format} writes
 * it fresh and opens the journal, the cache and the tree on it.
 */
public final class BTreeStore implements AutoCloseable {
    public static final long TREE_ID = 1;
    private static final long LOG_START = 1;

    public final BlockDevice device;
    public final Journal journal;
    public final BufferCache cache;
    public final BitmapAllocator allocator;
    public final BTree tree;

    private BTreeStore(BlockDevice device, Journal journal, BufferCache cache, BitmapAllocator allocator, BTree tree) {
        this.device = device;
        this.journal = journal;
        this.cache = cache;
        this.allocator = allocator;
        this.tree = tree;
    }

    /** Formats {@code device} with a log of {@code logBlocks} and an empty tree; the device stays the caller's. */
    public static BTreeStore format(BlockDevice device, int logBlocks, long cacheBytes) {
        LogGeometry log = new LogGeometry(LOG_START, logBlocks);
        long bitmapStart = LOG_START + logBlocks;
        long rest = device.blockCount() - bitmapStart;
        int bitmaps = BitmapAllocator.bitmapBlocks(device.blockSize(), rest);
        long dataStart = bitmapStart + bitmaps;
        Journal.format(device, log);
        Journal journal;
        try (BufferReplayer fresh = new BufferReplayer(device)) {
            journal = Journal.open(device, log, JournalOptions.defaults(), fresh);
        }
        BufferCache cache = null;
        try {
            cache = new BufferCache(device, journal, cacheBytes);
            BitmapAllocator allocator;
            BTree tree;
            try (Txn txn = Txn.begin(cache, bitmaps + BTree.CREATE_ITEMS + 1)) {
                allocator = BitmapAllocator.format(txn, bitmapStart, dataStart, device.blockCount() - dataStart, 0);
                tree = BTree.create(txn, allocator, TREE_ID);
                txn.commit();
            }
            journal.forceAll();
            return new BTreeStore(device, journal, cache, allocator, tree);
        } catch (RuntimeException e) {
            journal.close();
            if (cache != null) {
                cache.close();
            }
            throw e;
        }
    }

    /** Blocks a device needs for a log of {@code logBlocks} and {@code dataBlocks} for the allocator to hand out. */
    public static long deviceBlocks(int blockSize, int logBlocks, long dataBlocks) {
        return LOG_START + logBlocks + BitmapAllocator.bitmapBlocks(blockSize, dataBlocks) + dataBlocks;
    }

    /** Closes the journal (writing everything home) and the cache, not the device. */
    @Override
    public void close() {
        try {
            journal.close();
        } finally {
            cache.close();
        }
    }
}
