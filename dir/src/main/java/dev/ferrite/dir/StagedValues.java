package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

import dev.ferrite.io.internal.BufferPool;

/**
 * A write transaction's copies of the values it was given, kept until it ends: packed one after another
 * in buffers lent by the process's staging pool ({@link Tables#stagedValues}), off the Java heap, and
 * given back when the transaction commits or rolls back. A copy on the heap per put was a fresh 16 KiB
 * array for a 16 KiB value: the collector hands out heap it has not touched before until the whole heap
 * has been used once, and on the virtual machines this project measures on each first touch of a 4 KiB
 * page costs 6-15 us, so such a put cost 50 us where the copy itself is under 2 (docs/tables.md, "A
 * transaction's values"). The pool's buffers are reused, their pages touched once in the process's life.
 * A value longer than a buffer, or any value while the pool has none free, is copied onto the heap
 * instead. One thread uses an instance, as it uses its transaction.
 */
final class StagedValues {
    private final BufferPool pool;
    private final int bufferSize;
    /** The buffers lent to this transaction, the first {@link #count}; the last is being filled. */
    private MemorySegment[] lent = new MemorySegment[4];
    private int count;
    /** Bytes of the last buffer used so far. */
    private long used;

    StagedValues(BufferPool pool) {
        this.pool = pool;
        this.bufferSize = pool.bufferSize();
    }

    /** A copy of {@code value}, valid until {@link #release}. */
    MemorySegment copy(byte[] value) {
        int n = value.length;
        MemorySegment into = room(n);
        if (into == null) {
            return MemorySegment.ofArray(value.clone());
        }
        MemorySegment.copy(value, 0, into, ValueLayout.JAVA_BYTE, 0, n);
        return into;
    }

    /** {@code n} bytes of a lent buffer for a copy, or null (heap, then). */
    private MemorySegment room(int n) {
        if (n > bufferSize) {
            return null;
        }
        if (count == 0 || used + n > bufferSize) {
            MemorySegment b = pool.tryAcquire();
            if (b == null) {
                return null;
            }
            if (count == lent.length) {
                lent = Arrays.copyOf(lent, count * 2);
            }
            lent[count++] = b;
            used = 0;
        }
        MemorySegment s = lent[count - 1].asSlice(used, n);
        used += (n + 7) & ~7L; // copies 8-byte aligned, as the heap's arrays are
        return s;
    }

    /** Gives every buffer back: the copies made are no longer to be read. */
    void release() {
        for (int i = 0; i < count; i++) {
            pool.release(lent[i]);
            lent[i] = null;
        }
        count = 0;
        used = 0;
    }
}
