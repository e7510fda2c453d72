package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;

import dev.ferrite.journal.internal.DirtyMap;
import dev.ferrite.journal.internal.LogItem;

/**
 * The log item of one block initialisation record ({@link BlockInitFormat}), made and logged by
 * {@link BufferCache#createInitialised}. It is never written home: the blocks it describes are ordered
 * items of the same transaction, which reach home through the AIL and hold the log's tail at this
 * record's checkpoint until they do, so the AIL drops the record itself ({@link #isStale()}). Its image
 * is the record's range only (a chunk of a block, at least {@link BlockInitFormat#SIZE} bytes), the only
 * part of it ever logged; nothing else touches it, so its lock is always free.
 */
final class BlockInit extends LogItem {
    private final MemorySegment record;

    BlockInit(long first, int count, int magic, long owner, int blockSize) {
        super(first, BufferCache.INIT_TYPE);
        record = MemorySegment.ofArray(new byte[Math.max(BlockInitFormat.SIZE, blockSize / DirtyMap.CHUNKS)]);
        BlockInitFormat.write(record, count, magic, owner);
    }

    @Override
    protected MemorySegment image() {
        return record;
    }

    @Override
    protected boolean tryLock() {
        return true;
    }

    @Override
    protected void unlock() {
    }

    @Override
    protected void stamp(MemorySegment copy, long lsn) {
        throw new IllegalStateException(this + " is a logical record and is never written home");
    }

    @Override
    protected boolean isStale() {
        return true;
    }
}
