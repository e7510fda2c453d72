package dev.ferrite.journal.internal;

import dev.ferrite.journal.VolumeShutdownException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.zip.CRC32C;

import org.jctools.queues.atomic.SpscAtomicArrayQueue;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.internal.Crc32c;
import dev.ferrite.io.internal.OffHeap;

/**
 * The CIL push, in two stages on two threads, so that formatting one checkpoint overlaps the I/O of the
 * one before it:
 * <ol>
 *   <li>{@code ferrite-cil-push} swaps in a new CIL context and formats the old one's items into records
 *       in one of two aligned buffers (one op per item, with its latest contents), sealing each record
 *       (checksum, sector stamps) at the log position it will occupy;</li>
 *   <li>{@code ferrite-log-io} writes the formatted checkpoint with one or two device writes (two when
 *       the circular area wraps), flushes, and only then declares it durable and wakes its forcers; after
 *       that it returns unused reservation and hands the items to the AIL.</li>
 * </ol>
 * A forced push that finds nothing in flight skips the hand-off: the push thread writes it itself; and a
 * forcer that finds the log idle pushes and writes its checkpoint on its own thread, skipping both
 * hand-offs ({@link #pushInline}). Either way one thread at a time formats (the holder of the push turn,
 * {@code pushing}) and one at a time writes the log and publishes to the AIL, the turn passing with a
 * happens-before edge (the hand-off queue one way, {@code ioDone} the other, {@code pushing} between
 * the push thread and forcers).
 *
 * <p>The AIL hand-off (publishing the items) is the log I/O thread's, after the forcers are woken. A
 * forcer that wrote a checkpoint of a few items on its own thread puts them into the AIL itself when the
 * AIL is due that checkpoint next ({@link #insertedHere}: no hand-off at all). Any other checkpoint written
 * by a forcer or the push thread leaves its hand-off in {@code durable} for the log I/O thread, so a force
 * returns as soon as its flush does ({@link #deferHandOff}). Hand-offs
 * stay in checkpoint order (every checkpoint written elsewhere is queued before the next one is handed
 * to the log I/O thread, which drains the queue first) and are bounded in time: while they keep coming the
 * log I/O thread looks for them every {@link #HAND_OFF_POLL_NANOS} instead of being woken for each, and
 * the first one after it fell asleep wakes it. It publishes all it finds at once, so the AIL's consumer
 * wakes once per look rather than once per checkpoint. Until its hand-off a checkpoint's items stay pinned and
 * out of the AIL, which only holds the tail back: a crash meanwhile recovers from the log as ever.
 *
 * <p>Checkpoints reach the device strictly one after another, each flushed before the next is written: a
 * valid later checkpoint on disk therefore proves every earlier one was complete, which is how recovery
 * tells a torn tail from corruption. A checkpoint holding a transaction ordered after data
 * ({@link Transaction#orderAfterData}) is also preceded by a flush, which every such transaction in it
 * shares, unless a flush begun after the last of them committed has returned already; the data the layer
 * above left to the log ({@link DeferredData}) is written just before it.
 *
 * <p>Group commit: {@link #force} raises a target sequence and waits. A forced push starts only when the
 * log I/O stage is idle, so every commit that lands while a checkpoint is being written joins the next
 * one; a push for size (the CIL passed its threshold) starts at once, formatting while the previous
 * checkpoint is written.
 *
 * <p>Back-pressure: a committer whose commit left the CIL past its hard limit while its push has not
 * started (the previous checkpoint is still being written) waits in {@link #throttle}, after unlocking
 * its items, until the push takes the context. Without it the committers outrun the log, spending the CPU the log I/O needs on relogging
 * items into a context that only grows, and the checkpoints outgrow the format buffers.
 *
 * <p>Two sequences: commit sequences number CIL contexts (what {@link #force} takes; an empty context is
 * "pushed" without any I/O), checkpoint sequences number the checkpoints actually written, with no
 * gaps, which is what recovery follows from record to record.
 */
final class LogWriter implements AutoCloseable {
    /** A formatted context on its way to the device; {@code items == null} for an empty context. */
    private record Checkpoint(long commitSeq, long checkpointSeq, Buffer buffer, long bytes, int blocks,
                              int startBlock, long startLsn, long endLsn, LogItem[] items, long stolen,
                              int records, long formatStart, long preflushMark) implements Ail.Durable {
    }

