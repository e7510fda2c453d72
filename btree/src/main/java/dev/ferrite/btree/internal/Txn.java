package dev.ferrite.btree.internal;

import java.util.Arrays;

import dev.ferrite.journal.internal.Reservation;
import dev.ferrite.journal.internal.Transaction;

/**
 * A journal transaction together with the cached buffers it holds locked. Tree operations lock the
 * buffers they change through it; the locks are held until {@link #commit()} has copied the changes into
 * the log, then released (XFS's transaction/buffer pairing). A committer waits for a log device that is
 * behind only in {@link #close()}, so a transaction belongs in a try-with-resources block, with any locks
 * of the caller's own taken and released inside it. A transaction re-enters buffers it already holds, so
 * several operations may run in one transaction.
 *
 * <p>Lock order, which every operation follows so that transactions cannot deadlock: within a tree, top
 * down and, at one level, left to right; trees in the order the caller touches them, which a caller
 * mixing several trees in one transaction must keep the same everywhere; allocator blocks last.
 *
 * <p>Not thread-safe: one thread runs a transaction. Closing without committing releases everything if
 * nothing was changed, and shuts the journal down otherwise (the in-memory blocks hold changes that can
 * no longer be logged).
 *
 * <p>A closed transaction is kept by its thread and started again by that thread's next {@link #begin},
 * together with its journal transaction and arrays, so a tree operation allocates nothing for them: no
 * reference to a transaction may outlive its {@link #close()}, which must be called once.
 */
public final class Txn implements AutoCloseable {
    /** The transaction each thread closed last, for its next {@link #begin} on the same cache. */
    private static final ThreadLocal<Txn[]> IDLE = ThreadLocal.withInitial(() -> new Txn[1]);

    private final BufferCache cache;
    private Transaction tx;
    private Buffer[] held = new Buffer[8];
    private boolean[] changed = new boolean[8];
    private int count;
    private boolean done;
    /** The commit's sequence until {@link #close()} has throttled on it. */
    private long committed = NONE;
    private static final long NONE = -1;

    private Txn(BufferCache cache, Transaction tx) {
        this.cache = cache;
        this.tx = tx;
    }

    /** Begins a transaction reserving log space for {@code items} blocks changed (see {@link BTree#reservation()}). */
    public static Txn begin(BufferCache cache, int items) {
        Txn[] idle = IDLE.get();
        Txn t = idle[0];
        if (t == null || t.cache != cache) {
            return new Txn(cache, cache.journal().begin(Reservation.items(items)));
        }
        idle[0] = null;
        t.tx = cache.journal().begin(items, t.tx);
        t.done = false;
        return t;
    }

    /**
     * {@link #begin} if the log has the space now, else null having reserved nothing: for a caller that
     * holds a lock or claim a writer waiting for log space may need, and must let it go before waiting.
     */
    public static Txn tryBegin(BufferCache cache, int items) {
        Txn[] idle = IDLE.get();
        Txn t = idle[0];
        if (t == null || t.cache != cache) {
            Transaction tx = cache.journal().tryBegin(items, null);
            return tx == null ? null : new Txn(cache, tx);
        }
        Transaction tx = cache.journal().tryBegin(items, t.tx);
        if (tx == null) {
            return null; // t stays this thread's idle transaction
        }
        idle[0] = null;
        t.tx = tx;
        t.done = false;
        return t;
    }

    public BufferCache cache() {
        return cache;
    }

    /** The journal transaction underneath. */
    public Transaction transaction() {
        return tx;
    }

    /**
     * Buffers this transaction holds, changed or not: at least the items it has logged. A caller running
     * several operations in one transaction starts another only while this plus one operation's
     * {@link BTree#reservation()} stays within what it reserved.
     */
    public int held() {
        return count;
    }

    /** True if this transaction holds {@code b} locked. */
    public boolean holds(Buffer b) {
        return b.holder == this;
    }

    /**
     * Locks {@code b} for this transaction, waiting for another writer if needed (re-entrant).
     *
     * @return false if {@code b} became obsolete: look its block up again
     */
    public boolean lock(Buffer b) {
        if (b.holder == this) {
            return true;
        }
        if (!b.lock()) {
            return false;
        }
        adopt(b);
        return true;
    }

    /**
     * Locks {@code b} for this transaction only if no other holds it now (re-entrant): for a caller holding
     * locks that a holder of {@code b} may be waiting for, which must not wait in turn. False, nothing
     * locked, if another holds it or it became obsolete.
     */
    public boolean tryLock(Buffer b) {
        if (b.holder == this) {
            return true;
        }
        if (!b.tryLock()) {
            return false;
        }
        if (b.isObsolete()) {
            b.unlockQuietly();
            return false;
        }
        adopt(b);
        return true;
    }

