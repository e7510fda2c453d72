package dev.ferrite.dir;

import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

import dev.ferrite.journal.internal.Journal;

/**
 * Makes {@link Durability#ASYNC} commits durable within a bounded delay: a thread
 * ({@code ferrite-table-sync}, started by the first such commit) that, while commits wait, sleeps the
 * delay (so that the commits of that time share one force) and forces the log up to the latest of them;
 * with none waiting it parks until the next.
 */
final class AsyncCommits {
    private final Supplier<Journal> journal;
    private final long delayNanos;
    private final VolumeThread thread = new VolumeThread("ferrite-table-sync", this::run);
    /** Highest commit sequence an ASYNC commit asked to make durable. */
    private volatile long target = -1;
    /** The thread is parked with nothing to force: a new target must wake it. */
    private volatile boolean idle;

    AsyncCommits(Supplier<Journal> journal, long delayNanos) {
        this.journal = journal;
        this.delayNanos = delayNanos;
    }

    /** Commit sequence {@code seq} is to be durable within the delay. */
    void request(long seq) {
        if (seq <= target) {
            return; // a force for it is pending already
        }
        synchronized (this) {
            if (seq > target) {
                target = seq;
            }
        }
        // after the target: a thread that set idle reads the target again before it parks
        Thread t = thread.started();
        if (t != null && idle) {
            LockSupport.unpark(t);
        }
    }

    private void run() {
        Journal j = journal.get();
        while (!thread.stopping()) {
            long t = target;
            if (j.durableSeq() >= t) {
                idle = true; // then the target read again: a commit raising it after this sees the flag
                if (j.durableSeq() >= target && !thread.stopping()) {
                    LockSupport.park(this);
                }
                idle = false;
                continue;
            }
            LockSupport.parkNanos(this, delayNanos);
            try {
                j.force(t);
            } catch (RuntimeException e) { // the journal shut down: every later commit reports it
                return;
            }
        }
    }

    /** Stops the thread (unmount, before the journal closes, which makes everything durable). */
    void stop() {
        thread.stop();
    }
}
