package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.journal.internal.LogItem;

/**
 * One cached block: its off-heap image (a frame of the cache's slab), the journal's log-item state, and
 * an optimistic lock.
 *
 * <h2>The version word</h2>
 * Bit 0 says the buffer is obsolete (evicted or its block freed: look the block up again), bit 1 that it
 * is locked by a writer (or being loaded); the rest counts modifications. Readers never write it: they
 * take the version ({@link #readVersion()}), read the image, and {@link #validate} that the version did
 * not change, restarting otherwise. Writers lock with a CAS, from a version they read
 * ({@link #tryUpgrade}, "lock in place") or from whatever it is ({@link #lock()}), and unlocking bumps the
 * version. Reads of an image may see torn or garbage data until validated: code reading optimistically
 * checks every offset it reads (segments bounds-check anyway) and validates before acting on the result.
 *
 * <p>The lock is also the journal's item lock: a transaction holds it from the first change to commit,
 * and the AIL takes it (without bumping the version) to snapshot the image for write-back.
 */
public final class Buffer extends LogItem {
    static final long OBSOLETE = 1;
    static final long LOCKED = 2;
    static final long STEP = 4;
    /** The "version" of a buffer the reading transaction itself holds locked: always valid. */
    static final long HELD = Long.MIN_VALUE;

