package dev.ferrite.dir;

import java.util.concurrent.atomic.LongAdder;

/**
 * The volume-wide counts statfs reports, striped so that allocations in different groups never share a
 * cache line (XFS's per-CPU superblock counters). Each group header holds its own exact, journaled
 * counts; these sums are folded into the superblock at unmount and rebuilt from the group headers at
 * mount after an unclean shutdown.
 */
final class Counters {
    final LongAdder freeBlocks = new LongAdder();
    final LongAdder freeInodes = new LongAdder();
    final LongAdder inodes = new LongAdder();
    /**
     * Of {@link #freeBlocks}, those the groups hold back for their refcount trees' growth
     * ({@link Refcounts#reserve}): kept by the groups as their trees grow and shrink, never folded into the
     * superblock (the mount computes each group's from its tree).
     */
    final LongAdder reservedBlocks = new LongAdder();

    void set(long freeBlocks, long freeInodes, long inodes) {
        this.freeBlocks.reset();
        this.freeBlocks.add(freeBlocks);
        this.freeInodes.reset();
        this.freeInodes.add(freeInodes);
        this.inodes.reset();
        this.inodes.add(inodes);
    }
}
