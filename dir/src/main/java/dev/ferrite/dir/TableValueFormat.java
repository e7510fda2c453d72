package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import dev.ferrite.io.CorruptionException;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A table value as its B-tree stores it: a kind byte, then the value itself (inline) or where it lies
 * (a blob: a regular file of the volume's blob directory, {@link TableBlobs}).
 *
 * <pre>
 * inline, 1 + n bytes (n up to {@value #MAX_INLINE}):
 *   0  u8 kind {@value #INLINE}
 *   1  the value's n bytes
 *
 * blob, {@value #BLOB_SIZE} bytes:
 *   0  u8 kind {@value #BLOB}
 *   1  7 bytes zero
 *   8  u64 blob id (its file is named "l" and the id in hex while a key holds it)
 *  16  u64 the blob file's inode number
 *  24  u32 its inode generation
 *  28  u32 CRC32C of the value
 *  32  u64 the value's length
 * </pre>
 */
final class TableValueFormat {
    static final byte INLINE = 0, BLOB = 1;
    /** The longest value kept in the tree itself; longer ones go to a blob. */
    static final int MAX_INLINE = Table.MAX_TREE_VALUE - 1;
    static final int BLOB_SIZE = 40;
    private static final long ID = 8, INO = 16, GENERATION = 24, CRC = 28, LENGTH = 32;

    /** Where a value kept out of line lies. */
    record Blob(long id, long ino, int generation, int crc, long length) {
    }

    private TableValueFormat() {
    }

    /** The stored form of an inline value. */
    static byte[] inline(MemorySegment value) {
        byte[] b = new byte[1 + (int) value.byteSize()];
        MemorySegment.copy(value, 0, MemorySegment.ofArray(b), 1, value.byteSize());
        return b;
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

    /** The kind of the stored value {@code m} ({@code length} bytes), checked against its length. */
    static byte kind(MemorySegment m, long length, long table) {
        if (length < 1) {
            throw damaged(table, "a value of 0 bytes (no kind)");
        }
        byte k = m.get(ValueLayout.JAVA_BYTE, 0);
        if (k == INLINE) {
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
