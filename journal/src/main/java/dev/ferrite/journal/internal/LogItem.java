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
 * Dirty ranges are tracked in 64 chunks of {@code blockSize / 64} bytes. {@code loggedMap} is every
 * chunk changed since the item was last written home: each checkpoint logs all of it, so the newest
 * copy in the log always carries every change the home block lacks, and the log tail may pass older
 * copies. An item is <em>pinned</em> from the commit that puts it in a checkpoint until that checkpoint
 * is durable and in the AIL; a pinned item is never written home, so home blocks only ever hold
 * changes that are already durable in the log. An item whose block was newly allocated
 * ({@link Transaction#logZeroed}) is logged as zeros plus {@code loggedMap} until it is next home, so
 * the bytes it never changed from zero are never copied.
 */
public abstract class LogItem {
    private static final VarHandle PINS;

    static {
        try {
            PINS = MethodHandles.lookup().findVarHandle(LogItem.class, "pins", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final long home;
    private final int type;

    // Transaction and CIL state: written under the owner's lock (held by the committing transaction),
    // read by the CIL push after the context drained.
    Transaction tx;
    public long txDirty; // public for CilBench in perf, which commits into the CIL without a transaction
    boolean txZeroed;
    boolean txOrdered;
    long loggedMap;
    /** Allocated (zero-filled) since last written home: checkpoints log it as zeros plus loggedMap. */
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

    @SuppressWarnings("unused") // accessed through PINS
    private volatile int pins;

    // AIL state: guarded by the AIL's lock (inAil is also read, as a hint, by isClean()).
    long ailLsn;
    long ailSeq;
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

    /** LSN of the newest checkpoint holding this item while it waits in the AIL, else {@link Lsn#NONE}. */
    public final long lsn() {
        return ailLsn;
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
