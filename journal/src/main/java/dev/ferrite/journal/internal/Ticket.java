package dev.ferrite.journal.internal;

/**
 * A transaction's claim on log space (XFS's log ticket). {@code unit} bytes per transaction,
 * {@code count} units pre-reserved for a permanent ticket; {@code current} is what is left of the unit in
 * use. Owned by one transaction chain at a time, so its fields need no synchronization.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class Ticket {
    long unit;
    boolean permanent;
    public int count;
    public long current;
    /** The budget this ticket's space came from ({@link LogSpace#reserveFrom}), or null: the grant heads. */
    Ticket parent;

    public Ticket(long unit, int count) {
        reset(unit, count);
    }

    /** Readies a finished ticket for another transaction (see {@link Journal#begin(int, Transaction)}). */
    void reset(long unit, int count) {
        this.unit = unit;
        this.permanent = count > 1;
        this.count = count;
        this.current = unit;
        this.parent = null;
    }

    /** Bytes the grant heads must give this ticket up front. */
    long initialNeed() {
        return unit * count;
    }
}
