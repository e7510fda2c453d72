package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import dev.ferrite.btree.internal.BTreeNodeFormat;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A table value as its B-tree stores it: a kind byte, then the value itself (inline) or where it lies
 * (medium: one data extent of the volume, {@link TableExtents}, or chunks in the volume's overflow tree,
 * {@link TableOverflow}; a blob: a regular file of the volume's blob directory, {@link TableBlobs}); and
 * the overflow tree's chunk keys.
 *
 * <pre>
 * inline, 1 + n bytes (n up to {@link #maxInline}: key length + n at most 1,983, or n at most {@value #MAX_INLINE}
 * on a volume formatted before that bound):
 *   0  u8 kind {@value #INLINE}
 *   1  the value's n bytes
 *
 * blob, {@value #BLOB_SIZE} bytes:
 *   0  u8 kind {@value #BLOB}
 *   1  7 bytes zero
 *   8  u64 blob id (its file is named "l" and the id in hex, from its create on; between 2026-12-06 and
 *      the blob's flag at creation, a blob that replaced another took the other's id and name)
 *  16  u64 the blob file's inode number
 *  24  u32 its inode generation
 *  28  u32 CRC32C of the value
 *  32  u64 the value's length
 *
 * medium, {@value #MEDIUM_SIZE} bytes (a value too long to be inline, up to {@value #MAX_MEDIUM} bytes; so
 * {@value #MAX_INLINE} + 1 at least):
 *   0  u8 kind {@value #MEDIUM}
 *   1  3 bytes zero
 *   4  u32 the value's length
 *   8  u64 value id: its chunks' keys in the overflow tree
 *  16  u32 CRC32C of the value
 *
 * extent, {@value #EXTENT_SIZE} bytes (a medium value kept in data blocks, on a volume with the superblock's
 * INCOMPAT_TABLE_EXTENTS; the stub owns the blocks, no inode or extent map names them):
 *   0  u8 kind {@value #EXTENT}
 *   1  3 bytes zero
 *   4  u32 the value's length n (too long to be inline, up to {@value #MAX_MEDIUM})
 *   8  u64 the first device block of ceil(n / block size) contiguous ones: the value, then zeros to the
 *      end of its last block
 *  16  u32 CRC32C of the value
 *  20  4 bytes zero
 *
 * overflow tree key of a medium value's chunk, {@value #CHUNK_KEY} bytes, big-endian so that keys sort
 * by id, then chunk:
 *   0  u64 value id
 *   8  u32 chunk number: chunk c holds the value's bytes [c * {@value #CHUNK}, (c + 1) * {@value #CHUNK})
 * whose value is those bytes ({@value #CHUNK} but the last chunk's)
 * </pre>
 */
final class TableValueFormat {
    static final byte INLINE = 0, BLOB = 1, MEDIUM = 2, EXTENT = 3;
    /**
     * The longest value kept in the tree itself whatever its key (beside a short key, longer ones are:
     * {@link #maxInline}); a medium value is longer.
     */
    static final int MAX_INLINE = Table.MAX_INLINE;
    /** The longest value kept in the overflow tree; longer ones go to a blob. */
    static final int MAX_MEDIUM = Table.MAX_MEDIUM;
    static final int BLOB_SIZE = 40;
    static final int MEDIUM_SIZE = 20;
    static final int EXTENT_SIZE = 24;
    /** Bytes of a medium value per overflow tree entry: the most a tree cell held when the overflow tree came. */
    static final int CHUNK = BTreeNodeFormat.MAX_VALUE;
    static final int CHUNK_KEY = 12;
    private static final long ID = 8, INO = 16, GENERATION = 24, CRC = 28, LENGTH = 32;
    private static final long MEDIUM_LENGTH = 4, MEDIUM_ID = 8, MEDIUM_CRC = 16;
    private static final long EXTENT_LENGTH = 4, EXTENT_BLOCK = 8, EXTENT_CRC = 16;
    private static final ValueLayout.OfLong KEY_ID = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt KEY_CHUNK = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** Where a value kept out of line lies. */
    record Blob(long id, long ino, int generation, int crc, long length) {
    }

    /** A value kept in the overflow tree: its id, length and CRC32C. */
    record Medium(long id, int length, int crc) {
        /** Its chunks in the overflow tree. */
        int chunks() {
            return (length + CHUNK - 1) / CHUNK;
        }

        /** The length of chunk {@code c}. */
        int chunkLength(int c) {
            return Math.min(CHUNK, length - c * CHUNK);
        }
    }

    /** A medium value kept in data blocks: its first device block, length and CRC32C. */
    record Extent(long block, int length, int crc) {
        /** The blocks it takes, of {@code blockSize} bytes. */
        int blocks(int blockSize) {
            return (length + blockSize - 1) / blockSize;
        }
    }

    private TableValueFormat() {
    }

    static byte[] blob(Blob x) {
        byte[] b = new byte[BLOB_SIZE];
        MemorySegment m = MemorySegment.ofArray(b);
        m.set(ValueLayout.JAVA_BYTE, 0, BLOB);
        m.set(U64, ID, x.id());
        m.set(U64, INO, x.ino());
        m.set(U32, GENERATION, x.generation());
        m.set(U32, CRC, x.crc());
        m.set(U64, LENGTH, x.length());
        return b;
    }

    static byte[] medium(Medium x) {
        byte[] b = new byte[MEDIUM_SIZE];
        MemorySegment m = MemorySegment.ofArray(b);
        m.set(ValueLayout.JAVA_BYTE, 0, MEDIUM);
        m.set(U32, MEDIUM_LENGTH, x.length());
        m.set(U64, MEDIUM_ID, x.id());
        m.set(U32, MEDIUM_CRC, x.crc());
        return b;
    }

    static Medium readMedium(MemorySegment m) {
        return new Medium(m.get(U64, MEDIUM_ID), m.get(U32, MEDIUM_LENGTH), m.get(U32, MEDIUM_CRC));
    }

    static byte[] extent(Extent x) {
        byte[] b = new byte[EXTENT_SIZE];
        MemorySegment m = MemorySegment.ofArray(b);
        m.set(ValueLayout.JAVA_BYTE, 0, EXTENT);
        m.set(U32, EXTENT_LENGTH, x.length());
        m.set(U64, EXTENT_BLOCK, x.block());
        m.set(U32, EXTENT_CRC, x.crc());
        return b;
    }

    /** The value's length in a medium or extent stub (at the same offset in both). */
    static int mediumLength(MemorySegment m) {
        return m.get(U32, MEDIUM_LENGTH);
    }

    static Extent readExtent(MemorySegment m) {
        return new Extent(m.get(U64, EXTENT_BLOCK), m.get(U32, EXTENT_LENGTH), m.get(U32, EXTENT_CRC));
    }

    /** True if the stored value {@code m} ({@code length} bytes, its kind checked already) is an extent's stub. */
    static boolean isExtent(MemorySegment m, long length) {
        return length == EXTENT_SIZE && m.get(ValueLayout.JAVA_BYTE, 0) == EXTENT;
    }

    /**
     * The longest value kept inline beside a key of {@code keyLength} bytes: the kind byte and the value take
     * what the key leaves of a leaf cell, if the volume's trees bound key and value together ({@code wide}:
     * {@link BTreeNodeFormat#maxValue}).
     */
    static int maxInline(int keyLength, boolean wide) {
        return BTreeNodeFormat.maxValue(keyLength, wide) - 1;
    }

    /** True if a value of {@code length} bytes may be a medium value (too long to be inline beside any key, not a blob). */
    static boolean isMedium(long length) {
        return length > MAX_INLINE && length <= MAX_MEDIUM;
    }

    /**
     * True if a value of {@code length} bytes beside a key of {@code keyLength} is kept out of the tree but
     * not in a blob: in an extent or the overflow tree.
     */
    static boolean isMedium(int keyLength, long length, boolean wide) {
        return length > maxInline(keyLength, wide) && length <= MAX_MEDIUM;
    }

    /** Sets {@code key} ({@value #CHUNK_KEY} bytes) to the overflow tree key of chunk {@code chunk} of value {@code id}. */
    static void chunkKey(MemorySegment key, long id, int chunk) {
        key.set(KEY_ID, 0, id);
        key.set(KEY_CHUNK, 8, chunk);
    }

    static long chunkId(MemorySegment key) {
        return key.get(KEY_ID, 0);
    }

    static int chunkNumber(MemorySegment key) {
        return key.get(KEY_CHUNK, 8);
    }

    /** The kind of the stored value {@code m} ({@code length} bytes), checked against its length. */
    static byte kind(MemorySegment m, long length, long table) {
        if (length < 1) {
            throw damaged(table, "a value of 0 bytes (no kind)");
        }
        byte k = m.get(ValueLayout.JAVA_BYTE, 0);
        if (k == INLINE) {
            return k;
        }
        if (k == MEDIUM && length == MEDIUM_SIZE || k == EXTENT && length == EXTENT_SIZE) {
            int n = m.get(U32, MEDIUM_LENGTH); // at the same offset in both
            if (!isMedium(n)) {
                throw damaged(table, "a medium value of " + Integer.toUnsignedString(n) + " bytes");
            }
            return k;
        }
        if (k != BLOB || length != BLOB_SIZE) {
            throw damaged(table, "a value of kind " + k + " and " + length + " bytes");
        }
        return k;
    }

    static Blob readBlob(MemorySegment m) {
        return new Blob(m.get(U64, ID), m.get(U64, INO), m.get(U32, GENERATION), m.get(U32, CRC), m.get(U64, LENGTH));
    }

    private static CorruptionException damaged(long table, String what) {
        return new CorruptionException(-1, "table value", "table inode " + table + " holds " + what);
    }
}
