package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.journal.internal.DeferredData;
import dev.ferrite.journal.internal.Journal;

/**
 * Extent values ({@link TableExtents}) whose device write is left to the log: a put copies its value into
 * its frames of the data page cache only ({@link TableExtentCache#fillPinned}, pinned there) and registers
 * it here ({@link #defer}) before the transaction that makes its key name it commits; the log calls
 * {@link #writeDeferred} before it writes each checkpoint, which writes every value registered by then, in
 * runs of adjacent blocks (consecutive allocations mostly are), before the flush that precedes a
 * checkpoint holding a transaction ordered after data. So the checkpoint that names a value is durable
 * only after its bytes are, and one write serves many puts where each put wrote its own. Values whose
 * frames lie in order write from there; the others are copied into a staging buffer first ({@link #stage}).
 *
 * <h2>Frees</h2>
 * A value freed while its write is pending is written all the same (a checkpoint that names it may be
 * written before the free's, and a group that fails takes its blocks back), then its frames are dropped:
 * the free marks it ({@link #freed}). Its blocks are busy until the free is durable, and the free's
 * checkpoint is written after this write, so no other value's bytes ever lie under it. Only a group's
 * undo of the value it wrote itself ({@link #cancel}) drops it at once: its key's change and the undo are
 * in the group's one checkpoint, so none names it. Then a write in flight may put stale bytes in its
 * blocks, which are free and busy until after that write.
 *
 * <h2>Budget</h2>
 * At most a quarter of the data cache's frames are pinned for pending values ({@link #budgetBlocks}). A put
 * that finds the budget spent writes the pending values itself, in runs as the log does, and then leaves
 * its own to the log (asking the log to push instead made a checkpoint every half budget, whose relogged
 * leaves cost more than the writes).
 *
 * <h2>Locks</h2>
 * {@link #writing} is held for a write of the pending values, I/O included (no node or stripe lock is held
 * meanwhile), and taken before the others. The monitor of this object guards {@link #pending} and the
 * counts, held for a lookup or an update, never while taking a stripe's lock.
 */
final class TableExtentWriteBack implements DeferredData {
    /** Blocks copied into the staging buffer and written at once. */
    static final int STAGING_BLOCKS = 256;
    /**
     * Values adjacent on the device and in the data cache's slab are written from their frames, not
     * copied, once they make this many blocks: fewer would split a run of adjacent blocks into more writes.
     */
    static final int DIRECT_BLOCKS = 16;

    /** A value registered: written by the next {@link #writeDeferred}; its frames dropped after it if {@code freed}. */
    private static final class Deferred {
        final TableValueFormat.Extent x;
        boolean freed;

        Deferred(TableValueFormat.Extent x) {
            this.x = x;
        }
    }

    private final TableExtentCache cached;
    private final BlockDevice device;
    private final int blockSize;
    /** Most blocks pinned for pending values: a quarter of the data cache's frames. */
    final long budgetBlocks;
    /** Registered values, by first block, until written (or {@link #cancel}ed). */
    private final HashMap<Long, Deferred> pending = new HashMap<>();
    /**
     * Blocks counted for registered values and room reserved for them: changed under this object's lock,
     * read without it by {@link #freed} (volatile), which needs no lock when it is 0.
     */
    private volatile long pendingBlocks;
    /**
     * Held by a write of the pending values (the log's, or a put's at the budget): it guards
     * {@link #staging}, {@link #batch} and {@link #wroteAhead}, and a log's write waits for a put's in flight,
     * so that the values it took are on the device before the checkpoint.
     */
    private final ReentrantLock writing = new ReentrantLock();
    /** A put at the budget wrote pending values since the log's last {@link #writeDeferred}: its next checkpoint flushes first. */
    private boolean wroteAhead;
    private final MemorySegment staging;
    private final IoBatch batch = new IoBatch(STAGING_BLOCKS);
    /** Whether each value of the run just written was freed meanwhile (its frames then dropped); {@link #writing}'s. */
    private final boolean[] drops = new boolean[STAGING_BLOCKS];
    /** Each value's first frame if its frames lie in order in the slab, else -1, for {@link #stage}; {@link #writing}'s. */
    private final int[] firstFrames = new int[STAGING_BLOCKS];
    /**
     * Values written (by the log, or by puts at the budget), the device writes that wrote them and the
     * blocks of them copied into the staging buffer first, for tests.
     */
    private long written, runs, copied;

