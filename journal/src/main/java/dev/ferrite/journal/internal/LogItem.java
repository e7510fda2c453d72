package dev.ferrite.journal.internal;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A block-sized piece of metadata the journal logs: in Ferrite, a cached buffer of the B-tree module.
 * The journal knows nothing of its contents; it copies the byte ranges transactions mark dirty, writes
 * them to the log, keeps the item in the AIL until it is home, and asks it to write itself home.
 *
 * <h2>What the owner provides</h2>
 * <ul>
 *   <li>{@link #image()}: the item's live bytes, exactly one device block;
 *   <li>an exclusive lock ({@link #tryLock()}/{@link #unlock()}) that every modification holds. A
 *       transaction holds it from the first change through {@link Transaction#commit()}, which copies
 *       the dirty ranges into the log while the image is stable;
 *   <li>{@link #stamp(MemorySegment, long)}: puts the LSN and checksum into a write-back copy.
 * </ul>
 *
 * <h2>Journal state</h2>
 * Dirty ranges are tracked in {@value DirtyMap#CHUNKS} chunks of {@code blockSize / 128} bytes, as two words ({@link DirtyMap}). A checkpoint logs an item's
 * <em>delta</em>: the chunks changed in that checkpoint only. The item keeps its place in the AIL at the
 * first checkpoint that logged it since it was last written home ({@link #lsn()}), so the log tail
 * cannot pass any delta the home block lacks, and recovery, replaying every checkpoint from the tail in
 * order, composes them. A checkpoint logs the item <em>whole</em> instead, every chunk changed since it
 * was last home ({@code loggedMap}), when that is its first since home, when its block was just
 * allocated or initialised by a record, or when the AIL asked for it ({@code wholeRelog}: the item holds
 * the tail and could not be written home); a whole copy rebuilds what the home block lacks on its own,
 * so the item moves on in the AIL to that checkpoint. An item is <em>pinned</em> from the commit that
 * puts it in a checkpoint until that checkpoint is durable and in the AIL; a pinned item is never
 * written home, so home blocks only ever hold changes that are already durable in the log. An item
 * whose block was newly allocated ({@link Transaction#logZeroed}) is logged whole as zeros plus
 * {@code loggedMap}, so the bytes it never changed from zero are never copied.
 */
public abstract class LogItem {
    private static final VarHandle PINS;
    private static final VarHandle WHOLE_SEQ;

    static {
        try {
            PINS = MethodHandles.lookup().findVarHandle(LogItem.class, "pins", int.class);
            WHOLE_SEQ = MethodHandles.lookup().findVarHandle(LogItem.class, "wholeSeq", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final long home;
    private final int type;

    // Transaction and CIL state: written under the owner's lock (held by the committing transaction),
    // read by the CIL push after the context drained.
    Transaction tx;
    public long txDirty, txDirtyHigh; // public for CilBench in perf, which commits into the CIL without a transaction
    boolean txZeroed;
    boolean txOrdered;
    /** The commit logs the item whole in its context: decided once per commit, before its space is taken. */
    boolean txWhole;
    /** Every chunk changed since the item was last written home: what a whole copy logs. */
    long loggedMap, loggedMapHigh;
    /** Allocated (zero-filled) since last written home: its whole copies are zeros plus loggedMap. */
    boolean zeroed;
    /**
     * Initialised by a logical record ({@link Transaction#logOrdered}), neither written home nor relogged
     * in a later checkpoint since: it stays in the AIL at the record's checkpoint, so the tail cannot pass
     * the record while recovery needs it to rebuild the block. Its first relog in a later checkpoint is
     * logged as zeroed, with its header ({@link #headerLength()}) and every change since the record, as
     * a block just allocated is: that copy rebuilds the block on its own, so the item may move on in the
     * AIL like any other, and a hot block does not hold the tail.
     */
    boolean ordered;
    private CilSlot even;
    private CilSlot odd;
    /**
     * Whether the item's next commit must log it whole so that it moves on in the AIL: {@link #RELOG_ASKED}
     * by the AIL when the item holds the tail at or behind the push target and cannot go home (pinned or
     * locked: a hot block) or lies half a log behind, and by {@link Transaction#roll()} for the items it
     * commits (their holder may keep them locked while it waits for log space); {@link #RELOG_LOGGED} once
     * a commit has, until the item moves or goes home ({@link #RELOG_DELTA} again), so that the AIL does
     * not ask again while the whole copy is on its way (each whole copy asked for before the previous one
     * reached the AIL would keep the item where it is: {@link #loggedWholeBy}). An item's lock must not
     * be held through a wait for log space otherwise ({@link Journal#begin(Reservation)} before the
     * locks): relogged with deltas, its place in the AIL stays put, and may be the tail that wait needs
     * moved.
     */
    volatile int wholeRelog;
    static final int RELOG_DELTA = 0;
    static final int RELOG_ASKED = 1;
    static final int RELOG_LOGGED = 2;
    /**
     * Sequence of the newest checkpoint that logged the item whole (opaque: written as the checkpoint is
     * formatted, read by the AIL's consumer as it arrives; a newer value only keeps the item where it was).
     */
    @SuppressWarnings("unused") // accessed through WHOLE_SEQ
    private long wholeSeq = -1;

    @SuppressWarnings("unused") // accessed through PINS
    private volatile int pins;

    // AIL state: guarded by the AIL's lock (inAil is also read, as a hint, by isClean()).
    /** The item's place in the AIL: the oldest checkpoint the log must keep for it. */
    long ailLsn;
    long ailSeq;
    /** The newest checkpoint that logged the item: what a write-back of its image is stamped with. */
    long lastLsn;
    LogItem ailPrev;
    LogItem ailNext;
    volatile boolean inAil;

    /**
     * @param home device block the item lives in
     * @param type owner-defined kind (0..0xFFFE), handed back at recovery to pick the replay code
     */
    protected LogItem(long home, int type) {
        if (type < 0 || type >= LogRecordFormat.COMMIT_TYPE) {
            throw new IllegalArgumentException("log item type " + type + " is outside 0.." + (LogRecordFormat.COMMIT_TYPE - 1));
        }
        this.home = home;
        this.type = type;
    }

    /** The item's slot for contexts of {@code parity}, or null if it was never committed into one. */
    final CilSlot slotOrNull(int parity) {
        return parity == 0 ? even : odd;
    }

    /** The item's slot for contexts of {@code parity}, made on first use (under the owner's lock). */
    final CilSlot slot(int parity) {
        CilSlot s = parity == 0 ? even : odd;
        if (s == null) {
            s = new CilSlot();
            if (parity == 0) {
                even = s;
            } else {
                odd = s;
            }
        }
        return s;
    }

    public final long home() {
        return home;
    }

    public final int type() {
        return type;
    }

    /** True while a committed change of this item is not yet durable and in the AIL. */
    public final boolean isPinned() {
        return (int) PINS.getVolatile(this) != 0;
    }

    /**
     * True if the home block holds every committed change of this item: not pinned and not waiting in
     * the AIL. Exact only while holding the owner's lock (no commit can pin it then); a cache may evict
     * the item only when this holds. May lag and report false just after a write-back, never true early.
     */
    public final boolean isClean() {
        return !isPinned() && !inAil;
    }

    /**
     * While the item waits in the AIL, the LSN of its place there: the oldest checkpoint the log must keep
     * for it (its first since it was last home, or its last whole copy); else {@link Lsn#NONE}.
     */
    public final long lsn() {
        return ailLsn;
    }

    /** The AIL asks for a whole relog, unless one is asked for or on its way already. */
    final void askWholeRelog() {
        if (wholeRelog == RELOG_DELTA) {
            wholeRelog = RELOG_ASKED;
        }
    }

    /** The item moved on in the AIL or went home: no whole relog is wanted. */
    final void wholeRelogDone() {
        if (wholeRelog != RELOG_DELTA) {
            wholeRelog = RELOG_DELTA;
        }
    }

    final void loggedWholeIn(long seq) {
        WHOLE_SEQ.setOpaque(this, seq);
    }

    /** True if checkpoint {@code seq} logged the item whole (false if a newer one did, too). */
    final boolean loggedWholeBy(long seq) {
        return (long) WHOLE_SEQ.getOpaque(this) == seq;
    }

    /** Public for AilBench in perf, which publishes items as the log writer does. */
    public final void pin() {
        PINS.getAndAdd(this, 1);
    }

    final void unpin() {
        PINS.getAndAdd(this, -1);
    }

    /** The live contents: one block, changed only under the owner's lock. */
    protected abstract MemorySegment image();

    /** Takes the owner's exclusive lock if it is free; never blocks (the AIL skips busy items). */
    protected abstract boolean tryLock();

    /** Releases the lock taken by {@link #tryLock()}. */
    protected abstract void unlock();

    /**
     * Bytes at the start of the image that rebuilding the block from zeros needs besides its logged
     * changes (its header): logged with an ordered item's first relog ({@link #ordered}). None by default.
     */
    protected int headerLength() {
        return 0;
    }

    /** Writes {@code lsn} and a fresh checksum into a copy of the image about to be written home. */
    protected abstract void stamp(MemorySegment copy, long lsn);

    /** Called by the AIL once the home block holding the image as of {@code lsn} is durable. */
    protected void writtenBack(long lsn) {
    }

    /**
     * True once nothing of this item may be written home: the owner has freed the block it lived in (it
     * could overwrite whatever the block holds next), or the item is a logical record whose effect
     * reaches home through other items ({@link Transaction#logOrdered}). The AIL drops such an item
     * instead of writing it home. Checked under the owner's lock. A block reused after being freed must have its whole image logged by its first transaction,
     * or be logged as rebuilt from zeros ({@link Transaction#logZeroed}), so that recovery's replay of
     * the old owner's records cannot leave stale bytes in it.
     */
    protected boolean isStale() {
        return false;
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "[home " + home + ", type " + type + "]";
    }
}
