package dev.ferrite.btree;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static dev.ferrite.io.OnDisk.U16;
import static dev.ferrite.io.OnDisk.U64;

/**
 * A B+tree node: a slotted page. Fixed header, then a slot array of cell offsets in key order growing up,
 * cells growing down from the end of the block.
 *
 * <pre>
 *  0  block header ({@link BlockHeaderFormat}): magic 'FBTN', crc, block, owner (tree id), LSN
 * 32  u16 level: 0 for a leaf
 * 34  u16 count: cells
 * 36  u16 cell start: lowest byte used by cells; cells fill [cell start, block size)
 * 38  u16 garbage: bytes of dead cells inside the cell area (reclaimed by compaction)
 * 40  u64 left sibling at this level (0: none)
 * 48  u64 right sibling at this level (0: none)
 * 56  u64 leftmost child (interior nodes): the subtree of keys below the first separator
 * 64  u16 slot[count]: cell offsets, ordered by key (unsigned bytewise)
 *
 * leaf cell:      u16 key length, u16 value length, key, value
 * interior cell:  u16 key length, u64 child, key       (the child holds keys at or above the key)
 * </pre>
 *
 * Block 0 is never a node, so 0 means "no block" in sibling and child fields. Every accessor bounds-checks
 * (through the segment), so code reading a node optimistically gets an exception, never garbage
 * addresses, from a torn read, and validates its version before believing anything.
 */
public final class BTreeNodeFormat {
    public static final int MAGIC = 0x4E544246; // "FBTN" as little-endian bytes
    /** Magic of a node block that has been freed (logged when freed, so replay never resurrects it). */
    public static final int FREED_MAGIC = 0x46544246; // "FBTF"
    static final int LEVEL = 32, COUNT = 34, CELL_START = 36, GARBAGE = 38;
    static final int LEFT = 40, RIGHT = 48, LEFTMOST = 56;
    static final int SLOTS = 64;
    static final int LEAF_CELL_HEADER = 4;
    static final int INTERIOR_CELL_HEADER = 10;
    /** Key bytes read eight at a time for comparison (keys order bytewise, so as big-endian numbers). */
    private static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** Longest key. */
    public static final int MAX_KEY = 1024;
    /** Longest value: two largest leaf cells always fit one 4 KiB node, so a split always works. */
    public static final int MAX_VALUE = 960;

    private BTreeNodeFormat() {
    }

    /** Formats an empty node. */
    static void init(MemorySegment n, int level, int blockSize) {
        n.set(U16, LEVEL, (short) level);
        n.set(U16, COUNT, (short) 0);
        n.set(U16, CELL_START, (short) blockSize);
        n.set(U16, GARBAGE, (short) 0);
        n.set(U64, LEFT, 0);
        n.set(U64, RIGHT, 0);
        n.set(U64, LEFTMOST, 0);
    }

    static int level(MemorySegment n) {
        return Short.toUnsignedInt(n.get(U16, LEVEL));
    }

    static int count(MemorySegment n) {
        return Short.toUnsignedInt(n.get(U16, COUNT));
    }

    static int cellStart(MemorySegment n) {
        int v = Short.toUnsignedInt(n.get(U16, CELL_START));
        return v == 0 ? 65536 : v; // 64 KiB blocks store their end as 0
    }

    static int garbage(MemorySegment n) {
        return Short.toUnsignedInt(n.get(U16, GARBAGE));
    }

    static long left(MemorySegment n) {
        return n.get(U64, LEFT);
    }

    static long right(MemorySegment n) {
        return n.get(U64, RIGHT);
    }

    static long leftmost(MemorySegment n) {
        return n.get(U64, LEFTMOST);
    }

    static void setLeft(MemorySegment n, long b) {
        n.set(U64, LEFT, b);
    }

    static void setRight(MemorySegment n, long b) {
        n.set(U64, RIGHT, b);
    }

