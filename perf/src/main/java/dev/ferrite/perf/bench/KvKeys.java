package dev.ferrite.perf.bench;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The kv workload's keys and values, computed from an index so that nothing needs storing them. Key
 * {@code i} starts with the 8 bytes of {@link #mix}{@code (i)} big-endian: a bijection of the index, so
 * keys are unique, and spread uniformly, so inserting in index order inserts in hashed order. 8 to 32
 * more bytes follow, {@value #KEY_MIN} to {@value #KEY_MAX} in all. Value {@code i} is {@value #VALUE}
 * bytes whose first 8, the value's {@link #word}, are {@code i} big-endian: readers check it.
 *
 * <p>Threads split the key space two ways: by index ({@link #sliceStart}) for point operations, and by
 * key range ({@link #boundary}) for scans; the leading hash makes both splits even.
 */
public final class KvKeys {
    public static final int KEY_MIN = 16;
    public static final int KEY_MAX = 40;
    public static final int VALUE = 64;
    private static final VarHandle BE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

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

    /** Writes value {@code i} into {@code value} ({@value #VALUE} bytes long). */
    public static void value(long i, byte[] value) {
        BE_LONG.set(value, 0, i);
        long w = i * 0x9E37_79B9_7F4A_7C15L;
        for (int off = 8; off < VALUE; off += 8) {
            BE_LONG.set(value, off, w += off);
        }
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
