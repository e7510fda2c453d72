package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static dev.ferrite.io.internal.OnDisk.U16;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A B+tree node: a slotted page. Fixed header, then a slot array in key order, cells growing down from the
 * end of the block. A leaf's slot array floats: it may start above the header, and an insert or a delete
 * moves whichever side of the array has fewer slots, down into that front gap or up out of it, so that
 * the bytes it changes (and logs) are a quarter of the array on average, not a half.
 *
 * <pre>
 *  0  block header ({@link BlockHeaderFormat}): magic 'FBTN', crc, block, owner (tree id), LSN
 * 32  u8  level: 0 for a leaf
 * 33  u8  skip: how many leading bytes (0 to 8) every key of the node shares
 * 34  u16 count: cells
 * 36  u16 cell start: lowest byte used by cells; cells fill [cell start, block size)
 * 38  u16 garbage: bytes of dead cells inside the cell area (reclaimed by compaction)
 * 40  u64 left sibling at this level (0: none)
 * 48  u64 right sibling at this level (0: none)
 * 56  u64 leftmost child (interior nodes): the subtree of keys below the first separator;
 *         in a leaf, u16 slot base: where the slot array starts, a multiple of 8 from 72 (0 means 72)
 * 64  u64 prefix: the skip shared bytes, big-endian in the high bytes, zero below them
 * 72  u64 slot[count] from the slot base (72 in interior nodes), ordered by key (unsigned bytewise):
 *         bits 0-15 the cell's offset, bits 16-63 the key's head, its 6 bytes after the shared prefix
 *         (big-endian, zero-padded); a leaf's bytes from 72 to its slot base are free
 *
 * leaf cell:      u16 key length, u16 value length, key, value
 * interior cell:  u16 key length, u64 child, key       (the child holds keys at or above the key)
 * </pre>
 *
 * <p>The heads let a binary search run on the slot array alone: a probe reads a cell only when its head
 * equals the key's, so a lookup touches the header, a few slot lines and one cell instead of a cell line
 * per probe. The prefix may be shorter than what the keys really share (it shrinks when a key that does
 * not share it arrives, and is recomputed only when the node is rebuilt: split, merge, compaction), never
 * longer.
 *
 * <p>Block 0 is never a node, so 0 means "no block" in sibling and child fields. Every accessor bounds-checks
 * (through the segment), so code reading a node optimistically gets an exception, never garbage
 * addresses, from a torn read, and validates its version before believing anything.
 */
public final class BTreeNodeFormat {
    public static final int MAGIC = 0x4E544246; // "FBTN" as little-endian bytes
    /** Magic of a node block that has been freed (logged when freed, so replay never resurrects it). */
    public static final int FREED_MAGIC = 0x46544246; // "FBTF"
    static final int LEVEL = 32, SKIP = 33, COUNT = 34, CELL_START = 36, GARBAGE = 38;
    static final int LEFT = 40, RIGHT = 48, LEFTMOST = 56, PREFIX = 64;
    /** A leaf's slot base, where an interior node keeps its leftmost child. */
    static final int BASE = LEFTMOST;
    /** The lowest slot base: where the header ends. */
    static final int SLOTS = 72;
    /** Bytes of one slot. */
    static final int SLOT = 8;
    /** Bytes of a key's head kept in its slot. */
    private static final int HEAD_BYTES = 6;
    static final int LEAF_CELL_HEADER = 4;
    static final int INTERIOR_CELL_HEADER = 10;
    /** Key bytes read eight at a time for comparison (keys order bytewise, so as big-endian numbers). */
    private static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** Longest key. */
    public static final int MAX_KEY = 1024;
    /**
     * Longest key and value of a leaf cell together: two largest leaf cells (slots included, 2 x 1,996 of a
     * 4 KiB node's 4,024 bytes after the header) always fit one node, so a split always works. A value may
     * take what its key leaves: up to 1,983 bytes beside a 1-byte key, 1,968 beside a 16-byte one.
     */
    public static final int MAX_ENTRY = 1984;
    /**
     * Longest value of a tree that bounds values alone (a volume formatted before {@link #MAX_ENTRY}
     * bounded the pair: code of that time refuses a leaf holding a longer value); and the longest value
     * any key leaves room for.
     */
    public static final int MAX_VALUE = MAX_ENTRY - MAX_KEY;

