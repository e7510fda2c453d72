package dev.ferrite.io;

import dev.ferrite.io.sys.Posix;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * One io_uring instance driven through raw system calls: {@code io_uring_setup}, the three shared
 * mappings (submission ring, completion ring, submission entries) and {@code io_uring_enter}. Not
 * thread-safe; {@link UringEngine} lends each ring to one submitting thread at a time.
 *
 * <p>Ordering with the kernel: entries and the index array are written plainly and published by a
 * release store of the submission tail; completions are read after an acquire load of the completion
 * tail and released by a release store of the completion head. The kernel side reads and writes the same
 * words with the matching barriers ({@code io_uring(7)}).
 */
final class IoUring implements AutoCloseable {
    // struct io_uring_params (120 bytes) and the offset tables it returns.
    private static final long PARAMS_SIZE = 120;
    private static final long P_SQ_ENTRIES = 0, P_CQ_ENTRIES = 4, P_FLAGS = 8, P_FEATURES = 20;
    private static final long P_SQ_OFF = 40, P_CQ_OFF = 80;
    private static final long SQ_HEAD = 0, SQ_TAIL = 4, SQ_MASK = 8, SQ_ARRAY = 24;
    private static final long CQ_HEAD = 0, CQ_TAIL = 4, CQ_MASK = 8, CQ_CQES = 20;

    private static final int IORING_SETUP_CLAMP = 1 << 4;
    private static final int IORING_FEAT_SINGLE_MMAP = 1;
    private static final long IORING_OFF_SQ_RING = 0L;
    private static final long IORING_OFF_CQ_RING = 0x8000000L;
    private static final long IORING_OFF_SQES = 0x10000000L;
    private static final int IORING_ENTER_GETEVENTS = 1;

    // struct io_uring_sqe (64 bytes: opcode, flags, ioprio, fd | off | addr | len, rw_flags | user_data | 24 bytes
    // of buffer/personality/addr3 fields we leave zero) and struct io_uring_cqe (16 bytes).
    private static final long SQE_SIZE = 64, CQE_SIZE = 16;
    private static final long SQE_OPCODE = 0, SQE_OFF = 8, SQE_ADDR = 16, SQE_LEN = 24, SQE_USER_DATA = 32;
    private static final long CQE_USER_DATA = 0, CQE_RES = 8;
    private static final byte IORING_OP_READ = 22, IORING_OP_WRITE = 23;

    private static final VarHandle INT = JAVA_INT.varHandle();

    private final int ringFd;
    private final int sqEntries;
    private final MemorySegment sqRing, cqRing, sqes;
    private final long sqRingSize, cqRingSize;
    private final boolean singleMmap;
    private final long sqHead, sqTail, sqArray, cqHead, cqTail, cqes;
    private final int sqMask, cqMask;
    private int localTail;

