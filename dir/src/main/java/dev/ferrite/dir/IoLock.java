package dev.ferrite.dir;

import java.util.concurrent.locks.AbstractQueuedSynchronizer;

/**
 * A stripe of the files' I/O locks ({@link FileMapping#io}, XFS's i_rwsem): shared by reads and writes
 * of a file's data and write-backs of its cached pages, exclusive for what changes its mapping under
 * them or owns its end (truncate, fallocate, append, a trim, freeing an orphan). It protects the file's
 * mapping as the I/O under it sees it: no read or write uses extents whose blocks are being freed or
 * unwritten. (That no write-back puts an older cached page over a direct write is
 * {@link FilePages#writeBack}'s.)
 *
 * <p>A shared hold is a count and nothing else: taking and letting go is one CAS each, with nothing kept
 * per thread and nothing allocated. {@code ReentrantReadWriteLock} kept a hold count per reading thread
 * (a {@code ThreadLocal} entry and a {@code HoldCounter} made and dropped by each read hold beside
 * another's: 58-60 bytes per direct write with 32 writers, {@code OverwriteBench -t 32}) so that a
 * reader could take its lock again while a writer waited. So a shared hold is <em>not</em> reentrant: a
 * thread holding one must not take this lock again, shared or exclusive, except with {@link #tryLock}
 * (which then fails), because a waiting exclusive holder keeps new shared ones out. No path does: under
 * a shared hold the I/O takes only page, inode and buffer locks, a shared file's {@link BlockRanges},
 * the conversion turn and log space, and tries other files' I/O locks ({@link FileMapping}'s reclaim of
 * speculative blocks).
 *
 * <p>The exclusive hold has an owner and is reentrant, and its owner may take shared holds too (counted
 * as exclusive ones, let go before the exclusive hold they nest in): truncate frees through the same
 * {@link FileMapping#release} a trim takes it for, an append writes through the direct path's shared
 * write. Exclusive holds are rare (a write takes one only to trim a speculative tail it would split),
 * so their bookkeeping costs the shared path nothing.
 *
 * <p>Fair, in arrival order: a shared hold is not granted while anyone waits ahead of it, so an
 * exclusive waiter (a truncate, a fallocate) gets in once the holders present when it queued let
 * go, however many writers keep arriving. {@link #tryLock} takes a free lock without queueing.
 *
 * <p>Lock order: the I/O lock first, then a file's {@link FilePages#writeBack} lock (a write-back, or a
 * direct write over cached pages), then a shared file's {@link BlockRanges}, a direct write's conversion
 * turn ({@link Conversions}), the log reservation, and {@link FileMapping}'s order (the inode's lock, a group's AGF, the record's block).
 * A thread waits for one stripe at a time: holding one, it only tries others ({@link #tryLock}), or
 * takes one it holds exclusively again.
 */
@SuppressWarnings("serial") // never serialized
final class IoLock extends AbstractQueuedSynchronizer {
    /** The state while held exclusively; a count of shared holds otherwise (0: free). */
    private static final int EXCLUSIVE = -1;

    /** Holds the owner took beyond its first exclusive one (nested exclusive or shared); only the owner touches it. */
    private int nested;

    /** Takes a shared hold, waiting while the lock is held exclusively by another thread or anyone waits ahead. */
    void lockShared() {
        acquireShared(1);
    }

    /** Lets go of a shared hold. */
    void unlockShared() {
        releaseShared(1);
    }

    /** Takes the lock exclusively, waiting for the holders and those ahead; reentrant. */
    void lock() {
        acquire(1);
    }

    /** Takes the lock exclusively if it is free or this thread's, at once, whoever waits; false if not. */
    boolean tryLock() {
        Thread me = Thread.currentThread();
        if (getState() == 0 && compareAndSetState(0, EXCLUSIVE)) {
            setExclusiveOwnerThread(me);
            return true;
        }
        if (getExclusiveOwnerThread() == me) {
            nested++;
            return true;
        }
        return false;
    }

    /** Lets go of an exclusive hold. */
    void unlock() {
        release(1);
    }

    @Override
    protected int tryAcquireShared(int unused) {
        for (;;) {
            int s = getState();
            if (s == EXCLUSIVE) {
                if (getExclusiveOwnerThread() != Thread.currentThread()) {
                    return -1;
                }
                nested++; // the owner reads under its own exclusive hold
                return 1;
            }
            if (hasQueuedPredecessors()) { // an exclusive waiter, or shared ones queued behind it: after them
                return -1;
            }
            if (compareAndSetState(s, s + 1)) {
                return 1;
            }
        }
    }

    @Override
    protected boolean tryReleaseShared(int unused) {
        for (;;) {
            int s = getState();
            if (s == EXCLUSIVE) {
                if (getExclusiveOwnerThread() != Thread.currentThread() || nested == 0) {
                    throw new IllegalMonitorStateException("a shared hold let go under another's exclusive hold");
                }
                nested--;
                return false;
            }
            if (s == 0) {
                throw new IllegalMonitorStateException("a shared hold let go of a free lock");
            }
            if (compareAndSetState(s, s - 1)) {
                return s == 1; // the last reader out lets a waiting exclusive holder in
            }
        }
    }

    @Override
    protected boolean tryAcquire(int unused) {
        Thread me = Thread.currentThread();
        int s = getState();
        if (s == 0 && !hasQueuedPredecessors() && compareAndSetState(0, EXCLUSIVE)) {
            setExclusiveOwnerThread(me);
            return true;
        }
        if (s == EXCLUSIVE && getExclusiveOwnerThread() == me) {
            nested++;
            return true;
        }
        return false;
    }

    @Override
    protected boolean tryRelease(int unused) {
        if (getExclusiveOwnerThread() != Thread.currentThread()) {
            throw new IllegalMonitorStateException("an exclusive hold let go by a thread not holding it");
        }
        if (nested > 0) {
            nested--;
            return false;
        }
        setExclusiveOwnerThread(null);
        setState(0); // a volatile write: the owner's plain writes before it are seen by the next holder
        return true;
    }

    @Override
    protected boolean isHeldExclusively() {
        return getExclusiveOwnerThread() == Thread.currentThread();
    }
}
