package dev.ferrite.journal.internal;

import dev.ferrite.journal.VolumeShutdownException;

import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.JournalStats;
import dev.ferrite.journal.ReservationExceededException;

import java.security.SecureRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;

/**
 * Ferrite's write-ahead log, built the way XFS's delayed logging is (DESIGN section 4): transactions
 * reserve log space through two lock-free grant heads, commit their dirty ranges into the in-memory CIL,
 * background checkpoints write the CIL to a circular log region with checksummed, sector-stamped
 * records, and the AIL, fed in bulk through a Disruptor ring, writes metadata home and moves the tail.
 *
 * <pre>{@code
 * Journal.format(device, geometry);
 * try (Journal j = Journal.open(device, geometry, JournalOptions.defaults(), replayer)) {
 *     Transaction tx = j.begin(Reservation.items(2));
 *     // lock items, change their images, tx.log(item, offset, length) ...
 *     long seq = tx.commit();
 *     // unlock items
 *     j.throttle(seq); // waits only while the log device is behind
 *     j.force(seq);   // durable
 * }
 * }</pre>
 *
 * <p>Threads: {@code ferrite-cil-push} writes checkpoints, {@code ferrite-ail} inserts completed
 * checkpoints into the AIL, {@code ferrite-ail-pusher} writes items home. All are daemons that park
 * when idle and stop on {@link #close()}. After any failure that could lose acknowledged work (a log
 * write error, a transaction exceeding its reservation) the journal shuts down: every later call
 * throws {@link VolumeShutdownException}.
 */
public final class Journal implements AutoCloseable {
    /** The context the calling thread's group holds ({@link #pin}), or null. */
    private final ThreadLocal<Pin> pinned = new ThreadLocal<>();
    /** Groups open now: with none, a commit skips looking for its thread's. */
    private final AtomicInteger groups = new AtomicInteger();
    private final BlockDevice device;
    private final LogGeometry geometry;
    private final JournalOptions options;
    private final LogAnchor anchor;
    private final int epoch;
    private final RecoveryReport recovery;
    private final ShadowPool shadows;
    private final LogSpace space;
    private final Cil cil;
    private final Ail ail;
    private final LogWriter writer;
    private final long logBytes;
    private final LongAdder commits = new LongAdder();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    /** What every call after a shutdown reports: set once, before {@link #failure}. */
    private volatile String shutdownMessage;
    private boolean closed;

    /**
     * Writes an empty log (a fresh anchor with a new random log id) into {@code geometry} of {@code device}.
     *
     * @throws dev.ferrite.io.InvalidArgumentException if the region lies outside the device
     * @throws dev.ferrite.io.DeviceException          if writing or flushing the anchor fails
     */
    public static void format(BlockDevice device, LogGeometry geometry) {
        geometry.requireWithin(device);
        long logId;
        do {
            logId = new SecureRandom().nextLong();
        } while (logId == 0);
        LogAnchor.format(device, geometry, logId);
    }

    /**
     * Opens the log, recovering it first: every complete checkpoint after the anchored tail is replayed
     * through {@code replayer}, a torn or unfinished last checkpoint is discarded, and the log restarts
     * past them. See {@link #recovery()} for what was done.
     *
     * @throws dev.ferrite.io.CorruptionException      if the anchor is unreadable or describes another log, or
     *                                                 the log is damaged before its end
     * @throws dev.ferrite.io.InvalidArgumentException if the region lies outside the device
     * @throws dev.ferrite.io.DeviceException          if reading the log or writing the anchor fails
     */
    public static Journal open(BlockDevice device, LogGeometry geometry, JournalOptions options, Replayer replayer) {
        geometry.requireWithin(device);
        LogAnchor anchor = LogAnchor.read(device, geometry);
        try {
            Recovery.Result r = Recovery.run(device, geometry, anchor, replayer);
            int epoch = anchor.current().epoch() + 1;
            anchor.write(r.headLsn(), r.nextSeq(), epoch, false);
            return new Journal(device, geometry, options, anchor, epoch, r);
        } catch (RuntimeException e) {
            anchor.close();
            throw e;
        }
    }

