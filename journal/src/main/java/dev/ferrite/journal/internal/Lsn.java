package dev.ferrite.journal.internal;

/**
 * A log sequence number: the position of a log record as (cycle, block) packed into one {@code long},
 * cycle in the high 32 bits, block (within the log's circular area) in the low 32. The cycle counts how
 * many times the log has wrapped, so LSNs grow monotonically and compare as plain signed longs; 0 is
 * "no LSN" (cycles start at 1).
 */
public final class Lsn {
    /** Sorts before every real LSN: what a block never logged carries. */
    public static final long NONE = 0L;

    private Lsn() {
    }

    public static long of(int cycle, int block) {
        return ((long) cycle << 32) | (block & 0xFFFF_FFFFL);
    }

    public static int cycle(long lsn) {
        return (int) (lsn >>> 32);
    }

    public static int block(long lsn) {
        return (int) lsn;
    }

    /** "cycle/block", as in messages and dumps. */
    public static String toString(long lsn) {
        return cycle(lsn) + "/" + block(lsn);
    }
}
