package dev.ferrite.io;

import dev.ferrite.io.sys.Posix;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

/**
 * Argument checking, read-only and closed-state enforcement, and the in-flight guard shared by every
 * device, so each implementation only moves bytes.
 *
 * <p>The guard is one atomic word: bit 63 says "closed", bit 62 "paused", the low bits count calls in
 * progress. A call increments the count unless the closed bit is set, waiting while the paused bit is;
 * {@link #close()} sets the closed bit and waits for the count to drain before releasing the file
 * descriptor or memory, so no transfer ever touches a descriptor number that the process has already
 * reused; {@link #alone} sets the paused bit and waits likewise, so that what it reads is one point in time.
 */
abstract class AbstractBlockDevice implements BlockDevice {
    private static final long CLOSED = Long.MIN_VALUE;
    private static final long PAUSED = 1L << 62;
    private static final long CALLS = PAUSED - 1;

    private final String name;
    private final int blockSize;
    private final int blockShift;
    private final long blockCount;
    private final boolean readOnly;
    private final AtomicLong guard = new AtomicLong();

    AbstractBlockDevice(String name, int blockSize, long blockCount, boolean readOnly) {
        if (blockCount < 1) {
            throw new InvalidArgumentException(name + ": device must hold at least one block of " + blockSize + " bytes");
        }
        this.name = name;
        this.blockSize = blockSize;
        this.blockShift = Integer.numberOfTrailingZeros(blockSize);
        this.blockCount = blockCount;
        this.readOnly = readOnly;
    }

    abstract void doRead(long offset, MemorySegment dst);

    abstract void doWrite(long offset, MemorySegment src);

    abstract void doSubmit(IoBatch batch);

    abstract void doFlush();

    abstract void doDiscard(long offset, long length);

    abstract void doClose();

    @Override
    public final String name() {
        return name;
    }

    @Override
    public final int blockSize() {
        return blockSize;
    }

    @Override
    public final long blockCount() {
        return blockCount;
    }

    @Override
    public final boolean isReadOnly() {
        return readOnly;
    }

    @Override
    public final void read(long block, MemorySegment dst) {
        BlockDevice.requireTransfer(this, "read", block, dst);
        enter("read", block);
        try {
            doRead(block << blockShift, dst);
        } finally {
            exit();
        }
    }

    @Override
    public final void write(long block, MemorySegment src) {
        BlockDevice.requireTransfer(this, "write", block, src);
        BlockDevice.requireWritable(this, "write", block << blockShift);
        enter("write", block);
        try {
            doWrite(block << blockShift, src);
        } finally {
            exit();
        }
    }

    @Override
    public final void submit(IoBatch batch) {
        int n = batch.size();
        BlockDevice.requireSubmittable(this, batch);
        batch.resetResults();
        enter("submit", -1); // even for an empty batch: every call on a closed device fails
        try {
            if (n > 0) {
                doSubmit(batch);
            }
        } finally {
            exit();
        }
        int first = batch.firstError();
        if (first >= 0) {
            String op = batch.isWrite(first) ? "write" : "read";
            throw new DeviceException(name, op, batch.block(first) << blockShift, batch.error(first),
                    "batch request " + first + " of " + n + " (" + batch.errorCount() + " failed)");
        }
    }

    @Override
    public final void flush() {
        enter("flush", -1);
        try {
            doFlush();
        } finally {
            exit();
        }
    }

    @Override
    public final void discard(long block, long count) {
        if (count < 1) {
            throw new InvalidArgumentException(name + ": discard of " + count + " blocks at block " + block
                    + ": the count must be at least 1");
        }
        BlockDevice.requireInside(this, "discard", block, count);
        BlockDevice.requireWritable(this, "discard", block << blockShift);
        enter("discard", block);
        try {
            doDiscard(block << blockShift, count << blockShift);
        } finally {
            exit();
        }
    }

    @Override
    public final void close() {
        long s;
        do {
            s = guard.get();
            if ((s & CLOSED) != 0) {
                return;
            }
        } while (!guard.compareAndSet(s, s | CLOSED));
        for (int spins = 0; guard.get() != CLOSED; ) {
            spins = backOff(spins);
        }
        doClose();
    }

    private static int backOff(int spins) {
        if (spins < 100) {
            Thread.onSpinWait();
        } else {
            LockSupport.parkNanos(50_000);
        }
        return spins + 1;
    }

    /**
     * {@code flock} on {@code fd} for {@link #tryLockExclusive()} ({@code LOCK_EX | LOCK_NB}) or
     * {@link #unlockExclusive()} ({@code LOCK_UN}), inside the in-flight guard.
     *
     * @return false if the lock is held through another open file description
     */
    final boolean flock(int fd, int operation) {
        enter("flock", -1);
        try {
            while (Posix.flock(fd, operation) < 0) {
                int errno = Posix.errno();
                if (errno == Errno.EAGAIN) {
                    return false;
                }
                if (errno != Errno.EINTR) {
                    throw failure("flock", -1, errno, (operation & Posix.LOCK_UN) != 0 ? "unlock" : "exclusive lock");
                }
            }
            return true;
        } finally {
            exit();
        }
    }

    /** True once {@link #close()} has started. */
    final boolean isClosed() {
        return (guard.get() & CLOSED) != 0;
    }

    final DeviceException failure(String op, long offset, int errno, String detail) {
        return new DeviceException(name, op, offset, errno, detail);
    }

    /**
     * Marks a call in progress (fails with EBADF once closed), after any {@link #alone} under way; pair with
     * {@link #exit()}.
     */
    final void enter(String op, long block) {
        for (int spins = 0; ; ) {
            long s = guard.get();
            if ((s & CLOSED) != 0) {
                throw failure(op, block < 0 ? -1 : block << blockShift, Errno.EBADF, "device is closed");
            }
            if ((s & PAUSED) != 0) {
                spins = backOff(spins);
            } else if (guard.compareAndSet(s, s + 1)) {
                return;
            }
        }
    }

    /**
     * Runs {@code action} once every call in progress has returned, with none starting until it is done
     * (they wait): it sees the device at one point in time, every write that returned in it and none
     * begun after, as a crash at that point would leave a device that keeps what it acknowledged.
     *
     * @throws DeviceException EBADF once the device is closed
     */
    final <T> T alone(String op, Supplier<T> action) {
        for (int spins = 0; ; ) {
            long s = guard.get();
            if ((s & CLOSED) != 0) {
                throw failure(op, -1, Errno.EBADF, "device is closed");
            }
            if ((s & PAUSED) != 0) {
                spins = backOff(spins);
            } else if (guard.compareAndSet(s, s | PAUSED)) {
                break;
            }
        }
        try {
            for (int spins = 0; (guard.get() & CALLS) != 0; ) {
                spins = backOff(spins);
            }
            return action.get();
        } finally {
            guard.getAndAdd(-PAUSED);
        }
    }

    final void exit() {
        guard.decrementAndGet();
    }
}