    /**
     * A growable, page-aligned format buffer; two circulate between the stages. Mapped rather than
     * allocated: its pages fault in as checkpoints first fill them, instead of being zeroed up front by
     * the journal's open (tens of MiB with a large log).
     */
    private static final class Buffer {
        Arena arena = Arena.ofShared();
        MemorySegment segment;

        Buffer(long bytes) {
            segment = OffHeap.reserve(bytes, arena);
        }

        void ensure(long bytes) {
            if (segment.byteSize() < bytes) {
                arena.close();
                arena = Arena.ofShared();
                segment = OffHeap.reserve(Math.max(bytes, segment.byteSize() * 2), arena);
            }
        }
    }

    private record Forcer(Thread thread, long seq) {
    }

    /**
     * How often the log I/O thread looks for AIL hand-offs left by forcers while they keep coming: the
     * longest their items wait to reach the AIL (they hold the tail back meanwhile, nothing worse), and
     * few enough wake-ups to cost nothing beside the checkpoints they publish.
     */
    static final long HAND_OFF_POLL_NANOS = 1_000_000L;
    /** Hand-offs one poll holds: forces back to back on a RAM device come every few microseconds. */
    static final int DEFERRED_MAX = 4096;
    /** Most items of a checkpoint its forcer puts into the AIL itself ({@link #insertedHere}). */
    static final int INSERT_HERE_MAX = 16;

    private final BlockDevice device;
    private final LogGeometry geometry;
    private final int blockSize;
    private final long logId;
    private final int epoch;
    private final Cil cil;
    private final LogSpace space;
    private final Ail ail;
    private final java.util.function.Consumer<Throwable> onFailure;
    private final Thread formatter;
    private final Thread io;
    private final AtomicLong pushTarget = new AtomicLong();
    /** Threads waiting in {@link #force}; each is unparked alone when its sequence is durable (no monitor convoy). */
    private final ConcurrentLinkedQueue<Forcer> forcers = new ConcurrentLinkedQueue<>();
    /** Committers waiting in {@link #throttle}; unparked when the formatter takes a context. */
    private final ConcurrentLinkedQueue<Thread> throttled = new ConcurrentLinkedQueue<>();
    private final SpscAtomicArrayQueue<Checkpoint> formatted = new SpscAtomicArrayQueue<>(2);
    private final SpscAtomicArrayQueue<Buffer> freeBuffers = new SpscAtomicArrayQueue<>(2);
    /**
     * Checkpoints written off the log I/O thread, durable, whose AIL hand-off it has yet to do; produced
     * by the holder of the push turn only.
     */
    private final SpscAtomicArrayQueue<Checkpoint> durable = new SpscAtomicArrayQueue<>(DEFERRED_MAX);
    /** The log I/O thread's: the deferred hand-offs it takes from {@link #durable} at once, to publish in one claim. */
    private final Checkpoint[] deferredBatch = new Checkpoint[DEFERRED_MAX];
    /** The log I/O thread is parked until woken (not polling for hand-offs): a new hand-off must wake it. */
    private volatile boolean ioAsleep;
    /** Tests only: run on the log I/O thread before each AIL hand-off (to hold it). */
    volatile Runnable beforeHandOff;
    /** Data left to the log by the layer above ({@link Journal#deferData}), or null. */
    volatile DeferredData deferredData;
    private volatile long durableSeq;
    private volatile long lastCheckpointSeq;
    private volatile boolean background;
    private volatile boolean ioBusy;
    private volatile boolean running = true;
    private volatile Throwable failure;

    /** Checkpoints the log I/O thread has finished; it alone writes this. */
    private volatile long ioDone;

    /**
     * The push turn: held by whoever switches and formats a context (the push thread, or a forcer
     * writing its own checkpoint, {@link #pushInline}); the fields below are its holder's.
     */
    private final AtomicBoolean pushing = new AtomicBoolean();

