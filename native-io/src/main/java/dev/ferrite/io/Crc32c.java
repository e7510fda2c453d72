package dev.ferrite.io;

import java.lang.foreign.MemorySegment;
import java.util.zip.CRC32C;

/**
 * CRC32C (Castagnoli) over memory segments, using the JDK's intrinsic (SSE4.2 {@code crc32} / ARMv8
 * CRC instructions) through the segment's {@link java.nio.ByteBuffer} view. Every on-disk checksum in
 * Ferrite is this function; {@link #computeSkipping} is the form block headers use, where the checksum
 * field itself counts as zero.
 */
public final class Crc32c {
    /** Bytes of a stored checksum. */
    public static final int SIZE = 4;

    private Crc32c() {
    }

    /** CRC32C of the whole segment. */
    public static int compute(MemorySegment segment) {
        CRC32C crc = new CRC32C();
        crc.update(segment.asByteBuffer());
        return (int) crc.getValue();
    }

    /** CRC32C of {@code length} bytes starting at {@code offset}. */
    public static int compute(MemorySegment segment, long offset, long length) {
        return compute(segment.asSlice(offset, length));
    }

    /**
     * CRC32C of the whole segment as if the {@link #SIZE} bytes at {@code fieldOffset} were zero: how a
     * checksum stored inside the block it covers is computed, both when stamping and when verifying.
     */
    public static int computeSkipping(MemorySegment segment, long fieldOffset) {
        long size = segment.byteSize();
        if (fieldOffset < 0 || fieldOffset > size - SIZE) {
            throw new InvalidArgumentException("checksum field at " + fieldOffset + " lies outside a "
                    + size + "-byte segment");
        }
        CRC32C crc = new CRC32C();
        crc.update(segment.asSlice(0, fieldOffset).asByteBuffer());
        for (int i = 0; i < SIZE; i++) {
            crc.update(0);
        }
        crc.update(segment.asSlice(fieldOffset + SIZE).asByteBuffer());
        return (int) crc.getValue();
    }
}