    private IoUring(int ringFd, MemorySegment params) {
        this.ringFd = ringFd;
        this.sqEntries = params.get(JAVA_INT, P_SQ_ENTRIES);
        int cqEntries = params.get(JAVA_INT, P_CQ_ENTRIES);
        int features = params.get(JAVA_INT, P_FEATURES);
        long sqArrayOff = params.get(JAVA_INT, P_SQ_OFF + SQ_ARRAY);
        long cqesOff = params.get(JAVA_INT, P_CQ_OFF + CQ_CQES);
        long sqSize = sqArrayOff + 4L * sqEntries;
        long cqSize = cqesOff + CQE_SIZE * cqEntries;
        this.singleMmap = (features & IORING_FEAT_SINGLE_MMAP) != 0;
        if (singleMmap) {
            sqSize = cqSize = Math.max(sqSize, cqSize);
        }
        this.sqRingSize = sqSize;
        this.cqRingSize = cqSize;
        MemorySegment sq = null, cq = null;
        try {
            sq = map(sqSize, IORING_OFF_SQ_RING);
            cq = singleMmap ? sq : map(cqSize, IORING_OFF_CQ_RING);
            this.sqes = map(SQE_SIZE * sqEntries, IORING_OFF_SQES);
        } catch (RuntimeException e) {
            if (cq != null && cq != sq) {
                Posix.munmap(cq, cqSize);
            }
            if (sq != null) {
                Posix.munmap(sq, sqSize);
            }
            Posix.close(ringFd);
            throw e;
        }
        this.sqRing = sq;
        this.cqRing = cq;
        this.sqHead = params.get(JAVA_INT, P_SQ_OFF + SQ_HEAD);
        this.sqTail = params.get(JAVA_INT, P_SQ_OFF + SQ_TAIL);
        this.sqArray = sqArrayOff;
        this.sqMask = sqRing.get(JAVA_INT, params.get(JAVA_INT, P_SQ_OFF + SQ_MASK));
        this.cqHead = params.get(JAVA_INT, P_CQ_OFF + CQ_HEAD);
        this.cqTail = params.get(JAVA_INT, P_CQ_OFF + CQ_TAIL);
        this.cqMask = cqRing.get(JAVA_INT, params.get(JAVA_INT, P_CQ_OFF + CQ_MASK));
        this.cqes = cqesOff;
        this.localTail = (int) INT.getAcquire(sqRing, sqTail);
    }

