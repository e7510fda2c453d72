package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Key helpers. B-tree keys order as unsigned bytes, shorter before longer on a common prefix; these
 * encode numbers so that order is their numeric order.
 */
public final class Keys {
    private static final ValueLayout.OfLong BE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private Keys() {
    }

    /**
     * Unsigned bytewise comparison of {@code a[aFrom, aTo)} with {@code b[bFrom, bTo)}. Most comparisons
     * a search makes differ in the first eight bytes (directory keys start with a hash): those compare as
     * one big-endian word, without the bulk mismatch call.
     */
    public static int compare(MemorySegment a, long aFrom, long aTo, MemorySegment b, long bFrom, long bTo) {
        if (aTo - aFrom >= 8 && bTo - bFrom >= 8) {
            long x = a.get(BE_LONG, aFrom), y = b.get(BE_LONG, bFrom);
            if (x != y) {
                return Long.compareUnsigned(x, y);
            }
        }
        long m = MemorySegment.mismatch(a, aFrom, aTo, b, bFrom, bTo);
        if (m < 0) {
            return 0;
        }
        long al = aTo - aFrom, bl = bTo - bFrom;
        if (m == al) {
            return -1;
        }
        if (m == bl) {
            return 1;
        }
        return Integer.compare(Byte.toUnsignedInt(a.get(ValueLayout.JAVA_BYTE, aFrom + m)),
                Byte.toUnsignedInt(b.get(ValueLayout.JAVA_BYTE, bFrom + m)));
    }

    /** Unsigned bytewise comparison of whole segments. */
    public static int compare(MemorySegment a, MemorySegment b) {
        return compare(a, 0, a.byteSize(), b, 0, b.byteSize());
    }

    /** Unsigned bytewise comparison of arrays. */
    public static int compare(byte[] a, byte[] b) {
        return java.util.Arrays.compareUnsigned(a, b);
    }

    /** Writes {@code v} big-endian with the sign bit flipped: keys then sort as the signed numbers do. */
    public static void putLong(MemorySegment key, long offset, long v) {
        key.set(BE_LONG, offset, v ^ Long.MIN_VALUE);
    }

    /** Reads what {@link #putLong} wrote. */
    public static long getLong(MemorySegment key, long offset) {
        return key.get(BE_LONG, offset) ^ Long.MIN_VALUE;
    }

    /** An 8-byte key for {@code v}. */
    public static byte[] ofLong(long v) {
        byte[] k = new byte[8];
        putLong(MemorySegment.ofArray(k), 0, v);
        return k;
    }

    /**
     * The shortest key {@code s} with {@code left < s <= right} (both as unsigned bytes, {@code left <
     * right}): the separator a leaf split puts in the parent, as short as the two keys allow (suffix
     * truncation), so interior nodes hold more separators.
     */
    static int shortestSeparatorLength(MemorySegment left, MemorySegment right) {
        long m = left.mismatch(right);
        // right's first m+1 bytes already exceed left (or left is a prefix of right): that prefix suffices
        return (int) Math.min(right.byteSize(), m + 1);
    }
}
