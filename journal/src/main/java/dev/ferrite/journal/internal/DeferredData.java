package dev.ferrite.journal.internal;

/**
 * Data writes that transactions ordered after data ({@link Transaction#orderAfterData}) depend on but that
 * their writers left to the log: the layer above registers such data before the transaction that names it
 * commits, and the log has it written ({@link #writeDeferred}) before every checkpoint it writes, before the
 * device flush that precedes one holding a transaction ordered after data, so one flush covers the data of
 * every such transaction in it, as for data written before the commit. Implemented by the layer above
 * (tables' extent values, {@code dev.ferrite.dir.TableExtentWriteBack}).
 */
public interface DeferredData {
    /**
     * Writes (not flushes) every piece of data registered so far: at least everything registered before
     * the transactions of the checkpoint about to be written committed, all of it on the device when this
     * returns. Called by the log writer, one call at a time. True if anything registered was written since
     * the last call, by this call or otherwise (the log then flushes before a checkpoint ordered after data
     * whatever flushes it made since its transactions committed).
     */
    boolean writeDeferred();
}