    private static final VarHandle VERSION;
    private static final VarHandle USAGE;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            VERSION = l.findVarHandle(Buffer.class, "version", long.class);
            USAGE = l.findVarHandle(Buffer.class, "usage", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final BufferCache cache;
    final int frame;
    private final MemorySegment image;
    private final int magic;
    private final long owner;
    @SuppressWarnings("unused") // through VERSION
    private volatile long version;
    /** CLOCK usage count: set to the buffer's priority on access, decremented by the sweeping hand. */
    @SuppressWarnings("unused") // through USAGE
    private volatile int usage;
    /** The transaction holding this buffer locked, if a {@link Txn} locked it (lets it re-enter). */
    volatile Txn holder;
    /**
     * Where {@link #holder} keeps this buffer in its held list: a drain or a batch holds dozens, and a
     * scan of the list at every log call was 6% of a scattered delete's CPU. Its holder's alone.
     */
    int heldAt;
    /** Reclaim priority: interior nodes and headers are given more sweeps of the clock than leaves. */
    volatile int priority = 1;
    /** Next buffer in the cache's hash chain; kept when removed, so chain walkers standing here go on. */
    volatile Buffer chainNext;
    /** Next buffer in its chain of the cache's {@link FreeingBuffers}; kept when removed, as {@link #chainNext} is. */
    volatile Buffer freeingNext;
    /**
     * The buffer a cursor last moved to from this leaf along a sibling link: a hint that spares the next
     * move the cache's lookup (a hash bucket and a buffer, two cache misses a leaf in a scan). Used only
     * while it is of the block the link names and not obsolete: a buffer leaves the cache obsolete, so one
     * that is not is the block's cached buffer. Plain: a racy read finds null, an older hint or a newer
     * one, each checked so. Dropped when this buffer goes obsolete, so an evicted buffer holds none (bar
     * one set by a move racing its eviction) and hints do not chain evicted buffers together.
     */
    Buffer sibling;
    /**
     * A header's or interior node's hints: the buffer a descent last went to through each child index
     * ({@link BTree#child}), sparing the next descent the cache's lookup of the child (a hash bucket of a
     * table many megabytes long, a miss at the leaf level of a large tree). Checked as {@link #sibling} is,
     * so stale entries (the node split or merged, the child evicted) only cost the lookup; dropped when this
     * buffer goes obsolete and as the clock hand passes ({@link #dropHints}). Plain: a racy read finds an
     * older array or entry, each checked.
     */
    Buffer[] children;
    /** The block was freed: the AIL must not write this image home. Written under the lock. */
    private volatile boolean stale;

    Buffer(BufferCache cache, long block, int frame, MemorySegment image, int magic, long owner, long initialVersion) {
        super(block, BufferCache.ITEM_TYPE);
        this.cache = cache;
        this.frame = frame;
        this.image = image;
        this.magic = magic;
        this.owner = owner;
        this.version = initialVersion;
    }

    /** The block number. */
    public long block() {
        return home();
    }

    /** The block's bytes. Read optimistically (then {@link #validate}) or under the lock; change only under it. */
    public MemorySegment data() {
        return image;
    }

    /** The magic number the block was read or created with. */
    public int magic() {
        return magic;
    }

    /** The owner the block was read or created with. */
    public long owner() {
        return owner;
    }

    // ------------------------------------------------------------------ optimistic lock

    /**
     * The current version to validate optimistic reads against, waiting (spin, yield, park) while a
     * writer or loader holds the lock.
     *
     * @return the version, or -1 if the buffer is obsolete (look the block up again)
     */
    public long readVersion() {
        for (int spins = 0; ; spins++) {
            long v = (long) VERSION.getAcquire(this);
            if ((v & OBSOLETE) != 0) {
                return -1;
            }
            if ((v & LOCKED) == 0) {
                return v;
            }
            if (spins == 0) {
                cache.latches.waited(this);
            }
            backoff(spins);
        }
    }

    /** The version to read against for {@code txn}: {@link #HELD} if it holds this buffer, else {@link #readVersion()}. */
    long readVersion(Txn txn) {
        return txn != null && holder == txn ? HELD : readVersion();
    }

    /** True if nothing changed since {@code v} was read: everything read from the image in between is consistent. */
    public boolean validate(long v) {
        if (v == HELD) {
            return true;
        }
        VarHandle.loadLoadFence(); // the image reads above happen before this version read
        return (long) VERSION.getOpaque(this) == v;
    }

    /** Locks if the version is still {@code v} (upgrading an optimistic read in place). */
    public boolean tryUpgrade(long v) {
        return v >= 0 && VERSION.compareAndSet(this, v, v | LOCKED);
    }

    /**
     * Locks, waiting (spin, yield, park) while another writer holds the lock.
     *
     * @return false if the buffer became obsolete (nothing locked: look the block up again)
     */
    public boolean lock() {
        for (int spins = 0; ; spins++) {
            long v = (long) VERSION.getAcquire(this);
            if ((v & OBSOLETE) != 0) {
                return false;
            }
            if ((v & LOCKED) == 0 && VERSION.compareAndSet(this, v, v | LOCKED)) {
                return true;
            }
            if (spins == 0) {
                cache.latches.waited(this);
            }
            backoff(spins);
        }
    }

    /** True if the caller holds the lock (or a loader does). */
    public boolean isLocked() {
        return ((long) VERSION.getAcquire(this) & LOCKED) != 0;
    }

    /**
     * Unlocks after changing the image: optimistic readers that overlapped will restart. The buffer is
     * not yet evictable (a commit pins what it changed first), so no frame waiter needs to hear of it.
     */
    public void unlockChanged() {
        long v = (long) VERSION.getAcquire(this);
        VERSION.setRelease(this, (v & ~LOCKED) + STEP);
    }

    /**
     * Unlocks without having changed anything: optimistic readers are not disturbed. The buffer may be
     * evictable now, so the cache's frame waiters hear of it; the version is stored volatile so that the
     * store is ordered before the read of whether any wait ({@link BufferCache#frameMayBeFree}).
     */
    public void unlockUnchanged() {
        long v = (long) VERSION.getAcquire(this);
        VERSION.setVolatile(this, v & ~LOCKED);
        cache.frameMayBeFree();
    }

    /** As {@link #unlockUnchanged()}, for the cache's own probes that found the buffer no more evictable than before. */
    void unlockQuietly() {
        long v = (long) VERSION.getAcquire(this);
        VERSION.setRelease(this, v & ~LOCKED);
    }

    /**
     * While locked: makes every holder of this buffer look the block up again, and unlocks. Callers that
     * free its frame signal frame waiters themselves; a freed buffer stays pinned until its free is logged.
     */
    void unlockObsolete() {
        sibling = null;
        children = null;
        long v = (long) VERSION.getAcquire(this);
        VERSION.setRelease(this, ((v & ~LOCKED) + STEP) | OBSOLETE);
    }

    boolean isObsolete() {
        return ((long) VERSION.getAcquire(this) & OBSOLETE) != 0;
    }

    private static void backoff(int spins) {
        if (spins < 64) {
            Thread.onSpinWait();
        } else if (spins < 80) {
            Thread.yield();
        } else {
            LockSupport.parkNanos(Math.min(100_000L, 1_000L << Math.min(spins - 80, 7)));
        }
    }

    // ------------------------------------------------------------------ CLOCK

    void touch() {
        int p = priority;
        if ((int) USAGE.getOpaque(this) < p) {
            USAGE.setOpaque(this, p); // written only when it changes: hot buffers stay shared in every core's cache
        }
    }

    /**
     * Drops the child hints, as the clock hand passes: a hint keeps its buffer reachable after eviction
     * until a descent through its slot replaces it, so a tree many times the cache would otherwise keep an
     * evicted buffer per leaf; dropped once a lap, hints keep at most the buffers evicted within one.
     */
    void dropHints() {
        if (children != null) {
            children = null;
        }
    }

    /** One sweep of the clock hand: true if the usage count was already zero. */
    boolean sweep() {
        int u = (int) USAGE.getOpaque(this);
        if (u == 0) {
            return true;
        }
        USAGE.setOpaque(this, u - 1);
        return false;
    }

    // ------------------------------------------------------------------ journal hooks

    void markStale() {
        stale = true;
    }

    @Override
    protected MemorySegment image() {
        return image;
    }

    /** For the AIL and the evictor: an obsolete buffer can still be locked, to be dropped or reclaimed. */
    @Override
    protected boolean tryLock() {
        long v = (long) VERSION.getAcquire(this);
        return (v & LOCKED) == 0 && VERSION.compareAndSet(this, v, v | LOCKED);
    }

    @Override
    protected void unlock() {
        unlockUnchanged();
    }

    /** The block header: what a block rebuilt from zeros needs besides its logged changes. */
    @Override
    protected int headerLength() {
        return BlockHeaderFormat.SIZE;
    }

    @Override
    protected void stamp(MemorySegment copy, long lsn) {
        BlockHeaderFormat.stamp(copy, lsn);
    }

    @Override
    protected void writtenBack(long lsn) {
        cache.cleaned();
    }

    @Override
    protected boolean isStale() {
        return stale;
    }

    @Override
    public String toString() {
        return "Buffer[block " + block() + ", magic 0x" + Integer.toHexString(magic) + ", owner " + owner
                + ", version " + (long) VERSION.getOpaque(this) + "]";
    }
}
