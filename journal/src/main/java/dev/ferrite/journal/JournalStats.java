package dev.ferrite.journal;

/**
 * A snapshot of the journal's counters since open.
 *
 * @param commits           transactions committed with changes
 * @param forces            force calls that had to wait for a checkpoint
 * @param checkpoints       checkpoints written
 * @param checkpointBytes   log bytes written by them
 * @param checkpointItems   items they carried (an item relogged many times counts once per checkpoint)
 * @param logFlushes        device flushes issued for checkpoints
 * @param logWriteNanos     time spent in the checkpoints' device writes
 * @param logFlushNanos     time spent in those flushes: on a device with a volatile cache that cannot overlap
 *                          the next checkpoint's write, often the larger part of the log's time
 * @param reserveWaits      reservations that waited on the reserve head, and their total wait
 * @param reserveWaitNanos  see reserveWaits
 * @param writeWaits        regrants that waited on the write head, and their total wait
 * @param writeWaitNanos    see writeWaits
 * @param grantCasRetries   compare-and-swaps of either grant head that lost to another thread's and were tried
 *                          again: contention on the lock-free fast path, as distinct from the waits above
 * @param ailInsertBatches  bulk insertions into the AIL (one per Disruptor batch: a wake-up of its consumer)
 * @param ailInsertedItems  items inserted (moves of relogged items included)
 * @param ailForcerInserts  checkpoints a forcer wrote and inserted into the AIL itself, without the ring
 * @param ailPushRounds     write-back rounds of the pusher
 * @param ailPusherWakeups  times the pusher was woken from idle
 * @param ailWrittenBack    items written home
 * @param ailWrittenEarly   of those, items written home early because their relog had passed the relog limit
 * @param ailItems          items in the AIL now
 * @param tailMoves         anchored tail moves
 * @param freeBytes         log bytes free for new reservations now
 * @param logBytes          size of the circular log area
 * @param commitThrottles   commits that waited because the CIL had outgrown its hard limit (the log I/O
 *                          was behind), and their total wait
 * @param commitThrottleNanos see commitThrottles
 * @param shadowBytes       off-heap bytes held for the CIL's copies of logged items (in use or pooled)
 */
public record JournalStats(long commits, long forces, long checkpoints, long checkpointBytes, long checkpointItems,
                           long logFlushes, long logWriteNanos, long logFlushNanos, long reserveWaits, long reserveWaitNanos, long writeWaits,
                           long writeWaitNanos, long grantCasRetries, long ailInsertBatches, long ailInsertedItems, long ailForcerInserts, long ailPushRounds,
                           long ailPusherWakeups, long ailWrittenBack, long ailWrittenEarly, int ailItems, long tailMoves, long freeBytes,
                           long logBytes, long commitThrottles, long commitThrottleNanos, long shadowBytes) {
    /** Mean items per AIL bulk insertion. */
    public double itemsPerInsertBatch() {
        return ailInsertBatches == 0 ? 0 : (double) ailInsertedItems / ailInsertBatches;
    }
}
