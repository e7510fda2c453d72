package dev.ferrite.dir;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.AbstractQueuedSynchronizer;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * An inode in memory: its number, a reference count and the per-inode lock. Its attributes live in
 * its record in the buffer cache; this object is what the {@link InodeCache} hands out so that every
 * user of one inode shares its lock and its count of open references.
 *
 * <p>The object is its own lock: a re-entrant exclusive lock on the synchronizer it extends, as
 * {@code ReentrantLock}'s non-fair one, without the lock and its synchronizer as two more objects. A
 * create or an unlink that misses the inode cache makes one of these (every one, at a million files):
 * one object of 112 bytes where the three took 144.
 *
 * <p>The reference count is {@link #DEAD} once the cache reclaimed the object: a lookup that finds it
 * then makes a fresh one instead. Taking a reference is a CAS from any count that is not DEAD, and
 * reclaim is a CAS from 0 to DEAD, so a lookup and a reclaim racing on one object cannot both win.
 */
@SuppressWarnings("serial") // never serialized
final class Inode extends AbstractQueuedSynchronizer {
    static final int DEAD = -1;
    private static final VarHandle REFS, MODIFIED, WRITERS, LAST_SEQ, DATA_DIRTY, DATA_SYNCS;

    static {
        try {
            REFS = MethodHandles.lookup().findVarHandle(Inode.class, "refs", int.class);
            MODIFIED = MethodHandles.lookup().findVarHandle(Inode.class, "modified", long.class);
            WRITERS = MethodHandles.lookup().findVarHandle(Inode.class, "writers", long.class);
            LAST_SEQ = MethodHandles.lookup().findVarHandle(Inode.class, "lastSeq", long.class);
            DATA_DIRTY = MethodHandles.lookup().findVarHandle(Inode.class, "dataDirty", boolean.class);
            DATA_SYNCS = MethodHandles.lookup().findVarHandle(Inode.class, "dataSyncs", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** How an fsync takes {@link #dataDirty}, counted in {@link #dataSyncs}. */
    private static final DataMark DATA = new DataMark(DATA_DIRTY, DATA_SYNCS);

    final long ino;
    /** A file's direct writes waiting for their conversion ({@link Conversions}); made at the first. */
    volatile Conversions.Queue conversions;
    /** Next inode in the cache's hash chain; kept when unlinked, so chain walkers standing here go on. */
    volatile Inode chainNext;
    @SuppressWarnings("unused") // through REFS
    private volatile int refs;
    /** Open handles on this inode (guarded by {@link #lock}); a handle's reference keeps this object cached. */
    int opens;
    /**
     * Commit sequence of the last change to this inode, or -1 if unknown (the object is newer than it).
     * Writers side by side ({@link #writers}) raise it with {@link #noteSeq}; holders of {@link #lock} set it.
     */
    volatile long lastSeq = -1;
    /** Commit sequence of the last change to this file's size or extents (what fdatasync waits for), or -1 if unknown. */
    volatile long lastDataSeq = -1;
    /**
     * The modification time of a data write no transaction has logged yet (ns since the epoch; 0: none):
     * an overwrite in place or a buffered write logs nothing, so the time waits here, shown by stat, until
     * a transaction that touches the inode's times, fsync, the last close, a volume sync or the unmount
     * logs it (Linux's lazytime). Changed only by CAS ({@link #markModified}, {@link #clearModified}).
     */
    @SuppressWarnings("unused") // through MODIFIED
    private volatile long modified;
    /**
     * A regular file's data was written to the device since an fsync last took this mark
     * ({@link #markDataDirty}, {@link #takeDataSync}).
     */
    @SuppressWarnings("unused") // through DATA_DIRTY
    private volatile boolean dataDirty;
    /** fsyncs of the file between taking {@link #dataDirty} and the end of the flush it obliges them to. */
    @SuppressWarnings("unused") // through DATA_SYNCS
    private volatile int dataSyncs;
    /**
     * A regular file's size as buffered writes made it, past the committed one until write-back commits
     * it; 0 if none. Changed under the file's page lock ({@link FilePages#lock}), cleared under its I/O
     * lock held exclusively.
     */
    volatile long pendingSize;
    /** A regular file's cached pages, once buffered I/O used it ({@link BufferedIo}). */
    volatile FilePages pages;
    /** A regular file's written extents as its record last showed them, made at its first direct overwrite ({@link OverwriteHint}). */
    volatile OverwriteHint overwriteHint;
    /** A shared file's range locks ({@link BlockRanges}), made at its first copy on write or read. */
    volatile BlockRanges blockRanges;
    /** The inode's B-tree once opened: a directory's entries, a regular file's extents (dropped when the tree goes). */
    volatile dev.ferrite.btree.internal.BTree dirTree;

    /**
     * Bits of {@link #writers}: the blocks claimed to take ({@link #TAKES}) and to give back ({@link #GIVES},
     * counted in units of {@link #GIVE}), the exclusive and held flags, the writers inside that claimed no
     * block ({@link #PRESENCES}, in units of {@link #PRESENT}), and a count of changes above.
     */
    static final long TAKES = (1L << 10) - 1, GIVE = 1L << 10, GIVES = TAKES * GIVE,
            EXCLUSIVE = 1L << 20, HELD = 1L << 21, PRESENT = 1L << 22, PRESENCES = TAKES * PRESENT,
            CLAIMS = TAKES | GIVES | PRESENCES, CHANGE = 1L << 32;
    /**
     * A table's single writers inside their apply ({@code Tables#single}): the sums of the tree-reserve
     * blocks they claimed, apart for those that take blocks (splits: {@link #TAKES}, held against the
     * reserve's usable blocks) and those that give them back (merges, a refill's blocks: {@link #GIVES},
     * held against its free capacity), so that neither kind waits for room the other claimed
     * ({@link #CLAIMS}: any), {@link #EXCLUSIVE} while a holder of
     * {@link #lockExclusive} keeps them out, {@link #HELD} for the moment a directory's spill beside them
     * chooses its blocks ({@link #holdEntries}), the writers inside whose change neither takes nor gives a
     * block ({@link #PRESENCES}: a create into a leaf with room, an unlink that merges nothing; counted
     * so that an exclusive holder waits for them, held against no room), and a count of changes above, so that a CAS from a word
     * read before the reserve was looked at fails if any writer entered or left meanwhile (no ABA).
     */
    @SuppressWarnings("unused") // through WRITERS
    private volatile long writers;
    /**
     * The inode's last link went (a table dropped): set, holding it exclusively, by the unlink's
     * transaction once it committed, so that a table's writers, kept out meanwhile, learn it without
     * reading the record (whose block a split beside them may hold); cleared by a table's open
     * ({@code Tables#openIno}), which finds a link, should a new table reuse the inode and this object.
     */
    volatile boolean unlinked;
    /** Nesting of {@link #lockExclusive} (guarded by {@link #lock}). */
    private int exclusiveDepth;

    Inode(long ino, int refs) {
        this.ino = ino;
        this.refs = refs;
    }

    /**
     * Takes the per-inode lock, which serializes changes to this inode (taken before any buffer lock);
     * re-entrant. A table's single writes of inline values, and the creates of files in a tree directory
     * ({@code Creator#sharedCreate}), do not take it: they apply side by side ({@link #writers}), and
     * whoever must keep them out (a spill of a table's or file's tree reserve, a table's refill, a write
     * transaction, a drop's freeing; a directory's unlink, rename, link, rmdir and other creates) takes it through
     * {@link #lockExclusive}. A directory's refill and spill take only this lock and run beside them
     * ({@code DirContents#refillBeside}, {@code DirContents#spill}).
     */
    void lock() {
        acquire(1); // tries tryAcquire first, then queues
    }

    /** Whether a thread holds {@link #lock} now (a moment's answer). */
    boolean isLocked() {
        return getState() != 0;
    }

    /** {@link #lock} if it is free or held by this thread already; false, holding nothing, if not. */
    boolean tryLock() {
        return tryAcquire(1);
    }

    /** Lets go of one hold of {@link #lock}. */
    void unlock() {
        release(1);
    }

    @Override
    protected boolean tryAcquire(int holds) {
        Thread me = Thread.currentThread();
        int c = getState();
        if (c == 0) {
            if (compareAndSetState(0, holds)) {
                setExclusiveOwnerThread(me);
                return true;
            }
            return false;
        }
        if (getExclusiveOwnerThread() == me) {
            setState(c + holds); // only the holder writes the count while it is held
            return true;
        }
        return false;
    }

    @Override
    protected boolean tryRelease(int holds) {
        if (getExclusiveOwnerThread() != Thread.currentThread()) {
            throw new IllegalMonitorStateException("inode " + ino + "'s lock released by a thread that does not hold it");
        }
        int c = getState() - holds;
        if (c == 0) {
            setExclusiveOwnerThread(null);
        }
        setState(c); // a volatile write: publishes what the holder did, after the owner is cleared
        return c == 0;
    }

    @Override
    protected boolean isHeldExclusively() {
        return getExclusiveOwnerThread() == Thread.currentThread();
    }

    /** {@link #writers} now. */
    long writers() {
        return (long) WRITERS.getVolatile(this);
    }

    /** Enters with a claim of {@code blocks} if {@link #writers} is still {@code seen} and not exclusive. */
    boolean tryEnter(long seen, int blocks) {
        return (seen & (EXCLUSIVE | HELD)) == 0 && WRITERS.compareAndSet(this, seen, seen + CHANGE + blocks);
    }

    /**
     * Holding {@link #lock}: lets no writer enter until {@link #releaseEntries}, without waiting for those
     * inside; a writer that read {@link #writers} before fails its CAS. For a moment only: the writers
     * arriving spin on it ({@link #backoff}).
     */
    void holdEntries() {
        WRITERS.getAndAdd(this, CHANGE + HELD);
    }

    /** Ends {@link #holdEntries}. */
    void releaseEntries() {
        WRITERS.getAndAdd(this, CHANGE - HELD);
    }

    /** Leaves, giving back a claim of {@code blocks} taken by {@link #tryEnter}. */
    void leave(int blocks) {
        WRITERS.getAndAdd(this, CHANGE - blocks);
    }

    /**
     * Takes {@link #lock} and waits until no single writer is inside its apply; none enters until
     * {@link #unlockExclusive}. Re-entrant. Writers inside wait for nothing this holder has (they take no
     * inode lock, and this takes no buffer before they are out), so the wait ends.
     */
    void lockExclusive() {
        lock();
        excludeWriters();
    }

    /**
     * {@link #lockExclusive} if {@link #lock} is free (or held by this thread) now; false, holding nothing,
     * if not.
     */
    boolean tryLockExclusive() {
        if (!tryLock()) {
            return false;
        }
        excludeWriters();
        return true;
    }

    /**
     * {@link #lockExclusive} for a change that may turn out to be done already ({@code still} false: a
     * reserve's refill or spill that another thread made meanwhile): takes {@link #lock}, asks
     * {@code still}, and only if it holds keeps the writers out and asks again once they left. False,
     * holding nothing, if either answer was no. Threads that all found one reserve short so pass the lock
     * on without each setting {@link #EXCLUSIVE} and waiting for the writers inside to drain, which kept
     * every writer out through a turn per thread.
     */
    boolean lockExclusiveIf(BooleanSupplier still) {
        lock();
        boolean ok = false;
        try {
            ok = still.getAsBoolean();
        } finally {
            if (!ok) {
                unlock();
            }
        }
        if (!ok) {
            return false;
        }
        excludeWriters();
        boolean again = false;
        try {
            again = still.getAsBoolean();
        } finally {
            if (!again) {
                unlockExclusive();
            }
        }
        return again;
    }

    /** Holding {@link #lock}: keeps writers out (once per nesting) and waits for those inside to leave. */
    private void excludeWriters() {
        if (exclusiveDepth++ == 0) {
            WRITERS.getAndAdd(this, CHANGE + EXCLUSIVE);
            for (int spins = 0; (writers() & CLAIMS) != 0; spins++) {
                backoff(spins);
            }
        }
    }

    /** Raises {@link #lastSeq} to {@code seq} unless it is past it already (writers side by side commit in any order). */
    void noteSeq(long seq) {
        for (long cur = lastSeq; cur < seq && !LAST_SEQ.compareAndSet(this, cur, seq); cur = lastSeq) {
            Thread.onSpinWait();
        }
    }

    /**
     * A wait for others that finish soon (a table's writers: a tree change and its commit), getting
     * gentler: spins, then yields, then parks briefly.
     */
    static void backoff(int spins) {
        if (spins < 64) {
            Thread.onSpinWait();
        } else if (spins < 1024) {
            Thread.yield();
        } else {
            LockSupport.parkNanos(50_000);
        }
    }

    void unlockExclusive() {
        if (--exclusiveDepth == 0) {
            WRITERS.getAndAdd(this, CHANGE - EXCLUSIVE);
        }
        unlock();
    }

    /** The modification time waiting to be logged, or 0. */
    long modified() {
        return (long) MODIFIED.getVolatile(this);
    }

    /** A data write reached the device: its file owes it a flush at the next fsync ({@link #takeDataSync}). */
    void markDataDirty() {
        DATA.set(this);
    }

    /** An fsync's data part begins: whether it must make data durable ({@link DataMark#take}). */
    boolean takeDataSync() {
        return DATA.take(this);
    }

    /** An fsync that {@link #takeDataSync} obliged to flush ends ({@link DataMark#end}). */
    void endDataSync(boolean flushed) {
        DATA.end(this, flushed);
    }

    /** Records a data write at {@code now} unless a later time is recorded; true if none was recorded before. */
    boolean markModified(long now) {
        for (;;) {
            long cur = (long) MODIFIED.getVolatile(this);
            if (cur >= now) {
                return false;
            }
            if (MODIFIED.compareAndSet(this, cur, now)) {
                return cur == 0;
            }
        }
    }

    /** Forgets the recorded time if it is no later than {@code logged} (a transaction logged that); true if it did. */
    boolean clearModified(long logged) {
        long cur = (long) MODIFIED.getVolatile(this);
        return cur != 0 && cur <= logged && MODIFIED.compareAndSet(this, cur, 0L);
    }

    /** Takes a reference unless the object is dead. */
    boolean tryRef() {
        for (;;) {
            int r = (int) REFS.getVolatile(this);
            if (r == DEAD) {
                return false;
            }
            if (REFS.compareAndSet(this, r, r + 1)) {
                return true;
            }
        }
    }

    /** Drops a reference; returns the count left. */
    int unref() {
        int r = (int) REFS.getAndAdd(this, -1) - 1;
        if (r < 0) {
            throw new IllegalStateException("inode " + ino + " released more often than referenced");
        }
        return r;
    }

    /** Marks an unreferenced inode dead; false if someone holds or just took a reference. */
    boolean tryKill() {
        return REFS.compareAndSet(this, 0, DEAD);
    }

    int refs() {
        return (int) REFS.getVolatile(this);
    }

    @Override
    public String toString() {
        return "Inode[" + ino + ", refs " + refs() + "]";
    }
}
