package dev.ferrite.journal.internal;

import java.lang.foreign.MemorySegment;

/**
 * One logged item during recovery: its home block, type, the LSN of the checkpoint that logged it, and
 * the byte ranges of the block that checkpoint carries. A flyweight over the record being replayed:
 * valid only during {@link Replayer#replay}.
 */
public final class ReplayItem {
    private MemorySegment payload;
    private long op;
    private long lsn;
    private long seq;

    void set(MemorySegment payload, long op, long lsn, long seq) {
        this.payload = payload;
        this.op = op;
        this.lsn = lsn;
        this.seq = seq;
    }

    public long home() {
        return LogRecordFormat.opHome(payload, op);
    }

    public int type() {
        return LogRecordFormat.opType(payload, op);
    }

    /** LSN of the checkpoint that logged this copy: what the home block is stamped with after replay. */
    public long lsn() {
        return lsn;
    }

    /** Sequence number of that checkpoint. */
    public long seq() {
        return seq;
    }

    /**
     * True if the block was allocated since it was last written home: it is rebuilt from zeros and the
     * ranges alone, whatever its home block holds ({@link Transaction#logZeroed}).
     */
    public boolean zeroed() {
        return (LogRecordFormat.opFlags(payload, op) & LogRecordFormat.OP_ZEROED) != 0;
    }

    public int rangeCount() {
        return LogRecordFormat.opRangeCount(payload, op);
    }

    public int rangeOffset(int i) {
        return LogRecordFormat.rangeOffset(payload, op, i);
    }

    public int rangeLength(int i) {
        return LogRecordFormat.rangeLength(payload, op, i);
    }

    /** The bytes of range {@code i}, a view of the record, valid only during the {@link Replayer} call it is handed to. */
    public MemorySegment rangeData(int i) {
        long data = op + LogRecordFormat.opDataStart(rangeCount());
        for (int k = 0; k < i; k++) {
            data += rangeLength(k);
        }
        return payload.asSlice(data, rangeLength(i));
    }

    /**
     * Copies every range into {@code block} (the item's home block image) at its offset, after filling
     * the block with zeros if the item is {@link #zeroed()}.
     */
    public void applyTo(MemorySegment block) {
        if (zeroed()) {
            block.fill((byte) 0);
        }
        long data = op + LogRecordFormat.opDataStart(rangeCount());
        for (int i = 0, n = rangeCount(); i < n; i++) {
            int len = rangeLength(i);
            MemorySegment.copy(payload, data, block, rangeOffset(i), len);
            data += len;
        }
    }

    @Override
    public String toString() {
        return "ReplayItem[home " + home() + ", type " + type() + ", lsn " + Lsn.toString(lsn) + ", "
                + rangeCount() + " ranges" + (zeroed() ? ", zeroed" : "") + "]";
    }
}