    static void setLeftmost(MemorySegment n, long b) {
        n.set(U64, LEFTMOST, b);
    }

    static int slot(MemorySegment n, int i) {
        return Short.toUnsignedInt(n.get(U16, SLOTS + 2L * i));
    }

    static boolean isLeaf(MemorySegment n) {
        return level(n) == 0;
    }

    static int keyLength(MemorySegment n, int i) {
        return Short.toUnsignedInt(n.get(U16, slot(n, i)));
    }

    /** Offset of key i's bytes. */
    static int keyOffset(MemorySegment n, int i) {
        return slot(n, i) + (isLeaf(n) ? LEAF_CELL_HEADER : INTERIOR_CELL_HEADER);
    }

    static int valueLength(MemorySegment n, int i) {
        return Short.toUnsignedInt(n.get(U16, slot(n, i) + 2L));
    }

    static int valueOffset(MemorySegment n, int i) {
        int c = slot(n, i);
        return c + LEAF_CELL_HEADER + Short.toUnsignedInt(n.get(U16, c));
    }

    static long child(MemorySegment n, int i) {
        return n.get(U64, slot(n, i) + 2L);
    }

    static void setChild(MemorySegment n, int i, long b) {
        n.set(U64, slot(n, i) + 2L, b);
    }

    /** Bytes a leaf cell takes, slot included. */
    static int leafCellSize(int keyLen, int valueLen) {
        return 2 + LEAF_CELL_HEADER + keyLen + valueLen;
    }

    /** Bytes an interior cell takes, slot included. */
    static int interiorCellSize(int keyLen) {
        return 2 + INTERIOR_CELL_HEADER + keyLen;
    }

    /** Bytes cell i takes, slot included. */
    static int cellSize(MemorySegment n, int i) {
        return isLeaf(n) ? leafCellSize(keyLength(n, i), valueLength(n, i)) : interiorCellSize(keyLength(n, i));
    }

    /** Contiguous free bytes between the slot array and the cells. */
    static int freeContiguous(MemorySegment n) {
        return cellStart(n) - SLOTS - 2 * count(n);
    }

    /** Free bytes once compacted. */
    static int freeTotal(MemorySegment n) {
        return freeContiguous(n) + garbage(n);
    }

    /** Bytes used by slots and live cells. */
    static int used(MemorySegment n, int blockSize) {
        return blockSize - SLOTS - freeTotal(n);
    }

    // ------------------------------------------------------------------ search