    // The holder of the push turn only (and close, once the push thread has stopped).
    private long nextCheckpointSeq;
    /** Checkpoints handed to the log I/O thread. */
    private long handed;
    /** The buffer of a checkpoint written without the hand-off, for the next one. */
    private Buffer spare;
    private int headCycle;
    private int headBlock;
    /** The payload checksum of the record being formatted. */
    private final CRC32C payloadCrc = new CRC32C();
    private final RecordCursor cursor = new RecordCursor();
    /** {@link Crc32c#shiftOperator} of each payload length in blocks: to combine a payload's checksum with its header's. */
    private final int[] payloadShift;
    /** Bytes of the largest record. */
    private final long maxRecordBytes;

    // Whichever thread writes the log: ferrite-log-io, or ferrite-cil-push while nothing is in flight.
    private final IoBatch ioBatch = new IoBatch(2);

    final LongAdder checkpoints = new LongAdder();
    final LongAdder checkpointBytes = new LongAdder();
    final LongAdder checkpointItems = new LongAdder();
    final LongAdder forces = new LongAdder();
    final LongAdder logFlushes = new LongAdder();
    /**
     * Time in checkpoints' device writes, and in the log's flushes: on a disk whose flush writes back
     * what its cache holds, the flush is most of a large checkpoint's time (docs/journal.md, Durability).
     */
    final LongAdder logWriteNanos = new LongAdder();
    final LongAdder logFlushNanos = new LongAdder();
    /**
     * Device flushes of the log begun and ended, in the order the log writer issues them (one at a time):
     * a flush numbered past a count read at some moment began after that moment.
     */
    private volatile long flushesBegun, flushesEnded;
    final LongAdder throttles = new LongAdder();
    final LongAdder throttleNanos = new LongAdder();

    LogWriter(BlockDevice device, LogGeometry geometry, long logId, int epoch, long headLsn, long firstCheckpointSeq,
              Cil cil, LogSpace space, Ail ail, long pushThreshold, java.util.function.Consumer<Throwable> onFailure) {
        this.device = device;
        this.geometry = geometry;
        this.blockSize = device.blockSize();
        this.logId = logId;
        this.epoch = epoch;
        this.cil = cil;
        this.space = space;
        this.ail = ail;
        this.onFailure = onFailure;
        this.headCycle = Lsn.cycle(headLsn);
        this.headBlock = Lsn.block(headLsn);
        this.nextCheckpointSeq = firstCheckpointSeq;
        this.lastCheckpointSeq = firstCheckpointSeq - 1;
        this.durableSeq = cil.currentSeq() - 1;
        this.pushTarget.set(durableSeq);
        int maxPayloadBlocks = LogRecordFormat.maxPayloadBlocks(blockSize);
        this.maxRecordBytes = (1L + maxPayloadBlocks) * blockSize;
        this.payloadShift = new int[maxPayloadBlocks + 1];
        for (int b = 1; b <= maxPayloadBlocks; b++) {
            payloadShift[b] = Crc32c.shiftOperator((long) b * blockSize);
        }
        // Sized for a checkpoint of the push threshold plus the commits that land while it starts, so that
        // the steady state never maps a format buffer again.
        long initial = Math.max(64L * blockSize, pushThreshold + pushThreshold / 4);
        freeBuffers.offer(new Buffer(initial));
        freeBuffers.offer(new Buffer(initial));
        this.io = daemon(this::ioLoop, "ferrite-log-io");
        this.formatter = daemon(this::formatLoop, "ferrite-cil-push");
    }

