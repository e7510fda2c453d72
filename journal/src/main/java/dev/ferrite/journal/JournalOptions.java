package dev.ferrite.journal;

import dev.ferrite.io.InvalidArgumentException;

/**
 * Tuning knobs, all with defaults that suit a log of a few hundred MiB.
 *
 * @param pushThreshold    CIL size in bytes that starts a background checkpoint; 0 means an eighth of the
 *                         log (XFS's choice), capped at 32 MiB; commits wait while the CIL holds an
 *                         eighth more than this and its push has not begun (the log device is behind)
 * @param ringSize         slots in the Disruptor ring feeding the AIL, one per written checkpoint (power of two)
 * @param ailBatch         most items the AIL writes home per round (1..1024)
 * @param closeTimeoutMillis how long close waits for the AIL to write everything home
 * @param relogLimit       bytes an item has changed since it was last written home (what a whole relog of
 *                         it logs; checkpoints otherwise log only what changed in each) past which the AIL
 *                         writes the item home as soon as its checkpoint is durable, so that a whole relog
 *                         the AIL asks of a hot item stays small; 0 means half a block, a block or more
 *                         turns early write-back off
 */
public record JournalOptions(long pushThreshold, int ringSize, int ailBatch, long closeTimeoutMillis, int relogLimit) {
    /** The most items the AIL writes home in one round. */
    public static final int MAX_AIL_BATCH = 1024;

    public static final JournalOptions DEFAULTS = new JournalOptions(0, 1024, 256, 60_000, 0);

    public JournalOptions {
        if (pushThreshold < 0) {
            throw new InvalidArgumentException("push threshold " + pushThreshold + " is negative");
        }
        if (ringSize < 2 || Integer.bitCount(ringSize) != 1) {
            throw new InvalidArgumentException("AIL ring size " + ringSize + " is not a power of two of at least 2");
        }
        if (ailBatch < 1 || ailBatch > MAX_AIL_BATCH) {
            throw new InvalidArgumentException("AIL batch " + ailBatch + " is outside 1.." + MAX_AIL_BATCH);
        }
        if (closeTimeoutMillis < 1) {
            throw new InvalidArgumentException("close timeout " + closeTimeoutMillis + " ms must be positive");
        }
        if (relogLimit < 0) {
            throw new InvalidArgumentException("relog limit " + relogLimit + " is negative");
        }
    }

    public static JournalOptions defaults() {
        return DEFAULTS;
    }

    public JournalOptions withPushThreshold(long bytes) {
        return new JournalOptions(bytes, ringSize, ailBatch, closeTimeoutMillis, relogLimit);
    }

    public JournalOptions withRingSize(int slots) {
        return new JournalOptions(pushThreshold, slots, ailBatch, closeTimeoutMillis, relogLimit);
    }

    public JournalOptions withAilBatch(int items) {
        return new JournalOptions(pushThreshold, ringSize, items, closeTimeoutMillis, relogLimit);
    }

    public JournalOptions withRelogLimit(int bytes) {
        return new JournalOptions(pushThreshold, ringSize, ailBatch, closeTimeoutMillis, bytes);
    }
}
