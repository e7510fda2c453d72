package dev.ferrite.dir;

/**
 * A snapshot of the copy-on-write counters since mount ({@link Volume#copyOnWriteStats}).
 *
 * @param remaps            pieces of writes into shared blocks remapped to their new blocks (a write's piece
 *                          of one extent and one reference count)
 * @param remapTransactions transactions that remapped them: fewer than {@code remaps} where the remaps of
 *                          writers finishing together were batched into one
 */
public record CopyOnWriteStats(long remaps, long remapTransactions) {
    /** What happened between {@code earlier} and this snapshot. */
    public CopyOnWriteStats since(CopyOnWriteStats earlier) {
        return new CopyOnWriteStats(remaps - earlier.remaps, remapTransactions - earlier.remapTransactions);
    }
}