    /** Locks {@code b} if its version is still {@code v} (or this transaction already holds it). */
    boolean tryUpgrade(Buffer b, long v) {
        if (v == Buffer.HELD || b.holder == this) {
            return true;
        }
        if (!b.tryUpgrade(v)) {
            b.cache.latches.lockFailed(b);
            return false;
        }
        adopt(b);
        return true;
    }

    /** Takes ownership of a buffer locked on this transaction's behalf (one just created). */
    void adopt(Buffer b) {
        if (count == held.length) {
            held = Arrays.copyOf(held, count * 2);
            changed = Arrays.copyOf(changed, count * 2);
        }
        b.holder = this;
        b.heldAt = count;
        held[count] = b;
        changed[count] = false;
        count++;
    }

    /** Logs a change of {@code [offset, offset + length)} of a held buffer. */
    public void log(Buffer b, int offset, int length) {
        tx.log(b, offset, length);
        changed[indexOf(b)] = true;
    }

    /** Logs the header of a buffer just allocated, as a block rebuilt from zeros ({@link BufferCache#createEmpty}). */
    void logZeroed(Buffer b, int offset, int length) {
        tx.logZeroed(b, offset, length);
        changed[indexOf(b)] = true;
    }

    /** Adds a held buffer just initialised in full by a record this transaction logs, its bytes not logged. */
    void logOrdered(Buffer b) {
        tx.logOrdered(b);
        changed[indexOf(b)] = true;
    }

    /**
     * Unlocks a held buffer this transaction has not changed (a node locked on a path that turned out not
     * to need changing). A changed buffer stays held until commit.
     */
    void releaseUnchanged(Buffer b) {
        int i = indexOf(b);
        if (changed[i]) {
            return;
        }
        count--;
        if (i != count) { // the last one moves into its place, still held: its index is this transaction's to write
            held[i] = held[count];
            held[i].heldAt = i;
            changed[i] = changed[count];
        }
        held[count] = null;
        // unlocked last: once it is, another transaction may take it and set its index
        b.holder = null;
        b.unlockUnchanged();
    }

    /**
     * Unlocks {@code b}, locked through {@link #lock} and not changed since (say, an allocation group
     * header looked at and found full): other transactions may take it before this one commits. A changed
     * buffer stays held until commit.
     */
    public void release(Buffer b) {
        releaseUnchanged(b);
    }

    private int indexOf(Buffer b) {
        int i = b.heldAt;
        if (i < count && held[i] == b) {
            return i;
        }
        throw new IllegalStateException(b + " is not held by this transaction");
    }

    /**
     * Commits the changes into the journal and unlocks every held buffer. The journal's back-pressure
     * ({@link dev.ferrite.journal.internal.Journal#throttle}) waits in {@link #close()} instead: a caller that takes
     * locks of its own inside the try-with-resources block (the namespace's inode locks) has let them go by
     * then, so neither readers of these buffers nor those of the caller's objects wait for a slow log.
     *
     * @return the commit sequence: {@code cache.journal().force(seq)} makes it durable
     */
    /** See {@link Transaction#orderAfterData}: this transaction's changes point at data written just before it. */
    public void orderAfterData() {
        tx.orderAfterData();
    }

    public long commit() {
        if (done) {
            throw new IllegalStateException("transaction already committed or closed");
        }
        done = true;
        try {
            committed = tx.commit();
        } finally {
            unlockAll();
        }
        return committed;
    }

    private void unlockAll() {
        for (int i = 0; i < count; i++) {
            Buffer b = held[i];
            b.holder = null;
            if (b.isStale()) {
                cache.releaseFreed(b);
            } else if (changed[i]) {
                b.unlockChanged();
            } else {
                b.unlockUnchanged();
            }
            held[i] = null;
        }
        count = 0;
    }

    /**
     * After {@link #commit()}, takes the journal's back-pressure (returns at once unless the log device is
     * behind); otherwise ends the uncommitted transaction (see the class comment).
     */
    @Override
    public void close() {
        if (done) {
            if (committed != NONE) {
                long seq = committed;
                committed = NONE;
                cache.journal().throttle(seq);
            }
        } else {
            done = true;
            try {
                tx.cancel();
            } finally {
                unlockAll();
            }
        }
        IDLE.get()[0] = this;
    }
}