    private Journal(BlockDevice device, LogGeometry geometry, JournalOptions options, LogAnchor anchor, int epoch,
                    Recovery.Result r) {
        this.device = device;
        this.geometry = geometry;
        this.options = options;
        this.anchor = anchor;
        this.epoch = epoch;
        this.recovery = r.report();
        int bs = device.blockSize();
        this.logBytes = (long) geometry.areaBlocks() * bs;
        long head = r.headLsn();
        long headWord = ((long) Lsn.cycle(head) << 32) | ((long) Lsn.block(head) * bs);
        this.space = new LogSpace(logBytes, headWord, this::relieveSpace);
        long threshold = pushThreshold(options, logBytes);
        // A context logs up to its hard limit (1.125 thresholds); its shadows round that up to size classes
        // (at most double) in regions grown by doubling (at most double again): keep that much per parity,
        // so a steady load reuses its buffers, and free a peak beyond it.
        this.shadows = new ShadowPool(bs, 5 * threshold);
        // The callbacks below reach the writer through this object: they run only once the threads started.
        this.cil = new Cil(1, bs, threshold, shadows, this::backgroundPush, Cil.DRAIN_TIMEOUT_NANOS);
        this.ail = new Ail(device, options.ringSize(), options.ailBatch(), relogChunks(options, bs), geometry.areaBlocks(), head,
                r.nextSeq(), this::anchorTail, this::checkpointSoon, t -> shutdown("metadata write-back", t));
        this.writer = new LogWriter(device, geometry, anchor.current().logId(), epoch, head, r.nextSeq(), cil, space,
                ail, threshold, t -> shutdown("log write", t));
        ail.start();
        writer.start();
    }

    /** What opening found and replayed. */
    public RecoveryReport recovery() {
        return recovery;
    }

    /**
     * Starts a transaction, first reserving its worst-case log space. Waits (FIFO) while the log is full.
     *
     * @throws dev.ferrite.io.NoSpaceException if the reservation could never fit in this log
     * @throws VolumeShutdownException         if the journal has shut down
     */
    public Transaction begin(Reservation reservation) {
        requireAlive();
        Ticket ticket = new Ticket(reservationBytes(reservation.items()), reservation.count());
        reserve(ticket);
        return new Transaction(this, ticket, reservation.items(), device.blockSize(), cil.chunkShift());
    }

    /**
     * {@link #begin(Reservation)} of a one-shot reservation for {@code items} items, starting {@code reuse}
     * again when it is a finished transaction of this journal instead of allocating one: a caller that
     * keeps its last transaction (the B-tree's {@code Txn} does, per thread) begins without garbage.
     */
    public Transaction begin(int items, Transaction reuse) {
        if (items < 1) {
            return begin(Reservation.items(items)); // which refuses it
        }
        requireAlive();
        boolean reusing = reusable(reuse);
        Ticket ticket = ticketFor(items, reuse, reusing);
        reserve(ticket);
        return startOn(ticket, items, reusing ? reuse : null);
    }

    /**
     * {@link #begin(int, Transaction)} if the log has the space now; else null, having reserved nothing. For
     * a caller holding something that a writer already waiting in the log's queue may be waiting for: it
     * lets go of that before it waits for space (a transaction reserves before it locks).
     */
    public Transaction tryBegin(int items, Transaction reuse) {
        requireAlive();
        Pin p = groups.get() == 0 ? null : pinned.get();
        if (p != null || items < 1) {
            return begin(items, reuse); // inside a group, its budget stands in for a wait; begin refuses items < 1
        }
        boolean reusing = reusable(reuse);
        Ticket ticket = ticketFor(items, reuse, reusing);
        if (!space.reserve(ticket, 0)) {
            return null;
        }
        pushIfShort();
        return startOn(ticket, items, reusing ? reuse : null);
    }

    /** True if {@code t} is a finished transaction of this journal, to start again. */
    private boolean reusable(Transaction t) {
        return t != null && t.journal() == this && t.isDone();
    }

    /** A one-shot ticket for {@code items}: {@code reuse}'s, reset, when {@code reusing} it. */
    private Ticket ticketFor(int items, Transaction reuse, boolean reusing) {
        if (!reusing) {
            return new Ticket(reservationBytes(items), 1);
        }
        Ticket ticket = reuse.ticket();
        ticket.reset(reservationBytes(items), 1);
        return ticket;
    }

    /** The transaction of {@code items} on reserved {@code ticket}: {@code reuse} started again, or a new one. */
    private Transaction startOn(Ticket ticket, int items, Transaction reuse) {
        if (reuse == null) {
            return new Transaction(this, ticket, items, device.blockSize(), cil.chunkShift());
        }
        reuse.restart(items);
        return reuse;
    }

