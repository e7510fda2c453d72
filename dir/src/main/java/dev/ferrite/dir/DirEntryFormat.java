package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.zip.CRC32C;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.internal.Crc32c;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U8;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * Directory entries, in a directory's B-tree or inline in its inode record. Both forms hold the same
 * keys in the same (unsigned bytewise) order, so a readdir cookie, which is the last key returned, means
 * the same place in either and survives the conversion between them.
 *
 * <pre>
 * key     u32 BE CRC32C of the name (entries sort by hash), then the name's bytes (1 to 255)
 * value   u64 inode, u8 type (S_IFMT &gt;&gt; 12)
 *
 * inline directory (fork INLINE): INLINE_USED bytes of entries, sorted by key, each
 *   0  u8  name length
 *   1  u8  type
 *   2  u64 inode
 *  10  key: u32 BE hash, name
 *
 * tree directory (fork TREE), in the inline area
 *   0  u64 the tree's header block, or 0 once the tree is dissolved (an unlinked directory being freed)
 *   8  u32 blocks in the reserve
 *  12  u32 zero
 *  16  u64 reserve[RESERVE_CAPACITY]: free blocks owned by the directory, which its tree's splits pop
 *      and its merges push, so that a tree change never takes an allocation group lock
 * </pre>
 *
 * The record's size field counts the entries; its blocks field counts the tree's blocks and the reserve.
 */