    /**
     * Creates a ring with room for {@code entries} requests in flight.
     *
     * @throws DeviceException with the kernel's errno if io_uring is unavailable (ENOSYS, EPERM, ...)
     */
    static IoUring create(int entries) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment params = arena.allocate(PARAMS_SIZE, 8);
            params.set(JAVA_INT, P_FLAGS, IORING_SETUP_CLAMP);
            long fd = Posix.syscall(Posix.SYS_IO_URING_SETUP, entries, params.address(), 0, 0, 0, 0);
            if (fd < 0) {
                throw new DeviceException("io_uring", "io_uring_setup", -1, Posix.errno(), "entries " + entries);
            }
            return new IoUring((int) fd, params);
        }
    }

    /** Most requests this ring can hold in flight. */
    int entries() {
        return sqEntries;
    }

    /**
     * Runs the whole batch against {@code fd}, keeping up to {@code depth} requests in flight. Short
     * transfers (rare with O_DIRECT) are finished synchronously with pread/pwrite.
     *
     * <p>Free slots are refilled as soon as their completions are seen, but the new entries reach the
     * kernel one contiguous run per {@code io_uring_enter}: a random 4 KiB request alone, a sequential
     * stretch together. One call submitting many entries runs them all through the filesystem and
     * block layer under one plug before the device hears of the first, so a device that finishes the
     * whole queue at once (virtio-blk does) idles for that whole submission, every round; submitted
     * singly, the first request is on its way within microseconds and the rest follow while the device
     * works. A contiguous run stays together because the plug is what merges it into one large request.
     * The thread looks at the completion ring before every call and only asks the kernel to wait when
     * nothing is left to submit and nothing has completed.
     */
    void run(int fd, int blockSize, IoBatch batch, int depth) {
        depth = Math.min(depth, sqEntries);
        int n = batch.size();
        int next = 0, inFlight = 0, finished = 0;
        while (finished < n) {
            while (next < n && inFlight < depth) {
                prepare(fd, blockSize, batch, next);
                next++;
                inFlight++;
            }
            INT.setRelease(sqRing, sqTail, localTail);
            int reaped = reap(fd, blockSize, batch);
            // Unsubmitted entries are the last prepared ones, in batch order: the kernel consumes the ring in order.
            int unsubmitted = localTail - (int) INT.getAcquire(sqRing, sqHead);
            if (unsubmitted > 0 || reaped == 0) {
                int submit = unsubmitted == 0 ? 0 : contiguousRun(batch, blockSize, next - unsubmitted, next);
                boolean wait = reaped == 0 && submit == unsubmitted;
                enter(submit, wait ? 1 : 0, wait ? IORING_ENTER_GETEVENTS : 0);
            }
            inFlight -= reaped;
            finished += reaped;
        }
    }

    /** How many requests from {@code from} (before {@code to}) continue one another on the device, same direction. */
    private static int contiguousRun(IoBatch batch, int blockSize, int from, int to) {
        int i = from + 1;
        while (i < to && batch.isWrite(i) == batch.isWrite(i - 1)
                && batch.block(i) * blockSize == batch.block(i - 1) * blockSize + batch.buffer(i - 1).byteSize()) {
            i++;
        }
        return i - from;
    }

    private void enter(int toSubmit, int minComplete, int flags) {
        long r = Posix.syscall(Posix.SYS_IO_URING_ENTER, ringFd, toSubmit, minComplete, flags, 0, 0);
        if (r < 0) {
            int errno = Posix.errno();
            if (errno != Errno.EINTR && errno != Errno.EAGAIN && errno != Errno.EBUSY) {
                throw new DeviceException("io_uring", "io_uring_enter", -1, errno, "ring fd " + ringFd);
            }
        }
    }

    private void prepare(int fd, int blockSize, IoBatch batch, int i) {
        long sqe = (long) (localTail & sqMask) * SQE_SIZE;
        MemorySegment buf = batch.buffer(i);
        // Word by word, so every field not named here (flags, ioprio, rw_flags, buf_index, ...) is zero.
        byte opcode = batch.isWrite(i) ? IORING_OP_WRITE : IORING_OP_READ;
        sqes.set(JAVA_LONG, sqe + SQE_OPCODE, (opcode & 0xFFL) | ((fd & 0xFFFF_FFFFL) << 32));
        sqes.set(JAVA_LONG, sqe + SQE_OFF, batch.block(i) * blockSize);
        sqes.set(JAVA_LONG, sqe + SQE_ADDR, buf.address());
        sqes.set(JAVA_LONG, sqe + SQE_LEN, buf.byteSize() & 0xFFFF_FFFFL);
        sqes.set(JAVA_LONG, sqe + SQE_USER_DATA, i);
        sqes.set(JAVA_LONG, sqe + 40, 0L);
        sqes.set(JAVA_LONG, sqe + 48, 0L);
        sqes.set(JAVA_LONG, sqe + 56, 0L);
        sqRing.set(JAVA_INT, sqArray + 4L * (localTail & sqMask), localTail & sqMask);
        batch.started(i);
        localTail++;
    }

    private int reap(int fd, int blockSize, IoBatch batch) {
        int head = (int) INT.getAcquire(cqRing, cqHead);
        int tail = (int) INT.getAcquire(cqRing, cqTail);
        int count = tail - head;
        for (; head != tail; head++) {
            long cqe = cqes + (long) (head & cqMask) * CQE_SIZE;
            int i = (int) cqRing.get(JAVA_LONG, cqe + CQE_USER_DATA);
            int res = cqRing.get(JAVA_INT, cqe + CQE_RES);
            long len = batch.buffer(i).byteSize();
            if (res < 0) {
                batch.completed(i, -res);
            } else if (res < len) {
                batch.completed(i, DirectDevice.finishTransfer(fd, batch.isWrite(i), batch.buffer(i),
                        batch.block(i) * blockSize, res));
            } else {
                batch.completed(i, 0);
            }
        }
        INT.setRelease(cqRing, cqHead, head);
        return count;
    }

    private MemorySegment map(long size, long offset) {
        MemorySegment m = Posix.mmap(size, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED | Posix.MAP_POPULATE,
                ringFd, offset);
        if (m.address() == Posix.MAP_FAILED) {
            throw new DeviceException("io_uring", "mmap", offset, Posix.errno(), "ring fd " + ringFd);
        }
        return m;
    }

    @Override
    public void close() {
        Posix.munmap(sqes, sqes.byteSize());
        if (!singleMmap) {
            Posix.munmap(cqRing, cqRingSize);
        }
        Posix.munmap(sqRing, sqRingSize);
        Posix.close(ringFd);
    }
}