    private void reserve(Ticket ticket) {
        Pin p = groups.get() == 0 ? null : pinned.get();
        if (p == null || p.budget == null || ticket.permanent) {
            space.reserve(ticket);
        } else if (!space.reserve(ticket, p.starved ? 0 : TimeUnit.MILLISECONDS.toNanos(GROUP_WAIT_MILLIS))) {
            p.starved = true; // the next ones go to the budget at once: waiting again would likely be as vain
            space.reserveFrom(ticket, p.budget);
        }
        pushIfShort();
    }

    /** Starts writing back for space once a reservation leaves less than a quarter of the log free. */
    private void pushIfShort() {
        if (space.freeBytes() < logBytes / 4) {
            pushForSpace();
        }
    }

    /**
     * Starts a group: until the returned pin is closed, every commit (this thread's and others') goes into
     * the current CIL context, so the group's commits are recovered all or nothing (see {@link Cil#pin}).
     * Inside it, this thread's {@link #forceAll} makes durable only what came before the group, and
     * {@link #throttle} does not wait; keep groups short, as every force waits for them.
     *
     * @throws IllegalStateException if this thread already holds a group
     */
    public Pin pin() {
        return pin(0);
    }

    /**
     * {@link #pin()} with a budget of {@code budget} log bytes, reserved first, before the context is
     * pinned (the reservation may wait for the log like any other). The group's items stay pinned until it
     * ends, so the AIL cannot write home an item the group changed: if one of them holds the log's tail,
     * no space is freed until the group ends, and a holder waiting for space would wait forever. So inside
     * a budgeted group the holder's one-shot transactions wait for the log at most
     * {@value #GROUP_WAIT_MILLIS} ms (once one has waited that long, the later ones not at all), then take
     * their reservation from the budget, and throw
     * {@link ReservationExceededException} (changing nothing) once it cannot cover them: the caller can
     * stop and undo with what {@link Pin#budgetLeft()} still holds, instead of hanging.
     *
     * @throws dev.ferrite.io.NoSpaceException if the budget exceeds half the log
     */
    public Pin pin(long budget) {
        return pin(budget, Integer.MAX_VALUE);
    }

    /**
     * {@link #pin(long)} on a context holding at most {@code items} items logged before the group. Every item
     * a context logs stays dirty in memory, neither written home nor evicted, until the context's checkpoint
     * is written, and a group holds that off until it ends: a holder whose changes need free buffers (a
     * B-tree's, from a cache of fixed size) would wait for ever for buffers its own context holds. So a
     * current context holding more is pushed first and the next one pinned; the holder then bounds what
     * the group adds ({@link Pin#contextItems}).
     */
    public Pin pin(long budget, int items) {
        requireAlive();
        if (pinned.get() != null) {
            throw new IllegalStateException("this thread already holds a journal group");
        }
        Ticket reserved = null;
        if (budget > 0) {
            reserved = new Ticket(budget, 1);
            space.reserve(reserved);
        }
        Pin p;
        try {
            p = new Pin(pinWithin(items), reserved);
        } catch (RuntimeException e) {
            if (reserved != null) {
                space.ungrant(reserved);
            }
            throw e;
        }
        pinned.set(p);
        groups.incrementAndGet();
        return p;
    }

    /** Pins the current context once it holds at most {@code items} items, pushing one that holds more and waiting for its switch. */
    private Cil.Context pinWithin(int items) {
        for (;;) {
            Cil.Context c = cil.pin(this::requireAlive);
            if (c.itemCount() <= items) {
                return c;
            }
            long seq = c.seq; // read while pinned: once unpinned the context may be formatted and reused
            cil.unpin(c);
            writer.requestPush(seq);
            while (cil.currentSeq() == seq) {
                requireAlive(); // a push that failed never switches the context
                LockSupport.parkNanos(this, 50_000L);
            }
        }
    }

    /** How long a budgeted group's holder waits for log space before it draws on its budget ({@link #pin(long)}). */
    static final long GROUP_WAIT_MILLIS = 200;

    /** A group of commits that share one checkpoint ({@link #pin}); closed by the thread that began it. */
    public final class Pin implements AutoCloseable {
        private final Cil.Context context;
        /** The context's sequence, read when pinned: the context is reused for a later one once its checkpoint is formatted. */
        private final long seq;
        /** The budget ({@link #pin(long)}), or null. */
        private final Ticket budget;
        /** Log bytes the holder's own commits took from their reservations inside the group. */
        private long bytes;
        /** A reservation of the holder's timed out: the log is full, perhaps until the group ends. */
        private boolean starved;
        private boolean closed;

