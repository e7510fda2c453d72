package dev.ferrite.journal.internal;

import dev.ferrite.journal.ReservationExceededException;

import java.util.Arrays;

/**
 * A set of changes to log items that becomes durable atomically: after a crash either all of a
 * committed transaction's changes are recovered or none.
 *
 * <p>Use: {@link Journal#begin(Reservation)}; for each item, take the owner's lock, change the image,
 * {@link #log} the changed ranges; {@link #commit()} while still holding the locks; then unlock, pass
 * the returned sequence to {@link Journal#throttle(long)} (back-pressure, which must not wait under the
 * locks) and, when durability is needed, to {@link Journal#force(long)}. Reserve before locking: a
 * thread waiting for log space must not hold an item's lock (the wait may need that item written home
 * or moved on in the AIL), except across {@link #roll()}, which logs its items whole for that. One
 * thread uses a transaction; once committed or cancelled, only {@link Journal#begin(int, Transaction)}
 * may start it again.
 */
public final class Transaction {
    private final Journal journal;
    private final Ticket ticket;
    private int maxItems;
    private final int chunkShift;
    private final int blockSize;
    private LogItem[] items;
    private int count;
    private boolean dirty;
    private boolean done;
    /** {@link #orderAfterData} was called. */
    private boolean afterData;

    Transaction(Journal journal, Ticket ticket, int maxItems, int blockSize, int chunkShift) {
        this.journal = journal;
        this.ticket = ticket;
        this.maxItems = maxItems;
        this.blockSize = blockSize;
        this.chunkShift = chunkShift;
        this.items = new LogItem[Math.min(maxItems, 8)];
    }

    /** Starts this finished transaction again on its ticket, just reset and reserved (see {@link Journal#begin(int, Transaction)}). */
    void restart(int maxItems) {
        this.maxItems = maxItems;
        dirty = false;
        afterData = false;
        done = false;
    }

    /** The ticket a finished transaction can hand to its restart. */
    Ticket ticket() {
        return ticket;
    }

    Journal journal() {
        return journal;
    }

    /**
     * Adds an item to the transaction without logging anything yet. The caller holds the item's lock.
     *
     * @throws IllegalStateException if the item belongs to another running transaction, or the
     *                               reservation's item count is exhausted
     */
    public void join(LogItem item) {
        requireActive();
        if (item.tx == this) {
            return;
        }
        if (item.tx != null) {
            throw new IllegalStateException(item + " is already part of another running transaction");
        }
        if (count == maxItems) {
            throw new ReservationExceededException("transaction reserved room for " + maxItems
                    + " items and tried to join another: " + item);
        }
        if (count == items.length) {
            items = Arrays.copyOf(items, Math.min(maxItems, count * 2));
        }
        item.tx = this;
        item.txDirty = 0;
        item.txDirtyHigh = 0;
        item.txZeroed = false;
        item.txOrdered = false;
        items[count++] = item;
    }

    /** Marks {@code [offset, offset + length)} of the item's image as changed (joining the item if needed). */
    public void log(LogItem item, int offset, int length) {
        if (offset < 0 || length < 1 || offset > blockSize - length) {
            throw new IllegalArgumentException("range [" + offset + ", +" + length + ") lies outside a "
                    + blockSize + "-byte item");
        }
        join(item);
        item.txDirty |= DirtyMap.low(offset, length, chunkShift);
        item.txDirtyHigh |= DirtyMap.high(offset, length, chunkShift);
        dirty = true;
    }

    /**
     * Logs the first change of an item whose block has just been allocated and whose image is zero
     * outside {@code [offset, offset + length)}: until the block is next written home, recovery rebuilds
     * it from zeros and the logged ranges, whatever its home block held before, so bytes that stay zero
     * are never logged. Every later change to the image must be logged as usual.
     */
    public void logZeroed(LogItem item, int offset, int length) {
        log(item, offset, length);
        item.txZeroed = true;
    }