final class DirEntryFormat {
    static final int MAX_NAME = 255;
    static final int HASH = 4;
    static final int VALUE = 9;
    static final int ENTRY_HEADER = 10;
    static final int TREE_HEADER = 0, RESERVE_COUNT = 8, RESERVE = 16;
    static final int RESERVE_CAPACITY = 40;
    /** Header magic a dissolved directory tree's blocks get when they are freed: "FDRX". */
    static final int FREED_MAGIC = 0x58524446;

    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final VarHandle BE32_IN_ARRAY = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);

    private DirEntryFormat() {
    }

    static int hash(byte[] name) {
        return Crc32c.compute(name);
    }

    /** The B-tree key of {@code name}. */
    static byte[] key(byte[] name) {
        byte[] k = new byte[HASH + name.length];
        MemorySegment.ofArray(k).set(BE32, 0, hash(name));
        System.arraycopy(name, 0, k, HASH, name.length);
        return k;
    }

    /**
     * Makes a key in place in {@code key}, whose {@code nameLength} bytes at {@link #HASH} hold a name: writes
     * the name's hash before it (with {@code crc}, reset first) and returns the key's length.
     */
    static int keyInPlace(byte[] key, int nameLength, CRC32C crc) {
        crc.reset();
        crc.update(key, HASH, nameLength);
        BE32_IN_ARRAY.set(key, 0, (int) crc.getValue());
        return HASH + nameLength;
    }

    /** The name hash that begins {@code key} (made by {@link #key} or {@link #keyInPlace}). */
    static int keyHash(byte[] key) {
        return (int) BE32_IN_ARRAY.get(key, 0);
    }

    static byte[] value(long ino, int type) {
        byte[] v = new byte[VALUE];
        writeValue(MemorySegment.ofArray(v), ino, type);
        return v;
    }

    /** Writes the value naming {@code ino} of {@code type} into {@code v} ({@link #VALUE} bytes). */
    static void writeValue(MemorySegment v, long ino, int type) {
        v.set(U64, 0, ino);
        v.set(U8, 8, (byte) (type >>> 12));
    }

    static long valueInode(MemorySegment v) {
        return valueInode(v, 0);
    }

    /** The inode of the value at {@code at} of {@code b} (a cursor's page). */
    static long valueInode(MemorySegment b, long at) {
        return b.get(U64, at);
    }

    static int valueType(MemorySegment v) {
        return valueType(v, 0);
    }

    static int valueType(MemorySegment b, long at) {
        return Byte.toUnsignedInt(b.get(U8, at + 8)) << 12;
    }

    /** Bytes an entry of {@code key} takes inline. */
    static int inlineSize(int keyLength) {
        return ENTRY_HEADER + keyLength;
    }

    // ------------------------------------------------------------------ inline entries (offsets relative to the record)

    static int entryKeyLength(MemorySegment b, int at) {
        return HASH + Byte.toUnsignedInt(b.get(U8, at));
    }

    /**
     * Size of the inline entry at {@code at}, which must have a name and end by {@code end} (the used
     * inline area's end): else corruption of the inode block {@code b}.
     */
    static int entrySize(MemorySegment b, int at, int end) {
        int nameLength = Byte.toUnsignedInt(b.get(U8, at));
        int size = ENTRY_HEADER + HASH + nameLength;
        if (nameLength == 0 || size > end - at) {
            throw new CorruptionException(BlockHeaderFormat.blockNo(b), InodeFormat.STRUCTURE, "inline directory entry at "
                    + at + " with a name of " + nameLength + " bytes does not fit the " + (end - at) + " used bytes left");
        }
        return size;
    }

    static byte[] entryKey(MemorySegment b, int at) {
        byte[] k = new byte[entryKeyLength(b, at)];
        MemorySegment.copy(b, U8, at + ENTRY_HEADER, k, 0, k.length);
        return k;
    }

    /** Copies the key of the inline entry at {@code at} into {@code dst}; returns its length. */
    static int entryKey(MemorySegment b, int at, byte[] dst) {
        int length = entryKeyLength(b, at);
        MemorySegment.copy(b, U8, at + ENTRY_HEADER, dst, 0, length);
        return length;
    }

    /** Where the name of the inline entry at {@code at} starts (its length: {@link #entryKeyLength} less {@link #HASH}). */
    static int entryNameOffset(int at) {
        return at + ENTRY_HEADER + HASH;
    }

    /**
     * The inline entry at {@code at}'s key compared with the first {@code keyLength} bytes of {@code key},
     * unsigned bytewise as {@link Arrays#compareUnsigned(byte[], byte[])}: its sign only.
     */
    static int compareEntryKey(MemorySegment b, int at, MemorySegment key, int keyLength) {
        int length = entryKeyLength(b, at);
        long from = at + ENTRY_HEADER;
        long m = MemorySegment.mismatch(b, from, from + length, key, 0, keyLength);
        if (m < 0) {
            return 0;
        }
        if (m == length || m == keyLength) {
            return length - keyLength; // one is a prefix of the other
        }
        return Byte.compareUnsigned(b.get(U8, from + m), key.get(U8, m));
    }

    static long entryInode(MemorySegment b, int at) {
        return b.get(U64, at + 2);
    }

    static int entryType(MemorySegment b, int at) {
        return Byte.toUnsignedInt(b.get(U8, at + 1)) << 12;
    }

    static void setEntryValue(MemorySegment b, int at, long ino, int type) {
        b.set(U8, at + 1, (byte) (type >>> 12));
        b.set(U64, at + 2, ino);
    }

    /** Writes an entry of the first {@code keyLength} bytes of {@code key} at {@code at} (room made by the caller). */
    static void writeEntry(MemorySegment b, int at, byte[] key, int keyLength, long ino, int type) {
        b.set(U8, at, (byte) (keyLength - HASH));
        setEntryValue(b, at, ino, type);
        MemorySegment.copy(key, 0, b, U8, at + ENTRY_HEADER, keyLength);
    }

    // ------------------------------------------------------------------ tree directories

    static long treeHeader(MemorySegment b, int area) {
        return b.get(U64, area + TREE_HEADER);
    }

    static void setTreeHeader(MemorySegment b, int area, long block) {
        b.set(U64, area + TREE_HEADER, block);
    }

    /** Blocks in a tree directory's reserve; more than it holds is corruption of the inode block {@code b}. */
    static int reserveCount(MemorySegment b, int area) {
        int n = b.get(U32, area + RESERVE_COUNT);
        if (n < 0 || n > RESERVE_CAPACITY) {
            throw new CorruptionException(BlockHeaderFormat.blockNo(b), InodeFormat.STRUCTURE, "directory block reserve at "
                    + area + " of " + Integer.toUnsignedString(n) + " blocks; it holds at most " + RESERVE_CAPACITY);
        }
        return n;
    }

    static void setReserveCount(MemorySegment b, int area, int n) {
        b.set(U32, area + RESERVE_COUNT, n);
    }

    static int reserveOffset(int area, int i) {
        return area + RESERVE + 8 * i;
    }

    static long reserveEntry(MemorySegment b, int area, int i) {
        return b.get(U64, reserveOffset(area, i));
    }

    static void setReserveEntry(MemorySegment b, int area, int i, long block) {
        b.set(U64, reserveOffset(area, i), block);
    }

    /** Bytes of the inline area a tree directory uses. */
    static int treeAreaSize() {
        return RESERVE + 8 * RESERVE_CAPACITY;
    }
}
