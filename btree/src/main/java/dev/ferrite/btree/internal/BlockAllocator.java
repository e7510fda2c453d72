package dev.ferrite.btree.internal;

/**
 * Where B-trees get blocks for new nodes and return freed ones, inside the transaction that changes the
 * tree. Implementations lock their own metadata through the transaction and must never do I/O while
 * doing so (they are called with tree nodes locked): keep that metadata resident in the cache.
 */
public interface BlockAllocator {
    /**
     * A free block, marked used in {@code txn}: never one the cache reports {@link BufferCache#isBusy busy}
     * (freed, and the free not yet in a checkpoint).
     *
     * @throws dev.ferrite.io.NoSpaceException if none is free
     */
    long allocate(Txn txn);

    /** Marks {@code block} free in {@code txn}. */
    void free(Txn txn, long block);

    /** Free blocks now (a snapshot). */
    long freeBlocks();

    /** Log items one allocation or free changes (for reservations). */
    int itemsPerChange();
}
