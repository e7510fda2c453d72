package dev.ferrite.io;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.locks.LockSupport;

import org.jctools.queues.atomic.MpmcAtomicArrayQueue;

/**
 * A fixed set of equally sized, {@link BlockDevice#BUFFER_ALIGNMENT}-aligned off-heap buffers carved
 * from one slab, for hot paths that must not allocate per operation. {@link #acquire()} and
 * {@link #release(MemorySegment)} are lock-free (a JCTools MPMC array queue of pre-sliced segments) and
 * allocate nothing. The slab's lifetime is the pool's: {@link #close()} frees it, and any buffer still
 * held fails on its next access instead of touching freed memory.
 */
public final class BufferPool implements AutoCloseable {
    private final Arena arena;
    private final MemorySegment slab;
    private final long stride;
    private final int bufferSize;
    private final MemorySegment[] buffers;
    private final MpmcAtomicArrayQueue<MemorySegment> free;
    /** 1 while buffer i is lent out: catches a double release or a foreign segment. */
    private final AtomicIntegerArray lent;

    /**
     * @param bufferSize bytes per buffer, a positive multiple of {@link BlockDevice#SECTOR_SIZE}
     * @param count      number of buffers
     */
    public BufferPool(int bufferSize, int count) {
        if (bufferSize < 1 || bufferSize % BlockDevice.SECTOR_SIZE != 0) {
            throw new InvalidArgumentException("buffer size " + bufferSize + " is not a positive multiple of "
                    + BlockDevice.SECTOR_SIZE);
        }
        if (count < 1) {
            throw new InvalidArgumentException("buffer count " + count + " must be at least 1");
        }
        this.bufferSize = bufferSize;
        this.stride = ((long) bufferSize + BlockDevice.BUFFER_ALIGNMENT - 1) & -(long) BlockDevice.BUFFER_ALIGNMENT;
        this.arena = Arena.ofShared();
        this.slab = arena.allocate(stride * count, BlockDevice.BUFFER_ALIGNMENT);
        this.buffers = new MemorySegment[count];
        this.free = new MpmcAtomicArrayQueue<>(count);
        this.lent = new AtomicIntegerArray(count);
        for (int i = 0; i < count; i++) {
            buffers[i] = slab.asSlice(i * stride, bufferSize);
            free.offer(buffers[i]);
        }
    }

    /** A free buffer, or null if all are lent out. Contents are whatever the last user left. */
    public MemorySegment tryAcquire() {
        MemorySegment b = free.poll();
        if (b != null) {
            lent.set(indexOf(b), 1);
        }
        return b;
    }

    /** A free buffer, waiting (spin, then park) for one to be released if all are lent out. */
    public MemorySegment acquire() {
        for (int spins = 0; ; spins++) {
            MemorySegment b = tryAcquire();
            if (b != null) {
                return b;
            }
            if (spins < 64) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(20_000);
            }
        }
    }

    /** Returns a buffer obtained from this pool. */
    public void release(MemorySegment buffer) {
        int i = indexOf(buffer);
        if (i < 0 || buffers[i].address() != buffer.address() || buffer.byteSize() != bufferSize) {
            throw new InvalidArgumentException("segment at 0x" + Long.toHexString(buffer.address())
                    + " was not lent by this pool");
        }
        if (!lent.compareAndSet(i, 1, 0)) {
            throw new InvalidArgumentException("buffer " + i + " of the pool was released twice");
        }
        free.offer(buffers[i]);
    }

    private int indexOf(MemorySegment buffer) {
        long off = buffer.address() - slab.address();
        if (off < 0 || off >= slab.byteSize() || off % stride != 0) {
            return -1;
        }
        return (int) (off / stride);
    }

    public int bufferSize() {
        return bufferSize;
    }

    public int capacity() {
        return buffers.length;
    }

    /** Buffers free right now (a snapshot under concurrency). */
    public int available() {
        return free.size();
    }

    @Override
    public void close() {
        arena.close();
    }
}
