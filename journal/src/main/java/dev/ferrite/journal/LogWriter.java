package dev.ferrite.journal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.VolumeShutdownException;

/**
 * The CIL push: the one thread ({@code ferrite-cil-push}) that turns contexts into checkpoints on disk.
 *
 * <p>A push swaps in a new CIL context, formats the old one's items into records in one aligned buffer
 * (one op per item, with its latest contents), seals each record (checksum, sector stamps), writes
 * them with one or two device writes (two when the circular area wraps), flushes, and only then
 * declares the checkpoint durable, wakes its forcers, returns unused reservation, and hands the items
 * to the AIL. Checkpoints are written strictly one after another, each flushed before the next is
 * written: a valid later checkpoint on disk therefore proves every earlier one was complete, which is
 * how recovery tells a torn tail from corruption.
 *
 * <p>Group commit: {@link #force} raises a target sequence and waits; all commits that landed in the
 * context while the previous checkpoint was being written go to disk together in the next one.
 *
 * <p>Two sequences: commit sequences number CIL contexts (what {@link #force} takes; an empty context is
 * "pushed" without any I/O), checkpoint sequences number the checkpoints actually written, with no
 * gaps, which is what recovery follows from record to record.
 */
final class LogWriter implements AutoCloseable {
    private final BlockDevice device;
    private final LogGeometry geometry;
    private final int blockSize;
    private final long logId;
    private final int epoch;
    private final Cil cil;
    private final LogSpace space;
    private final Ail ail;
    private final Thread thread;
    private final AtomicLong pushTarget = new AtomicLong();
    private final Object durableLock = new Object();
    private final IoBatch io = new IoBatch(2);
    private volatile long durableSeq;
    private volatile long lastCheckpointSeq;
    private volatile boolean background;
    private volatile boolean running = true;
    private volatile Throwable failure;
    private final java.util.function.Consumer<Throwable> onFailure;

    // Writer thread only.
    private long nextCheckpointSeq;
    private int headCycle;
    private int headBlock;
    private Arena bufferArena = Arena.ofShared();
    private MemorySegment buffer;
    private LogItem[] itemArray = new LogItem[64];

    final LongAdder checkpoints = new LongAdder();
    final LongAdder checkpointBytes = new LongAdder();
    final LongAdder checkpointItems = new LongAdder();
    final LongAdder forces = new LongAdder();
    final LongAdder logFlushes = new LongAdder();

