package dev.ferrite.dir;

import java.util.Arrays;

/**
 * A shared file's range locks over its blocks, under its I/O lock held shared: a copy on write holds the
 * blocks it writes exclusively, from choosing them to the remap, so that no other writer of the file
 * remaps them meanwhile; a read holds the blocks it reads shared, from looking them up to the end of its
 * device read, so that no remap lets go of them (freeing them, or leaving them to another file that may
 * then write them in place) while it reads. Disjoint ranges proceed side by side. The I/O lock held
 * exclusively (truncate, punch, clone) keeps every holder out, so none is needed under it.
 *
 * <p>A table of the ranges held, under this object's monitor; a waiter waits on it until no held range
 * conflicts. Not fair: a writer may wait while overlapping reads keep coming. Lock order
 * ({@link IoLock}'s): after the I/O lock, a file's {@link FilePages#writeBack} lock and the pages a
 * buffered read fills; before the conversion turn ({@link Conversions}), the log reservation and
 * {@link FileMapping}'s locks. A thread holds one range at a time.
 */
final class BlockRanges {
    /** Held ranges {@code [firsts[k], ends[k])}, exclusively where {@code exclusive[k]}: the first {@link #count}. */
    private long[] firsts = new long[8], ends = new long[8];
    private boolean[] exclusive = new boolean[8];
    private int count;
    /** Threads waiting: an unlock wakes them only if there are any. */
    private int waiting;

    /** {@code i}'s ranges, made at its first use. */
    static BlockRanges of(Inode i) {
        BlockRanges r = i.blockRanges;
        if (r == null) {
            synchronized (i) {
                r = i.blockRanges;
                if (r == null) {
                    i.blockRanges = r = new BlockRanges();
                }
            }
        }
        return r;
    }

    /** Holds blocks {@code [first, end)}, exclusively or shared, waiting while a conflicting hold overlaps them. */
    synchronized void lock(long first, long end, boolean excl) {
        boolean interrupted = false;
        while (conflicts(first, end, excl)) {
            waiting++;
            try {
                wait();
            } catch (InterruptedException e) {
                interrupted = true; // the caller's I/O is not interruptible either: kept for it
            } finally {
                waiting--;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        if (count == firsts.length) {
            firsts = Arrays.copyOf(firsts, count * 2);
            ends = Arrays.copyOf(ends, count * 2);
            exclusive = Arrays.copyOf(exclusive, count * 2);
        }
        firsts[count] = first;
        ends[count] = end;
        exclusive[count++] = excl;
    }

    /** Lets go of a hold {@link #lock} took with the same arguments. */
    synchronized void unlock(long first, long end, boolean excl) {
        for (int k = count - 1; k >= 0; k--) {
            if (firsts[k] == first && ends[k] == end && exclusive[k] == excl) {
                count--;
                firsts[k] = firsts[count];
                ends[k] = ends[count];
                exclusive[k] = exclusive[count];
                if (waiting > 0) {
                    notifyAll();
                }
                return;
            }
        }
        throw new IllegalMonitorStateException("blocks [" + first + ", " + end + ") let go but not held" + (excl ? " exclusively" : ""));
    }

    private boolean conflicts(long first, long end, boolean excl) {
        for (int k = 0; k < count; k++) {
            if (firsts[k] < end && first < ends[k] && (excl || exclusive[k])) {
                return true;
            }
        }
        return false;
    }
}
