package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

import dev.ferrite.btree.internal.Cursor;

/**
 * Walks a table's keys in order (or in reverse) between bounds. Lock-free: it copies one leaf at a time,
 * so it never blocks a writer, and after a concurrent change it finds its place again by key; it returns
 * each key at most once, in order, with the value it had when its leaf was copied. A key written or
 * deleted while the cursor runs is seen or not depending on whether the change reached the key's leaf
 * before the cursor did. Not thread-safe: one thread uses a cursor.
 */
public final class TableCursor {
    private final Table table;
    private final Cursor cursor;
    /** Reverse prefix scans: a key equal to this is skipped, and the scan ends below {@link #low}; else null. */
    private final byte[] skip, low;

    TableCursor(Table table, Cursor cursor) {
        this(table, cursor, null, null);
    }

    TableCursor(Table table, Cursor cursor, byte[] skip, byte[] low) {
        this.table = table;
        this.cursor = cursor;
        this.skip = skip;
        this.low = low;
    }

    /**
     * Moves to the next entry; false past the last one.
     *
     * @throws TableException TABLE_CLOSED if the table's handle was closed
     */
    public boolean next() {
        table.requireOpen();
        while (cursor.next()) {
            if (low == null) {
                return true;
            }
            MemorySegment k = cursor.keySegment();
            if (skip != null && compare(k, skip) == 0) {
                continue;
            }
            return compare(k, low) >= 0;
        }
        return false;
    }

    private static int compare(MemorySegment a, byte[] b) {
        return Arrays.compareUnsigned(a.toArray(ValueLayout.JAVA_BYTE), b);
    }

    /** The current key (a copy). */
    public byte[] key() {
        return cursor.key();
    }

    /** The current value (a copy). */
    public byte[] value() {
        return cursor.value();
    }

    /** The current key, valid until the next move (a view, nothing copied). */
    public MemorySegment keySegment() {
        return cursor.keySegment();
    }

    /** The current value, valid until the next move (a view, nothing copied). */
    public MemorySegment valueSegment() {
        return cursor.valueSegment();
    }

    /** Copies the current value into {@code out} (as much as fits) and returns its whole length. */
    public int value(MemorySegment out) {
        return cursor.value(out);
    }
}