    LogWriter(BlockDevice device, LogGeometry geometry, long logId, int epoch, long headLsn, long firstCheckpointSeq,
              Cil cil, LogSpace space, Ail ail, java.util.function.Consumer<Throwable> onFailure) {
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
        this.buffer = bufferArena.allocate(64L * blockSize, BlockDevice.BUFFER_ALIGNMENT);
        this.thread = new Thread(this::run, "ferrite-cil-push");
        this.thread.setDaemon(true);
        this.thread.start();
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

    /** Committer: the current context passed the push threshold. */
    void backgroundPush() {
        if (!background) {
            background = true;
            LockSupport.unpark(thread);
        }
    }

    /** Asks for contexts up to {@code seq} to be pushed, without waiting. */
    void requestPush(long seq) {
        for (long cur = pushTarget.get(); seq > cur; cur = pushTarget.get()) {
            if (pushTarget.compareAndSet(cur, seq)) {
                LockSupport.unpark(thread);
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
        checkAlive();
        requestPush(seq);
        boolean interrupted = false;
        synchronized (durableLock) {
            while (durableSeq < seq && failure == null) {
                try {
                    durableLock.wait();
                } catch (InterruptedException e) {
                    interrupted = true; // a force cannot be abandoned half-way: the caller needs its answer
                }
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        if (durableSeq < seq) {
            checkAlive();
        }
    }

    void checkAlive() {
        Throwable f = failure;
        if (f != null) {
            throw new VolumeShutdownException("journal has shut down: " + f, f);
        }
    }

    /** Head of the log: where the next record goes. Stable only while the writer is idle. */
    long headLsn() {
        return Lsn.of(headCycle, headBlock);
    }

    private void run() {
        try {
            while (true) {
                while (running && !background && pushTarget.get() < cil.currentSeq()) {
                    LockSupport.park(this);
                }
                if (!running && pushTarget.get() < cil.currentSeq()) {
                    return;
                }
                background = false;
                Cil.Context ctx = cil.switchContext();
                push(ctx);
            }
        } catch (Throwable t) {
            fail(t);
        }
    }

    private void push(Cil.Context ctx) {
        List<LogItem> items = ctx.items();
        if (items.isEmpty()) {
            markDurable(ctx.seq);
            return;
        }
        long start = System.nanoTime();
        long stolen = ctx.bytes();
        int parity = (int) (ctx.seq & 1);
        int chunkShift = cil.chunkShift();
        ensureCapacity(stolen + 8L * blockSize); // slack: an accounting bug is reported below, not as an overflow
        long payloadCapacity = (long) LogRecordFormat.maxPayloadBlocks(blockSize) * blockSize;
        long tailWord = space.tail();
        long tailLsn = Lsn.of((int) (tailWord >>> 32), (int) ((tailWord & 0xFFFF_FFFFL) / blockSize));

        long checkpointSeq = nextCheckpointSeq;
        RecordCursor rec = new RecordCursor(headCycle, headBlock, tailLsn, checkpointSeq);
        long startLsn = Lsn.of(headCycle, headBlock);
        if (itemArray.length < items.size()) {
            itemArray = new LogItem[Integer.highestOneBit(items.size()) * 2];
        }
        int count = 0;
        for (LogItem it : items) {
            long map = it.shadowMap[parity];
            int size = DirtyMap.opSize(map, chunkShift);
            if (rec.payloadUsed + size > payloadCapacity) {
                rec.close(false);
            }
            DirtyMap.writeOp(buffer, rec.recordStart + blockSize + rec.payloadUsed, it.type(), it.home(), map,
                    chunkShift, it.shadow[parity]);
            rec.payloadUsed += size;
            rec.ops++;
            cil.releaseShadow(it, parity);
            itemArray[count++] = it;
        }
        if (rec.payloadUsed + LogRecordFormat.COMMIT_OP_SIZE > payloadCapacity) {
            rec.close(false);
        }
        LogRecordFormat.writeCommitOp(buffer, rec.recordStart + blockSize + rec.payloadUsed, count, rec.index + 1L);
        rec.payloadUsed += LogRecordFormat.COMMIT_OP_SIZE;
        rec.ops++;
        rec.close(true);

        long actual = rec.recordStart;
        if (actual > stolen) {
            throw new IllegalStateException("checkpoint " + checkpointSeq + " needs " + actual
                    + " bytes of log but its transactions reserved only " + stolen + ": log space accounting is broken");
        }
        int blocks = (int) (actual / blockSize);
        int first = Math.min(blocks, geometry.areaBlocks() - headBlock);
        io.clear();
        io.write(geometry.areaStart() + headBlock, buffer.asSlice(0, (long) first * blockSize));
        if (blocks > first) {
            io.write(geometry.areaStart(), buffer.asSlice((long) first * blockSize, (long) (blocks - first) * blockSize));
        }
        device.submit(io);
        io.clear();
        device.flush();
        logFlushes.increment();

        headCycle = rec.cycle;
        headBlock = rec.block;
        nextCheckpointSeq = checkpointSeq + 1;
        lastCheckpointSeq = checkpointSeq;
        checkpoints.increment();
        checkpointBytes.add(actual);
        checkpointItems.add(count);
        markDurable(ctx.seq);
        space.release(stolen - actual);
        ail.publish(itemArray, count, startLsn, checkpointSeq, Lsn.of(headCycle, headBlock));
        java.util.Arrays.fill(itemArray, 0, count, null);
        CheckpointEvent.emit(checkpointSeq, startLsn, count, rec.index, actual, System.nanoTime() - start);
    }

    /** Formats records one after another into the buffer, tracking each record's position in the log. */
    private final class RecordCursor {
        final long tailLsn;
        final long seq;
        int cycle;
        int block;
        long recordStart;
        long payloadUsed;
        int ops;
        int index;

        RecordCursor(int cycle, int block, long tailLsn, long seq) {
            this.cycle = cycle;
            this.block = block;
            this.tailLsn = tailLsn;
            this.seq = seq;
        }

        void close(boolean commit) {
            int payloadBlocks = (int) ((payloadUsed + blockSize - 1) / blockSize);
            long payloadStart = recordStart + blockSize;
            long padStart = payloadStart + payloadUsed;
            long end = payloadStart + (long) payloadBlocks * blockSize;
            if (padStart < end) {
                buffer.asSlice(padStart, end - padStart).fill((byte) 0);
            }
            short flags = (short) ((index == 0 ? LogRecordFormat.FLAG_START : 0) | (commit ? LogRecordFormat.FLAG_COMMIT : 0));
            MemorySegment record = buffer.asSlice(recordStart, end - recordStart);
            LogRecordFormat.writeHeader(record.asSlice(0, blockSize), cycle, flags, Lsn.of(cycle, block), tailLsn, logId,
                    seq, epoch, index, payloadBlocks, (int) payloadUsed, ops);
            LogRecordFormat.seal(record, blockSize, cycle);
            block += 1 + payloadBlocks;
            while (block >= geometry.areaBlocks()) {
                block -= geometry.areaBlocks();
                cycle++;
            }
            recordStart = end;
            payloadUsed = 0;
            ops = 0;
            index++;
        }
    }

    private void ensureCapacity(long bytes) {
        long need = (bytes + blockSize - 1) / blockSize * blockSize;
        if (buffer.byteSize() >= need) {
            return;
        }
        bufferArena.close();
        bufferArena = Arena.ofShared();
        buffer = bufferArena.allocate(Math.max(need, buffer.byteSize() * 2), BlockDevice.BUFFER_ALIGNMENT);
    }

    private void markDurable(long seq) {
        synchronized (durableLock) {
            durableSeq = seq;
            durableLock.notifyAll();
        }
    }

    private void fail(Throwable t) {
        failure = t;
        synchronized (durableLock) {
            durableLock.notifyAll();
        }
        onFailure.accept(t);
    }

    Throwable failure() {
        return failure;
    }

    /** Stops the thread once everything asked for is pushed. Forces nothing new. */
    @Override
    public void close() {
        running = false;
        LockSupport.unpark(thread);
        try {
            thread.join(TimeUnit.SECONDS.toMillis(30));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        bufferArena.close();
    }
}
