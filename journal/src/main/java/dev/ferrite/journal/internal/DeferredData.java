package dev.ferrite.journal.internal;

/**
 * Data writes that transactions ordered after data ({@link Transaction#orderAfterData}) depend on but that
 * their writers left to the log: the layer above registers such data before the transaction that names it
 * commits, and the log writes it ({@link #writeDeferred}) before the device flush that precedes a
 * checkpoint holding a transaction ordered after data, so one flush covers the data of every such
 * transaction in it, as for data written before the commit. Implemented by the layer above (tables' extent
 * values, {@code dev.ferrite.dir.TableExtentWriteBack}).
 */
public interface DeferredData {
    /**
     * Writes (not flushes) every piece of data registered so far: at least everything registered before
     * the transactions of the checkpoint about to be written committed. Called by the log writer, one
     * call at a time. True if it wrote anything (the log then flushes before the checkpoint whatever
     * flushes it made since those transactions committed).
     */
    boolean writeDeferred();
}