    private BTreeNodeFormat() {
    }

    /**
     * Longest value a leaf cell takes beside a key of {@code keyLength} bytes: what the key leaves of
     * {@link #MAX_ENTRY} if {@code wide} (the volume's trees bound the pair), else {@link #MAX_VALUE}.
     */
    public static int maxValue(int keyLength, boolean wide) {
        return wide ? MAX_ENTRY - keyLength : MAX_VALUE;
    }

    /** Formats an empty node. */
    static void init(MemorySegment n, int level, int blockSize) {
        n.set(ValueLayout.JAVA_BYTE, LEVEL, (byte) level);
        n.set(ValueLayout.JAVA_BYTE, SKIP, (byte) 0);
        n.set(U16, COUNT, (short) 0);
        n.set(U16, CELL_START, (short) blockSize);
        n.set(U16, GARBAGE, (short) 0);
        n.set(U64, LEFT, 0);
        n.set(U64, RIGHT, 0);
        n.set(U64, LEFTMOST, 0);
        n.set(U64, PREFIX, 0);
    }

    static int level(MemorySegment n) {
        return Byte.toUnsignedInt(n.get(ValueLayout.JAVA_BYTE, LEVEL));
    }

    /** Leading bytes every key of the node shares (and the search compares once, against the prefix). */
    static int skip(MemorySegment n) {
        return Byte.toUnsignedInt(n.get(ValueLayout.JAVA_BYTE, SKIP));
    }

