package dev.ferrite.dir;

import dev.ferrite.btree.BlockAllocator;
import dev.ferrite.btree.Buffer;
import dev.ferrite.btree.Txn;

/**
 * A group header's free list ({@link AgHeaderFormat}) as the allocator of the trees that header heads: a
 * stack of group blocks kept topped up between tree operations, so that allocating a node only pops an
 * entry of a header the transaction already holds, never recursing into the free-space trees and never
 * reading a block. Every change requires the header locked by the transaction.
 */
final class FreeList implements BlockAllocator {
    private final Buffer header;
    private final int countOffset;
    private final int capacity;
    private final long groupStart;

    FreeList(Buffer header, int countOffset, long groupStart, int blockSize) {
        this.header = header;
        this.countOffset = countOffset;
        this.capacity = AgHeaderFormat.listCapacity(blockSize);
        this.groupStart = groupStart;
    }

    /** Entries now: exact under the header's lock, a snapshot otherwise. */
    int count() {
        return AgHeaderFormat.u32(header.data(), countOffset);
    }

    int capacity() {
        return capacity;
    }

    /** Group block of entry {@code i} (for checkers). */
    int entry(int i) {
        return AgHeaderFormat.u32(header.data(), AgHeaderFormat.listEntryOffset(i));
    }

    void push(Txn txn, int groupBlock) {
        checkHeld(txn);
        int n = count();
        if (n == capacity) {
            throw new IllegalStateException("free list in " + header + " is full (" + capacity + " entries)");
        }
        AgHeaderFormat.setU32(header.data(), AgHeaderFormat.listEntryOffset(n), groupBlock);
        AgHeaderFormat.setU32(header.data(), countOffset, n + 1);
        txn.log(header, AgHeaderFormat.listEntryOffset(n), 4);
        txn.log(header, countOffset, 4);
    }

    int pop(Txn txn) {
        checkHeld(txn);
        int n = count();
        if (n == 0) {
            // the group keeps a reserve for every tree operation it starts: running dry is a bug, not ENOSPC
            throw new IllegalStateException("free list in " + header + " ran dry inside a tree operation");
        }
        AgHeaderFormat.setU32(header.data(), countOffset, n - 1);
        txn.log(header, countOffset, 4);
        return entry(n - 1);
    }

    private void checkHeld(Txn txn) {
        if (!txn.holds(header)) {
            throw new IllegalStateException("free list of " + header + " changed by a transaction not holding it");
        }
    }

    @Override
    public long allocate(Txn txn) {
        return groupStart + pop(txn);
    }

    @Override
    public void free(Txn txn, long block) {
        push(txn, (int) (block - groupStart));
    }

    @Override
    public long freeBlocks() {
        return count();
    }

    @Override
    public int itemsPerChange() {
        return 1;
    }
}
