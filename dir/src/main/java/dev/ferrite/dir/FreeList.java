package dev.ferrite.dir;

import dev.ferrite.btree.internal.BlockAllocator;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;

/**
 * A group header's free list ({@link AgHeaderFormat}) as the allocator of the trees that header heads: a
 * stack of group blocks kept topped up between tree operations, so that allocating a node only pops an
 * entry of a header the transaction already holds, never recursing into the free-space trees and never
 * reading a block. Every change requires the header locked by the transaction.
 *
 * <p>Freed tree nodes go onto the list at once, but stay {@link BufferCache#isBusy busy} until their free
 * is in a checkpoint: pops skip them, and the reserve checks count only entries that are not busy. An
 * entry never turns busy while it is on the list, so a reserve counted at an operation's start holds.
 *
 * <p>The list's blocks count as free blocks held back: it keeps {@link Counters#listsLack} at what it
 * lacks of {@link AllocationGroup#LIST_MOST} entries, so that only an entry taken by a tree lowers the
 * spare count. A tree's take that no claim covers ({@link #charged} false) comes out of the set-aside pool
 * ({@link Counters#draw}).
 */
final class FreeList implements BlockAllocator {
    private final BufferCache cache;
    private final Buffer header;
    private final int countOffset;
    private final int capacity;
    private final long groupStart;
    /**
     * Under the header's lock: at least the number of busy entries. Only tree nodes freed onto the list
     * ({@link #free}) can be busy; a count of them found busy (by a scan of the whole list, or 0 at
     * mount) plus the frees since bounds it. With the cache's {@link BufferCache#busyBound} this lets
     * {@link #holds} answer without asking about entries, even while many other blocks are busy.
     */
    private int mayBeBusy;
    private final Counters counters;
    /**
     * Under the header's lock: true while an allocation whose claim covers the trees' growth changes them
     * (its blocks' promise, a write-back's pages' share of it), so the nodes they take draw nothing from the
     * set-aside pool.
     */
    boolean charged;

    FreeList(BufferCache cache, Buffer header, int countOffset, long groupStart, Counters counters) {
        this.cache = cache;
        this.header = header;
        this.countOffset = countOffset;
        this.capacity = AgHeaderFormat.listCapacity();
        this.groupStart = groupStart;
        this.counters = counters;
        counters.listsLack.add(lack(count()));
    }

    /** What a list of {@code count} entries lacks of its most: held back in free space for its refills. */
    static int lack(int count) {
        return Math.max(0, AllocationGroup.LIST_MOST - count);
    }

    /** Sets the count to {@code n}, keeping {@link Counters#listsLack}. */
    private void setCount(Txn txn, int n) {
        counters.listsLack.add(lack(n) - lack(count()));
        AgHeaderFormat.setU32(header.data(), countOffset, n);
        txn.log(header, countOffset, 4);
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
        requireHeld(txn);
        int n = count();
        if (n == capacity) {
            throw new IllegalStateException("free list in " + header + " is full (" + capacity + " entries)");
        }
        AgHeaderFormat.setU32(header.data(), AgHeaderFormat.listEntryOffset(n), groupBlock);
        txn.log(header, AgHeaderFormat.listEntryOffset(n), 4);
        setCount(txn, n + 1);
    }

    private boolean busy(int i) {
        return cache.isBusy(groupStart + entry(i));
    }

    /** With the header locked: true if at least {@code n} entries are not busy. */
    boolean holds(int n) {
        int c = count();
        if (c - n >= Math.min(mayBeBusy, cache.busyBound())) {
            return true;
        }
        mayBeBusy = c - usable();
        return c - mayBeBusy >= n;
    }

    /** {@link #holds} without the header's lock: a hint, which may be stale by the time it returns. */
    boolean seemsToHold(int n) {
        int c = count();
        return c - n >= Math.min(mayBeBusy, cache.busyBound()) || usable() >= n;
    }

    /** Entries that are not busy. */
    int usable() {
        int found = 0;
        for (int i = count() - 1; i >= 0; i--) {
            if (!busy(i)) {
                found++;
            }
        }
        return found;
    }

    /**
     * Takes the topmost entry that is not busy, to become a tree node. One the cache holds live is in use
     * already: an image whose list names it (a count raised over stale entries, say) is corrupt; one in use
     * but not cached goes unseen.
     */
    int pop(Txn txn) {
        int n = count();
        int i = n - 1;
        while (i >= 0 && busy(i)) {
            i--;
        }
        if (i < 0) {
            // the group keeps a reserve for every tree operation it starts: running dry is a bug, not ENOSPC
            throw new IllegalStateException("free list in " + header + " ran dry inside a tree operation (" + n
                    + " entries, all freed since the last checkpoint)");
        }
        if (cache.cached(groupStart + entry(i)) != null) {
            throw new CorruptionException(header.block(), "free list", "entry " + i + " names block "
                    + (groupStart + entry(i)) + ", which is in use");
        }
        return take(txn, i);
    }

    /** Takes an entry to give back to free space: a busy one if there is one (free space may hold busy blocks). */
    int popForSpill(Txn txn) {
        int n = count();
        for (int i = n - 1; i >= 0; i--) {
            if (busy(i)) {
                return take(txn, i);
            }
        }
        return take(txn, n - 1);
    }

    /** Removes entry {@code i}, moving the top entry into its place. */
    private int take(Txn txn, int i) {
        requireHeld(txn);
        int n = count();
        int e = entry(i);
        if (i != n - 1) {
            AgHeaderFormat.setU32(header.data(), AgHeaderFormat.listEntryOffset(i), entry(n - 1));
            txn.log(header, AgHeaderFormat.listEntryOffset(i), 4);
        }
        setCount(txn, n - 1);
        return e;
    }

    private void requireHeld(Txn txn) {
        if (!txn.holds(header)) {
            throw new IllegalStateException("free list of " + header + " changed by a transaction not holding it");
        }
    }

    /** A node for a tree: {@link #pop}, out of the set-aside pool unless {@link #charged} and if it lowered the spare count. */
    @Override
    public long allocate(Txn txn) {
        int b = pop(txn);
        if (!charged && count() < AllocationGroup.LIST_MOST) {
            counters.draw(1);
        }
        return groupStart + b;
    }

    /** A node a tree gave back: if it raised the spare count, the set-aside pool is topped up from it first. */
    @Override
    public void free(Txn txn, long block) {
        push(txn, (int) (block - groupStart));
        mayBeBusy++;
        if (count() <= AllocationGroup.LIST_MOST) {
            counters.repay(1);
        }
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