    /**
     * Adds a block just initialised in full by a logical record that this transaction logs too (an item
     * whose replay rebuilds the block, such as a run of new inode blocks), without logging its bytes: it
     * is tracked like a logged item (pinned, then in the AIL until written home) but its op carries no
     * ranges, and it holds the log's tail at this transaction's checkpoint, so the log keeps the record
     * as long as recovery may need it (XFS's ordered buffers). Later changes are logged as usual, except
     * that the item's first relog in a later checkpoint, if it is not home by then, is logged whole
     * enough to rebuild the block without the record ({@link LogItem#ordered}).
     */
    public void logOrdered(LogItem item) {
        join(item);
        item.txOrdered = true;
        dirty = true;
    }

    /**
     * Orders this transaction's changes after every device write that completed before it commits: the
     * checkpoint holding them is written only after a device flush (XFS's REQ_PREFLUSH on log writes).
     * For a change that points at data written just before it (an unwritten extent marked written), so
     * that no crash can leave the change durable and the data not, without a flush per change: every such
     * transaction in a checkpoint shares its one flush. For the next commit or roll only.
     */
    public void orderAfterData() {
        requireActive();
        afterData = true;
    }

    /**
     * Moves the logged changes into the journal's in-memory log and ends the transaction, without waiting.
     * Call it while still holding the items' locks.
     *
     * @return the commit sequence to pass, once the items are unlocked, to {@link Journal#throttle(long)},
     *         and to {@link Journal#force(long)} for durability
     */
    public long commit() {
        requireActive();
        long seq;
        try {
            seq = journal.commit(items, count, ticket, afterData);
        } finally {
            detach();
            done = true;
        }
        journal.space().ungrant(ticket);
        return seq;
    }

    /**
     * Commits this transaction and continues on the same permanent reservation with a fresh one: the
     * items are detached (re-join what the next step changes), and logged whole, so that the caller may
     * keep them locked through the next step's wait for log space ({@link LogItem#wholeRelog}). Waits for
     * log space only once the reservation's pre-reserved count is used up. Pass the last sequence of the
     * chain to {@link Journal#throttle(long)} once its items are unlocked.
     *
     * @return the commit sequence of the part just committed
     */
    public long roll() {
        requireActive();
        if (!ticket.permanent) {
            throw new IllegalStateException("roll() needs a permanent reservation (Reservation.permanent)");
        }
        long seq;
        try {
            // the caller may keep these items locked while the next step waits for log space: logged whole,
            // they move on in the AIL, so none of them can hold the tail that wait needs moved
            for (int i = 0; i < count; i++) {
                items[i].wholeRelog = LogItem.RELOG_ASKED;
            }
            seq = journal.commit(items, count, ticket, afterData);
            afterData = false;
        } catch (RuntimeException e) {
            done = true;
            throw e;
        } finally {
            detach();
        }
        dirty = false;
        journal.space().rolled(ticket);
        journal.space().regrant(ticket);
        return seq;
    }

    /**
     * Ends the transaction without logging. Cancelling after {@link #log} shuts the journal down: the
     * items' in-memory images hold changes that can now never be logged, and writing them home would
     * break atomicity.
     */
    public void cancel() {
        if (done) {
            return;
        }
        detach();
        done = true;
        journal.space().ungrant(ticket);
        if (dirty) {
            journal.shutdown(new IllegalStateException("a transaction was cancelled after logging changes"));
            throw new IllegalStateException("cancelled a transaction after logging changes: the journal has shut down");
        }
    }

    /** True once committed or cancelled. */
    public boolean isDone() {
        return done;
    }

    private void detach() {
        for (int i = 0; i < count; i++) {
            items[i].tx = null;
            items[i].txDirty = 0;
            items[i].txDirtyHigh = 0;
            items[i].txZeroed = false;
            items[i].txOrdered = false;
            items[i] = null;
        }
        count = 0;
    }

    private void requireActive() {
        if (done) {
            throw new IllegalStateException("transaction already committed or cancelled");
        }
    }
}
