package dev.ferrite.perf.bench;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The kv workload's keys and values, computed from an index so that nothing needs storing them. Key
 * {@code i} starts with the 8 bytes of {@link #mix}{@code (i)} big-endian: a bijection of the index, so
 * keys are unique, and spread uniformly, so inserting in index order inserts in hashed order. 8 to 32
 * more bytes follow, {@value #KEY_MIN} to {@value #KEY_MAX} in all. Value {@code i} is {@value #VALUE}
 * bytes by default ({@value #VALUE_MIN} and up with {@code --value-sizes}) whose first 8, the value's
 * {@link #word}, are {@code i} big-endian: readers check it. Its first {@value #VALUE} bytes depend on
 * {@code i}; longer values go on with a filler that {@link #newValue} writes once per buffer, so that
 * making a 1 MiB value costs the workload no more than making a 64-byte one.
 *
 * <p>Threads split the key space two ways: by index ({@link #sliceStart}) for point operations, and by
 * key range ({@link #boundary}) for scans; the leading hash makes both splits even.
 */
public final class KvKeys {
    public static final int KEY_MIN = 16;
    public static final int KEY_MAX = 40;
    public static final int VALUE = 64;
    /** The shortest value: its word. */
    public static final int VALUE_MIN = 8;
    private static final VarHandle BE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong SEGMENT_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private KvKeys() {
    }

    /** SplitMix64's finalizer: a bijection of the longs that scatters neighbouring inputs. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58_476D_1CE4_E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D0_49BB_1331_11EBL;
        return z ^ (z >>> 31);
    }

    /** Writes key {@code i} into {@code key} ({@value #KEY_MAX} bytes long) and returns its length. */
    public static int key(long i, byte[] key) {
        long tail = mix(~i);
        int length = KEY_MIN + (int) Long.remainderUnsigned(tail, KEY_MAX - KEY_MIN + 1);
        BE_LONG.set(key, 0, mix(i));
        // Whole words up to the last one that starts inside the key; bytes past its length are ignored.
        for (int off = 8; off < length; off += 8) {
            BE_LONG.set(key, off, tail);
            tail = tail * 0x9E37_79B9_7F4A_7C15L + off;
        }
        return length;
    }

    /**
     * A buffer for values of {@code length} bytes ({@value #VALUE_MIN} or more), its bytes past the first
     * {@value #VALUE} filled for {@link #value} (the same in every buffer: scattered, not compressible).
     */
    public static byte[] newValue(int length) {
        if (length < VALUE_MIN) {
            throw new IllegalArgumentException("a value of " + length + " bytes has no room for its word");
        }
        byte[] value = new byte[length];
        for (int off = VALUE; off < length; off += 8) {
            putTail(value, off, mix(off));
        }
        return value;
    }

    /**
     * Writes value {@code i} into {@code value}, a {@link #newValue} buffer: the first {@value #VALUE}
     * bytes (all of a shorter value); the filler after them stays.
     */
    public static void value(long i, byte[] value) {
        value(i, 0, value);
    }

    /**
     * Writes version {@code version} of value {@code i}: its word is {@code i} as ever, the bytes after
     * it differ from version to version, so that an update changes the value as a real one would
     * (version 0 is {@link #value(long, byte[])}).
     */
    public static void value(long i, long version, byte[] value) {
        BE_LONG.set(value, 0, i);
        long w = (i + version * 0xD1B5_4A32_D192_ED03L) * 0x9E37_79B9_7F4A_7C15L;
        for (int off = 8, end = Math.min(VALUE, value.length); off < end; off += 8) {
            putTail(value, off, w += off);
        }
    }

    /** The word {@code w} big-endian at {@code off}, cut short at the end of the array. */
    private static void putTail(byte[] value, int off, long w) {
        if (off + 8 <= value.length) {
            BE_LONG.set(value, off, w);
        } else {
            for (int b = off; b < value.length; b++) {
                value[b] = (byte) (w >>> (56 - 8 * (b - off)));
            }
        }
    }

    /**
     * The XOR of a value's 8-byte words, big-endian, the last one zero-padded: what a scan computes to read
     * every byte of each value, whatever the store hands it (an array, a buffer, a segment).
     */
    public static long fold(MemorySegment value) {
        return fold(value, 0, value.byteSize());
    }

    /**
     * {@link #fold(MemorySegment)} of {@code bytes[offset, offset + length)}: XORed together, the folds of
     * a value's pieces that each start at a multiple of 8 bytes into it are the fold of the value.
     */
    public static long fold(MemorySegment bytes, long offset, long length) {
        long x = 0;
        for (long done = 0; done < length; done += FOLD_PART) {
            x ^= foldPart(bytes.asSlice(offset + done, Math.min(FOLD_PART, length - done)));
        }
        return x;
    }

    /**
     * Parts of a fold, in bytes: a multiple of 8, and small enough for an int-counted loop over a slice,
     * which C2 unrolls at once. A loop counted in longs over the whole segment from {@code offset} cost
     * 3-8x as much CPU a byte on 4 KiB pieces (a store lending its cached pages) as on a whole 1 MiB value.
     */
    private static final long FOLD_PART = 1L << 30;

    private static long foldPart(MemorySegment part) {
        if (part.heapBase().orElse(null) instanceof byte[] array) {
            return foldArray(array, (int) part.address(), (int) part.byteSize());
        }
        long x = 0;
        int words = (int) (part.byteSize() >>> 3);
        for (int i = 0; i < words; i++) {
            x ^= part.getAtIndex(SEGMENT_LONG, i);
        }
        for (long off = (long) words << 3, shift = 56; off < part.byteSize(); off++, shift -= 8) {
            x ^= (part.get(ValueLayout.JAVA_BYTE, off) & 0xFFL) << shift;
        }
        return x;
    }

    /** {@link #fold(MemorySegment)} of the first {@code length} bytes of {@code value}. */
    public static long fold(byte[] value, int length) {
        return foldArray(value, 0, length);
    }

    /**
     * The fold of {@code array[from, from + length)}, through the array's own view: heap values (but a
     * read-only segment's, whose array is not shown) never reach the segment loop, whose compiled code then
     * serves native memory alone (a scan that met both kinds, a store's inline values copied to the heap and
     * its large ones lent in place, compiled it for both and folded native pieces 3-6 times slower).
     */
    private static long foldArray(byte[] array, int from, int length) {
        long x = 0;
        int end = from + length, off = from;
        for (; off + 8 <= end; off += 8) {
            x ^= (long) BE_LONG.get(array, off);
        }
        for (int shift = 56; off < end; off++, shift -= 8) {
            x ^= (array[off] & 0xFFL) << shift;
        }
        return x;
    }

    /** The first 8 bytes of a value: its index. */
    public static long word(byte[] value) {
        return (long) BE_LONG.get(value, 0);
    }

    /**
     * First index of thread {@code t}'s share of {@code keys} indexes; {@code t == threads} gives the end.
     * {@code keys * threads} must fit a long ({@link KvBench} bounds both).
     */
    static long sliceStart(long keys, int t, int threads) {
        return keys * t / threads;
    }

    /**
     * Where thread {@code t}'s share of the key range starts (inclusive) and thread {@code t - 1}'s ends
     * (exclusive): an 8-byte key, or null for the ends of the range ({@code t} 0 or {@code threads}). Every
     * key is longer than 8 bytes, so it falls on one side of a boundary by its leading hash alone.
     */
    static byte[] boundary(int t, int threads) {
        if (t == 0 || t == threads) {
            return null;
        }
        byte[] b = new byte[8];
        BE_LONG.set(b, 0, Long.divideUnsigned(-1L, threads) * t);
        return b;
    }

    /** Unsigned bytewise order of the remaining bytes of two buffers, shorter first on a common prefix. */
    static int compare(ByteBuffer a, ByteBuffer b) {
        int m = a.mismatch(b);
        if (m < 0) {
            return 0;
        }
        if (m == a.remaining() || m == b.remaining()) {
            return a.remaining() - b.remaining();
        }
        return Byte.toUnsignedInt(a.get(a.position() + m)) - Byte.toUnsignedInt(b.get(b.position() + m));
    }
}