    /**
     * Binary search for {@code key}. Keys of a node share the prefix its first and last keys share, so
     * that prefix is compared once and the search compares only what follows it, eight bytes at a time
     * as one unsigned number ({@link #head}): most probes end on that one comparison.
     *
     * @return the index of the key if present, else {@code -(insertion point) - 1}
     */
    static int search(MemorySegment n, MemorySegment key) {
        int count = count(n);
        if (count == 0) {
            return -1;
        }
        int header = isLeaf(n) ? LEAF_CELL_HEADER : INTERIOR_CELL_HEADER;
        int keyLen = (int) key.byteSize();
        int skip = 0;
        if (count > 1) {
            int firstCell = slot(n, 0), lastCell = slot(n, count - 1);
            int firstLen = Short.toUnsignedInt(n.get(U16, firstCell));
            int firstOff = firstCell + header;
            int prefix = commonPrefix(n, firstOff, firstLen, lastCell + header, Short.toUnsignedInt(n.get(U16, lastCell)));
            if (prefix > 0) {
                long m = MemorySegment.mismatch(n, firstOff, firstOff + prefix, key, 0, Math.min(prefix, keyLen));
                if (m >= 0) {
                    // the key differs from every key of the node inside the shared prefix: all sort the same way
                    boolean below = m == keyLen || m < prefix && Byte.toUnsignedInt(key.get(ValueLayout.JAVA_BYTE, m))
                            < Byte.toUnsignedInt(n.get(ValueLayout.JAVA_BYTE, firstOff + m));
                    return below ? -1 : -(count + 1);
                }
                skip = prefix;
            }
        }
        int rest = keyLen - skip;
        long keyHead = head(key, skip, rest);
        int lo = 0, hi = count - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int cell = slot(n, mid);
            int len = Short.toUnsignedInt(n.get(U16, cell)) - skip;
            long off = cell + header + skip;
            long h = head(n, off, len);
            int c;
            if (h != keyHead) {
                c = Long.compareUnsigned(h, keyHead);
            } else if (len <= 8 || rest <= 8) {
                c = Integer.compare(len, rest); // equal heads, zero-padded: the shorter is a prefix of the other
            } else {
                c = Keys.compare(n, off + 8, off + len, key, skip + 8, keyLen);
            }
            if (c < 0) {
                lo = mid + 1;
            } else if (c > 0) {
                hi = mid - 1;
            } else {
                return mid;
            }
        }
        return -(lo + 1);
    }

    /**
     * The first 8 bytes of {@code s[off, off + len)} as an unsigned big-endian number, zero-padded if
     * shorter: heads order as the byte strings do, except that equal heads of strings of 8 bytes or fewer
     * leave the shorter one first.
     */
    static long head(MemorySegment s, long off, int len) {
        if (len >= 8) {
            return s.get(BE64, off);
        }
        long h = 0;
        for (int i = 0; i < len; i++) {
            h |= (long) Byte.toUnsignedInt(s.get(ValueLayout.JAVA_BYTE, off + i)) << (56 - 8 * i);
        }
        return h;
    }

    /** Bytes two keys of a node share at their start. */
    private static int commonPrefix(MemorySegment n, int a, int al, int b, int bl) {
        int shortest = Math.min(al, bl);
        long x = head(n, a, al) ^ head(n, b, bl);
        if (x != 0) {
            return Math.min(shortest, Long.numberOfLeadingZeros(x) >>> 3);
        }
        if (shortest <= 8) {
            return shortest;
        }
        long m = MemorySegment.mismatch(n, a + 8, a + al, n, b + 8, b + bl);
        return m < 0 ? al : 8 + (int) m;
    }

    /** Compares key i of the node with {@code key}, both known equal in their first {@code skip} bytes. */
    static int compareFrom(MemorySegment n, int i, MemorySegment key, int skip) {
        int off = keyOffset(n, i), len = keyLength(n, i);
        return Keys.compare(n, off + skip, off + len, key, skip, key.byteSize());
    }

    /** Compares key i of the node with {@code key}. */
    static int compare(MemorySegment n, int i, MemorySegment key) {
        return compareFrom(n, i, key, 0);
    }

    /** The child to follow for {@code key} in an interior node. */
    static long childFor(MemorySegment n, MemorySegment key) {
        int i = search(n, key);
        int idx = i >= 0 ? i : -i - 2; // the last separator at or below the key; -1 means the leftmost child
        return idx < 0 ? leftmost(n) : child(n, idx);
    }

    /** Index of the child followed for {@code key}: -1 for the leftmost, else the separator's index. */
    static int childIndexFor(MemorySegment n, MemorySegment key) {
        int i = search(n, key);
        return i >= 0 ? i : -i - 2;
    }

    /** Child at index {@code i} in the numbering of {@link #childIndexFor} (-1 = leftmost). */
    static long childAt(MemorySegment n, int i) {
        return i < 0 ? leftmost(n) : child(n, i);
    }

    // ------------------------------------------------------------------ changes (under the node's lock)

    /** Makes room for a cell of {@code bytes} (slot included), compacting if that frees enough. */
    static boolean ensureRoom(MemorySegment n, int bytes, int blockSize, MemorySegment scratch) {
        if (freeContiguous(n) >= bytes) {
            return true;
        }
        if (freeTotal(n) < bytes) {
            return false;
        }
        compact(n, blockSize, scratch);
        return true;
    }

    /** Rewrites the cells contiguously at the end of the block, dropping garbage. */
    static void compact(MemorySegment n, int blockSize, MemorySegment scratch) {
        int count = count(n);
        int end = blockSize;
        for (int i = 0; i < count; i++) {
            int c = slot(n, i);
            int len = cellSize(n, i) - 2;
            end -= len;
            MemorySegment.copy(n, c, scratch, end, len);
            n.set(U16, SLOTS + 2L * i, (short) end);
        }
        MemorySegment.copy(scratch, end, n, end, blockSize - end);
        n.set(U16, CELL_START, (short) end);
        n.set(U16, GARBAGE, (short) 0);
    }

    private static int allocateCell(MemorySegment n, int pos, int cellLen) {
        int count = count(n);
        int start = cellStart(n) - cellLen;
        // shift slots [pos, count) up by one
        MemorySegment.copy(n, SLOTS + 2L * pos, n, SLOTS + 2L * (pos + 1), 2L * (count - pos));
        n.set(U16, SLOTS + 2L * pos, (short) start);
        n.set(U16, COUNT, (short) (count + 1));
        n.set(U16, CELL_START, (short) start);
        return start;
    }

    /** Inserts a leaf cell at index {@code pos}; room must have been ensured. Returns the cell offset. */
    static int insertLeaf(MemorySegment n, int pos, MemorySegment key, MemorySegment value) {
        int kl = (int) key.byteSize(), vl = (int) value.byteSize();
        int c = allocateCell(n, pos, LEAF_CELL_HEADER + kl + vl);
        n.set(U16, c, (short) kl);
        n.set(U16, c + 2L, (short) vl);
        MemorySegment.copy(key, 0, n, c + LEAF_CELL_HEADER, kl);
        MemorySegment.copy(value, 0, n, c + LEAF_CELL_HEADER + kl, vl);
        return c;
    }

    /** Inserts an interior cell (separator and the child right of it) at index {@code pos}. */
    static int insertInterior(MemorySegment n, int pos, MemorySegment key, long child) {
        int kl = (int) key.byteSize();
        int c = allocateCell(n, pos, INTERIOR_CELL_HEADER + kl);
        n.set(U16, c, (short) kl);
        n.set(U64, c + 2L, child);
        MemorySegment.copy(key, 0, n, c + INTERIOR_CELL_HEADER, kl);
        return c;
    }

    /** Copies cell i of {@code from} to index {@code pos} of {@code to} (same node kind); room must be there. */
    static void copyCell(MemorySegment from, int i, MemorySegment to, int pos) {
        int len = cellSize(from, i) - 2;
        int c = allocateCell(to, pos, len);
        MemorySegment.copy(from, slot(from, i), to, c, len);
    }

    /** Removes cell i (its bytes become garbage). */
    static void remove(MemorySegment n, int i) {
        int count = count(n);
        int len = cellSize(n, i) - 2;
        MemorySegment.copy(n, SLOTS + 2L * (i + 1), n, SLOTS + 2L * i, 2L * (count - i - 1));
        n.set(U16, COUNT, (short) (count - 1));
        n.set(U16, GARBAGE, (short) (garbage(n) + len));
    }

    /** Removes cells [from, count): what a split moved to the new right node. */
    static void truncate(MemorySegment n, int from) {
        int count = count(n);
        int dead = 0;
        for (int i = from; i < count; i++) {
            dead += cellSize(n, i) - 2;
        }
        n.set(U16, COUNT, (short) from);
        n.set(U16, GARBAGE, (short) (garbage(n) + dead));
    }

    /** Key i as its own segment (a slice of the node). */
    static MemorySegment key(MemorySegment n, int i) {
        return n.asSlice(keyOffset(n, i), keyLength(n, i));
    }

    /** Value i of a leaf as a slice of the node. */
    static MemorySegment value(MemorySegment n, int i) {
        return n.asSlice(valueOffset(n, i), valueLength(n, i));
    }
}
