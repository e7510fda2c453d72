package dev.ferrite.dir;

import dev.ferrite.btree.BlockAllocator;
import dev.ferrite.btree.Buffer;
import dev.ferrite.btree.BufferCache;
import dev.ferrite.btree.Txn;

/**
 * A directory tree's blocks come from, and go back to, the reserve in its inode record
 * ({@link DirEntryFormat}): the transaction changing the tree already holds that record's block, so a
 * split or merge takes no allocation group lock and reads nothing. The namespace keeps the reserve
 * between its low and high marks in transactions of their own before each change.
 */
final class DirAllocator implements BlockAllocator {
    private final BufferCache cache;
    private final long block;
    private final int ag;
    private final int area;

    DirAllocator(BufferCache cache, long inodeBlock, int ag, int recordOffset) {
        this.cache = cache;
        this.block = inodeBlock;
        this.ag = ag;
        this.area = recordOffset + InodeFormat.INLINE;
    }

    private Buffer held(Txn txn) {
        Buffer b = cache.get(block, InodeFormat.MAGIC, ag, "inode block");
        if (!txn.holds(b)) {
            throw new IllegalStateException("directory tree changed by a transaction not holding its inode block " + block);
        }
        return b;
    }

    @Override
    public long allocate(Txn txn) {
        Buffer b = held(txn);
        int n = DirEntryFormat.reserveCount(b.data(), area);
        if (n == 0) {
            throw new IllegalStateException("directory block reserve in inode block " + block + " ran dry inside a tree operation");
        }
        DirEntryFormat.setReserveCount(b.data(), area, n - 1);
        txn.log(b, area + DirEntryFormat.RESERVE_COUNT, 4);
        return DirEntryFormat.reserveEntry(b.data(), area, n - 1);
    }

    @Override
    public void free(Txn txn, long freed) {
        Buffer b = held(txn);
        int n = DirEntryFormat.reserveCount(b.data(), area);
        if (n == DirEntryFormat.RESERVE_CAPACITY) {
            throw new IllegalStateException("directory block reserve in inode block " + block + " is full");
        }
        DirEntryFormat.setReserveEntry(b.data(), area, n, freed);
        DirEntryFormat.setReserveCount(b.data(), area, n + 1);
        txn.log(b, DirEntryFormat.reserveOffset(area, n), 8);
        txn.log(b, area + DirEntryFormat.RESERVE_COUNT, 4);
    }

    @Override
    public long freeBlocks() {
        return DirEntryFormat.reserveCount(cache.get(block, InodeFormat.MAGIC, ag, "inode block").data(), area);
    }

    @Override
    public int itemsPerChange() {
        return 1;
    }
}
