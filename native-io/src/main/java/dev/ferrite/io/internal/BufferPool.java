package dev.ferrite.io.internal;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;

import org.jctools.queues.atomic.MpmcAtomicArrayQueue;

/**
 * A fixed set of equally sized, {@link BlockDevice#BUFFER_ALIGNMENT}-aligned off-heap buffers carved
 * from one slab ({@link OffHeap#reserve}: its pages are supplied as buffers first use them, so a pool
 * sized for bursts costs memory only for what the bursts used), for hot paths that must not allocate per
 * operation. {@link #acquire()} and
 * {@link #release(MemorySegment)} are lock-free and allocate nothing. The slab's lifetime is the pool's:
 * {@link #close()} frees it, and any buffer still held fails on its next access instead of touching
 * freed memory.
 *
 * <p>Free buffers live in two places. A thread first uses the {@value #CACHE_SLOTS} cache slots of its
 * stripe (picked by thread id; stripes sit 128 bytes apart), so a thread that acquires and releases in
 * turn writes no line another thread touches. A release that finds its stripe full spills to a shared
 * MPMC queue, and an acquire that finds its stripe empty takes from the queue. No stripe belongs to a
 * thread: slots are claimed by CAS, threads that collide on a stripe simply share it, and an acquire
 * that finds its stripe and the queue empty takes from any other stripe. A buffer cached by a thread
 * that died or went idle is therefore never lost, and {@link #acquire()} only waits when every buffer
 * is lent. It then waits on the pool's monitor, which a release signals only while someone waits (a
 * release reads one counter otherwise), and gives up after a bound with a {@link NoSpaceException}.
 *
 * <p>Every buffer has a lent flag, 128 bytes from the next: set by the acquirer with a plain store (the
 * CAS or queue hand-off that gave it the buffer already orders it after the previous release), cleared
 * by release with a CAS, which is how a double release is caught; a foreign segment fails the address
 * check before that.
 */
public final class BufferPool implements AutoCloseable {
    /** Slots per stripe: a thread holding up to this many buffers at a time never touches the queue. */
    private static final int CACHE_SLOTS = 8;
    /**
     * ints between stripes, and between lent flags: 128 bytes, beyond the adjacent-line prefetcher's
     * pair. The first PAD ints stay unused, since their line also holds the array's length, which every
     * access reads for its bounds check.
     */
    private static final int PAD = 32;
    /** A power of two, at least four per processor so that few threads ever share one. */
    private static final int STRIPES = Integer.highestOneBit(4 * Runtime.getRuntime().availableProcessors() - 1) << 1;
    /** How long {@link #acquire()} waits for a release before it reports the pool exhausted. */
    public static final Duration DEFAULT_WAIT = Duration.ofSeconds(60);
    /** Failed tries before an acquire parks: a release by a thread on another core often comes this soon. */
    private static final int SPINS = 64;

