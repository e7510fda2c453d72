package dev.ferrite.journal.internal;

import dev.ferrite.io.NoSpaceException;
import dev.ferrite.journal.ReservationExceededException;

/**
 * Log space accounting: the reserve and write {@link GrantHead}s and the tail they are measured against,
 * all in the grant domain of (cycle, byte offset) words over a circular area of {@code logBytes}.
 *
 * <p>As in XFS: a new ticket waits on the reserve head for all its units (a permanent ticket's future
 * units included), then takes the same amount on the write head. A permanent ticket whose pre-reserved
 * units run out puts a unit back on the reserve head without waiting (which may over-commit it,
 * throttling new reservers) and then waits on the write head only: rolling transactions, which usually
 * hold locks, never queue behind new reservations.
 *
 * <p>Every addition to the write head is a checked grant, so the write head never passes the tail by
 * more than the log, whatever the interleaving; the log's real head never passes the write head. (XFS
 * adds a new ticket's space to its write head unchecked, which lets a regrant racing between the two
 * heads' updates push the write head past the tail for a moment; checking both closes that window.)
 *
 * <p>The tail moves only when the AIL has written metadata home and anchored the new tail on disk, so
 * space handed out here is always safe to overwrite.
 */
// Public for perf's JMH benches (dev.ferrite.perf.jmh); journal-internal, for a qualified export, not application API.
public final class LogSpace {
    /** One cycle in a grant word. */
    private static final long CYCLE = 1L << 32;

    final long logBytes;
    final GrantHead reserveHead;
    public final GrantHead writeHead;
    private final PaddedWord tail = new PaddedWord();
    private final Runnable pressure;

    /**
     * @param start    grant word of the log head at open; both heads start here, and so does the tail
     *                 (recovery leaves nothing live in the log)
     * @param pressure asks the AIL to push when a reserver is about to wait
     */
    public LogSpace(long logBytes, long start, Runnable pressure) {
        this.logBytes = logBytes;
        this.pressure = pressure;
        this.tail.set(start);
        // Volatile loads of the tail: a reserver's load after storing its queue count must not be
        // satisfied before that store (see GrantHead's class comment). On x86 this costs nothing extra.
        this.reserveHead = new GrantHead("reserve", logBytes, start, tail::get);
        this.writeHead = new GrantHead("write", logBytes, start, tail::get);
    }

    /*
     * add and sub carry without a branch: a branch the heads never took while the JIT profiled them (the
     * log's first wrap, well into a run) would trap and send every compiled caller they are inlined into
     * (the commit paths) back to the interpreter and the compiler, a stall in the middle of a measured run.
     */

    /** Grant word (cycle high, bytes low) plus {@code n >= 0} bytes, carrying into the cycle. */
    static long add(long word, long n, long logBytes) {
        if (n > logBytes) { // never a head's step: no grant or release exceeds the log
            return addCycles(word, n, logBytes);
        }
        long bytes = (word & 0xFFFF_FFFFL) + n; // below 2 * logBytes
        long carry = ~((bytes - logBytes) >> 63); // all ones if bytes >= logBytes
        return word + n + (carry & (CYCLE - logBytes));
    }

    /** Grant word minus {@code n >= 0} bytes, borrowing from the cycle. */
    static long sub(long word, long n, long logBytes) {
        if (n > logBytes) {
            return addCycles(word, -n, logBytes);
        }
        long borrow = ((word & 0xFFFF_FFFFL) - n) >> 63; // all ones if the bytes go negative
        return word - n + (borrow & (logBytes - CYCLE));
    }

    private static long addCycles(long word, long n, long logBytes) {
        long bytes = (word & 0xFFFF_FFFFL) + n;
        return ((word >>> 32) + Math.floorDiv(bytes, logBytes)) << 32 | Math.floorMod(bytes, logBytes);
    }

    /** Bytes from {@code head} forward to {@code tail}: the log size minus what lies between them. */
    static long distanceFree(long head, long tail, long logBytes) {
        return logBytes - used(head, tail, logBytes);
    }

