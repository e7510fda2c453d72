package dev.ferrite.journal.internal;

/**
 * What opening the journal found and did.
 *
 * @param clean                the log was closed cleanly: nothing to replay
 * @param tailLsn              where the walk started (the anchored tail)
 * @param headLsn              where new records go: just past the last complete checkpoint
 * @param recordsScanned       records read and verified
 * @param checkpointsReplayed  complete checkpoints replayed
 * @param itemsReplayed        logged items applied to their home blocks
 * @param itemsSkipped         logged items whose home block was already newer
 * @param discarded            what was found past the head and ignored (a torn or unfinished checkpoint),
 *                             or null if the log ended cleanly
 * @param nanos                time recovery took
 */
public record RecoveryReport(boolean clean, long tailLsn, long headLsn, long recordsScanned, long checkpointsReplayed,
                             long itemsReplayed, long itemsSkipped, String discarded, long nanos) {
    @Override
    public String toString() {
        return (clean ? "clean log" : "recovered") + ": tail " + Lsn.toString(tailLsn) + ", head " + Lsn.toString(headLsn)
                + ", " + recordsScanned + " records scanned, " + checkpointsReplayed + " checkpoints and " + itemsReplayed
                + " items replayed, " + itemsSkipped + " items already home"
                + (discarded != null ? ", discarded: " + discarded : "") + String.format(", %.1f ms", nanos / 1e6);
    }
}