    private final Arena arena;
    private final MemorySegment slab;
    private final long stride;
    private final int bufferSize;
    private final MemorySegment[] buffers;
    /** Free buffers beyond the stripes' caches. */
    private final MpmcAtomicArrayQueue<MemorySegment> free;
    /** Stripe s's slots are [slots(s), slots(s) + CACHE_SLOTS): buffer index + 1, or 0 when empty. */
    private final AtomicIntegerArray cache = new AtomicIntegerArray((STRIPES + 1) * PAD);
    /** Buffer i's lent flag is at flag(i): 1 while lent out. */
    private final AtomicIntegerArray lent;
    /**
     * Threads in {@link #acquire(Duration)} past their spins. A waiter counts itself before it tries the
     * pool again and a release puts its buffer back (by CAS) before it reads this, so either the waiter
     * finds the buffer or the release finds the waiter (both are sequentially consistent accesses).
     */
    private final AtomicInteger waiters = new AtomicInteger();
    /** Monitor that waiters wait on; guards {@link #releases}. */
    private final Object released = new Object();
    /** Releases signalled to waiters: a waiter that saw it unchanged since its last try may wait. */
    private long releases;

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
        this.slab = OffHeap.reserve(stride * count, arena); // page-aligned; a page costs RAM once a buffer first uses it
        this.buffers = new MemorySegment[count];
        this.free = new MpmcAtomicArrayQueue<>(Math.max(2, count)); // JCTools' smallest capacity
        this.lent = new AtomicIntegerArray((count + 1) * PAD);
        for (int i = 0; i < count; i++) {
            buffers[i] = slab.asSlice(i * stride, bufferSize);
            free.offer(buffers[i]);
        }
    }

    /** A free buffer, or null if all are lent out. Contents are whatever the last user left. */
    public MemorySegment tryAcquire() {
        int home = stripe();
        int i = takeFrom(home);
        if (i < 0) {
            MemorySegment queued = free.poll();
            i = queued != null ? indexOf(queued) : steal(home);
            if (i < 0) {
                return null;
            }
        }
        lent.setPlain(flag(i), 1);
        return buffers[i];
    }

    /** A free buffer, waiting up to {@link #DEFAULT_WAIT} for one to be released if all are lent out. */
    public MemorySegment acquire() {
        return acquire(DEFAULT_WAIT);
    }

    /**
     * A free buffer, waiting (a few spins, then on a signal from {@link #release}) for one to be
     * released if all are lent out.
     *
     * @throws NoSpaceException if every buffer stayed lent for {@code timeout}
     */
    public MemorySegment acquire(Duration timeout) {
        for (int spins = 0; spins < SPINS; spins++) {
            MemorySegment b = tryAcquire();
            if (b != null) {
                return b;
            }
            Thread.onSpinWait();
        }
        long start = System.nanoTime();
        long limit = timeout.toNanos();
        waiters.incrementAndGet();
        try {
            for (;;) {
                long seen;
                synchronized (released) {
                    seen = releases;
                }
                MemorySegment b = tryAcquire();
                if (b != null) {
                    return b;
                }
                long left = limit - (System.nanoTime() - start);
                if (left <= 0) {
                    throw new NoSpaceException(this + ": all " + buffers.length + " buffers stayed lent for "
                            + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms while " + waiters.get()
                            + " thread(s) waited; hold fewer at once or make the pool larger");
                }
                synchronized (released) {
                    if (releases == seen) {
                        released.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for a buffer of " + this, e);
        } finally {
            waiters.decrementAndGet();
        }
    }

    /** Returns a buffer obtained from this pool, from any thread. */
    public void release(MemorySegment buffer) {
        int i = indexOf(buffer);
        if (i < 0 || buffer.byteSize() != bufferSize) {
            throw new InvalidArgumentException("segment at 0x" + Long.toHexString(buffer.address())
                    + " was not lent by this pool");
        }
        if (!lent.compareAndSet(flag(i), 1, 0)) {
            throw new InvalidArgumentException("buffer " + i + " of the pool was released twice");
        }
        int base = slots(stripe());
        for (int s = base; s < base + CACHE_SLOTS; s++) {
            if (cache.getPlain(s) == 0 && cache.compareAndSet(s, 0, i + 1)) {
                signal();
                return;
            }
        }
        free.offer(buffers[i]); // never full: it has room for every buffer
        signal();
    }

    /** After a buffer went back: wakes the waiters, if there are any. */
    private void signal() {
        if (waiters.get() != 0) {
            synchronized (released) {
                releases++;
                released.notifyAll();
            }
        }
    }

    private static int stripe() {
        // Consecutive thread ids land on distinct stripes.
        return (int) Thread.currentThread().threadId() & (STRIPES - 1);
    }

    private static int slots(int stripe) {
        return (stripe + 1) * PAD;
    }

    private static int flag(int buffer) {
        return (buffer + 1) * PAD;
    }

    /** Claims a cached buffer of stripe {@code s}; its index, or -1 if it has none. */
    private int takeFrom(int s) {
        int base = slots(s);
        for (int slot = base; slot < base + CACHE_SLOTS; slot++) {
            if (cache.getPlain(slot) != 0) {
                int v = cache.getAndSet(slot, 0);
                if (v != 0) {
                    return v - 1;
                }
            }
        }
        return -1;
    }

    /** A buffer cached in another stripe, or -1 if every stripe is empty. */
    private int steal(int home) {
        for (int k = 1; k < STRIPES; k++) {
            int i = takeFrom((home + k) & (STRIPES - 1));
            if (i >= 0) {
                return i;
            }
        }
        return -1;
    }

    /** The index of the buffer that starts where {@code buffer} does, or -1. */
    private int indexOf(MemorySegment buffer) {
        long off = buffer.address() - slab.address();
        if (off < 0 || off >= slab.byteSize()) {
            return -1;
        }
        long i = off / stride;
        return i * stride == off ? (int) i : -1;
    }

    public int bufferSize() {
        return bufferSize;
    }

    public int capacity() {
        return buffers.length;
    }

    /** Buffers free right now, cached or queued (a snapshot under concurrency). */
    public int available() {
        int n = free.size();
        for (int s = 0; s < STRIPES; s++) {
            for (int slot = slots(s); slot < slots(s) + CACHE_SLOTS; slot++) {
                if (cache.get(slot) != 0) {
                    n++;
                }
            }
        }
        return n;
    }

    @Override
    public String toString() {
        return "buffer pool of " + buffers.length + " x " + bufferSize + " bytes at 0x" + Long.toHexString(slab.address());
    }

    @Override
    public void close() {
        arena.close();
    }
}