    /** Bytes from {@code tail} forward to {@code head}. */
    static long used(long head, long tail, long logBytes) {
        long hc = head >>> 32, tc = tail >>> 32;
        long hb = head & 0xFFFF_FFFFL, tb = tail & 0xFFFF_FFFFL;
        return (hc - tc) * logBytes + hb - tb;
    }

    /** Tail as a grant word. */
    long tail() {
        return tail.getAcquire();
    }

    /** Takes the initial space of a new ticket: waits (FIFO) on the reserve head, then on the write head. */
    public void reserve(Ticket t) {
        reserve(t, Long.MAX_VALUE);
    }

    /** {@link #reserve(Ticket)} giving up after about {@code timeoutNanos} on each head: false if nothing was taken. */
    boolean reserve(Ticket t, long timeoutNanos) {
        long need = t.initialNeed();
        if (need > logBytes / 2) {
            throw new NoSpaceException("a reservation of " + need + " bytes exceeds half the log ("
                    + logBytes / 2 + " of " + logBytes + " bytes); the log is too small for it");
        }
        if (!reserveHead.tryGrant(need) && !reserveHead.grant(need, pressure, timeoutNanos)) {
            return false;
        }
        if (!writeHead.tryGrant(need) && !writeHead.grant(need, pressure, timeoutNanos)) {
            reserveHead.release(need);
            return false;
        }
        return true;
    }

    /**
     * Takes a one-shot ticket's space out of {@code budget}, a ticket already granted, instead of the heads;
     * {@link #ungrant} gives back to it what the ticket does not use.
     *
     * @throws ReservationExceededException if the budget has less left than the ticket needs
     */
    void reserveFrom(Ticket t, Ticket budget) {
        long need = t.initialNeed();
        if (t.permanent || need > budget.current) {
            throw new ReservationExceededException("the log is full, and what is left of the group's budget ("
                    + budget.current + " bytes) cannot cover a transaction reserving " + need);
        }
        budget.current -= need;
        t.parent = budget;
    }

    /**
     * After a rolled transaction committed: hand back what it did not use, and start the next unit; a
     * ticket out of pre-reserved units puts one back on the reserve head (see class comment).
     */
    void rolled(Ticket t) {
        if (t.count > 0) {
            t.count--;
        }
        writeHead.release(t.current);
        reserveHead.release(t.current);
        t.current = t.unit;
        if (t.count == 0) {
            reserveHead.add(t.unit);
        }
    }

    /** Before the next transaction of a rolled chain: a ticket out of units waits for one on the write head. */
    void regrant(Ticket t) {
        if (t.count > 0) {
            return;
        }
        if (!writeHead.tryGrant(t.unit)) {
            writeHead.grant(t.unit, pressure);
        }
    }

    /** The ticket is done: everything it still holds goes back to both heads. */
    public void ungrant(Ticket t) {
        if (t.count > 0) {
            t.count--;
        }
        long bytes = t.current + (long) t.count * t.unit;
        t.current = 0;
        t.count = 0;
        if (t.parent != null) {
            t.parent.current += bytes;
            t.parent = null;
            return;
        }
        writeHead.release(bytes);
        reserveHead.release(bytes);
    }

    /** Returns bytes a checkpoint reserved (stolen from tickets) but did not write. */
    void release(long bytes) {
        writeHead.release(bytes);
        reserveHead.release(bytes);
    }

    /**
     * The anchored tail moved forward: waiters may now fit. The volatile store orders the tail before the
     * heads' loads of their queue counts; a release store would let those loads pass it and miss a
     * reserver that queued meanwhile.
     */
    void moveTail(long newTail) {
        tail.set(newTail);
        writeHead.wake();
        reserveHead.wake();
    }

    /** Bytes of log free for new reservations right now (may be negative while over-committed). */
    long freeBytes() {
        return reserveHead.space();
    }

    void shutdown(Throwable cause) {
        reserveHead.shutdown(cause);
        writeHead.shutdown(cause);
    }
}
