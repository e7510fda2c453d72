package dev.ferrite.journal.internal;

/**
 * What recovery hands each logged item to: the owner of the item type knows where its blocks keep their
 * LSN and how to stamp them. Recovery calls {@link #replay} for every item of every complete checkpoint,
 * oldest first, then {@link #finish()}.
 */
public interface Replayer {
    /**
     * Applies {@code item}'s ranges to its home block, unless that block already carries an LSN at or
     * after {@link ReplayItem#lsn()} (it was written home after this copy was logged), and stamps the
     * block with the item's LSN. Must be idempotent: a crash during recovery replays everything again.
     *
     * <p>The home block's LSN may be trusted only if the block passes its checksum: a write-back torn
     * by a crash can carry the new LSN in one sector and old contents in others. Such a block must be
     * replayed whatever LSN it shows; the log still holds every change it lacks, because the tail
     * passes an item only after its write-back was flushed.
     *
     * @return true if applied, false if skipped because the home block was newer
     */
    boolean replay(ReplayItem item);

    /**
     * True if items of {@code type} are this replayer's to apply. Recovery refuses a checkpoint holding
     * another type as damaged, and the log with it (a record's checksum can pass over a wrong value).
     */
    default boolean knows(int type) {
        return true;
    }

    /**
     * True if items of {@code type} initialise blocks (records that rebuild whole blocks, such as a run of
     * new inode blocks): recovery replays them before the other items of their checkpoint, whose changes
     * to those blocks were made after the initialisation whatever order the checkpoint lists them in.
     */
    default boolean replaysFirst(int type) {
        return false;
    }

    /**
     * How many consecutive blocks, from its home block, {@code item} (of a type this replayer knows)
     * writes: 1 for a block's ranges; for an initialisation record, the blocks it initialises. Below 1
     * if the item cannot be one of its type: recovery then refuses the checkpoint as damaged, as it does
     * an item whose blocks lie outside the device or inside the log.
     */
    default int blocks(ReplayItem item) {
        return 1;
    }

    /** Makes every replayed block durable at home (write and flush) before the log forgets them. */
    void finish();
}
