package dev.ferrite.io.internal;

import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Device flushes shared by concurrent callers (group commit for data): a caller needs a flush that
 * starts after it called, so a caller arriving while one is in flight waits for it to end and then for
 * the next, which one of the waiters issues for all of them. N threads that each wrote and want their
 * writes durable pay for about two flushes between them instead of N.
 *
 * <p>The lock guards only the three counters and is never held across the flush itself. A flush that
 * fails counts for no one: its issuer throws, and the callers waiting for it issue the next themselves.
 */
public final class SharedFlush {
    private final Runnable flush;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition ended = lock.newCondition();
    /** Flushes started, and the highest of them that completed (guarded by {@link #lock}). */
    private long started, completed;
    /** A flush is in flight (guarded by {@link #lock}). */
    private boolean inFlight;
    /** Flushes issued, for stats and tests (guarded by {@link #lock}). */
    private long issued;

    /** {@code flush} makes every write that completed before it started durable, and throws if it cannot. */
    public SharedFlush(Runnable flush) {
        this.flush = flush;
    }

    /** Returns once a flush that started after this call began has completed; runs it if no one else does. */
    public void flush() {
        lock.lock();
        try {
            long need = started + 1; // the one in flight, if any, may have started before our writes ended
            while (completed < need) {
                if (inFlight) {
                    ended.awaitUninterruptibly();
                    continue;
                }
                inFlight = true;
                long mine = ++started;
                issued++;
                boolean ok = false;
                lock.unlock();
                try {
                    flush.run();
                    ok = true;
                } finally {
                    lock.lock();
                    inFlight = false;
                    if (ok) {
                        completed = mine;
                    }
                    ended.signalAll();
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** Flushes issued so far. */
    public long issued() {
        lock.lock();
        try {
            return issued;
        } finally {
            lock.unlock();
        }
    }
}
