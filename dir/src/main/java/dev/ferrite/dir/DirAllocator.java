package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.function.Supplier;

import dev.ferrite.btree.internal.BlockAllocator;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;

/**
 * A directory's tree, or a regular file's extent tree, takes its blocks from, and gives them back to, the
 * reserve in its inode record ({@link DirEntryFormat}, {@link ExtentTreeFormat}), locking that record's
 * block in the changing transaction (re-entrant: a directory's change holds it already), so a split or
 * merge takes no allocation group lock and reads nothing. A tree's destroy, which reads its nodes, frees
 * them only after its last read and takes the record's block then. The namespace keeps the reserve
 * between its low and high marks in transactions of their own before each change; a table's single
 * writers, which change its tree side by side, each claim blocks of it first ({@code Tables#single}).
 *
 * <p>Nodes the tree frees go back to the reserve at once but stay {@link BufferCache#isBusy busy} until
 * their free is in a checkpoint: allocation skips them and the marks count only the reserve's other
 * entries ({@link #usable}). So do the blocks a directory's spill beside its writers is freeing
 * ({@link SpillingBlocks}).
 */
final class DirAllocator implements BlockAllocator {
    private final BufferCache cache;
    private final long block;
    private final int ag;
    private final int area;
    /** The blocks a spill beside the tree's writers is freeing, or null. */
    private final Supplier<long[]> spilling;

    DirAllocator(BufferCache cache, long inodeBlock, int ag, int recordOffset, Supplier<long[]> spilling) {
        this.cache = cache;
        this.block = inodeBlock;
        this.ag = ag;
        this.area = recordOffset + InodeFormat.INLINE;
        this.spilling = spilling;
    }

    /**
     * The record's block, locked for {@code txn}: held already by a directory's or a file's change, taken
     * here by a table's (last, after the tree's nodes: {@link Txn}'s lock order), so that writers of one
     * table contend on it only when they split or merge.
     */
    private Buffer lock(Txn txn) {
        Buffer b;
        do { // a destroy frees after reading every node, and takes the record's block only then
            b = cache.get(block, InodeFormat.MAGIC, ag, "inode block");
        } while (!txn.lock(b));
        return b;
    }

    /** Entries of the reserve at {@code area} of {@code m} that are not busy, counted up to {@code enough}. */
    static int usable(BufferCache cache, MemorySegment m, int area, int enough) {
        return usable(cache, m, area, enough, null);
    }

    /** {@link #usable}, leaving out the blocks of {@code spilling} too (none: null). */
    static int usable(BufferCache cache, MemorySegment m, int area, int enough, long[] spilling) {
        int n = DirEntryFormat.reserveCount(m, area);
        int busy = cache.busyBound();
        if (n - enough - (spilling == null ? 0 : spilling.length) >= busy) {
            return enough;
        }
        if (busy == 0 && spilling == null) {
            // nothing is busy: every entry counts. A table's reserve is kept below its fill mark, so
            // each single write's entry (DirContents#enter) would otherwise ask the cache about each
            return Math.min(n, enough);
        }
        int found = 0;
        for (int i = n - 1; i >= 0 && found < enough; i--) {
            long e = DirEntryFormat.reserveEntry(m, area, i);
            if (!cache.isBusy(e) && !SpillingBlocks.contains(spilling, e)) {
                found++;
            }
        }
        return found;
    }

    /**
     * The entries to spill from the reserve at {@code area} of {@code m} down to {@code downTo} (at least
     * one), busy ones first (a spill makes room without losing usable
     * entries), and of those not busy only so many that {@code keep} of them stay (all there are, if
     * fewer): written to {@code out}, their number returned.
     */
    static int spillOrder(BufferCache cache, MemorySegment m, int area, int downTo, int keep, long[] out) {
        int count = DirEntryFormat.reserveCount(m, area);
        int want = Math.max(1, count - downTo);
        int spare = Math.max(0, usable(cache, m, area, count) - keep); // usable entries it may take
        int n = 0;
        long taken = 0; // by index: an entry busy in the first pass may no longer be in the second
        for (int pass = 0; pass < 2; pass++) {
            for (int i = count - 1; i >= 0 && n < want; i--) {
                long e = DirEntryFormat.reserveEntry(m, area, i);
                if ((taken & 1L << i) != 0) {
                    continue;
                }
                boolean busy = cache.isBusy(e);
                if (pass == 0 ? busy : busy || spare-- > 0) {
                    taken |= 1L << i;
                    out[n++] = e;
                }
            }
        }
        return n;
    }

    /** Whether block {@code e} is in the reserve at {@code area} of {@code m}. */
    static boolean inReserve(MemorySegment m, int area, long e) {
        for (int i = DirEntryFormat.reserveCount(m, area) - 1; i >= 0; i--) {
            if (DirEntryFormat.reserveEntry(m, area, i) == e) {
                return true;
            }
        }
        return false;
    }

    /** The index of entry {@code e} in the reserve at {@code area} of {@code m}. */
    static int indexOf(MemorySegment m, int area, long e) {
        for (int i = DirEntryFormat.reserveCount(m, area) - 1; i >= 0; i--) {
            if (DirEntryFormat.reserveEntry(m, area, i) == e) {
                return i;
            }
        }
        throw new IllegalStateException("block " + e + " is not in the reserve");
    }

    /** Removes reserve entry {@code i}, moving the last into its place (logging is the caller's). */
    static long remove(MemorySegment m, int area, int i) {
        int n = DirEntryFormat.reserveCount(m, area);
        long e = DirEntryFormat.reserveEntry(m, area, i);
        DirEntryFormat.setReserveEntry(m, area, i, DirEntryFormat.reserveEntry(m, area, n - 1));
        DirEntryFormat.setReserveEntry(m, area, n - 1, 0);
        DirEntryFormat.setReserveCount(m, area, n - 1);
        return e;
    }

    @Override
    public long allocate(Txn txn) {
        Buffer b = lock(txn);
        MemorySegment m = b.data();
        int i = DirEntryFormat.reserveCount(m, area) - 1;
        long[] spill = spilling.get(); // read after the record's lock: see DirContents#withhold
        while (i >= 0 && (cache.isBusy(DirEntryFormat.reserveEntry(m, area, i)) || SpillingBlocks.contains(spill, DirEntryFormat.reserveEntry(m, area, i)))) {
            i--;
        }
        if (i < 0) {
            throw new IllegalStateException("tree block reserve in inode block " + block + " ran dry inside a tree operation");
        }
        int n = DirEntryFormat.reserveCount(m, area);
        long e = remove(m, area, i);
        txn.log(b, DirEntryFormat.reserveOffset(area, i), 8 * (n - i));
        txn.log(b, area + DirEntryFormat.RESERVE_COUNT, 4);
        return e;
    }

    @Override
    public void free(Txn txn, long freed) {
        Buffer b = lock(txn);
        int n = DirEntryFormat.reserveCount(b.data(), area);
        if (n == DirEntryFormat.RESERVE_CAPACITY) {
            throw new IllegalStateException("tree block reserve in inode block " + block + " is full");
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
