package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
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
 * leaves cost more than the writes). Before that, from a quarter of the budget ({@link #behindBlocks}), a
 * thread of its own writes them in the background ({@link #writeBehind}), as an operating system's page
 * cache starts writing dirty pages back at a background threshold: a bulk load's values reach the device
 * while it runs, on another CPU, instead of all at the next checkpoint or sync (a sync after 16,384 puts
 * of 16 KiB wrote 256 MiB).
 *
 * <h2>Locks</h2>
 * {@link #writing} is held for a write of the pending values, I/O included (no node or stripe lock is held
 * meanwhile), and taken before the others. The monitor of this object guards {@link #pending} and the
 * counts, held for a lookup or an update, never while taking a stripe's lock.
 */
final class TableExtentWriteBack implements DeferredData {
    private static final System.Logger LOG = System.getLogger(TableExtentWriteBack.class.getName());
    /** Blocks copied into the staging buffer and written at once. */
    static final int STAGING_BLOCKS = 256;
    /**
     * Values adjacent on the device and in the data cache's slab are written from their frames, not
     * copied, once they make this many blocks: fewer would split a run of adjacent blocks into more writes.
     */
    static final int DIRECT_BLOCKS = 16;

    /**
     * A value registered: written by the next {@link #writeDeferred}; its frames dropped after it if
     * {@code freed}. {@code firstFrame}: the first of its pinned frames if they lie in order in the slab,
     * else {@link TableExtentCache#SCATTERED}, as {@link TableExtentCache#fillPinned} found them (pinned,
     * they stay there until written: the write needs no lookup of them).
     */
    private static final class Deferred {
        final TableValueFormat.Extent x;
        final int firstFrame;
        boolean freed;

        Deferred(TableValueFormat.Extent x, int firstFrame) {
            this.x = x;
            this.firstFrame = firstFrame;
        }
    }

    private final TableExtentCache cached;
    private final BlockDevice device;
    private final int blockSize;
    /** Most blocks pinned for pending values: a quarter of the data cache's frames. */
    final long budgetBlocks;
    /**
     * Registered values, by first block, until written (or {@link #cancel}ed). Linked: {@link #taken} walks
     * the values, not a table sized for the most ever pending (16,384 of them after a bulk load).
     */
    private final LinkedHashMap<Long, Deferred> pending = new LinkedHashMap<>();
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
    /**
     * A put at the budget or the background write wrote pending values since the log's last
     * {@link #writeDeferred}: its next checkpoint flushes first.
     */
    private boolean wroteAhead;
    /** Made by the first write that copies (most mounts never write a medium value: a mount stays cheap). */
    private MemorySegment staging;
    private final IoBatch batch = new IoBatch(STAGING_BLOCKS);
    /** Whether each value of the run just written was freed meanwhile (its frames then dropped); {@link #writing}'s. */
    private final boolean[] drops = new boolean[STAGING_BLOCKS];
    /**
     * Values written (by the log, or by puts at the budget), the device writes that wrote them and the
     * blocks of them copied into the staging buffer first, for tests.
     */
    private long written, runs, copied;
    /** Of {@link #written}, the values the background thread wrote and those puts at the budget wrote. */
    private long writtenBehind, writtenAtBudget;
    /** The bytes the writes of {@link #written} wrote, and the time spent in them. */
    private long bytesWritten, writeNanos;
    /**
     * Pending blocks from which the background write starts: a quarter of {@link #budgetBlocks}, but two
     * staging buffers' worth at least, so that it writes runs, not value by value (past the budget, never:
     * a cache that small leaves the writes to the log and the puts at the budget).
     */
    final long behindBlocks;
    /** Writes the pending values in the background ({@link #writeBehind}); started by the first put past {@link #behindBlocks}. */
    private final ParkedThread behind = new ParkedThread("ferrite-value-writeback", this::writeBehind);
    /** A put past {@link #behindBlocks} asked for the background write, which has not begun its look yet: the others need not. */
    private volatile boolean behindAsked;

    TableExtentWriteBack(TableExtentCache cached, BlockDevice device, Journal journal, int frames) {
        this.cached = cached;
        this.device = device;
        this.blockSize = device.blockSize();
        this.budgetBlocks = frames / 4;
        this.behindBlocks = Math.max(budgetBlocks / 4, 2L * STAGING_BLOCKS);
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
            int wrote = writePending(); // this thread writes the values pending, in runs, for room
            wroteAhead |= wrote > 0;
            synchronized (this) {
                writtenAtBudget += wrote;
            }
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
        int first = cached.fillPinned(x, value);
        if (first == TableExtentCache.NO_FRAMES) {
            unreserve(x.blocks(blockSize));
            return false;
        }
        Deferred d = new Deferred(x, first);
        synchronized (this) {
            pending.put(x.block(), d);
        }
        return true;
    }

    /**
     * Counts {@code n} blocks more pinned for a pending value; false if the budget has not that many left.
     * Past {@link #behindBlocks}, asks for the background write.
     */
    private boolean reserve(int n) {
        long now;
        synchronized (this) {
            if (pendingBlocks + n > budgetBlocks) {
                return false;
            }
            now = pendingBlocks += n;
        }
        if (now >= behindBlocks && !behindAsked) {
            behindAsked = true;
            behind.wake();
        }
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
            boolean wrote = writePending() > 0 | wroteAhead;
            wroteAhead = false;
            return wrote;
        } finally {
            writing.unlock();
        }
    }

    /** {@link #writeDeferred}'s writes, {@link #writing} held; how many values it wrote. */
    private int writePending() {
        Deferred[] taken = taken();
        for (int i = 0, j; i < taken.length; i = j) {
            j = sliceEnd(taken, i);
            writeSlice(taken, i, j, false);
        }
        return taken.length;
    }

    /**
     * The background write, on its own thread: the values pending when it looks, a slice of at most
     * {@value #STAGING_BLOCKS} blocks at a time, each under {@link #writing}; values another write took
     * meanwhile (the log's before a checkpoint, which writes every value registered before it, whichever
     * thread gets there first) are passed over. A device error leaves the values pending, for the log's
     * write to meet and report.
     */
    private void writeBehind() {
        behindAsked = false; // before the look: a put past the mark after it asks again
        Deferred[] taken = taken();
        try {
            for (int i = 0, j; i < taken.length && !behind.stopping(); i = j) {
                j = sliceEnd(taken, i);
                writing.lock();
                try {
                    Deferred[] live = stillPending(taken, i, j);
                    if (live.length > 0) {
                        writeSlice(live, 0, live.length, true);
                        wroteAhead = true;
                    }
                } finally {
                    writing.unlock();
                }
            }
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "background write of table values failed; the log's write retries them", e);
        }
    }

    /** The values registered now, by first block. */
    private Deferred[] taken() {
        Deferred[] taken;
        synchronized (this) {
            taken = pending.values().toArray(new Deferred[0]);
        }
        Arrays.sort(taken, Comparator.comparingLong(d -> d.x.block()));
        return taken;
    }

    /** Where the slice of {@code taken} from {@code i} ends: its values make at most {@value #STAGING_BLOCKS} blocks (one value at least). */
    private int sliceEnd(Deferred[] taken, int i) {
        int j = i;
        for (int blocks = 0; j < taken.length && (j == i || blocks + taken[j].x.blocks(blockSize) <= STAGING_BLOCKS); j++) {
            blocks += taken[j].x.blocks(blockSize);
        }
        return j;
    }

    /** Of values {@code taken[i, j)}, those still registered: the log's or a put's write took the others since the look. */
    private synchronized Deferred[] stillPending(Deferred[] taken, int i, int j) {
        Deferred[] live = new Deferred[j - i];
        int n = 0;
        for (int m = i; m < j; m++) {
            if (pending.get(taken[m].x.block()) == taken[m]) {
                live[n++] = taken[m];
            }
        }
        return Arrays.copyOf(live, n);
    }

    /**
     * Writes values {@code taken[i, j)} (one slice) in runs, then takes them off the pending list;
     * {@link #writing} held; {@code behind}: for the background write.
     */
    private void writeSlice(Deferred[] taken, int i, int j, boolean behind) {
        int copies = stage(taken, i, j);
        long began = System.nanoTime();
        if (batch.size() == 1) {
            device.write(batch.block(0), batch.buffer(0)); // a plain pwrite: the cheapest at depth 1
        } else {
            device.submit(batch);
        }
        long took = System.nanoTime() - began, bytes = 0;
        for (int m = 0; m < batch.size(); m++) {
            bytes += batch.buffer(m).byteSize();
        }
        synchronized (this) { // once a slice, not once a value: the putters registering values take this lock too
            for (int m = i; m < j; m++) {
                Deferred d = taken[m];
                drops[m - i] = d.freed;
                if (pending.remove(d.x.block(), d)) {
                    pendingBlocks -= d.x.blocks(blockSize);
                }
            }
            written += j - i;
            if (behind) {
                writtenBehind += j - i;
            }
            runs += batch.size();
            copied += copies;
            bytesWritten += bytes;
            writeNanos += took;
        }
        for (int m = i; m < j; m++) {
            cached.written(taken[m].x, drops[m - i], taken[m].firstFrame);
        }
    }

    /** Stops the background write (unmount, before the journal's last checkpoint writes what is pending). */
    void stop() {
        behind.stop();
    }

    /**
     * Fills {@link #batch} with the writes of values {@code taken[i, j)} (sorted by block, at most
     * {@link #STAGING_BLOCKS} blocks in all): a stretch of values adjacent on the device whose frames lie
     * side by side in the slab, {@link #DIRECT_BLOCKS} blocks or more of them or with no other value next to
     * it on the device ({@link #alone}), is written from its frames;
     * the others are copied into {@link #staging} and written in runs of adjacent blocks from there, so that
     * values in scattered frames still take one write a run. {@link #writing} held. Returns the blocks copied.
     */
    private int stage(Deferred[] taken, int i, int j) {
        batch.clear();
        int used = 0, runAt = 0, copied = 0;
        long runStart = -1, runEnd = -1; // the staging run open, if runStart >= 0
        for (int m = i; m < j; ) {
            TableValueFormat.Extent x = taken[m].x;
            int e = m + 1, n = x.blocks(blockSize), first = taken[m].firstFrame;
            while (first >= 0 && e < j && taken[e].x.block() == x.block() + n && cached.follows(first, n, taken[e].firstFrame)) {
                n += taken[e++].x.blocks(blockSize);
            }
            if (first >= 0 && (n >= DIRECT_BLOCKS || alone(taken, i, j, m, e, n))) {
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
            if (staging == null) {
                staging = Arena.ofAuto().allocate((long) STAGING_BLOCKS * blockSize, BlockDevice.BUFFER_ALIGNMENT);
            }
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

    /**
     * Whether values {@code taken[m, e)}, {@code n} blocks adjacent on the device, have no neighbour on the
     * device among {@code taken[i, j)}: copied into the staging buffer they would make a write of their own
     * all the same, so the copy would gain nothing. Overwrites scatter their values (each fills a hole a
     * value freed), and the write-back of 16 KiB overwrites copied all of them, a write each.
     */
    private boolean alone(Deferred[] taken, int i, int j, int m, int e, int n) {
        long start = taken[m].x.block();
        return (m == i || taken[m - 1].x.block() + taken[m - 1].x.blocks(blockSize) != start)
                && (e == j || taken[e].x.block() != start + n);
    }

    /** Blocks pinned for values whose write is pending, for tests. */
    synchronized long pendingBlocks() {
        return pendingBlocks;
    }

    /** The counts since mount. */
    synchronized ValueWriteStats stats() {
        return new ValueWriteStats(written, writtenBehind, writtenAtBudget, runs, copied, bytesWritten, writeNanos);
    }

    /** {@link #written}, {@link #runs} and {@link #copied}, for tests. */
    synchronized long[] counts() {
        return new long[]{written, runs, copied};
    }
}
