package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongPredicate;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.testkit.ForwardingDevice;

/**
 * A device that fails chosen requests with an errno, for fault-injection tests: reads or writes of
 * blocks a predicate picks, optionally only those a given thread issues (the caller's own data write, or
 * the AIL pusher's write-back), and flushes. A failed request changes nothing on the device underneath; a
 * batch with a failing request fails whole, before any of it runs. Faults stay armed until cleared, as a
 * dead region of a disk stays dead, except a flush fault, which fails the next {@code n} flushes.
 */
final class FaultDevice extends ForwardingDevice {
    private record Fault(LongPredicate blocks, String threadPrefix, int errno) {
        boolean hits(long block) {
            return blocks.test(block) && (threadPrefix == null || Thread.currentThread().getName().startsWith(threadPrefix));
        }
    }

    private volatile Fault reads;
    private volatile Fault writes;
    private final AtomicInteger flushFaults = new AtomicInteger();
    private volatile int flushErrno = Errno.EIO;
    /** Requests failed so far. */
    final AtomicInteger injected = new AtomicInteger();

    FaultDevice(BlockDevice inner) {
        super(inner);
    }

    /** Fails every read of a block {@code blocks} picks, by any thread. */
    FaultDevice failReads(LongPredicate blocks, int errno) {
        reads = new Fault(blocks, null, errno);
        return this;
    }

    /** Fails every write of a block {@code blocks} picks, by a thread whose name starts with {@code threadPrefix} (null: any). */
    FaultDevice failWrites(LongPredicate blocks, String threadPrefix, int errno) {
        writes = new Fault(blocks, threadPrefix, errno);
        return this;
    }

    /** Fails the next {@code n} flushes. */
    FaultDevice failFlushes(int n, int errno) {
        flushErrno = errno;
        flushFaults.set(n);
        return this;
    }

    /** Disarms every fault: the device is healthy again. */
    void clear() {
        reads = null;
        writes = null;
        flushFaults.set(0);
    }

    @Override
    public void read(long block, MemorySegment dst) {
        check(reads, "read", block, blocks(dst));
        super.read(block, dst);
    }

    @Override
    public void write(long block, MemorySegment src) {
        check(writes, "write", block, blocks(src));
        super.write(block, src);
    }

    @Override
    public void submit(IoBatch batch) {
        for (int i = 0; i < batch.size(); i++) {
            boolean w = batch.isWrite(i);
            check(w ? writes : reads, w ? "write" : "read", batch.block(i), blocks(batch.buffer(i)));
        }
        super.submit(batch);
    }

    @Override
    public void flush() {
        if (flushFaults.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            injected.incrementAndGet();
            throw new DeviceException(name(), "flush", -1, flushErrno, "injected fault");
        }
        super.flush();
    }

    private long blocks(MemorySegment s) {
        return s.byteSize() / blockSize();
    }

    private void check(Fault f, String op, long block, long count) {
        if (f == null) {
            return;
        }
        for (long b = block; b < block + count; b++) {
            if (f.hits(b)) {
                injected.incrementAndGet();
                throw new DeviceException(name(), op, b * blockSize(), f.errno, "injected fault on block " + b);
            }
        }
    }
}
