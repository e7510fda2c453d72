package dev.ferrite.dir;

/**
 * What an allocation group operation that may have to be retried came to. Anything but {@link #DONE}
 * leaves the transaction unchanged and the group's headers released; a block or inode a {@code DONE}
 * allocation handed out is read from the group while the transaction still holds its header
 * ({@link AllocationGroup#allocatedBlock}, {@link AllocationGroup#allocatedInode}), so the result never
 * mixes a status with a number and costs no allocation.
 */
enum AllocOutcome {
    /** The operation's changes are in the transaction. */
    DONE,
    /** Not enough free space (or no free inode and no room for a chunk) in this group. */
    NO_SPACE,
    /** A free list is below its reserve: run {@link AllocationGroup#refillFreeList()}, then retry. */
    NEEDS_REFILL,
    /** The group has no free inode: retry in a transaction reserved for a new chunk, with frames for it. */
    NEEDS_CHUNK,
    /** The free space that fits was all freed since the last checkpoint: run {@link AllocationGroup#awaitBusy}, then retry. */
    BUSY
}