    TableExtentWriteBack(TableExtentCache cached, BlockDevice device, Journal journal, int frames) {
        this.cached = cached;
        this.device = device;
        this.blockSize = device.blockSize();
        this.budgetBlocks = frames / 4;
        this.staging = Arena.ofAuto().allocate((long) STAGING_BLOCKS * blockSize, BlockDevice.BUFFER_ALIGNMENT);
        journal.deferData(this);
    }

    /**
     * Caches value {@code x} ({@code value}, its bytes) pinned and registers its write, to come before the
     * checkpoint of the transaction that makes a key name it, which the caller commits after this. At the
     * budget, writes the values pending first. False if the budget is still spent (by other puts meanwhile)
     * or the cache has no frames for it: the caller writes it itself.
     */
    boolean defer(TableValueFormat.Extent x, MemorySegment value) {
        return reserveRoom(x.blocks(blockSize)) && deferReserved(x, value);
    }

    /**
     * Counts {@code n} blocks more pinned for a value about to be {@link #deferReserved}, holding no node or
     * group lock: at the budget, writes the values pending first. False, counting nothing, if the budget is
     * still spent (by other puts meanwhile).
     */
    boolean reserveRoom(int n) {
        if (reserve(n)) {
            return true;
        }
        writing.lock();
        try {
            wroteAhead |= writePending(); // this thread writes the values pending, in runs, for room
        } finally {
            writing.unlock();
        }
        return reserve(n);
    }

    /** Gives back the room {@link #reserveRoom} counted for {@code n} blocks, for a value not deferred after all. */
    synchronized void unreserve(int n) {
        pendingBlocks -= n;
    }

    /**
     * {@link #defer} of value {@code x} in the room {@link #reserveRoom} counted for it. False, the room
     * given back, if the cache has no frames for it: the caller writes it itself.
     */
    boolean deferReserved(TableValueFormat.Extent x, MemorySegment value) {
        if (!cached.fillPinned(x, value)) {
            unreserve(x.blocks(blockSize));
            return false;
        }
        synchronized (this) {
            pending.put(x.block(), new Deferred(x));
        }
        return true;
    }

    /** Counts {@code n} blocks more pinned for a pending value; false if the budget has not that many left. */
    private synchronized boolean reserve(int n) {
        if (pendingBlocks + n > budgetBlocks) {
            return false;
        }
        pendingBlocks += n;
        return true;
    }

    /**
     * Value {@code x}'s blocks are being freed: true if its write is pending, which goes ahead, its frames
     * dropped after it (the caller drops them now otherwise).
     */
    boolean freed(TableValueFormat.Extent x) {
        // a value's registration and its count come before the commit of the key that names it, which comes
        // before the free's look at the key: a count of 0 seen then is after its write was done, if it had one
        if (pendingBlocks == 0) {
            return false;
        }
        synchronized (this) {
            Deferred d = pending.get(x.block());
            if (d == null || !d.x.equals(x)) {
                return false;
            }
            d.freed = true;
            return true;
        }
    }

    /** Value {@code x}'s blocks, {@link #freed}, were taken back by the group that freed them: its frames stay. */
    synchronized void retaken(TableValueFormat.Extent x) {
        Deferred d = pending.get(x.block());
        if (d != null && d.x.equals(x)) {
            d.freed = false;
        }
    }

    /**
     * For a group's undo of value {@code x} it wrote (its key's change undone in the same checkpoint):
     * forgets its pending write, if any. The caller drops its frames next.
     */
    void cancel(TableValueFormat.Extent x) {
        synchronized (this) {
            Deferred d = pending.get(x.block());
            if (d != null && d.x.equals(x)) {
                pending.remove(x.block());
                pendingBlocks -= x.blocks(blockSize);
            }
        }
    }

    /**
     * Writes every value registered so far, in runs of adjacent blocks (see the class comment); true if it
     * or a put at the budget wrote any since the last call, so that the checkpoint's flush comes after them.
     */
    @Override
    public boolean writeDeferred() {
        writing.lock();
        try {
            boolean wrote = writePending() | wroteAhead;
            wroteAhead = false;
            return wrote;
        } finally {
            writing.unlock();
        }
    }

