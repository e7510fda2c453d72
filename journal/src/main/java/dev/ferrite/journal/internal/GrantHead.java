package dev.ferrite.journal.internal;

import dev.ferrite.journal.VolumeShutdownException;

import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;


/**
 * One grant head: how far into the log space has been promised, as a single 64-bit word, cycle in the
 * high half and byte offset within the circular area in the low half, moved only by compare-and-swap.
 * Free space is the distance from the head forward to the tail (another such word, owned by
 * {@link LogSpace}).
 *
 * <p>Fast path ({@link #tryGrant}): when nobody is queued and the space fits, one CAS; no lock, no
 * allocation. Slow path ({@link #grant}): a reserver that does not fit, or that arrives while others are
 * queued, joins a FIFO queue and parks. {@link #wake()} (called when the tail moves or space is handed
 * back) grants queued requests in order, on the waiters' behalf, stopping at the first that does not fit
 * so a large request is never starved by a stream of small ones.
 *
 * <p>The queue and its lock are touched only on the slow path; {@code queued} is the volatile count the
 * fast path reads to stay out of line-jumping.
 *
 * <p>Wake-ups (a Dekker pair): a reserver stores {@code queued} and then loads the tail and the head; a
 * waker stores the tail (volatile, {@link LogSpace#moveTail}) or CASes the head ({@link #release}) and
 * then loads {@code queued}. Every one of those accesses is volatile, so they are sequentially
 * consistent: either the waker sees the reserver queued, or the reserver sees the new space. As a second
 * line, a waiter whose timed park runs out grants queued requests itself, so no missed wake-up can
 * leave a request that fits parked.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class GrantHead {
    /** Queued reserver; {@code granted} is written by whoever grants it, then the thread is unparked. */
    private static final class Waiter {
        final Thread thread = Thread.currentThread();
        final long need;
        volatile boolean granted;

        Waiter(long need) {
            this.need = need;
        }
    }

    /** Longest park of a waiter before it looks at the space itself. */
    private static final long PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

    private final String name;
    private final long logBytes;
    private final LongSupplier tail;
    private final PaddedWord head = new PaddedWord();
    private final ReentrantLock queueLock = new ReentrantLock();
    private final ArrayDeque<Waiter> queue = new ArrayDeque<>();
    private volatile int queued;
    private volatile Throwable shutdownCause;
    /** Compare-and-swaps of the head that lost to another thread's: striped, touched only when one fails. */
    private final LongAdder casRetries = new LongAdder();

    // slow-path statistics, written under queueLock
    private long waits;
    private long waitNanos;
    /** Requests granted by a waiter whose timed park ran out, not by a wake-up: each one a wake-up missed or late. */
    private long lateGrants;

    GrantHead(String name, long logBytes, long initial, LongSupplier tail) {
        this.name = name;
        this.logBytes = logBytes;
        this.tail = tail;
        head.set(initial);
    }

    /** Current head word (cycle high, bytes low). */
    public long get() {
        return head.get();
    }

    /** Bytes free between this head and the tail; negative if the head is over-committed. */
    long space() {
        return LogSpace.distanceFree(head.get(), tail.getAsLong(), logBytes);
    }

    /** Takes {@code need} bytes if nobody is queued and they fit now. Lock-free, allocation-free. */
    boolean tryGrant(long need) {
        if (queued != 0) {
            return false;
        }
        long t = tail.getAsLong();
        for (long cur = head.get(); ; cur = head.get()) {
            if (LogSpace.distanceFree(cur, t, logBytes) < need) {
                return false;
            }
            if (head.compareAndSet(cur, LogSpace.add(cur, need, logBytes))) {
                return true;
            }
            casRetries.increment();
        }
    }

    /**
     * Takes {@code need} bytes, waiting in FIFO order for the tail to free them. {@code pressure} runs
     * before parking and on every wake-up without a grant (the journal asks the AIL to push). A waiter
     * whose park times out first grants whatever fits at the front of the queue, itself included.
     *
     * @throws VolumeShutdownException if the journal shuts down while waiting
     */
    void grant(long need, Runnable pressure) {
        grant(need, pressure, Long.MAX_VALUE);
    }

    /**
     * {@link #grant(long, Runnable)} giving up after {@code timeoutNanos}: false if nothing was granted then
     * (the request leaves the queue).
     */
    boolean grant(long need, Runnable pressure, long timeoutNanos) {
        if (tryGrant(need)) {
            return true;
        }
        Waiter w = new Waiter(need);
        queueLock.lock();
        try {
            queue.addLast(w);
            queued = queue.size();
            grantQueued();
        } finally {
            queueLock.unlock();
        }
        if (w.granted) {
            return true;
        }
        pressure.run();
        long start = System.nanoTime();
        boolean interrupted = false;
        while (!w.granted) {
            if (System.nanoTime() - start >= timeoutNanos) {
                abandon(w);
                if (!w.granted) {
                    break;
                }
            }
            Throwable cause = shutdownCause;
            if (cause != null) {
                abandon(w);
                if (!w.granted) {
                    throw new VolumeShutdownException("journal shut down while waiting for " + need
                            + " bytes of log space on the " + name + " head", cause);
                }
                break;
            }
            LockSupport.parkNanos(this, PARK_NANOS);
            interrupted |= Thread.interrupted();
            if (!w.granted) {
                grantLate();
            }
            if (!w.granted) {
                pressure.run(); // the pusher got stuck, or its tail move did not free enough: ask again
            }
        }
        long waited = System.nanoTime() - start;
        queueLock.lock();
        try {
            waits++;
            waitNanos += waited;
        } finally {
            queueLock.unlock();
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        GrantWaitEvent.emit(name, need, waited);
        return w.granted;
    }

    /** Adds bytes without any check (the caller already owns them under another accounting). */
    void add(long bytes) {
        for (long cur = head.get(); !head.compareAndSet(cur, LogSpace.add(cur, bytes, logBytes)); cur = head.get()) {
            casRetries.increment();
            Thread.onSpinWait();
        }
    }

    /** Hands bytes back, then lets queued reservers have them. */
    void release(long bytes) {
        if (bytes == 0) {
            return;
        }
        for (long cur = head.get(); !head.compareAndSet(cur, LogSpace.sub(cur, bytes, logBytes)); cur = head.get()) {
            casRetries.increment();
            Thread.onSpinWait();
        }
        wake();
    }

    /** Grants queued requests that now fit, in order. Cheap when nobody waits. */
    void wake() {
        if (queued == 0) {
            return;
        }
        queueLock.lock();
        try {
            grantQueued();
        } finally {
            queueLock.unlock();
        }
    }

    /** Fails every current and future waiter. */
    void shutdown(Throwable cause) {
        shutdownCause = cause;
        queueLock.lock();
        try {
            for (Waiter w : queue) {
                LockSupport.unpark(w.thread);
            }
        } finally {
            queueLock.unlock();
        }
    }

    /** A waiter's timed park ran out: grants what fits now, counting grants no wake-up made. */
    private void grantLate() {
        queueLock.lock();
        try {
            lateGrants += grantQueued();
        } finally {
            queueLock.unlock();
        }
    }

    /** Under queueLock: grants queued requests in order while they fit; returns how many it granted. */
    private int grantQueued() {
        int granted = 0;
        for (Waiter w; (w = queue.peekFirst()) != null; ) {
            long t = tail.getAsLong();
            long cur = head.get();
            if (LogSpace.distanceFree(cur, t, logBytes) < w.need) {
                return granted;
            }
            if (!head.compareAndSet(cur, LogSpace.add(cur, w.need, logBytes))) {
                casRetries.increment();
                continue; // a fast-path reserver moved the head: re-read and re-check
            }
            queue.pollFirst();
            queued = queue.size();
            w.granted = true;
            LockSupport.unpark(w.thread);
            granted++;
        }
        return granted;
    }

    private void abandon(Waiter w) {
        queueLock.lock();
        try {
            queue.remove(w);
            queued = queue.size();
        } finally {
            queueLock.unlock();
        }
    }

    /** Reservers queued right now. */
    int queued() {
        return queued;
    }

    /** Reservations that had to wait, for how long in total, and how many were granted late (see {@link #grantLate}). */
    long[] waitStats() {
        queueLock.lock();
        try {
            return new long[] {waits, waitNanos, lateGrants};
        } finally {
            queueLock.unlock();
        }
    }

    /** Compare-and-swaps of the head that failed because another thread moved it first, and were tried again. */
    long casRetries() {
        return casRetries.sum();
    }

    String name() {
        return name;
    }
}