        private Pin(Cil.Context context, Ticket budget) {
            this.context = context;
            this.seq = context.seq;
            this.budget = budget;
        }

        /** Bytes of the budget not used or lent right now (0 without one). */
        public long budgetLeft() {
            return budget == null ? 0 : budget.current;
        }

        /** The context's commit sequence: force it, once closed, to make the group durable. */
        public long seq() {
            return seq;
        }

        /** Log bytes committed into the group's context so far, by every committer in it. */
        public long contextBytes() {
            return context.bytes();
        }

        /** Items (blocks) logged in the group's context so far, by every committer in it: each stays in memory until the group ends. */
        public int contextItems() {
            return context.itemCount();
        }

        /** Log bytes the holder's own commits added to the context so far (what the group itself costs the log). */
        public long bytes() {
            return bytes;
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                pinned.remove();
                groups.decrementAndGet();
                cil.unpin(context);
                if (budget != null) {
                    space.ungrant(budget);
                }
            }
        }
    }

    /** Log bytes one transaction of {@code items} items reserves per unit. */
    public long reservationBytes(int items) {
        return items * cil.itemReservation() + cil.checkpointOverhead();
    }

    /** Never waits: the committer holds its items' locks here ({@link #throttle} comes after it unlocks). */
    long commit(LogItem[] items, int count, Ticket ticket, boolean afterData) {
        requireAlive();
        try {
            // read after the data writes completed: a log flush begun after this covers them
            long before = ticket.current;
            long seq = cil.commit(items, count, ticket, afterData ? writer.flushesBegun() : -1);
            commits.increment();
            Pin p = groups.get() == 0 ? null : pinned.get();
            if (p != null) {
                p.bytes += before - ticket.current;
            }
            return seq;
        } catch (ReservationExceededException e) {
            shutdown(e);
            throw e;
        }
    }

    /**
     * Back-pressure on committers: returns at once unless the CIL context of commit sequence {@code seq}
     * has grown past its hard limit while its checkpoint could not start (the log device is behind); then
     * waits until that checkpoint takes it. Call it after every commit (or roll), once the transaction's
     * items are unlocked: waiting with them locked would stall every reader of those items.
     */
    public void throttle(long seq) {
        if (cil.overHardLimit(seq) && pinned.get() == null) { // a group's holder cannot wait for its own context
            writer.throttle(seq);
        }
    }

    LogSpace space() {
        return space;
    }

    LogWriter writer() {
        return writer;
    }

    /**
     * Returns once every transaction committed with a sequence up to {@code seq} is durable.
     *
     * @throws VolumeShutdownException if the journal has shut down, or shuts down before {@code seq} is durable
     */
    public void force(long seq) {
        requireAlive(); // even for a durable seq: after a shutdown nothing is acknowledged any more
        Pin held = pinned.get();
        if (held != null && seq >= held.context.seq) {
            throw new IllegalStateException("cannot force commit sequence " + seq + " inside the group pinning it");
        }
        forceLog(seq);
    }

    /** {@link LogWriter#force}, a failure meanwhile reported as the journal's shutdown (naming where it was met). */
    private void forceLog(long seq) {
        try {
            writer.force(seq);
        } catch (VolumeShutdownException e) {
            requireAlive();
            throw e;
        }
    }

    /**
     * Makes everything committed so far durable; returns the sequence that is now durable.
     *
     * @throws VolumeShutdownException as {@link #force}
     */
    public long forceAll() {
        requireAlive();
        long seq = allSeq();
        forceLog(seq);
        return seq;
    }

    /** Whether this thread holds a group ({@link #pin}), whose context no force of its own can make durable. */
    public boolean holdsGroup() {
        return pinned.get() != null;
    }

    /**
     * Asks for everything committed so far to be written to the log, without waiting: the current
     * context's checkpoint starts once the groups pinning it (this thread's too) have ended. For a group's
     * holder that needs its context durable, and with no other force may otherwise wait a long time for
     * it: a context that only relogs the same items never grows to its push threshold.
     */
    public void requestPush() {
        requireAlive();
        writer.requestPush(cil.currentSeq());
    }

    /**
     * Has the log write {@code data} before each checkpoint, and before the flush that precedes one holding a
     * transaction ordered after data ({@link DeferredData}); set once, before the layer above leaves it any.
     */
    public void deferData(DeferredData data) {
        writer.deferredData = data;
    }

    /**
     * The sequence that {@link #forceAll} would force: forcing it (now or later, e.g. {@link #force}) makes
     * everything committed so far durable.
     */
    public long allSeq() {
        Pin held = pinned.get();
        return held != null ? held.context.seq - 1 : cil.currentSeq();
    }

    /**
     * A mark for {@link #flushedSince}: the log's device flushes begun so far. Taken after some device
     * writes completed, it lets their writer skip a flush of its own if the log flushes the device
     * afterwards anyway (an fsync whose force wrote a checkpoint).
     */
    public long flushMark() {
        return writer.flushesBegun();
    }

    /** Whether a device flush the log began after {@code mark} was taken has returned: every write completed before the mark is durable. */
    public boolean flushedSince(long mark) {
        return writer.flushesEnded() > mark;
    }

    /** Newest commit sequence known durable. */
    public long durableSeq() {
        return writer.durableSeq();
    }

    /**
     * Quiesces the log, as XFS's log quiesce does: makes everything committed durable, writes every
     * logged item home and moves the log tail up to the head, so that recovery after a crash now would
     * replay nothing. Not a CIL checkpoint, which only writes committed changes to the log.
     *
     * @throws VolumeShutdownException if the journal has shut down, or shuts down meanwhile
     * @throws IllegalStateException   if the AIL does not drain within {@link JournalOptions#closeTimeoutMillis}
     */
    public void quiesce() {
        forceAll();
        ail.pushAllAndWait(writer.lastCheckpointSeq(), TimeUnit.MILLISECONDS.toNanos(options.closeTimeoutMillis()));
        requireAlive();
    }

    /**
     * Starts writing home everything logged so far, without waiting: the current CIL context is pushed
     * and the AIL is asked to write back every item it holds. A buffer cache short of clean buffers
     * calls this, then waits for {@link LogItem#writtenBack} callbacks.
     *
     * @throws VolumeShutdownException if the journal has shut down
     */
    public void writeBackAll() {
        requireAlive();
        if (cil.currentHasChanges()) {
            writer.requestPush(cil.currentSeq());
        }
        ail.pushTo(ail.maxLsn());
    }

    /**
     * One line of internal state (grant heads, tail, AIL, CIL, log writer) for diagnosing a stall: what
     * a dump prints, and what a test prints when a reservation waits too long.
     */
    public String diagnostics() {
        return "tail " + Lsn.toString(grantLsn(space.tail())) + ", reserve head " + Lsn.toString(grantLsn(space.reserveHead.get()))
                + ", write head " + Lsn.toString(grantLsn(space.writeHead.get())) + ", free " + space.freeBytes()
                + " bytes, queued " + space.reserveHead.queued() + "/" + space.writeHead.queued() + ", granted late "
                + space.reserveHead.waitStats()[2] + "/" + space.writeHead.waitStats()[2] + "; " + ail.diagnostics()
                + "; CIL sequence " + cil.currentSeq() + (cil.currentHasChanges() ? " (changes)" : " (empty)") + "; "
                + writer.diagnostics();
    }

    private long grantLsn(long word) {
        return Lsn.of((int) (word >>> 32), (int) ((word & 0xFFFF_FFFFL) / device.blockSize()));
    }

    /** Counters since open. */
    public JournalStats stats() {
        long[] rw = space.reserveHead.waitStats();
        long[] ww = space.writeHead.waitStats();
        return new JournalStats(commits.sum(), writer.forces.sum(), writer.checkpoints.sum(),
                writer.checkpointBytes.sum(), writer.checkpointItems.sum(), writer.logFlushes.sum(), writer.logWriteNanos.sum(),
                writer.logFlushNanos.sum(), rw[0], rw[1],
                ww[0], ww[1], space.reserveHead.casRetries() + space.writeHead.casRetries(), ail.insertBatches.sum(), ail.insertedItems.sum(), ail.insertedNow.sum(), ail.pushRounds.sum(),
                ail.pusherWakeups.sum(), ail.writtenBack.sum(), ail.writtenEarly.sum(), ail.size(), ail.tailMoves.sum(), space.freeBytes(),
                logBytes, writer.throttles.sum(), writer.throttleNanos.sum(), shadows.residentBytes());
    }

    /** Size of the circular log area in bytes. */
    public long logBytes() {
        return logBytes;
    }

    /** The device block size: every log item is one block. */
    public int blockSize() {
        return device.blockSize();
    }

    /** True once the journal has shut down after a failure. */
    public boolean isShutdown() {
        return failure.get() != null;
    }

    /**
     * Forces the log, writes everything home, marks the log clean and stops the journal's threads. Call
     * it once no transaction is running. After a failure it only stops the threads (the log stays dirty,
     * so the next open recovers).
     *
     * @throws VolumeShutdownException        if the journal shuts down while writing everything home (the
     *                                        threads are stopped all the same)
     * @throws IllegalStateException          as {@link #quiesce}
     * @throws dev.ferrite.io.DeviceException if marking the log clean fails
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        boolean clean = false;
        try {
            if (failure.get() == null) {
                quiesce();
                clean = true;
            }
        } finally {
            writer.close();
            ail.close();
            try {
                if (clean && failure.get() == null) {
                    anchor.write(writer.headLsn(), writer.nextCheckpointSeq(), epoch, true);
                }
            } finally {
                anchor.close();
                shadows.close();
            }
        }
    }

    /** AIL pusher: anchors a new tail durably, then lets reservers use the space behind it. */
    private void anchorTail(long tailLsn, long tailSeq) {
        try {
            anchor.write(tailLsn, tailSeq, epoch, false);
        } catch (RuntimeException e) {
            shutdown("log anchor write", e); // named here: the AIL would report it as a write-back
            throw e;
        }
        int bs = device.blockSize();
        space.moveTail(((long) Lsn.cycle(tailLsn) << 32) | ((long) Lsn.block(tailLsn) * bs));
    }

    /**
     * A reserver is about to wait: space held by the CIL comes back only once it is checkpointed and its
     * items written home, so push both.
     */
    private void relieveSpace() {
        if (cil.currentHasChanges()) {
            writer.requestPush(cil.currentSeq());
        }
        pushForSpace();
    }

    /** The CIL passed its push threshold. */
    private void backgroundPush() {
        writer.backgroundPush();
    }

    /** The AIL met pinned items: push the CIL so they reach the AIL and can be written home. */
    private void checkpointSoon() {
        writer.requestPush(cil.currentSeq());
    }

    /** Asks the AIL to free a quarter of the log beyond the tail. */
    private void pushForSpace() {
        long target = LogSpace.add(space.tail(), logBytes / 4, logBytes);
        ail.pushTo(Lsn.of((int) (target >>> 32), (int) ((target & 0xFFFF_FFFFL) / device.blockSize())));
    }

    /** Shuts the journal down after {@code cause}: nothing more is logged or written home, every later call fails. */
    public void shutdown(Throwable cause) {
        shutdown("the journal", cause);
    }

    /**
     * {@link #shutdown(Throwable)} after {@code cause} met in {@code where} (a log write, a metadata
     * write-back...), which every later call's {@link VolumeShutdownException} names: "volume shut down
     * after I/O error at log write: ..." for a device error. The first cause wins.
     */
    public void shutdown(String where, Throwable cause) {
        if (failure.get() != null) {
            return;
        }
        String message = cause instanceof DeviceException
                ? "volume shut down after I/O error at " + where + ": " + cause.getMessage()
                : "volume shut down after a failure in " + where + ": " + cause;
        synchronized (failure) {
            if (failure.get() == null) {
                shutdownMessage = message;
                failure.set(cause);
                space.shutdown(cause);
            }
        }
    }

    /**
     * Throws {@link VolumeShutdownException}, naming the error and where it was met, once the journal
     * has shut down: the volume's every call checks it (one volatile read while the journal runs; the
     * log writer and the AIL shut the journal down before they stop).
     */
    public void requireAlive() {
        Throwable f = failure.get();
        if (f != null) {
            throw new VolumeShutdownException(shutdownMessage, f);
        }
    }

    /** The CIL size that starts a background push: the option, or an eighth of the log capped at 32 MiB. */
    private static long pushThreshold(JournalOptions options, long logBytes) {
        return options.pushThreshold() > 0 ? options.pushThreshold() : Math.min(logBytes / 8, 32L << 20);
    }

    /** The relog limit in chunks of a block (the journal's dirty-chunk unit); {@link DirtyMap#CHUNKS} means never. */
    private static int relogChunks(JournalOptions options, int blockSize) {
        int limit = options.relogLimit();
        return limit == 0 ? DirtyMap.CHUNKS / 2 : (int) Math.min(DirtyMap.CHUNKS, (long) limit * DirtyMap.CHUNKS / blockSize);
    }
}