    /** {@link #writeDeferred}'s writes, {@link #writing} held; true if there were any. */
    private boolean writePending() {
        Deferred[] taken;
        synchronized (this) {
            if (pending.isEmpty()) {
                return false;
            }
            taken = pending.values().toArray(new Deferred[0]);
        }
        Arrays.sort(taken, Comparator.comparingLong(d -> d.x.block()));
        int writes = 0, copies = 0;
        for (int i = 0; i < taken.length; ) {
            int j = i;
            for (int blocks = 0; j < taken.length && (j == i || blocks + taken[j].x.blocks(blockSize) <= STAGING_BLOCKS); j++) {
                blocks += taken[j].x.blocks(blockSize);
            }
            copies += stage(taken, i, j);
            if (batch.size() == 1) {
                device.write(batch.block(0), batch.buffer(0)); // a plain pwrite: the cheapest at depth 1
            } else {
                device.submit(batch);
            }
            writes += batch.size();
            synchronized (this) { // once a run, not once a value: the putters registering values take this lock too
                for (int m = i; m < j; m++) {
                    Deferred d = taken[m];
                    drops[m - i] = d.freed;
                    if (pending.remove(d.x.block(), d)) {
                        pendingBlocks -= d.x.blocks(blockSize);
                    }
                }
            }
            for (int m = i; m < j; m++) {
                cached.written(taken[m].x, drops[m - i]);
            }
            i = j;
        }
        synchronized (this) {
            written += taken.length;
            runs += writes;
            copied += copies;
        }
        return true;
    }

    /**
     * Fills {@link #batch} with the writes of values {@code taken[i, j)} (sorted by block, at most
     * {@link #STAGING_BLOCKS} blocks in all): a stretch of values adjacent on the device whose frames lie
     * side by side in the slab, {@link #DIRECT_BLOCKS} blocks or more of them, is written from its frames;
     * the others are copied into {@link #staging} and written in runs of adjacent blocks from there, so that
     * values in scattered frames still take one write a run. {@link #writing} held. Returns the blocks copied.
     */
    private int stage(Deferred[] taken, int i, int j) {
        for (int m = i; m < j; m++) {
            firstFrames[m - i] = cached.framesInOrder(taken[m].x);
        }
        batch.clear();
        int used = 0, runAt = 0, copied = 0;
        long runStart = -1, runEnd = -1; // the staging run open, if runStart >= 0
        for (int m = i; m < j; ) {
            TableValueFormat.Extent x = taken[m].x;
            int e = m + 1, n = x.blocks(blockSize), first = firstFrames[m - i];
            while (first >= 0 && e < j && taken[e].x.block() == x.block() + n && cached.follows(first, n, firstFrames[e - i])) {
                n += taken[e++].x.blocks(blockSize);
            }
            if (first >= 0 && n >= DIRECT_BLOCKS) {
                if (runStart >= 0) {
                    batch.write(runStart, staging.asSlice((long) runAt * blockSize, (runEnd - runStart) * blockSize));
                    runStart = -1;
                }
                batch.write(x.block(), cached.inSlab(first, n)); // pinned until written: nothing changes them
                m = e;
                continue;
            }
            n = x.blocks(blockSize);
            // a value cancelled meanwhile leaves what the staging held (or its frames hold now) in its blocks:
            // free, busy until after this write, as a write from the frames above would
            if (first >= 0) {
                MemorySegment.copy(cached.inSlab(first, n), 0, staging, (long) used * blockSize, (long) n * blockSize);
            } else {
                cached.copyBlocks(x, staging, (long) used * blockSize);
            }
            copied += n;
            if (runStart < 0 || x.block() != runEnd) {
                if (runStart >= 0) {
                    batch.write(runStart, staging.asSlice((long) runAt * blockSize, (runEnd - runStart) * blockSize));
                }
                runStart = x.block();
                runAt = used;
            }
            runEnd = x.block() + n;
            used += n;
            m++;
        }
        if (runStart >= 0) {
            batch.write(runStart, staging.asSlice((long) runAt * blockSize, (runEnd - runStart) * blockSize));
        }
        return copied;
    }

    /** Blocks pinned for values whose write is pending, for tests. */
    synchronized long pendingBlocks() {
        return pendingBlocks;
    }

    /** {@link #written}, {@link #runs} and {@link #copied}, for tests. */
    synchronized long[] counts() {
        return new long[]{written, runs, copied};
    }
}
