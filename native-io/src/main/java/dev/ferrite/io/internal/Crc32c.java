package dev.ferrite.io.internal;

import dev.ferrite.io.InvalidArgumentException;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.zip.CRC32C;

import static dev.ferrite.io.internal.OnDisk.U32;

/**
 * CRC32C (Castagnoli) over memory segments, using the JDK's intrinsic (SSE4.2 {@code crc32} / ARMv8
 * CRC instructions) through the segment's {@link java.nio.ByteBuffer} view. Every on-disk checksum in
 * Ferrite is this function; {@link #computeSkipping} is the form block headers use, where the checksum
 * field itself counts as zero. A caller that owns the block outright (and can write it) can use
 * {@link #stampInPlace} and {@link #verifyInPlace} instead: they zero the field for the length of one
 * intrinsic pass over the whole block, about 1.6x faster at 4 KiB than {@code computeSkipping}'s three
 * pieces around the field ({@code Crc32cBench}).
 *
 * <p>Allocation-free for native segments met again: each thread keeps its {@link CRC32C} and the buffer
 * views it made of the segments it checksummed last ({@link Views}), so a block written home from the same
 * memory (the AIL's snapshot slots, a cached block's frame) costs no new objects, which a {@code CRC32C},
 * two slices and two views per block had.
 */
public final class Crc32c {
    /** Bytes of a stored checksum. */
    public static final int SIZE = 4;

    private static final ThreadLocal<Views> VIEWS = ThreadLocal.withInitial(Views::new);

    private Crc32c() {
    }

    /** CRC32C of the whole segment. */
    public static int compute(MemorySegment segment) {
        return compute(segment, 0, segment.byteSize());
    }

    /** CRC32C of a whole array, without the buffer view a segment needs. */
    public static int compute(byte[] bytes) {
        CRC32C crc = VIEWS.get().crc;
        crc.reset();
        crc.update(bytes, 0, bytes.length);
        return (int) crc.getValue();
    }

    /** CRC32C of {@code length} bytes starting at {@code offset}. */
    public static int compute(MemorySegment segment, long offset, long length) {
        Objects.checkFromIndexSize(offset, length, segment.byteSize());
        Views v = VIEWS.get();
        ByteBuffer b = v.of(segment);
        CRC32C crc = v.crc;
        crc.reset();
        crc.update(b.limit((int) (offset + length)).position((int) offset));
        return (int) crc.getValue();
    }

    /**
     * CRC32C of the whole segment as if the {@link #SIZE} bytes at {@code fieldOffset} were zero: how a
     * checksum stored inside the block it covers is computed, both when stamping and when verifying.
     */
    public static int computeSkipping(MemorySegment segment, long fieldOffset) {
        requireField(segment, fieldOffset);
        Views v = VIEWS.get();
        ByteBuffer b = v.of(segment);
        CRC32C crc = v.crc;
        crc.reset();
        crc.update(b.limit((int) fieldOffset).position(0));
        for (int i = 0; i < SIZE; i++) {
            crc.update(0);
        }
        crc.update(b.limit(b.capacity()).position((int) fieldOffset + SIZE));
        return (int) crc.getValue();
    }

    /**
     * Computes the block's checksum as {@link #computeSkipping} does and stores it, little-endian, in the
     * field at {@code fieldOffset}. The field's old contents are overwritten first, so no other thread may
     * read or write the segment meanwhile.
     *
     * @return the checksum stored
     */
    public static int stampInPlace(MemorySegment segment, long fieldOffset) {
        requireField(segment, fieldOffset);
        segment.set(U32, fieldOffset, 0);
        int crc = compute(segment);
        segment.set(U32, fieldOffset, crc);
        return crc;
    }

    /**
     * True if the little-endian checksum stored at {@code fieldOffset} is the block's, as
     * {@link #computeSkipping} computes it. The field reads as zero while the checksum is computed and
     * holds its stored value again on return, so no other thread may read or write the segment meanwhile.
     */
    public static boolean verifyInPlace(MemorySegment segment, long fieldOffset) {
        requireField(segment, fieldOffset);
        int stored = segment.get(U32, fieldOffset);
        segment.set(U32, fieldOffset, 0);
        try {
            return compute(segment) == stored;
        } finally {
            segment.set(U32, fieldOffset, stored);
        }
    }

    /** The reflected Castagnoli polynomial. */
    private static final int POLY = 0x82F63B78;
    /** {@code X2N[k]} is x^(2^k) mod P, reflected: shifting by 2^k bits. */
    private static final int[] X2N = new int[32];

    static {
        X2N[0] = 1 << 30; // x^1
        for (int k = 1; k < X2N.length; k++) {
            X2N[k] = multiply(X2N[k - 1], X2N[k - 1]);
        }
    }

    /** a * b modulo P, both reflected (bit 31 is x^0). */
    private static int multiply(int a, int b) {
        int product = 0;
        for (int m = 1 << 31; m != 0; m >>>= 1) {
            if ((a & m) != 0) {
                product ^= b;
            }
            b = (b >>> 1) ^ (POLY & -(b & 1));
        }
        return product;
    }

    /**
     * The operator that {@link #combine(int, int, int)} needs for a second part of {@code length} bytes:
     * x^(8 * length) mod P. Costs about a microsecond; a caller combining many parts of a few lengths
     * computes it once per length.
     */
    public static int shiftOperator(long length) {
        if (length < 0) {
            throw new InvalidArgumentException("negative length " + length);
        }
        int op = 1 << 31; // x^0
        long n = length;
        for (int k = 3; n != 0; n >>>= 1, k++) {
            if ((n & 1) != 0) {
                op = multiply(X2N[k & 31], op);
            }
        }
        return op;
    }

    /**
     * CRC32C of {@code A} followed by {@code B}, from the CRC32C of each: {@code shift} is
     * {@link #shiftOperator} of B's length. Lets a checksum be computed piece by piece in any order, each
     * piece while it is still in the cache, e.g. a payload as it is written and its header last.
     */
    public static int combine(int crcA, int crcB, int shift) {
        return multiply(shift, crcA) ^ crcB;
    }

    /**
     * A thread's checksum state: its {@code CRC32C}, and the {@link ByteBuffer} views of the native
     * segments it met last, one per slot by the segment's address in 4 KiB pages (a batch of consecutive
     * blocks meets no collision). A view is reused only for a segment of the same address, size and scope
     * (the same memory, alive as long as that segment); its position and limit are this thread's to set,
     * and nothing runs between setting them and the update that reads them, so no reentry can disturb them.
     */
    private static final class Views {
        private static final int SLOTS = 1024;

        final CRC32C crc = new CRC32C();
        private final MemorySegment[] segments = new MemorySegment[SLOTS];
        private final ByteBuffer[] views = new ByteBuffer[SLOTS];

        /** A view of the whole of {@code s}; position and limit are the caller's to set. */
        ByteBuffer of(MemorySegment s) {
            if (!s.isNative()) {
                return s.asByteBuffer();
            }
            int i = (int) (s.address() >>> 12) & (SLOTS - 1);
            MemorySegment seen = segments[i];
            if (seen == null || seen.address() != s.address() || seen.byteSize() != s.byteSize() || !seen.scope().equals(s.scope())) {
                views[i] = s.asByteBuffer();
                segments[i] = s;
            }
            return views[i];
        }
    }

    private static void requireField(MemorySegment segment, long fieldOffset) {
        long size = segment.byteSize();
        if (fieldOffset < 0 || fieldOffset > size - SIZE) {
            throw new InvalidArgumentException("checksum field at " + fieldOffset + " lies outside a "
                    + size + "-byte segment");
        }
    }
}
