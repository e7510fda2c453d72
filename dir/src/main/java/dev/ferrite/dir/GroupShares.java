package dev.ferrite.dir;

/**
 * Shares of the log for table commits applying in journal groups at once ({@code Tables#commit}). A group
 * pins what it changes until it ends, so groups open together could fill the log with none able to
 * finish (a group's changes reach the log only once it ends, and its next change may wait for space).
 * So every open group holds a share, and the shares together never pass a quarter of the log: groups
 * side by side are never more than one group of that size was. A group that does not fit waits, and
 * admission is first come first served, so a group that needs the whole quarter (one that keeps its
 * tables to itself) is not starved by a stream of small ones. A group alone always gets its share.
 */
final class GroupShares {
    /** Log bytes the open groups' shares take. Guarded by this, as are the tickets. */
    private long held;
    /** The next ticket handed out, and the one whose turn it is to be admitted. */
    private long issued, serving;

    /**
     * Waits until a share of {@code bytes} fits beside the others' within {@code total} (or none is held)
     * and every group that asked before was admitted; then holds it. Uninterruptible: an interrupt is kept.
     */
    synchronized void take(long bytes, long total) {
        long ticket = issued++;
        boolean interrupted = false;
        while (ticket != serving || held != 0 && held + bytes > total) {
            try {
                wait();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        held += bytes;
        serving++;
        notifyAll(); // the next in line may fit too
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Grows a held share from {@code from} to {@code to} bytes if that fits within {@code total} now and no group waits; never waits. */
    synchronized boolean tryGrow(long from, long to, long total) {
        if (issued != serving || held - from + to > total) {
            return false;
        }
        held += to - from;
        return true;
    }

    /** Gives back a share of {@code bytes}. */
    synchronized void give(long bytes) {
        held -= bytes;
        notifyAll();
    }
}