    void start() {
        io.start();
        formatter.start();
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    long durableSeq() {
        return durableSeq;
    }

    /** Checkpoint sequence of the newest checkpoint written (its items may still be on their way to the AIL). */
    long lastCheckpointSeq() {
        return lastCheckpointSeq;
    }

    /** Checkpoint sequence the next checkpoint will carry. Stable only while the writer is idle. */
    long nextCheckpointSeq() {
        return nextCheckpointSeq;
    }

    /** Head of the log: where the next record goes. Stable only while the writer is idle. */
    long headLsn() {
        return Lsn.of(headCycle, headBlock);
    }

    /** Committer: the current context passed the push threshold. */
    void backgroundPush() {
        if (!background) {
            background = true;
            LockSupport.unpark(formatter);
        }
    }

    /** Asks for contexts up to {@code seq} to be pushed, without waiting. */
    void requestPush(long seq) {
        for (long cur = pushTarget.get(); seq > cur; cur = pushTarget.get()) {
            if (pushTarget.compareAndSet(cur, seq)) {
                LockSupport.unpark(formatter);
                return;
            }
        }
    }

    /** Returns once every commit of sequence {@code seq} or earlier is durable. */
    void force(long seq) {
        if (durableSeq >= seq) {
            return;
        }
        forces.increment();
        requireAlive();
        if (pushInline(seq)) {
            return;
        }
        Forcer me = new Forcer(Thread.currentThread(), seq);
        forcers.add(me);
        requestPush(seq);
        // Interrupts are not honoured: a force abandoned half-way would leave the caller without an answer.
        while (durableSeq < seq && failure == null) {
            LockSupport.park(this);
        }
        forcers.remove(me);
        if (durableSeq < seq) {
            requireAlive();
        }
    }

    /**
     * Committer, its items unlocked ({@link Journal#throttle}): waits until context {@code seq} is no
     * longer the current one, its push having begun.
     */
    void throttle(long seq) {
        long start = System.nanoTime();
        Thread me = Thread.currentThread();
        throttled.add(me);
        backgroundPush();
        // Checked after joining the queue: a context taken from now on finds this thread there to wake.
        while (cil.currentSeq() == seq && running && failure == null) {
            LockSupport.parkNanos(this, 10_000_000L);
        }
        throttled.remove(me);
        throttles.increment();
        throttleNanos.add(System.nanoTime() - start);
    }

    String diagnostics() {
        return "push target " + pushTarget.get() + ", durable " + durableSeq + (ioBusy ? ", I/O busy" : "")
                + (background ? ", background push asked" : "") + ", " + formatted.size() + " formatted waiting, "
                + durable.size() + " durable awaiting the AIL";
    }

    void requireAlive() {
        Throwable f = failure;
        if (f != null) {
            throw new VolumeShutdownException("journal has shut down: " + f, f);
        }
    }

    // ------------------------------------------------------------------ stage 1: format

    private void formatLoop() {
        try {
            while (true) {
                // A forced push waits for the log I/O stage to go idle (group commit); a size push does not.
                while (running && !background && !(pushTarget.get() >= cil.currentSeq() && !ioBusy)) {
                    LockSupport.park(this);
                }
                if (!running && pushTarget.get() < cil.currentSeq()) {
                    return;
                }
                if (!pushing.compareAndSet(false, true)) {
                    LockSupport.park(this); // a forcer writes its own checkpoint, and wakes us when it is done
                    continue;
                }
                try {
                    push();
                } finally {
                    pushing.set(false);
                }
            }
        } catch (Throwable t) {
            fail(t);
        }
    }

    /** One push, holding {@link #pushing}: the current context formatted, then written here or handed on. */
    private void push() {
        // Buffer first: while this waits for the log I/O, a size push stays asked for, so committers
        // passing the threshold do not wake this thread again and again.
        Buffer buffer = takeBuffer();
        boolean forced = !background;
        background = false;
        Cil.Context ctx = cil.switchContext();
        wakeThrottled();
        ioBusy = true; // before the hand-off, so no forced push slips in ahead of it
        Checkpoint c = format(ctx, buffer);
        cil.retire(ctx);
        if (forced && ioDone == handed) {
            // Nothing in flight: a forcer waits on this checkpoint alone, so write it here and save
            // it the hand-off to ferrite-log-io (a thread wake-up, much of a small force's latency).
            // Size pushes keep the two stages so that formatting overlaps the previous write.
            writeDurable(c);
            deferHandOff(c);
            spare = c.buffer();
            ioBusy = false;
        } else {
            handed++;
            hand(c);
        }
    }

    /**
     * A forcer writes the checkpoint it waits for itself when the log is idle: no checkpoint in flight,
     * no push under way, a format buffer free. That saves the two thread hand-offs of a push (waking
     * {@code ferrite-cil-push}, and it waking the forcer), which cost a small force more than its I/O.
     * Forcers that find the log busy wait for the push thread as before, which groups them into the
     * next checkpoint. False, with nothing done, if the log is not idle.
     */
    private boolean pushInline(long seq) {
        if (ioBusy || !running || !pushing.compareAndSet(false, true)) {
            return false;
        }
        try {
            if (durableSeq >= seq) {
                return true;
            }
            if (ioBusy || ioDone != handed) {
                return false;
            }
            Buffer buffer = spare != null ? spare : freeBuffers.poll();
            if (buffer == null) {
                return false;
            }
            spare = null;
            ioBusy = true;
            background = false; // the context it asked for is this one
            Cil.Context ctx = cil.switchContext();
            wakeThrottled();
            Checkpoint c = format(ctx, buffer);
            cil.retire(ctx);
            writeDurable(c);
            if (!insertedHere(c)) {
                deferHandOff(c); // the forcer returns now; the log I/O thread hands its items to the AIL
            }
            spare = buffer;
            ioBusy = false;
            return true;
        } catch (Throwable t) {
            fail(t);
            return false;
        } finally {
            pushing.set(false);
            if (background || pushTarget.get() > durableSeq) {
                LockSupport.unpark(formatter); // asked for while this thread had the push
            }
        }
    }

    private void wakeThrottled() {
        if (throttled.isEmpty()) {
            return; // no iterator to make
        }
        for (Thread t : throttled) {
            LockSupport.unpark(t);
        }
    }

    private Buffer takeBuffer() {
        if (spare != null) {
            Buffer b = spare;
            spare = null;
            return b;
        }
        for (Buffer b; ; ) {
            if ((b = freeBuffers.poll()) != null) {
                return b;
            }
            requireAlive();
            LockSupport.park(this);
        }
    }

    private void hand(Checkpoint c) {
        while (!formatted.offer(c)) {
            requireAlive();
            LockSupport.park(this);
        }
        LockSupport.unpark(io);
    }

    private Checkpoint format(Cil.Context ctx, Buffer buffer) {
        LogItem[] items = ctx.items();
        if (items.length == 0) {
            return new Checkpoint(ctx.seq, 0, buffer, 0, 0, 0, 0, 0, null, 0, 0, 0, -1);
        }
        long start = System.nanoTime();
        long stolen = ctx.bytes();
        int parity = (int) (ctx.seq & 1);
        int chunkShift = cil.chunkShift();
        buffer.ensure(stolen + 8L * blockSize); // slack: an accounting bug is reported below, not as an overflow
        MemorySegment out = buffer.segment;
        long payloadCapacity = (long) LogRecordFormat.maxPayloadBlocks(blockSize) * blockSize;
        long tailWord = space.tail();
        long tailLsn = Lsn.of((int) (tailWord >>> 32), (int) ((tailWord & 0xFFFF_FFFFL) / blockSize));
        long checkpointSeq = nextCheckpointSeq;
        long startLsn = Lsn.of(headCycle, headBlock);
        RecordCursor rec = cursor.start(out, headCycle, headBlock, tailLsn, checkpointSeq);
        int count = 0;
        for (LogItem it : items) {
            CilSlot slot = it.slot(parity);
            int size = DirtyMap.opSize(slot.shadowMap, slot.shadowMapHigh, chunkShift);
            if (rec.payloadUsed + size > payloadCapacity) {
                rec.close(false);
            }
            DirtyMap.writeOp(out, rec.recordStart + blockSize + rec.payloadUsed, it.type(),
                    slot.zeroed ? LogRecordFormat.OP_ZEROED : 0, it.home(), slot.shadowMap, slot.shadowMapHigh, slot.layout, slot.layoutHigh, chunkShift, slot.slab, slot.at);
            if (slot.whole) {
                it.loggedWholeIn(checkpointSeq);
            }
            rec.payloadUsed += size;
            rec.ops++;
            rec.checksumAhead();
            cil.releaseShadow(it, parity);
            count++;
        }
        cil.shadowsFormatted(parity);
        if (rec.payloadUsed + LogRecordFormat.COMMIT_OP_SIZE > payloadCapacity) {
            rec.close(false);
        }
        LogRecordFormat.writeCommitOp(out, rec.recordStart + blockSize + rec.payloadUsed, count, rec.index + 1L);
        rec.payloadUsed += LogRecordFormat.COMMIT_OP_SIZE;
        rec.ops++;
        rec.close(true);

        long bytes = rec.recordStart;
        if (bytes > stolen) {
            throw new IllegalStateException("checkpoint " + checkpointSeq + " needs " + bytes
                    + " bytes of log but its transactions reserved only " + stolen + ": log space accounting is broken");
        }
        int startBlock = headBlock;
        headCycle = rec.cycle;
        headBlock = rec.block;
        nextCheckpointSeq = checkpointSeq + 1;
        return new Checkpoint(ctx.seq, checkpointSeq, buffer, bytes, (int) (bytes / blockSize), startBlock, startLsn,
                Lsn.of(headCycle, headBlock), items, stolen, rec.index, start, ctx.preflushMark.get());
    }

    /**
     * Formats records one after another into the buffer, tracking each record's position in the log.
     * A large record's payload is checksummed as it is formatted, a step at a time while it is still in
     * the cache, rather than read back from memory once the record is complete; the header last, combined
     * with it. A record smaller than a step is checksummed whole as it is sealed. One per writer, reused by
     * every checkpoint (only the holder of the push turn formats): a forced commit allocates that much less.
     */
    private final class RecordCursor {
        /** Payload bytes checksummed at a time: a few items, well inside the L1 cache they were copied through. */
        private static final int CHECKSUM_STEP = 8 * 1024;

        MemorySegment out;
        long tailLsn;
        long seq;
        int cycle;
        int block;
        long recordStart;
        long payloadUsed;
        int ops;
        int index;
        /** Offset in {@code out} up to which the current record's payload is in {@link #payloadCrc}. */
        long checksummed;
        /** The current record as a buffer for the checksum, made at its first step. */
        ByteBuffer view;

        /** Begins a checkpoint's records at {@code out}'s start, which goes to the log at {@code cycle}/{@code block}. */
        RecordCursor start(MemorySegment out, int cycle, int block, long tailLsn, long seq) {
            this.out = out;
            this.cycle = cycle;
            this.block = block;
            this.tailLsn = tailLsn;
            this.seq = seq;
            recordStart = 0;
            payloadUsed = 0;
            ops = 0;
            index = 0;
            checksummed = blockSize;
            view = null;
            payloadCrc.reset();
            return this;
        }

        /** After an op: checksums the payload formatted since the last step, if a step's worth. */
        void checksumAhead() {
            if (recordStart + blockSize + payloadUsed - checksummed >= CHECKSUM_STEP) {
                checksum(recordStart + blockSize + payloadUsed);
            }
        }

        private void checksum(long upTo) {
            if (view == null) {
                view = out.asSlice(recordStart, Math.min(out.byteSize() - recordStart, maxRecordBytes)).asByteBuffer();
            }
            payloadCrc.update(view.limit((int) (upTo - recordStart)).position((int) (checksummed - recordStart)));
            checksummed = upTo;
        }

        void close(boolean commit) {
            long payloadStart = recordStart + blockSize;
            // A payload that fits moves into the header block (it was formatted after it, where any payload
            // may grow): the record is then one block, the write of a small forced commit half as long.
            boolean inline = payloadUsed <= LogRecordFormat.maxInlineBytes(blockSize);
            int payloadBlocks = inline ? 0 : (int) ((payloadUsed + blockSize - 1) / blockSize);
            long end = payloadStart + (long) payloadBlocks * blockSize;
            short flags = (short) ((index == 0 ? LogRecordFormat.FLAG_START : 0) | (commit ? LogRecordFormat.FLAG_COMMIT : 0)
                    | (inline ? LogRecordFormat.FLAG_INLINE : 0));
            MemorySegment record = out.asSlice(recordStart, end - recordStart);
            LogRecordFormat.writeHeader(record.asSlice(0, blockSize), cycle, flags, Lsn.of(cycle, block), tailLsn, logId,
                    seq, epoch, index, payloadBlocks, (int) payloadUsed, ops); // zero-fills the header block
            if (inline) {
                MemorySegment.copy(out, payloadStart, out, recordStart + LogRecordFormat.SECTOR, payloadUsed);
            } else if (payloadStart + payloadUsed < end) {
                out.asSlice(payloadStart + payloadUsed, end - payloadStart - payloadUsed).fill((byte) 0);
            }
            if (checksummed == payloadStart) { // small: one pass over the whole record, still in the cache
                LogRecordFormat.seal(record, blockSize, cycle);
            } else {
                checksum(end);
                int crc = (int) payloadCrc.getValue();
                payloadCrc.reset();
                LogRecordFormat.seal(record, blockSize, cycle, crc, payloadShift[payloadBlocks]);
            }
            block += 1 + payloadBlocks;
            while (block >= geometry.areaBlocks()) {
                block -= geometry.areaBlocks();
                cycle++;
            }
            recordStart = end;
            checksummed = end + blockSize;
            view = null;
            payloadUsed = 0;
            ops = 0;
            index++;
        }
    }

    // ------------------------------------------------------------------ stage 2: write and flush

    private void ioLoop() {
        try {
            boolean idle = false;
            while (true) {
                Checkpoint c = formatted.poll();
                if (c != null) {
                    idle = false;
                    ioBusy = true;
                    LockSupport.unpark(formatter); // a queue slot is free
                    handOffDeferred(); // checkpoints written before c was handed; their items go first
                    writeDurable(c);
                    handOff(c);
                    freeBuffers.offer(c.buffer());
                    ioDone++; // the only writer
                    LockSupport.unpark(formatter);
                    continue;
                }
                if (!idle) {
                    idle = true;
                    ioBusy = false;
                    LockSupport.unpark(formatter); // a forced push may have waited for us to go idle
                }
                if (handOffDeferred() && running) {
                    LockSupport.parkNanos(this, HAND_OFF_POLL_NANOS); // more are likely to follow: poll, unwoken
                    continue;
                }
                if (!running && !formatter.isAlive() && formatted.isEmpty() && durable.isEmpty()) {
                    return;
                }
                ioAsleep = true; // Dekker with deferHandOff: stored, then the queues loaded
                if (formatted.isEmpty() && durable.isEmpty()) {
                    LockSupport.park(this); // the formatter unparks us with each hand-off, close() at the end
                }
                ioAsleep = false;
            }
        } catch (Throwable t) {
            fail(t);
        }
    }

    /**
     * Writes the checkpoint (unless empty), declares it durable, waking its forcers, then returns the
     * reservation it did not use: two CASes, and left for later it would make reservers meanwhile find
     * the log fuller than it is and push the AIL for space.
     */
    private void writeDurable(Checkpoint c) {
        if (c.items() == null) {
            markDurable(c.commitSeq());
            return;
        }
        write(c);
        markDurable(c.commitSeq());
        space.release(c.stolen() - c.bytes());
    }

    /**
     * A forcer, its checkpoint durable and its fellow forcers woken: puts a checkpoint of a few items into
     * the AIL itself when the AIL is due that checkpoint next ({@link Ail#insertNow}), which costs it less
     * than the hand-off it saves two other threads (the log I/O thread's look, the AIL consumer's wake-up).
     * A larger checkpoint (commits of others gathered in) is left to the log I/O thread, so that its forcer
     * returns right after the flush.
     */
    private boolean insertedHere(Checkpoint c) {
        return c.items() != null && c.items().length <= INSERT_HERE_MAX && ail.insertNow(c);
    }

    /**
     * Holder of the push turn, having written {@code c} off the log I/O thread: leaves its AIL hand-off to
     * that thread, waking it only if it sleeps (while it polls for hand-offs, this costs a queue offer).
     */
    private void deferHandOff(Checkpoint c) {
        if (c.items() == null) {
            return;
        }
        if (!durable.offer(c)) { // more than a poll's worth: wake the log I/O thread and wait for room
            LockSupport.unpark(io);
            while (!durable.offer(c)) {
                requireAlive();
                Thread.onSpinWait();
            }
        }
        VarHandle.fullFence(); // Dekker with ioLoop: the offer stored, then ioAsleep loaded
        if (ioAsleep) {
            LockSupport.unpark(io);
        }
    }

    /**
     * Log I/O thread: hands the deferred checkpoints to the AIL, oldest first, all in one publish (the AIL's
     * consumer then wakes once for them all, not once each); true if there were any.
     */
    private boolean handOffDeferred() {
        Checkpoint c = durable.poll();
        if (c == null) {
            return false;
        }
        Runnable hook = beforeHandOff;
        if (hook != null) {
            hook.run();
        }
        int n = 0;
        do {
            deferredBatch[n++] = c; // never an empty context's: deferHandOff leaves those out
        } while (n < deferredBatch.length && (c = durable.poll()) != null);
        ail.publish(deferredBatch, n);
        return true;
    }

    /**
     * Log I/O thread, once {@code c} is durable and its forcers woken: hands its items to the AIL (in
     * checkpoint order, the AIL's list order).
     */
    private void handOff(Checkpoint c) {
        if (c.items() == null) {
            return;
        }
        Runnable hook = beforeHandOff;
        if (hook != null) {
            hook.run();
        }
        ail.publish(c.items(), c.items().length, c.startLsn(), c.checkpointSeq(), c.endLsn());
    }

    private void write(Checkpoint c) {
        MemorySegment out = c.buffer().segment;
        int first = Math.min(c.blocks(), geometry.areaBlocks() - c.startBlock());
        // data its transactions point at reaches stable storage before they do: the data left to the log
        // written first (before every checkpoint: one that frees its blocks is durable only after it), then a
        // flush, unless nothing was left and a flush begun after they committed has returned already (the
        // previous checkpoint's, say)
        DeferredData d = deferredData;
        boolean wrote = d != null && d.writeDeferred();
        if (c.preflushMark() >= 0 && (wrote || flushesEnded <= c.preflushMark())) {
            flush();
        }
        long writeStart = System.nanoTime();
        if (c.blocks() == first) {
            // one contiguous write: a plain pwrite on a direct device, the cheapest at depth 1 (a batch goes
            // through io_uring, which may hand an O_DIRECT write to a kernel worker thread)
            device.write(geometry.areaStart() + c.startBlock(), out.asSlice(0, c.bytes()));
        } else {
            ioBatch.clear();
            ioBatch.write(geometry.areaStart() + c.startBlock(), out.asSlice(0, (long) first * blockSize));
            ioBatch.write(geometry.areaStart(), out.asSlice((long) first * blockSize, (long) (c.blocks() - first) * blockSize));
            device.submit(ioBatch);
            ioBatch.clear();
        }
        logWriteNanos.add(System.nanoTime() - writeStart);
        flush();
        lastCheckpointSeq = c.checkpointSeq();
        checkpoints.increment();
        checkpointBytes.add(c.bytes());
        checkpointItems.add(c.items().length);
        CheckpointEvent.emit(c.checkpointSeq(), c.startLsn(), c.items().length, c.records(), c.bytes(),
                System.nanoTime() - c.formatStart());
    }

    /** A device flush of the log's, counted as begun before it is issued and as ended once it returns. */
    private void flush() {
        flushesBegun = flushesBegun + 1; // one log writer at a time: no lost update
        long start = System.nanoTime();
        device.flush();
        logFlushNanos.add(System.nanoTime() - start);
        flushesEnded = flushesEnded + 1;
        logFlushes.increment();
    }

    /** Log flushes begun so far (see {@link Journal#flushMark}). */
    long flushesBegun() {
        return flushesBegun;
    }

    /** Log flushes that have returned. */
    long flushesEnded() {
        return flushesEnded;
    }

    private void markDurable(long seq) {
        durableSeq = seq;
        if (forcers.isEmpty()) {
            return; // a force written on its own thread waits for nobody (no iterator to make)
        }
        for (Forcer f : forcers) {
            if (f.seq() <= seq) {
                LockSupport.unpark(f.thread());
            }
        }
    }

    /** Stops the log after {@code t}: the journal shuts down first, so a forcer that wakes to it reports that. */
    private void fail(Throwable t) {
        onFailure.accept(t);
        failure = t;
        for (Forcer f : forcers) {
            LockSupport.unpark(f.thread());
        }
        LockSupport.unpark(formatter);
    }

    Throwable failure() {
        return failure;
    }

    /** Stops both threads once everything asked for is written. Forces nothing new. */
    @Override
    public void close() {
        running = false;
        LockSupport.unpark(formatter);
        try {
            formatter.join(TimeUnit.SECONDS.toMillis(30));
            LockSupport.unpark(io);
            io.join(TimeUnit.SECONDS.toMillis(30));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (Buffer b; (b = freeBuffers.poll()) != null; ) {
            b.arena.close();
        }
        if (spare != null) {
            spare.arena.close();
        }
    }
}
