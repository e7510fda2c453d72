package dev.ferrite.journal.internal;

import dev.ferrite.journal.JournalOptions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

import com.lmax.disruptor.ExceptionHandler;
import com.lmax.disruptor.LiteBlockingWaitStrategy;
import com.lmax.disruptor.RingBuffer;
import com.lmax.disruptor.dsl.Disruptor;
import com.lmax.disruptor.dsl.ProducerType;

import org.jctools.queues.atomic.MpscAtomicArrayQueue;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.internal.OffHeap;

/**
 * The active item list: every item with changes durable in the log but not yet at home, ordered by the
 * start LSN of the oldest checkpoint the log must keep for it: the first that logged it since it was
 * last home, as checkpoints log only each item's delta ({@link LogItem}), or the last that logged it
 * whole.
 *
 * <h2>Bulk insertion through a Disruptor</h2>
 * The log writer publishes each completed checkpoint as one ring slot carrying its whole item array: a
 * constant-cost hand-off, so the writer goes straight on to the next checkpoint however many items this
 * one had (a slot per item cost it a millisecond per 10k items, and a wait whenever a checkpoint
 * outgrew the ring). One consumer thread ({@code ferrite-ail}) gathers slots until Disruptor says the
 * batch ended, then takes the AIL lock once and appends every item of every checkpoint gathered. LSNs
 * only grow, so the list stays ordered by appending; an item relogged with its delta keeps its place, one
 * relogged whole is unlinked and appended, i.e. moves forward. Only after insertion are the items
 * unpinned and allowed home. A forcer that wrote a small checkpoint on its own thread inserts it itself
 * when it is the one due next ({@link #insertNow}), under the same lock, so a lone committer's forces wake
 * no thread here; the order check is the same either way.
 *
 * <h2>Pushing</h2>
 * The pusher ({@code ferrite-ail-pusher}) writes back items up to a target LSN. It is woken only when
 * the target moves forward. For each round it snapshots up to {@code batch} unpinned, unlocked items
 * (clearing their logged maps: the next checkpoint of an item carries only what changed after the
 * snapshot), writes them in block order with one batch and one flush, drops those not relogged
 * meanwhile, then moves the tail: the new tail is anchored on disk (write and flush) before
 * {@link LogSpace} may hand out the space behind it. Pinned items make it ask the log for a checkpoint.
 * An item it cannot write home, pinned or locked (a block changed again and again), whose place lies more
 * than a quarter of the log behind, is asked to be relogged whole ({@link LogItem#wholeRelog}): its next
 * checkpoint then moves it on, so a hot block never holds the tail for long. One relogged while its write-back is in flight stays listed (its relog
 * after the snapshot is always whole, its first since home, and has moved it on already).
 *
 * <h2>Heavy items go home early</h2>
 * An item changed again and again (a hot leaf, or a node a split logged whole) gathers changes since it
 * was last home, which a whole relog logs at once. The consumer therefore hands every inserted item
 * whose logged map is past the relog limit to the pusher, which writes it home at once (if it is not
 * busy or pinned by then): what a whole relog of it would log starts afresh.
 *
 * <p>Lock order: an item's owner lock, then the AIL lock; no I/O under the AIL lock.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class Ail implements AutoCloseable {
    /** One ring slot: a completed checkpoint, its first {@code count} items and where it ends. */
    static final class Event {
        LogItem[] items;
        int count;
        long lsn;
        long seq;
        long endLsn;
    }

    public interface TailListener {
        /** Anchors the new tail durably and lets the log reuse the space behind it. */
        void tailMoved(long tailLsn, long tailSeq);
    }

    private final BlockDevice device;
    private final int batchMax;
    private final TailListener tailListener;
    private final Runnable needCheckpoint;
    private final int relogChunks;
    private final int areaBlocks;

    // The list, and where the oldest checkpoint not yet inserted begins; guarded by lock.
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition progress = lock.newCondition();
    private LogItem first;
    private LogItem last;
    private int size;
    private long nextStartLsn;
    private long nextStartSeq;
    private long anchoredLsn;

    // Insertion (consumer thread only).
    private final Disruptor<Event> disruptor;
    private final RingBuffer<Event> ring;
    private Event[] pending = new Event[256];
    private int pendingCount;

    // Pushing.
    private final Thread pusher;
    private final AtomicLong target = new AtomicLong(Lsn.NONE);
    /**
     * Items past the relog limit, from the inserters (the consumer, forcers inserting their own checkpoint)
     * to the pusher; a full queue drops (they come back).
     */
    private final MpscAtomicArrayQueue<LogItem> heavy = new MpscAtomicArrayQueue<>(1 << 14);
    /** Set when items arrive at or below a target the pusher already finished: it must look again. */
    private volatile boolean rescan;
    private volatile boolean running = true;
    private volatile Throwable failure;
    /** The journal's shutdown, told of a failure before anyone waiting on the AIL wakes to it. */
    private final java.util.function.Consumer<Throwable> onFailure;
    private final Arena arena = Arena.ofShared();
    /** Each snapshot as a block-sized segment, made once: a slice per write-back was garbage. */
    private final MemorySegment[] snapSlots;
    private final LogItem[] snapItems;
    private final long[] snapLsns;
    private final long[] order;
    private final IoBatch io;

    // Statistics.
    final LongAdder insertBatches = new LongAdder();
    /** Checkpoints a forcer inserted itself ({@link #insertNow}), not through the ring. */
    final LongAdder insertedNow = new LongAdder();
    public final LongAdder insertedItems = new LongAdder();
    final LongAdder pushRounds = new LongAdder();
    final LongAdder pusherWakeups = new LongAdder();
    final LongAdder writtenBack = new LongAdder();
    final LongAdder writtenEarly = new LongAdder();
    final LongAdder tailMoves = new LongAdder();
    final LongAdder droppedStale = new LongAdder();

    /** Most items written home per round (block numbers are packed with the index for sorting). */
    static final int MAX_BATCH = JournalOptions.MAX_AIL_BATCH;

    /**
     * @param relogChunks logged-map size (in chunks, 128ths of a block) past which an item is written home early;
     *                    64 turns that off
     * @param areaBlocks  blocks of the log's circular area: an item relogged with deltas while its place
     *                    lies more than half of it behind, or one a push cannot write home a quarter of
     *                    it behind, is asked to relog whole
     */
    public Ail(BlockDevice device, int ringSize, int batchMax, int relogChunks, int areaBlocks, long startLsn, long startSeq,
        TailListener tailListener, Runnable needCheckpoint, java.util.function.Consumer<Throwable> onFailure) {
        if (batchMax < 1 || batchMax > MAX_BATCH) {
            throw new IllegalArgumentException("AIL batch " + batchMax + " is outside 1.." + MAX_BATCH);
        }
        this.onFailure = onFailure;
        this.device = device;
        this.batchMax = batchMax;
        this.tailListener = tailListener;
        this.needCheckpoint = needCheckpoint;
        this.relogChunks = relogChunks;
        this.areaBlocks = areaBlocks;
        this.nextStartLsn = startLsn;
        this.nextStartSeq = startSeq;
        this.anchoredLsn = startLsn;
        int align = BlockDevice.BUFFER_ALIGNMENT;
        long snapStride = ((long) device.blockSize() + align - 1) / align * align; // each slot starts aligned for the device
        // mapped, not allocated: the kernel supplies pages as write-backs first use them, where an arena's
        // allocation would zero the whole batch (a MiB) at every mount
        MemorySegment snapshots = OffHeap.reserve(snapStride * batchMax, arena);
        this.snapSlots = new MemorySegment[batchMax];
        for (int i = 0; i < batchMax; i++) {
            snapSlots[i] = snapshots.asSlice(i * snapStride, device.blockSize());
        }
        this.snapItems = new LogItem[batchMax];
        this.snapLsns = new long[batchMax];
        this.order = new long[batchMax];
        this.io = new IoBatch(batchMax);
        // One publisher at a time, but not always the same thread (the log writer's two stages take turns),
        // which the single-producer sequencer refuses; a claim per checkpoint makes the CAS immaterial.
        this.disruptor = new Disruptor<>(Event::new, ringSize, r -> daemon(r, "ferrite-ail"),
                ProducerType.MULTI, new LiteBlockingWaitStrategy());
        this.disruptor.handleEventsWith(this::onEvent);
        this.disruptor.setDefaultExceptionHandler(new ExceptionHandler<>() {
            @Override
            public void handleEventException(Throwable ex, long sequence, Event event) {
                fail(ex);
            }

            @Override
            public void handleOnStartException(Throwable ex) {
                fail(ex);
            }

            @Override
            public void handleOnShutdownException(Throwable ex) {
            }
        });
        this.ring = disruptor.getRingBuffer();
        this.pusher = daemon(this::pushLoop, "ferrite-ail-pusher");
    }

    /** Starts the consumer and the pusher. */
    public void start() {
        disruptor.start();
        pusher.start();
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    // ------------------------------------------------------------------ insertion

    /** Log writer thread: hands a durable checkpoint's items (the array is the AIL's from now on) to the AIL. */
    public void publish(LogItem[] items, int count, long lsn, long seq, long endLsn) {
        long slot = ring.next();
        fill(ring.get(slot), items, count, lsn, seq, endLsn);
        ring.publish(slot);
    }

    private static void fill(Event e, LogItem[] items, int count, long lsn, long seq, long endLsn) {
        e.items = items;
        e.count = count;
        e.lsn = lsn;
        e.seq = seq;
        e.endLsn = endLsn;
    }

    /** A durable checkpoint as the log writer hands it over: its items (the AIL's from then on), where it starts and ends. */
    interface Durable {
        LogItem[] items();

        long startLsn();

        long checkpointSeq();

        long endLsn();
    }

    /**
     * Log writer thread: hands the first {@code n} of {@code checkpoints}, durable and in checkpoint order,
     * to the AIL in one claim of the ring (several if they outnumber its slots), so that the consumer wakes
     * once for all of them, as it would for one: checkpoints forcers wrote on their own threads, gathered
     * since the last hand-off, would otherwise wake it one by one. Clears the array's references.
     */
    void publish(Durable[] checkpoints, int n) {
        for (int done = 0; done < n; ) {
            int k = Math.min(n - done, ring.getBufferSize());
            long hi = ring.next(k);
            long lo = hi - (k - 1);
            for (int i = 0; i < k; i++) {
                Durable c = checkpoints[done + i];
                checkpoints[done + i] = null;
                fill(ring.get(lo + i), c.items(), c.items().length, c.startLsn(), c.checkpointSeq(), c.endLsn());
            }
            ring.publish(lo, hi);
            done += k;
        }
    }

    private void onEvent(Event e, long sequence, boolean endOfBatch) {
        if (pendingCount == pending.length) {
            pending = Arrays.copyOf(pending, pendingCount * 2);
        }
        Event copy = pending[pendingCount];
        if (copy == null) {
            copy = pending[pendingCount] = new Event();
        }
        copy.items = e.items;
        copy.count = e.count;
        copy.lsn = e.lsn;
        copy.seq = e.seq;
        copy.endLsn = e.endLsn;
        e.items = null;
        pendingCount++;
        if (endOfBatch) {
            insertPending();
        }
    }

    private void insertPending() {
        int items = 0;
        lock.lock();
        try {
            for (int c = 0; c < pendingCount; c++) {
                Event e = pending[c];
                if (e.seq != nextStartSeq) {
                    // the list's order and the tail rest on it: a checkpoint skipped or out of place could
                    // let the tail pass items still only in the log
                    throw new IllegalStateException("checkpoint " + e.seq + " reached the AIL where checkpoint "
                            + nextStartSeq + " was due: checkpoints must arrive one after another, in order");
                }
                insertLocked(e.items, e.count, e.lsn, e.seq, e.endLsn);
                items += e.count;
            }
            progress.signalAll();
        } finally {
            lock.unlock();
        }
        long lowest = Long.MAX_VALUE;
        boolean early = false;
        for (int c = 0; c < pendingCount; c++) {
            Event e = pending[c];
            early |= release(e.items, e.count);
            if (e.count > 0) {
                lowest = Math.min(lowest, e.lsn);
            }
            e.items = null;
        }
        wakePusherFor(lowest, early);
        insertBatches.increment();
        insertedItems.add(items);
        AilInsertEvent.emit(items, pendingCount);
        pendingCount = 0;
    }

    /**
     * A forcer that wrote checkpoint {@code c} on its own thread: inserts its items here and now if it is
     * the next checkpoint the AIL is due (every earlier one inserted), without the ring and without waking
     * anyone (a lock taken, a few links, and the pusher woken only if a push already waits for these
     * items). False, with nothing done, if an earlier checkpoint is still on its way through the ring or
     * the log writer's queue: {@code c} must then follow it the same way.
     */
    boolean insertNow(Durable c) {
        LogItem[] items = c.items();
        lock.lock();
        try {
            if (c.checkpointSeq() != nextStartSeq) {
                return false;
            }
            insertLocked(items, items.length, c.startLsn(), c.checkpointSeq(), c.endLsn());
            progress.signalAll(); // no system call unless someone waits (a quiesce, a close)
        } finally {
            lock.unlock();
        }
        wakePusherFor(items.length > 0 ? c.startLsn() : Long.MAX_VALUE, release(items, items.length));
        insertedNow.increment();
        insertedItems.add(items.length);
        AilInsertEvent.emit(items.length, 1);
        return true;
    }

    /** Under the lock: appends (or keeps in place) the items of checkpoint {@code seq}, the one due next. */
    private void insertLocked(LogItem[] items, int count, long lsn, long seq, long endLsn) {
        for (int i = 0; i < count; i++) {
            LogItem it = items[i];
            it.lastLsn = lsn;
            if (it.inAil) {
                if (!it.loggedWholeBy(seq)) {
                    // a delta: the item's older place still holds the changes before it. Half a
                    // log behind, it is relogged whole next, long before the push for space
                    // (a quarter free) could find it holding the tail, hot, with every
                    // committer waiting for space and none to relog it.
                    if (blocksBetween(it.ailLsn, lsn) > areaBlocks / 2) {
                        it.askWholeRelog();
                    }
                    continue;
                }
                unlink(it);
            }
            it.wholeRelogDone();
            it.ailLsn = lsn;
            it.ailSeq = seq;
            it.inAil = true;
            it.ailPrev = last;
            it.ailNext = null;
            if (last == null) {
                first = it;
            } else {
                last.ailNext = it;
            }
            last = it;
            size++;
        }
        nextStartLsn = endLsn;
        nextStartSeq = seq + 1;
    }

    /** After insertion, without the lock: unpins the items; true if any went to the pusher as heavy. */
    private boolean release(LogItem[] items, int count) {
        boolean early = false;
        for (int i = 0; i < count; i++) {
            LogItem it = items[i];
            // read without the owner's lock: a hint, rechecked under it before writing
            if (DirtyMap.chunks(it.loggedMap, it.loggedMapHigh) > relogChunks) {
                early |= heavy.offer(it);
            }
            it.unpin();
        }
        return early;
    }

    /** Wakes the pusher if items inserted from {@code lowest} on lie within a push already asked for, or went to it as heavy. */
    private void wakePusherFor(long lowest, boolean early) {
        if (lowest <= target.get()) {
            // a push already asked for these (they were still in flight then): once per batch, not per item
            rescan = true;
            LockSupport.unpark(pusher);
        } else if (early) {
            LockSupport.unpark(pusher);
        }
    }

    /** Log blocks from {@code from} to {@code to}, a later LSN. */
    private long blocksBetween(long from, long to) {
        return (long) (Lsn.cycle(to) - Lsn.cycle(from)) * areaBlocks + Lsn.block(to) - Lsn.block(from);
    }

    private void unlink(LogItem it) {
        if (it.ailPrev == null) {
            first = it.ailNext;
        } else {
            it.ailPrev.ailNext = it.ailNext;
        }
        if (it.ailNext == null) {
            last = it.ailPrev;
        } else {
            it.ailNext.ailPrev = it.ailPrev;
        }
        it.ailPrev = it.ailNext = null;
        it.inAil = false;
        size--;
    }

    // ------------------------------------------------------------------ pushing

    /** Asks for every item at or below {@code lsn} to be written home; wakes the pusher only if the target moved. */
    void pushTo(long lsn) {
        for (long cur = target.get(); lsn > cur; cur = target.get()) {
            if (target.compareAndSet(cur, lsn)) {
                LockSupport.unpark(pusher);
                return;
            }
        }
    }

    /**
     * Waits until the items of checkpoint {@code seq} (durable already) are in the AIL, then writes every
     * item in the AIL home and waits until the anchored tail has caught up with the end of the log as it
     * was then (items relogged meanwhile are not waited for).
     */
    void pushAllAndWait(long seq, long timeoutNanos) {
        long deadline = System.nanoTime() + timeoutNanos;
        long goal;
        long newest;
        lock.lock();
        try {
            while (nextStartSeq <= seq && failure == null) {
                if (deadline - System.nanoTime() <= 0) {
                    throw new IllegalStateException("checkpoint " + seq + " did not reach the AIL within "
                            + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms");
                }
                progress.awaitNanos(TimeUnit.MILLISECONDS.toNanos(50));
            }
            goal = nextStartLsn;
            newest = last != null ? last.ailLsn : nextStartLsn;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the AIL", e);
        } finally {
            lock.unlock();
        }
        pushTo(newest);
        lock.lock();
        try {
            while (anchoredLsn < goal && failure == null) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new IllegalStateException("AIL did not drain to " + Lsn.toString(goal) + " within "
                            + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms (" + size + " items left, tail "
                            + Lsn.toString(anchoredLsn) + ")");
                }
                progress.awaitNanos(Math.min(left, TimeUnit.MILLISECONDS.toNanos(50)));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            lock.unlock();
        }
        // after a failure the journal has shut down already: its caller reports that
    }

    private void pushLoop() {
        long reached = Lsn.NONE;
        long backoff = 0;
        boolean unfinished = false; // the last round stopped short of its target (batch limit, or stuck)
        while (running) {
            long tgt = target.get();
            boolean pushing = tgt > reached || rescan || unfinished;
            if (!pushing && heavy.isEmpty()) {
                LockSupport.park(this);
                pusherWakeups.increment();
                continue;
            }
            try {
                if (!heavy.isEmpty()) {
                    earlyRound();
                }
                if (!pushing) {
                    continue;
                }
                rescan = false;
                Round r = pushRound(tgt);
                unfinished = r != Round.DONE;
                if (r == Round.DONE) {
                    reached = tgt;
                }
                if (r == Round.STUCK) {
                    // every candidate pinned or locked: back off (1 ms doubling to 50 ms) while they clear
                    backoff = Math.min(Math.max(backoff * 2, TimeUnit.MILLISECONDS.toNanos(1)), TimeUnit.MILLISECONDS.toNanos(50));
                    LockSupport.parkNanos(this, backoff);
                } else {
                    backoff = 0;
                }
            } catch (Throwable t) {
                fail(t);
                return;
            }
        }
    }

    private enum Round { DONE, PROGRESS, STUCK }

    private Round pushRound(long tgt) {
        // Candidates and snapshots share snapItems: the i-th snapshot never outruns the i-th candidate.
        int candidates = 0;
        LogItem[] cands = snapItems;
        long head;
        lock.lock();
        try {
            for (LogItem it = first; it != null && it.ailLsn <= tgt && candidates < batchMax; it = it.ailNext) {
                cands[candidates++] = it;
            }
            head = nextStartLsn;
        } finally {
            lock.unlock();
        }
        pushRounds.increment();
        if (candidates == 0) {
            advanceTail();
            return Round.DONE;
        }
        int written = 0;
        int stale = 0;
        boolean pinned = false;
        for (int i = 0; i < candidates; i++) {
            LogItem it = cands[i];
            cands[i] = null;
            Take t = take(it, written, false);
            switch (t) {
                case WRITTEN -> written++;
                case PINNED -> pinned = true;
                case STALE -> stale++;
                case BUSY, SKIPPED -> { }
            }
            // Held in place by changes, it holds the tail: relogged whole, it moves on. Not one whose place
            // lies in the newest quarter of the log, which no push for space reaches (a push to write
            // everything home, for a cache short of clean buffers, would have every busy block relogged).
            if ((t == Take.PINNED || t == Take.BUSY) && blocksBetween(it.ailLsn, head) > areaBlocks / 4) {
                it.askWholeRelog();
            }
        }
        if (written > 0) {
            writeHome(written);
        }
        if (pinned) {
            needCheckpoint.run();
        }
        advanceTail();
        return written > 0 || stale > 0 ? Round.PROGRESS : Round.STUCK;
    }

    /**
     * Writes home up to a batch of the items queued as heavy that still are: in the AIL, unpinned (a
     * pinned one is being relogged already and will be queued again), not busy, logged map still past the
     * limit (an item queued twice was written the first time).
     */
    private void earlyRound() {
        int written = 0;
        LogItem it;
        while (written < batchMax && (it = heavy.poll()) != null) {
            if (take(it, written, true) == Take.WRITTEN) {
                written++;
            }
        }
        if (written > 0) {
            writeHome(written);
            writtenEarly.add(written);
            advanceTail();
        }
    }

    /** What became of an item offered for write-back. */
    private enum Take { WRITTEN, PINNED, BUSY, STALE, SKIPPED }

    /**
     * Snapshots {@code it} into slot {@code i} if it can go home now: not pinned, its lock free, not stale
     * (a stale one is dropped). With {@code early}, only if it is still in the AIL with its logged map past
     * the relog limit (an item queued twice went home the first time).
     */
    private Take take(LogItem it, int i, boolean early) {
        if (early && !it.inAil) {
            return Take.SKIPPED;
        }
        if (it.isPinned()) {
            return Take.PINNED;
        }
        if (!it.tryLock()) {
            return Take.BUSY;
        }
        try {
            if (it.isPinned()) {
                return Take.PINNED;
            }
            if (early && (!it.inAil || DirtyMap.chunks(it.loggedMap, it.loggedMapHigh) <= relogChunks)) {
                return Take.SKIPPED;
            }
            if (it.isStale()) {
                dropStale(it);
                return Take.STALE;
            }
            snapshot(it, i);
            return Take.WRITTEN;
        } finally {
            it.unlock();
        }
    }

    /**
     * Copies a locked, unpinned item's image into snapshot {@code i}, stamped with the newest checkpoint
     * that logged it (the image holds every change logged, and nothing else); its relog starts afresh, so
     * its next one is whole (and, once home, the block no longer needs rebuilding from zeros or from its
     * initialisation record).
     */
    private void snapshot(LogItem it, int i) {
        int blockSize = device.blockSize();
        MemorySegment snap = snapSlots[i];
        MemorySegment.copy(it.image(), 0, snap, 0, blockSize);
        it.loggedMap = 0;
        it.loggedMapHigh = 0;
        it.zeroed = false;
        it.ordered = false;
        it.wholeRelogDone();
        long lsn = it.lastLsn;
        it.stamp(snap, lsn);
        snapItems[i] = it;
        snapLsns[i] = lsn;
    }

    private void writeHome(int written) {
        // Sort by home block: (home << 10 | index) keeps it allocation-free.
        for (int i = 0; i < written; i++) {
            order[i] = snapItems[i].home() << 10 | i;
        }
        Arrays.sort(order, 0, written);
        io.clear();
        for (int k = 0; k < written; k++) {
            int i = (int) (order[k] & 1023);
            io.write(snapItems[i].home(), snapSlots[i]);
        }
        device.submit(io);
        device.flush();
        io.clear();
        lock.lock();
        try {
            for (int i = 0; i < written; i++) {
                LogItem it = snapItems[i];
                // relogged meanwhile: its home lacks that checkpoint, which (whole, its first since the
                // snapshot) has moved it on already; the tail has not passed it, as it moves only below
                if (it.inAil && it.lastLsn == snapLsns[i]) {
                    unlink(it);
                }
            }
        } finally {
            lock.unlock();
        }
        for (int i = 0; i < written; i++) {
            snapItems[i].writtenBack(snapLsns[i]);
            snapItems[i] = null;
        }
        writtenBack.add(written);
        AilPushEvent.emit(written);
    }

    /** Removes a freed block's item: its contents must never reach home. Pusher thread, owner lock held. */
    private void dropStale(LogItem it) {
        lock.lock();
        try {
            if (it.inAil) {
                unlink(it);
            }
        } finally {
            lock.unlock();
        }
        it.loggedMap = 0;
        it.loggedMapHigh = 0;
        it.zeroed = false;
        it.ordered = false;
        it.wholeRelogDone();
        droppedStale.increment();
    }

    /** Moves the tail to the oldest LSN still needed, anchoring it first. Pusher thread only. */
    private void advanceTail() {
        long tailLsn;
        long tailSeq;
        lock.lock();
        try {
            if (first != null) {
                tailLsn = first.ailLsn;
                tailSeq = first.ailSeq;
            } else {
                tailLsn = nextStartLsn;
                tailSeq = nextStartSeq;
            }
            if (tailLsn == anchoredLsn) {
                return;
            }
        } finally {
            lock.unlock();
        }
        tailListener.tailMoved(tailLsn, tailSeq);
        lock.lock();
        try {
            anchoredLsn = tailLsn;
            progress.signalAll();
        } finally {
            lock.unlock();
        }
        tailMoves.increment();
    }

    /** The items in AIL order, oldest first: a snapshot for inspection. */
    java.util.List<LogItem> items() {
        lock.lock();
        try {
            java.util.List<LogItem> out = new java.util.ArrayList<>(size);
            for (LogItem it = first; it != null; it = it.ailNext) {
                out.add(it);
            }
            return out;
        } finally {
            lock.unlock();
        }
    }

    /** Newest LSN in the AIL, or the next checkpoint's if it is empty. */
    long maxLsn() {
        lock.lock();
        try {
            return last != null ? last.ailLsn : nextStartLsn;
        } finally {
            lock.unlock();
        }
    }

    String diagnostics() {
        lock.lock();
        try {
            return "AIL " + size + " items " + (first == null ? "" : Lsn.toString(first.ailLsn) + ".." + Lsn.toString(last.ailLsn))
                    + ", push target " + Lsn.toString(target.get()) + ", anchored tail " + Lsn.toString(anchoredLsn)
                    + ", next checkpoint at " + Lsn.toString(nextStartLsn) + (rescan ? ", rescan" : "");
        } finally {
            lock.unlock();
        }
    }

    /** Items in the AIL now. */
    int size() {
        lock.lock();
        try {
            return size;
        } finally {
            lock.unlock();
        }
    }

    /** LSN of the oldest item, or of the next checkpoint if the AIL is empty. */
    long minLsn() {
        lock.lock();
        try {
            return first != null ? first.ailLsn : nextStartLsn;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Stops the AIL after {@code t}: the journal hears first (it shuts down, so no later call goes on
     * from home blocks that may not be on disk), then the waiters wake to find it shut down.
     */
    private void fail(Throwable t) {
        onFailure.accept(t);
        failure = t;
        lock.lock();
        try {
            progress.signalAll();
        } finally {
            lock.unlock();
        }
    }

    Throwable failure() {
        return failure;
    }

    /** Stops insertion (after the ring drains) and the pusher. Items still listed stay unwritten. */
    @Override
    public void close() {
        disruptor.shutdown();
        running = false;
        LockSupport.unpark(pusher);
        try {
            pusher.join(TimeUnit.SECONDS.toMillis(10));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        arena.close();
    }
}