    /** The shared leading bytes, big-endian in the high {@link #skip} bytes. */
    static long prefix(MemorySegment n) {
        return n.get(U64, PREFIX);
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

    /** Offset of cell i. */
    static int slot(MemorySegment n, int i) {
        return (int) n.get(U64, slotOffset(n, i)) & 0xFFFF;
    }

    /** Head of key i as its slot keeps it. */
    static long slotHead(MemorySegment n, int i) {
        return n.get(U64, slotOffset(n, i)) >>> 16;
    }

    private static long slotOffset(MemorySegment n, int i) {
        return base(n) + (long) SLOT * i;
    }

    /** Where the slot array starts: {@link #SLOTS} but in a leaf whose array floats above a front gap. */
    static int base(MemorySegment n) {
        if (!isLeaf(n)) {
            return SLOTS;
        }
        int b = Short.toUnsignedInt(n.get(U16, BASE));
        return b == 0 ? SLOTS : b;
    }

    /** Moves a leaf's slot array to start at {@code base}. */
    static void moveSlots(MemorySegment n, int base) {
        int from = base(n);
        if (from != base) {
            MemorySegment.copy(n, from, n, base, (long) SLOT * count(n));
            n.set(U16, BASE, (short) base);
        }
    }

    /** Free bytes between the header and a leaf's slot array. */
    static int frontGap(MemorySegment n) {
        return base(n) - SLOTS;
    }

    /** End of the slot array: what a change of the slots logs up to. */
    static int slotsEnd(MemorySegment n) {
        return base(n) + SLOT * count(n);
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
        return SLOT + LEAF_CELL_HEADER + keyLen + valueLen;
    }

    /** Bytes an interior cell takes, slot included. */
    static int interiorCellSize(int keyLen) {
        return SLOT + INTERIOR_CELL_HEADER + keyLen;
    }

    /** Most entries a leaf of {@code blockSize} bytes holds with keys and values of these lengths: for bounds on a tree's size. */
    public static int leafCapacity(int blockSize, int keyLength, int valueLength) {
        return (blockSize - SLOTS) / leafCellSize(keyLength, valueLength);
    }

    /** Most children an interior node of {@code blockSize} bytes holds with separators of at most {@code keyLength} bytes (the leftmost has no cell). */
    public static int interiorCapacity(int blockSize, int keyLength) {
        return (blockSize - SLOTS) / interiorCellSize(keyLength) + 1;
    }

    /** Bytes cell i takes, slot included. */
    static int cellSize(MemorySegment n, int i) {
        return isLeaf(n) ? leafCellSize(keyLength(n, i), valueLength(n, i)) : interiorCellSize(keyLength(n, i));
    }

    /** Contiguous free bytes between the slot array and the cells: where a new cell goes. */
    static int freeContiguous(MemorySegment n) {
        return cellStart(n) - slotsEnd(n);
    }

    /** Free bytes once compacted. */
    static int freeTotal(MemorySegment n) {
        return freeContiguous(n) + garbage(n) + frontGap(n);
    }

    /** Fewest entries of a leaf given a front gap: below it, a shift is a chunk or two either way. */
    private static final int MIN_FLOATING = 8;

    /**
     * Front gap for a leaf of {@code entries} entries taking {@code bytes} (slots included) with
     * {@code spare} bytes free besides: room for the slots of half the entries that fit in the spare bytes,
     * if they are like these, since an insert below the middle takes its slot from the gap. A multiple of
     * {@link #SLOT}.
     */
    static int frontGapFor(int spare, int entries, int bytes) {
        if (entries < MIN_FLOATING || spare <= 0) {
            return 0;
        }
        return (int) ((long) spare * SLOT * entries / (2L * bytes)) & -SLOT;
    }

    /** Bytes used by slots and live cells. */
    static int used(MemorySegment n, int blockSize) {
        return blockSize - SLOTS - freeTotal(n);
    }

    /** Levels a node may have: a tree is at most this deep. */
    static final int MAX_LEVELS = 48;

    /**
     * Why a node image read from the device cannot be a node of a sound tree, or null if it can: every
     * count, offset and length in it lies where the accessors follow it (slots below the cells, each cell
     * inside the block with lengths in range, live and dead cell bytes filling the cell area), keys are
     * ascending and match their slots' heads and the node's prefix, and block pointers lie on the device.
     * Checked once per read from the device, where the checksum is, so code reading cached nodes needs
     * no checks of its own: the checksum guards against media errors, this against crafted images and bugs.
     */
    static String unsound(MemorySegment n, int blockSize, long blockCount, boolean wide) {
        int level = level(n);
        if (level >= MAX_LEVELS) {
            return "level " + level + " (a tree has at most " + MAX_LEVELS + ")";
        }
        int skip = skip(n);
        if (skip > 8) {
            return "keys share " + skip + " leading bytes (at most 8 are kept)";
        }
        int count = count(n);
        int cellStart = cellStart(n);
        int base = base(n);
        if ((base - SLOTS) % SLOT != 0 || base < SLOTS) {
            return "the slot array starts at offset " + base + " (a multiple of " + SLOT + " from " + SLOTS + ")";
        }
        if (cellStart > blockSize || base + (long) SLOT * count > cellStart) {
            return count + " slots from offset " + base + " and cells from offset " + cellStart + " do not fit a block of "
                    + blockSize;
        }
        boolean leaf = level == 0;
        int header = leaf ? LEAF_CELL_HEADER : INTERIOR_CELL_HEADER;
        long live = 0;
        for (int i = 0; i < count; i++) {
            int c = slot(n, i);
            if (c < cellStart || c + header > blockSize) {
                return "cell " + i + " at offset " + c + " lies outside the cell area [" + cellStart + ", " + blockSize + ")";
            }
            int kl = Short.toUnsignedInt(n.get(U16, c));
            int vl = leaf ? Short.toUnsignedInt(n.get(U16, c + 2L)) : 0;
            if (kl < Math.max(1, skip) || kl > MAX_KEY || leaf && vl > maxValue(kl, wide)) {
                return "cell " + i + " has a key of " + kl + " bytes and a value of " + vl + " (keys 1 to " + MAX_KEY
                        + " bytes and at least the " + skip + " shared, " + (wide ? "key and value up to " + MAX_ENTRY
                        : "values up to " + MAX_VALUE) + ")";
            }
            int size = header + kl + vl;
            if (c + size > blockSize) {
                return "cell " + i + " at offset " + c + " of " + size + " bytes runs past the block's end";
            }
            live += size;
            if (!sharesPrefix(n, i)) {
                return "key " + i + " does not start with the node's " + skip + "-byte prefix";
            }
            if (slotHead(n, i) != computedHead(n, i)) {
                return "slot " + i + " holds head 0x" + Long.toHexString(slotHead(n, i)) + ", its key's is 0x"
                        + Long.toHexString(computedHead(n, i));
            }
            if (i > 0) {
                int p = slot(n, i - 1) + header;
                if (Keys.compare(n, p, p + keyLength(n, i - 1), n, c + header, c + header + kl) >= 0) {
                    return "key " + i + " is not above key " + (i - 1);
                }
            }
            if (!leaf && !onDevice(child(n, i), blockCount)) {
                return "child " + i + " is block " + child(n, i) + " (the device has " + blockCount + ")";
            }
        }
        if (live + garbage(n) != blockSize - cellStart) {
            return live + " live and " + garbage(n) + " dead cell bytes do not fill the " + (blockSize - cellStart)
                    + " bytes from offset " + cellStart;
        }
        if (!leaf && !onDevice(leftmost(n), blockCount)) {
            return "leftmost child is block " + leftmost(n) + " (the device has " + blockCount + ")";
        }
        if (left(n) != 0 && !onDevice(left(n), blockCount) || right(n) != 0 && !onDevice(right(n), blockCount)) {
            return "siblings are blocks " + left(n) + " and " + right(n) + " (the device has " + blockCount + ")";
        }
        return null;
    }

    /** A block pointer that can name a node: block 0 is never one. */
    static boolean onDevice(long block, long blockCount) {
        return block > 0 && block < blockCount;
    }

    // ------------------------------------------------------------------ search

    /**
     * Binary search for {@code key}. The key's first {@link #skip} bytes are compared once, with the
     * node's prefix; the probes then compare the next six as one number against the slots' heads and read
     * a cell only when the heads are equal.
     *
     * @return the index of the key if present, else {@code -(insertion point) - 1}
     */
    static int search(MemorySegment n, MemorySegment key) {
        int count = count(n);
        if (count == 0) {
            return -1;
        }
        int keyLen = (int) key.byteSize();
        int skip = skip(n);
        if (skip > 0) {
            long k = head(key, 0, keyLen) & prefixMask(skip);
            long prefix = prefix(n);
            if (k != prefix) {
                // the key differs from every key of the node inside the shared prefix: all sort the same way
                return Long.compareUnsigned(k, prefix) < 0 ? -1 : -(count + 1);
            }
            if (keyLen < skip) {
                return -1; // a proper prefix of every key here
            }
        }
        long keyHead = head48(key, skip, keyLen - skip);
        int header = isLeaf(n) ? LEAF_CELL_HEADER : INTERIOR_CELL_HEADER;
        long base = base(n);
        int lo = 0, hi = count - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            long slot = n.get(U64, base + (long) SLOT * mid);
            long h = slot >>> 16;
            int c;
            if (h != keyHead) {
                c = h < keyHead ? -1 : 1; // 48-bit numbers: signed comparison is unsigned
            } else {
                int cell = (int) slot & 0xFFFF;
                long off = cell + header;
                c = Keys.compare(n, off + skip, off + Short.toUnsignedInt(n.get(U16, cell)), key, skip, keyLen);
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
     * True if {@code key} sorts between the node's first and last keys, both included: then it lies in the
     * range of every node the tree may hold at this node's place. Compares heads first, as {@link #search}
     * does, and a key only when the heads are equal.
     */
    static boolean spans(MemorySegment n, MemorySegment key) {
        int count = count(n);
        if (count == 0) {
            return false;
        }
        int keyLen = (int) key.byteSize();
        int skip = skip(n);
        if (skip > 0 && (keyLen < skip || (head(key, 0, keyLen) & prefixMask(skip)) != prefix(n))) {
            return false; // below or above every key of the node
        }
        long keyHead = head48(key, skip, keyLen - skip);
        long first = slotHead(n, 0), last = slotHead(n, count - 1);
        return (first < keyHead || first == keyHead && compareFrom(n, 0, key, skip) <= 0)
                && (keyHead < last || keyHead == last && compareFrom(n, count - 1, key, skip) >= 0);
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

    /** A slot's head: the first {@value #HEAD_BYTES} bytes of {@code s[off, off + len)}, as {@link #head} orders them. */
    private static long head48(MemorySegment s, long off, int len) {
        return (len >= 8 ? s.get(BE64, off) : head(s, off, Math.min(len, HEAD_BYTES))) >>> 16;
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

    /** {@link #ensureRoom}: nothing moved (there was room, or no way to make it). */
    static final int ROOM = 0;
    /** {@link #ensureRoom}: a leaf's slot array moved (down into its front gap). */
    static final int SLID = 1;
    /** {@link #ensureRoom}: the node was compacted. */
    static final int COMPACTED = 2;

    /**
     * Makes contiguous room for a cell of {@code bytes} (slot included): by moving a leaf's slots down
     * into its front gap if that is enough, else by compacting if that frees enough (leaving a leaf a
     * front gap if {@code floating}). Returns which it did.
     */
    static int ensureRoom(MemorySegment n, int bytes, int blockSize, MemorySegment scratch, boolean floating) {
        int contiguous = freeContiguous(n);
        if (contiguous >= bytes || freeTotal(n) < bytes) {
            return ROOM;
        }
        int room = contiguous + frontGap(n);
        if (room >= bytes) {
            moveSlots(n, SLOTS + frontGapFor(room - bytes, count(n), blockSize - SLOTS - freeTotal(n)));
            return SLID;
        }
        compact(n, blockSize, scratch, floating ? bytes : blockSize);
        return COMPACTED;
    }

    /**
     * Rewrites the cells contiguously at the end of the block, dropping garbage; a leaf's slots then start
     * above a front gap ({@link #frontGapFor}) that leaves {@code reserve} bytes contiguous for what the
     * caller adds next. The keys stay as they were, so their heads do, unless they now share a longer
     * prefix (an insert shortened it): only then is every head rewritten (reading every key was most of
     * a compaction's cost).
     */
    static void compact(MemorySegment n, int blockSize, MemorySegment scratch, int reserve) {
        int count = count(n);
        int end = blockSize;
        int base = base(n);
        boolean leaf = isLeaf(n);
        for (int i = 0; i < count; i++) {
            long s = n.get(U64, base + (long) SLOT * i);
            int c = (int) s & 0xFFFF, keyLen = Short.toUnsignedInt(n.get(U16, c));
            int len = leaf ? LEAF_CELL_HEADER + keyLen + Short.toUnsignedInt(n.get(U16, c + 2L)) : INTERIOR_CELL_HEADER + keyLen;
            end -= len;
            MemorySegment.copy(n, c, scratch, end, len);
            n.set(U64, base + (long) SLOT * i, s & ~0xFFFFL | end);
        }
        MemorySegment.copy(scratch, end, n, end, blockSize - end);
        n.set(U16, CELL_START, (short) end);
        n.set(U16, GARBAGE, (short) 0);
        if (leaf) {
            int spare = end - SLOTS - SLOT * count - reserve;
            moveSlots(n, SLOTS + frontGapFor(spare, count, blockSize - end + SLOT * count));
        }
        if (count == 0 || sharedBytes(n) != skip(n)) {
            refreshPrefix(n);
        }
    }

    /**
     * Sets the prefix to what the node's first and last keys (so all of them) share, up to 8 bytes, and
     * rewrites every head: called when a node is rebuilt, since inserts only ever shorten the prefix.
     */
    static void refreshPrefix(MemorySegment n) {
        if (count(n) == 0) {
            setPrefix(n, 0, 0);
            return;
        }
        setPrefix(n, sharedBytes(n), head(n, keyOffset(n, 0), keyLength(n, 0)));
    }

    /** Leading bytes (up to 8) that the first and last keys of non-empty node {@code n}, so all of its keys, share. */
    private static int sharedBytes(MemorySegment n) {
        int last = count(n) - 1;
        long a = head(n, keyOffset(n, 0), keyLength(n, 0)), z = head(n, keyOffset(n, last), keyLength(n, last));
        return Math.min(Math.min(keyLength(n, 0), keyLength(n, last)), Long.numberOfLeadingZeros(a ^ z) >>> 3);
    }

    /** Makes the prefix one that the key {@code s[off, off + len)} shares too, before it is inserted. */
    private static void admit(MemorySegment n, MemorySegment s, long off, int len) {
        int skip = skip(n);
        if (skip == 0) {
            return;
        }
        long prefix = prefix(n);
        int shared = Math.min(len, Long.numberOfLeadingZeros(head(s, off, len) ^ prefix) >>> 3);
        if (shared >= skip) {
            return;
        }
        // Each head grows by the d prefix bytes it now starts with and loses as many from its end: no cell is read.
        int d = skip - shared;
        long lead = (prefix << 8 * shared) >>> 16;
        for (int i = 0, count = count(n); i < count; i++) {
            long slot = n.get(U64, slotOffset(n, i));
            long head = lead | (d < HEAD_BYTES ? (slot >>> 16) >>> 8 * d : 0);
            n.set(U64, slotOffset(n, i), head << 16 | slot & 0xFFFF);
        }
        n.set(ValueLayout.JAVA_BYTE, SKIP, (byte) shared);
        n.set(U64, PREFIX, shared == 0 ? 0 : prefix & prefixMask(shared));
    }

    /** Sets the shared prefix to the first {@code skip} bytes of {@code word} and recomputes every head from its key. */
    private static void setPrefix(MemorySegment n, int skip, long word) {
        n.set(ValueLayout.JAVA_BYTE, SKIP, (byte) skip);
        n.set(U64, PREFIX, skip == 0 ? 0 : word & prefixMask(skip));
        for (int i = 0, count = count(n); i < count; i++) {
            int cell = slot(n, i);
            long key = keyOffset(n, i);
            n.set(U64, slotOffset(n, i), head48(n, key + skip, keyLength(n, i) - skip) << 16 | cell);
        }
    }

    /**
     * Takes {@code cellLen} bytes for a new cell and a slot at index {@code pos} giving it {@code head}:
     * the slots below {@code pos} move down one into the front gap if they are fewer than those above and
     * the gap has room, else the slots from {@code pos} move up one.
     */
    private static int allocateCell(MemorySegment n, int pos, int cellLen, long head) {
        int count = count(n);
        int start = cellStart(n) - cellLen;
        int base = base(n);
        if (pos < count - pos && base - SLOT >= SLOTS) {
            MemorySegment.copy(n, base, n, base - SLOT, (long) SLOT * pos);
            base -= SLOT;
            n.set(U16, BASE, (short) base);
        } else {
            MemorySegment.copy(n, base + (long) SLOT * pos, n, base + (long) SLOT * (pos + 1), (long) SLOT * (count - pos));
        }
        n.set(U64, base + (long) SLOT * pos, head << 16 | start);
        n.set(U16, COUNT, (short) (count + 1));
        n.set(U16, CELL_START, (short) start);
        return start;
    }

    /** Whether key i starts with the node's prefix (for the checker). */
    static boolean sharesPrefix(MemorySegment n, int i) {
        int skip = skip(n), len = keyLength(n, i);
        return skip <= 8 && len >= skip && (skip == 0 || (head(n, keyOffset(n, i), len) & prefixMask(skip)) == prefix(n));
    }

    /** Key i's head as computed from its bytes, to compare with {@link #slotHead} (for the checker). */
    static long computedHead(MemorySegment n, int i) {
        return headHere(n, n, keyOffset(n, i), keyLength(n, i));
    }

    /** The high {@code skip} bytes of a word (1 to 8). */
    private static long prefixMask(int skip) {
        return -1L << (64 - 8 * skip);
    }

    /** The head, under the node's current prefix, of a key that shares it. */
    private static long headHere(MemorySegment n, MemorySegment s, long off, int len) {
        int skip = skip(n);
        return head48(s, off + skip, len - skip);
    }

    /** Inserts a leaf cell at index {@code pos}; room must have been ensured. Returns the cell offset. */
    static int insertLeaf(MemorySegment n, int pos, MemorySegment key, MemorySegment value) {
        int kl = (int) key.byteSize(), vl = (int) value.byteSize();
        admit(n, key, 0, kl);
        int c = allocateCell(n, pos, LEAF_CELL_HEADER + kl + vl, headHere(n, key, 0, kl));
        n.set(U16, c, (short) kl);
        n.set(U16, c + 2L, (short) vl);
        MemorySegment.copy(key, 0, n, c + LEAF_CELL_HEADER, kl);
        MemorySegment.copy(value, 0, n, c + LEAF_CELL_HEADER + kl, vl);
        return c;
    }

    /**
     * Whether leaf entry {@code i} can become {@code key} with a value of {@code valueLength} bytes where it
     * lies: the same key and value lengths, the key sharing the node's prefix and sorting between entry
     * {@code i}'s neighbours, and past the node's last key only in the rightmost leaf, before its first only
     * in the leftmost (a leaf's range is bounded by its parent's separators, not its own keys).
     */
    static boolean replaceableInPlace(MemorySegment n, int i, MemorySegment key, int valueLength) {
        int kl = (int) key.byteSize(), skip = skip(n);
        if (keyLength(n, i) != kl || valueLength(n, i) != valueLength
                || skip > 0 && (kl < skip || (head(key, 0, kl) & prefixMask(skip)) != prefix(n))) {
            return false;
        }
        int c = compare(n, i, key);
        if (c < 0) {
            return i + 1 < count(n) ? compare(n, i + 1, key) > 0 : right(n) == 0;
        }
        return c == 0 || (i > 0 ? compare(n, i - 1, key) < 0 : left(n) == 0);
    }

    /** Makes leaf entry {@code i} {@code key} and {@code value}, {@link #replaceableInPlace} known. Returns the cell's offset. */
    static int replaceInPlace(MemorySegment n, int i, MemorySegment key, MemorySegment value) {
        int c = slot(n, i), kl = (int) key.byteSize();
        MemorySegment.copy(key, 0, n, c + LEAF_CELL_HEADER, kl);
        MemorySegment.copy(value, 0, n, c + LEAF_CELL_HEADER + kl, value.byteSize());
        n.set(U64, slotOffset(n, i), headHere(n, key, 0, kl) << 16 | c);
        return c;
    }

    /** Inserts an interior cell (separator and the child right of it) at index {@code pos}. */
    static int insertInterior(MemorySegment n, int pos, MemorySegment key, long child) {
        int kl = (int) key.byteSize();
        admit(n, key, 0, kl);
        int c = allocateCell(n, pos, INTERIOR_CELL_HEADER + kl, headHere(n, key, 0, kl));
        n.set(U16, c, (short) kl);
        n.set(U64, c + 2L, child);
        MemorySegment.copy(key, 0, n, c + INTERIOR_CELL_HEADER, kl);
        return c;
    }

    /**
     * Sets the prefix of an empty node about to be filled by appends in key order to what its first key
     * {@code a[aOff, +aLen)} and last key {@code b[bOff, +bLen)} share (so every key between them too).
     */
    static void presetPrefix(MemorySegment n, MemorySegment a, long aOff, int aLen, MemorySegment b, long bOff, int bLen) {
        long first = head(a, aOff, aLen);
        int shared = Math.min(Math.min(aLen, bLen), Long.numberOfLeadingZeros(first ^ head(b, bOff, bLen)) >>> 3);
        n.set(ValueLayout.JAVA_BYTE, SKIP, (byte) shared);
        n.set(U64, PREFIX, shared == 0 ? 0 : first & prefixMask(shared));
    }

    /**
     * Appends cell i of {@code from} as the last cell of {@code to} (same node kind), whose prefix the key
     * shares ({@link #presetPrefix}) and which has room: a node rebuilt in key order needs no slot shifts
     * and no prefix checks.
     */
    static void appendCell(MemorySegment from, int i, MemorySegment to) {
        int cell = slot(from, i);
        int kl = Short.toUnsignedInt(from.get(U16, cell));
        boolean leaf = isLeaf(from);
        int header = leaf ? LEAF_CELL_HEADER : INTERIOR_CELL_HEADER;
        int len = header + kl + (leaf ? Short.toUnsignedInt(from.get(U16, cell + 2L)) : 0);
        int start = appendSlot(to, len, from, cell + header, kl);
        MemorySegment.copy(from, cell, to, start, len);
    }

    /** As {@link #appendCell}, for a new leaf cell. */
    static void appendLeaf(MemorySegment to, MemorySegment key, MemorySegment value) {
        int kl = (int) key.byteSize(), vl = (int) value.byteSize();
        int start = appendSlot(to, LEAF_CELL_HEADER + kl + vl, key, 0, kl);
        to.set(U16, start, (short) kl);
        to.set(U16, start + 2L, (short) vl);
        MemorySegment.copy(key, 0, to, start + LEAF_CELL_HEADER, kl);
        MemorySegment.copy(value, 0, to, start + LEAF_CELL_HEADER + kl, vl);
    }

    /** Takes {@code len} cell bytes and the next slot, headed by the key {@code s[off, +kl)}; returns the cell offset. */
    private static int appendSlot(MemorySegment to, int len, MemorySegment s, long off, int kl) {
        int count = count(to);
        int start = cellStart(to) - len;
        int skip = skip(to);
        to.set(U64, slotOffset(to, count), head48(s, off + skip, kl - skip) << 16 | start);
        to.set(U16, COUNT, (short) (count + 1));
        to.set(U16, CELL_START, (short) start);
        return start;
    }

    /** Copies cell i of {@code from} to index {@code pos} of {@code to} (same node kind); room must be there. */
    static void copyCell(MemorySegment from, int i, MemorySegment to, int pos) {
        int len = cellSize(from, i) - SLOT;
        long key = keyOffset(from, i);
        int kl = keyLength(from, i);
        admit(to, from, key, kl);
        int c = allocateCell(to, pos, len, headHere(to, from, key, kl));
        MemorySegment.copy(from, slot(from, i), to, c, len);
    }

    /**
     * Removes cell i (its bytes become garbage): in a leaf that may float, the slots below i move up one
     * (the front gap grows) if they are fewer than those above; else the slots above i move down one.
     */
    static void remove(MemorySegment n, int i, boolean floating) {
        int count = count(n);
        int len = cellSize(n, i) - SLOT;
        int base = base(n);
        if (floating && isLeaf(n) && i < count - 1 - i) {
            MemorySegment.copy(n, base, n, base + SLOT, (long) SLOT * i);
            n.set(U16, BASE, (short) (base + SLOT));
        } else {
            MemorySegment.copy(n, base + (long) SLOT * (i + 1), n, base + (long) SLOT * i, (long) SLOT * (count - i - 1));
        }
        n.set(U16, COUNT, (short) (count - 1));
        n.set(U16, GARBAGE, (short) (garbage(n) + len));
    }

    /** Removes cells [from, count): what a split moved to the new right node. */
    static void truncate(MemorySegment n, int from) {
        int count = count(n);
        int dead = 0;
        for (int i = from; i < count; i++) {
            dead += cellSize(n, i) - SLOT;
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
