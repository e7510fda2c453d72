package dev.ferrite.journal.internal;

import dev.ferrite.io.internal.ThreadSlots;
import dev.ferrite.journal.ReservationExceededException;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * The committed item list: delayed logging's in-memory aggregation of committed changes until the next
 * checkpoint writes them.
 *
 * <p>No global lock on the commit path. Commits are spread over stripes, twice as many as the JVM has
 * processors (a power of two, at least 4), picked by a hash of the committing thread's id: not per CPU,
 * since a thread does not know its CPU, but enough stripes that few threads share one; each
 * {@link Context} (one per checkpoint sequence) has, per stripe on its own cache line, a count of
 * committers inside and the log bytes they stole, plus a lock-free stack of the items first logged in
 * the context. A committer enters its stripe, re-checks that the context is still current, and leaves;
 * the push thread swaps in a new context and waits for the old one's stripes to drain (a striped
 * grace period), after which the old context is immutable and its items are merged.
 *
 * <p>An item relogged within a context is copied again into its shadow buffer and written once per
 * checkpoint with its latest contents: the chunks changed in that context (its delta), or every chunk
 * changed since it was last home when the context logs it whole ({@link LogItem}: its first context
 * since home, a block just allocated or initialised, or one the AIL asked to move on). A shadow holds
 * only the logged chunks, packed in chunk order (the op's data as the checkpoint writes it), and is
 * replaced by a larger one when a relog adds chunks past its size. Each item has two shadows, by context
 * parity: commits into context k+1 never touch the buffers context k's push reads, and context k+2
 * exists only once k's push is over ({@link ShadowPool} relies on that too).
 *
 * <p>Space: every commit steals from its ticket exactly the log bytes its items add to the context,
 * plus a share for record headers and padding; the first commit of a context also steals the
 * checkpoint's fixed overhead. What the checkpoint does not use goes back to the grant heads.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class Cil {
    private static final int SLOT_STRIDE = 8;   // longs per stripe in Context.slots: own 64-byte line
    private static final int HEAD_STRIDE = 16;  // references per stripe in Context.heads
    /** Spins of the push thread on a stripe still in use before it parks. */
    private static final int DRAIN_SPINS = 1000;
    /** How long the push thread waits for committers to leave a context before declaring one stuck. */
    public static final long DRAIN_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(30);

    /**
     * A context is reused once its checkpoint is formatted ({@link #retire}): a new one per checkpoint was
     * a few hundred bytes of garbage per forced commit on 2 CPUs and 16 KiB on 64. A committer or pinner
     * that read {@link #current} long ago may still touch a retired or reused context; it only ever
     * raises and then lowers its own count ({@code slots}' committers, {@link #pins}), and looks again
     * at {@code current} before it does anything else. So those counts are never reset, they return to
     * zero by themselves, and the rest is reset before the context is published again.
     */
    static final class Context {
        /** Written only while the context is not current, and published by the write of {@link #current}. */
        long seq;
        /** [stripe * SLOT_STRIDE] committers inside; [+1] bytes stolen by the stripe's commits; [+2] items added. */
        final AtomicLongArray slots;
        final AtomicReferenceArray<LogItem> heads;
        /** Sum of the stripes' bytes in {@code quantum} steps: cheap to read for the push threshold. */
        final AtomicLong approxBytes = new AtomicLong();
        final AtomicBoolean overheadTaken = new AtomicBoolean();
        /** The push thread once it has switched this context out and waits for it to drain; null before. */
        volatile Thread drainer;
        /**
         * The log's device flushes begun ({@code LogWriter#flushesBegun}) when the last commit in this
         * context ordered after data writes ({@code Transaction#orderAfterData}) came in, or -1 if none
         * did: its checkpoint is written after a device flush begun later than that. Raised inside the
         * context, so the push sees it once the context has drained.
         */
        final AtomicLong preflushMark = new AtomicLong(-1);
        /** Groups holding this context current ({@link #pin}): the push switches it out only once none does. */
        final AtomicInteger pins = new AtomicInteger();
        /** Set by the push before it waits for {@link #pins} to drain: no new pin is taken on this context. */
        volatile boolean closing;

        Context(long seq, int stripes) {
            this.seq = seq;
            this.slots = new AtomicLongArray(stripes * SLOT_STRIDE);
            this.heads = new AtomicReferenceArray<>(stripes * HEAD_STRIDE);
        }

        /** Makes a retired context ready to be context {@code seq}: all but the committers' and pins' counts. */
        Context reuse(long seq) {
            this.seq = seq;
            for (int i = 0; i < slots.length(); i += SLOT_STRIDE) {
                slots.set(i + 1, 0);
                slots.set(i + 2, 0);
            }
            for (int i = 0; i < heads.length(); i += HEAD_STRIDE) {
                heads.set(i, null);
            }
            approxBytes.set(0);
            overheadTaken.set(false);
            drainer = null;
            preflushMark.set(-1);
            closing = false;
            return this;
        }

        long bytes() {
            long sum = 0;
            for (int i = 1; i < slots.length(); i += SLOT_STRIDE) {
                sum += slots.get(i);
            }
            return sum;
        }

        /** How many items (blocks) have been logged in this context so far: each stays pinned in memory until its checkpoint is written. */
        int itemCount() {
            long n = 0;
            for (int i = 2; i < slots.length(); i += SLOT_STRIDE) {
                n += slots.get(i);
            }
            return (int) n;
        }

        /** The items logged in this context, in an array of exactly their number; only once it has drained. */
        LogItem[] items() {
            LogItem[] out = new LogItem[itemCount()];
            int parity = (int) (seq & 1);
            int k = 0;
            for (int s = 0; s < heads.length(); s += HEAD_STRIDE) {
                for (LogItem it = heads.get(s); it != null; it = it.slot(parity).next) {
                    out[k++] = it;
                }
            }
            return out;
        }
    }

    private final int stripeMask;
    private final int chunkShift;
    private final ShadowPool shadows;
    private final long shareNum;
    private final long shareDen;
    private final long checkpointOverhead;
    private final long threshold;
    /** Context size past which committers wait for a push: an eighth over the threshold. */
    private final long hardLimit;
    /** Step in which stripes report their bytes to the shared total: coarse, but well under the threshold. */
    private final long quantum;
    private final Runnable overThreshold;
    private final long drainTimeoutNanos;
    private volatile Context current;
    /** A formatted context for the next switch to reuse, or null; only the push turn's holder touches it. */
    private Context retired;

    /**
     * @param firstSeq      sequence of the first context
     * @param blockSize     device block size (items are one block)
     * @param threshold     context size in bytes that starts a background push
     * @param overThreshold called (from a committer) when the current context passes the threshold
     * @param drainTimeoutNanos how long {@link #switchContext} waits for committers to leave a context
     */
    public Cil(long firstSeq, int blockSize, long threshold, ShadowPool shadows, Runnable overThreshold, long drainTimeoutNanos) {
        int cpus = Runtime.getRuntime().availableProcessors();
        int stripes = Integer.highestOneBit(Math.max(4, cpus * 2) * 2 - 1);
        this.stripeMask = stripes - 1;
        this.chunkShift = DirtyMap.chunkShift(blockSize);
        this.shadows = shadows;
        // Records: each but the last is filled to within one op of capacity, and costs at most two blocks
        // beyond its payload (header and last-block padding); the share pays for that in proportion.
        long capacity = (long) LogRecordFormat.maxPayloadBlocks(blockSize) * blockSize - DirtyMap.maxOpSize(chunkShift);
        this.shareNum = 2L * blockSize;
        this.shareDen = capacity;
        this.checkpointOverhead = 3L * blockSize + LogRecordFormat.COMMIT_OP_SIZE;
        this.threshold = threshold;
        this.hardLimit = threshold + threshold / 8;
        this.quantum = Math.max(blockSize, Math.min(64 * 1024, threshold / (4L * stripes)));
        this.overThreshold = overThreshold;
        this.drainTimeoutNanos = drainTimeoutNanos;
        this.current = new Context(firstSeq, stripes);
    }

    public int chunkShift() {
        return chunkShift;
    }

    /** Log bytes reserved per item in the worst case, record overhead share included. */
    long itemReservation() {
        return share(DirtyMap.maxOpSize(chunkShift)) + DirtyMap.maxOpSize(chunkShift);
    }

    /** Fixed log bytes of one checkpoint, taken by the first commit of each context. */
    long checkpointOverhead() {
        return checkpointOverhead;
    }

    long currentSeq() {
        return current.seq;
    }

    Context current() {
        return current;
    }

    private long share(long bytes) {
        return (bytes * shareNum + shareDen - 1) / shareDen;
    }

    /**
     * The current thread's stripe, by {@link ThreadSlots} (package-private for tests). A hash of the thread
     * id (bits 40-41 of the id times the golden ratio) put threads whose ids were two apart on one stripe
     * more often than not, and with them its three atomic updates a commit: 64 B deletes at 2 threads cost
     * 2.07-2.23 µs of the workers' CPU each, against 1.42-1.61 with a stripe each.
     */
    int stripe() {
        return ThreadSlots.current() & stripeMask;
    }

    /**
     * Moves the transaction's dirty ranges into the current context and charges the ticket. The caller
     * holds every item's lock.
     *
     * @param afterFlushes -1, or the log's device flushes begun so far: the context's checkpoint must be
     *                     written after a flush begun later (see {@link Context#preflushMark})
     * @return the context's sequence: forcing it makes this commit durable
     * @throws ReservationExceededException if the changes need more log space than the ticket holds;
     *                                      nothing has been changed then
     */
    public long commit(LogItem[] items, int count, Ticket ticket, long afterFlushes) {
        int stripe = stripe();
        Context ctx;
        for (;;) {
            ctx = current;
            ctx.slots.getAndIncrement(stripe * SLOT_STRIDE);
            if (ctx == current) {
                break;
            }
            leave(ctx, stripe);
        }
        try {
            int p = (int) (ctx.seq & 1);
            long steal = 0;
            boolean dirty = false;
            for (int i = 0; i < count; i++) {
                LogItem it = items[i];
                if ((it.txDirty | it.txDirtyHigh) != 0 || it.txOrdered) {
                    dirty = true;
                    CilSlot slot = it.slotOrNull(p);
                    boolean inCtx = slot != null && slot.ctxSeq == ctx.seq;
                    boolean whole = inCtx ? slot.whole || it.txZeroed || it.wholeRelog == LogItem.RELOG_ASKED
                            : wholeInNewContext(it);
                    // a delta that covers every chunk changed since home is the whole: logged as such it
                    // moves the item on, at no cost, where a delta would hold the tail at its old place
                    // until written home (a block rewritten in full, again and again, never would be)
                    whole |= ((inCtx ? slot.shadowMap : 0) | it.txDirty) == (it.loggedMap | it.txDirty)
                            && ((inCtx ? slot.shadowMapHigh : 0) | it.txDirtyHigh) == (it.loggedMapHigh | it.txDirtyHigh);
                    it.txWhole = whole;
                    long map = whole ? it.loggedMap | it.txDirty | (inCtx ? 0 : rebuildMap(it))
                            : (inCtx ? slot.shadowMap : 0) | it.txDirty;
                    long mapHigh = whole ? it.loggedMapHigh | it.txDirtyHigh : (inCtx ? slot.shadowMapHigh : 0) | it.txDirtyHigh;
                    int grown = DirtyMap.opSize(map, mapHigh, chunkShift) - (inCtx ? slot.opBytes : 0);
                    steal += grown + share(grown);
                }
            }
            if (!dirty) {
                return ctx.seq;
            }
            boolean needOverhead = !ctx.overheadTaken.get();
            if (steal + (needOverhead ? checkpointOverhead : 0) > ticket.current) {
                throw new ReservationExceededException("transaction needs " + (steal + (needOverhead ? checkpointOverhead : 0))
                        + " bytes of log space but its reservation has " + ticket.current + " left");
            }
            if (needOverhead && ctx.overheadTaken.compareAndSet(false, true)) {
                steal += checkpointOverhead;
            }
            for (int i = 0; i < count; i++) {
                LogItem it = items[i];
                if ((it.txDirty | it.txDirtyHigh) != 0 || it.txOrdered) {
                    insert(ctx, p, stripe, it);
                }
            }
            for (long m = ctx.preflushMark.get(); afterFlushes > m; m = ctx.preflushMark.get()) {
                if (ctx.preflushMark.compareAndSet(m, afterFlushes)) {
                    break;
                }
            }
            ticket.current -= steal;
            long after = ctx.slots.addAndGet(stripe * SLOT_STRIDE + 1, steal);
            long crossed = after / quantum - (after - steal) / quantum;
            if (crossed != 0 && ctx.approxBytes.addAndGet(crossed * quantum) >= threshold) {
                overThreshold.run();
            }
            return ctx.seq;
        } finally {
            leave(ctx, stripe);
        }
    }

    /**
     * A committer leaves its stripe of {@code ctx}; the last one out of a context being drained wakes the
     * push thread. Dekker with {@link #switchContext}: both sides store (the count here, {@code drainer}
     * there) and then load the other's word, all volatile, so one of them sees the other.
     */
    private static void leave(Context ctx, int stripe) {
        if (ctx.slots.decrementAndGet(stripe * SLOT_STRIDE) == 0) {
            Thread drainer = ctx.drainer;
            if (drainer != null) {
                LockSupport.unpark(drainer);
            }
        }
    }

    /**
     * True if an item's first commit into a context logs it whole rather than as the context's delta:
     * nothing logged since it was last home (the delta is the whole, and its place in the AIL starts
     * here), a block just allocated, an ordered block relogged after its record's checkpoint, or one the
     * AIL asked to move on.
     */
    private static boolean wholeInNewContext(LogItem it) {
        return (it.loggedMap | it.loggedMapHigh) == 0 || it.txZeroed || it.ordered && !it.txOrdered || it.wholeRelog == LogItem.RELOG_ASKED;
    }

    /**
     * What an item's first commit into a context must log besides its changes: for an ordered item
     * relogged after its record's checkpoint, its header (it is logged as zeroed from then on, and its
     * copy must rebuild the block without the record: {@link LogItem#ordered}); else nothing. The low
     * word: a header lies in the block's first half.
     */
    private long rebuildMap(LogItem it) {
        return it.ordered && !it.txOrdered && it.headerLength() > 0 ? DirtyMap.low(0, it.headerLength(), chunkShift) : 0;
    }

    private void insert(Context ctx, int p, int stripe, LogItem it) {
        CilSlot slot = it.slot(p);
        if (slot.ctxSeq != ctx.seq && it.ordered && !it.txOrdered) {
            it.loggedMap |= rebuildMap(it);
            it.txZeroed = true;
            it.ordered = false;
        }
        long union = it.loggedMap | it.txDirty, unionHigh = it.loggedMapHigh | it.txDirtyHigh;
        boolean whole = it.txWhole;
        long map, mapHigh;
        if (slot.ctxSeq != ctx.seq) {
            map = whole ? union : it.txDirty;
            mapHigh = whole ? unionHigh : it.txDirtyHigh;
            shadows.acquire(p, DirtyMap.packedSize(map, mapHigh, chunkShift), slot);
            DirtyMap.pack(map, mapHigh, map, mapHigh, chunkShift, it.image(), slot.slab, slot.at);
            slot.layout = map;
            slot.layoutHigh = mapHigh;
            slot.ctxSeq = ctx.seq;
            it.pin();
            int head = stripe * HEAD_STRIDE;
            LogItem first;
            do {
                first = ctx.heads.get(head);
                slot.next = first;
            } while (!ctx.heads.compareAndSet(head, first, it));
            ctx.slots.getAndIncrement(stripe * SLOT_STRIDE + 2);
        } else if (whole && !slot.whole) {
            // the context's delta turns whole: every chunk changed since home, all copied from the image,
            // which holds each at its newest (a block zeroed again holds none of the shadow's older copies)
            map = union;
            mapHigh = unionHigh;
            layOut(p, slot, map, mapHigh);
            DirtyMap.pack(map, mapHigh, slot.layout, slot.layoutHigh, chunkShift, it.image(), slot.slab, slot.at);
        } else {
            map = whole ? union : slot.shadowMap | it.txDirty;
            mapHigh = whole ? unionHigh : slot.shadowMapHigh | it.txDirtyHigh;
            if ((map & ~slot.layout | mapHigh & ~slot.layoutHigh) != 0) {
                // new chunks: make room among the packed ones, in a larger buffer if needed (the smaller
                // one stays with the context until its parity is reset)
                MemorySegment from = slot.slab;
                long fromAt = slot.at;
                long fromLow = slot.layout, fromHigh = slot.layoutHigh;
                layOut(p, slot, map, mapHigh);
                DirtyMap.repack(fromLow, fromHigh, slot.layout, slot.layoutHigh, chunkShift, from, fromAt, slot.slab, slot.at);
            }
            DirtyMap.pack(it.txDirty, it.txDirtyHigh, slot.layout, slot.layoutHigh, chunkShift, it.image(), slot.slab, slot.at);
        }
        if (whole && it.wholeRelog == LogItem.RELOG_ASKED) {
            it.wholeRelog = LogItem.RELOG_LOGGED;
        }
        it.zeroed |= it.txZeroed;
        it.ordered |= it.txOrdered;
        slot.whole = whole;
        slot.shadowMap = map;
        slot.shadowMapHigh = mapHigh;
        slot.zeroed = whole && it.zeroed;
        slot.opBytes = DirtyMap.opSize(map, mapHigh, chunkShift);
        it.loggedMap = union;
        it.loggedMapHigh = unionHigh;
        it.txDirty = 0;
        it.txDirtyHigh = 0;
        it.txZeroed = false;
        it.txOrdered = false;
        it.txWhole = false;
    }

    /**
     * Gives {@code slot} a layout with room for {@code map}: packed, or the whole block once packed would
     * exceed {@link DirtyMap#spreadBytes}; in its shadow if that is large enough, else in a new one.
     */
    private void layOut(int p, CilSlot slot, long map, long mapHigh) {
        boolean spread = slot.layout == DirtyMap.ALL && slot.layoutHigh == DirtyMap.ALL
                || DirtyMap.packedSize(map, mapHigh, chunkShift) > DirtyMap.spreadBytes(chunkShift);
        slot.layout = spread ? DirtyMap.ALL : map;
        slot.layoutHigh = spread ? DirtyMap.ALL : mapHigh;
        int size = DirtyMap.packedSize(slot.layout, slot.layoutHigh, chunkShift);
        if (size > slot.capacity) {
            shadows.acquire(p, size, slot);
        }
    }

    /**
     * Push thread only: installs the next context and waits until no committer is still inside the old
     * one, which is returned, complete and immutable. A commit inside a context copies a few ranges and
     * never blocks, so the wait spins briefly, then parks until the last committer out unparks it.
     *
     * @throws IllegalStateException if a committer is still inside after the drain timeout: it is stuck,
     *                               and the context can never be written
     */
    Context switchContext() {
        Context old = current;
        old.drainer = Thread.currentThread();
        old.closing = true; // Dekker with pin: closing stored, then pins loaded
        long[] deadline = {0};
        if (old.pins.get() != 0) { // the waits' closures only when there is something to wait for: a switch makes no more garbage than its context
            await(() -> old.pins.get() == 0, deadline, () -> "CIL context " + old.seq + " stayed pinned by " + old.pins.get()
                    + " group(s) for " + TimeUnit.NANOSECONDS.toMillis(drainTimeoutNanos) + " ms");
        }
        Context next = retired;
        retired = null;
        current = next != null ? next.reuse(old.seq + 1) : new Context(old.seq + 1, stripeMask + 1);
        deadline[0] = 0;
        for (int i = 0; i < old.slots.length(); i += SLOT_STRIDE) {
            int slot = i;
            if (old.slots.get(slot) != 0) {
                await(() -> old.slots.get(slot) == 0, deadline, () -> "CIL context " + old.seq + " did not drain in "
                        + TimeUnit.NANOSECONDS.toMillis(drainTimeoutNanos) + " ms: " + old.slots.get(slot)
                        + " committer(s) still inside on stripe " + slot / SLOT_STRIDE + " of " + (stripeMask + 1));
            }
        }
        return old;
    }

    /**
     * The holder of the push turn, once it has formatted {@code c} (the context {@link #switchContext}
     * returned): the next switch reuses it.
     */
    void retire(Context c) {
        retired = c;
    }

    /**
     * Push thread: spins briefly, then parks (the last one out unparks it) until {@code done}; throws
     * {@code stuck}'s message once the drain timeout, counted from {@code deadline[0]} (0: from the first park), passes.
     */
    private void await(BooleanSupplier done, long[] deadline, Supplier<String> stuck) {
        for (int spins = 0; !done.getAsBoolean(); spins++) {
            if (spins < DRAIN_SPINS) {
                Thread.onSpinWait();
                continue;
            }
            long now = System.nanoTime();
            if (deadline[0] == 0) {
                deadline[0] = now + drainTimeoutNanos;
            } else if (now - deadline[0] >= 0) {
                throw new IllegalStateException(stuck.get());
            }
            LockSupport.parkNanos(this, deadline[0] - now);
        }
    }

    /**
     * Holds the current context current until {@link #unpin}: every commit made meanwhile, by any thread,
     * goes into it, so a group of commits (a table transaction applied as many small ones) lands in one
     * checkpoint and is recovered all or nothing. A push waiting to switch the context out waits for the
     * pins to go (XFS takes its context lock shared for the same reason); a pin asked for while a push is
     * waiting waits for the switch and pins the next context, so a stream of groups cannot starve the
     * push. The holder must not wait for this context's push (force it, or throttle on it) before it unpins.
     */
    Context pin(Runnable requireAlive) {
        for (;;) {
            Context c = current;
            c.pins.incrementAndGet();
            if (!c.closing && c == current) { // Dekker with switchContext: pins stored, then closing loaded
                return c;
            }
            unpin(c);
            while (current == c && c.closing) { // closing reset: reused, and current again
                requireAlive.run(); // a push that failed never switches the context
                LockSupport.parkNanos(this, 50_000L);
            }
        }
    }

    /** Lets go of a context {@link #pin} returned; the last pin out of a closing context wakes the push. */
    void unpin(Context c) {
        if (c.pins.decrementAndGet() == 0 && c.closing) {
            Thread drainer = c.drainer;
            if (drainer != null) {
                LockSupport.unpark(drainer);
            }
        }
    }

    /**
     * True if context {@code seq} is still current and has grown past the hard limit: its push is late
     * (the log I/O is behind), and committing more into it would only make the next checkpoint bigger.
     */
    boolean overHardLimit(long seq) {
        Context c = current;
        return c.seq == seq && c.approxBytes.get() >= hardLimit;
    }

    /** True if the current context holds any committed change (its exact byte count is not needed). */
    boolean currentHasChanges() {
        return current.overheadTaken.get();
    }

    /** Push thread: drops an item's shadow for {@code parity} once its op has been formatted. */
    void releaseShadow(LogItem it, int parity) {
        CilSlot slot = it.slot(parity);
        slot.slab = null;
        slot.next = null;
    }

    /**
     * Push thread, once every item of the context of {@code parity} it just took is formatted: the
     * shadows of that parity are all free again (the next context of that parity does not exist yet).
     */
    void shadowsFormatted(int parity) {
        shadows.reset(parity);
    }
}
