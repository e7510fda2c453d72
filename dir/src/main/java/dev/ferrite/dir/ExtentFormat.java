package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A regular file's extent list, in its inode record's inline area (fork format
 * {@link InodeFormat#FORK_EXTENTS}; the area's used bytes say how many extents there are). Extents are
 * sorted by file block and do not overlap; each maps {@code length} file blocks from {@code file block}
 * onto as many contiguous device blocks from {@code device block}, all in one allocation group.
 *
 * <pre>
 * extent (16 bytes; inline area of 408 bytes: 25 extents)
 *   0  u64 file block                 (below {@link #MAX_FILE_BLOCKS})
 *   8  u64 bits  0..42 device block   (43 bits: 32 PiB of 4 KiB blocks)
 *          bits 43..62 length          (20 bits: 1 to {@link #MAX_LENGTH} blocks, just under 4 GiB)
 *          bit  63     unwritten       (allocated, reads as zeros until the data written there is durable)
 * </pre>
 * Two words instead of the 24 bytes an unpacked u64/u64/u32/u32 would take: 25 extents fit inline
 * instead of 17, and the bits given up are ones no volume can use (a group holds at most 2^28 blocks,
 * so longer extents would cross groups anyway; a device of 2^43 blocks is far past any group count).
 */
final class ExtentFormat {
    static final int SIZE = 16;
    static final int FILE_BLOCK = 0, PACKED = 8;
    private static final int DEVICE_BITS = 43, LENGTH_BITS = 20;
    private static final long DEVICE_MASK = (1L << DEVICE_BITS) - 1;
    static final int MAX_LENGTH = (1 << LENGTH_BITS) - 1;
    private static final long UNWRITTEN = 1L << 63;
    /** File blocks a file may map: the largest multiple of 4 KiB below 2^63 bytes, in 4 KiB blocks. */
    static final long MAX_FILE_BLOCKS = Long.MAX_VALUE / 4096;
    /** What {@link #writtenBlock} says of a file whose extents are in its tree ({@link ExtentTreeFormat}): look there. */
    static final long IN_TREE = -2;

    private ExtentFormat() {
    }

    /** Extents a record's inline area of {@code inlineCapacity} bytes holds. */
    static int capacity(int inlineCapacity) {
        return inlineCapacity / SIZE;
    }

    /** Offset of extent {@code i} of the list at {@code area}. */
    private static int at(int area, int i) {
        return area + i * SIZE;
    }

    static long fileBlock(MemorySegment b, int area, int i) {
        return b.get(U64, at(area, i) + FILE_BLOCK);
    }

    static long deviceBlock(MemorySegment b, int area, int i) {
        return b.get(U64, at(area, i) + PACKED) & DEVICE_MASK;
    }

    static int length(MemorySegment b, int area, int i) {
        return (int) (b.get(U64, at(area, i) + PACKED) >>> DEVICE_BITS) & MAX_LENGTH;
    }

    static boolean unwritten(MemorySegment b, int area, int i) {
        return b.get(U64, at(area, i) + PACKED) < 0;
    }

    static void set(MemorySegment b, int area, int i, long fileBlock, long deviceBlock, int length, boolean unwritten) {
        b.set(U64, at(area, i) + FILE_BLOCK, fileBlock);
        b.set(U64, at(area, i) + PACKED, pack(fileBlock, deviceBlock, length, unwritten));
    }

    /** The packed word (device block, length, unwritten) of an extent at {@code fileBlock}, checked encodable. */
    static long pack(long fileBlock, long deviceBlock, int length, boolean unwritten) {
        if (fileBlock < 0 || fileBlock + length > MAX_FILE_BLOCKS || (deviceBlock & ~DEVICE_MASK) != 0 || length < 1
                || length > MAX_LENGTH) {
            throw new IllegalArgumentException("extent [" + fileBlock + ", +" + length + ") at device block " + deviceBlock
                    + " cannot be encoded");
        }
        return deviceBlock | (long) length << DEVICE_BITS | (unwritten ? UNWRITTEN : 0);
    }

    static long packedDevice(long word) {
        return word & DEVICE_MASK;
    }

    static int packedLength(long word) {
        return (int) (word >>> DEVICE_BITS) & MAX_LENGTH;
    }

    static boolean packedUnwritten(long word) {
        return word < 0;
    }

    /**
     * Null if the extent {@code [fb, +len)} at device block {@code dev} is one {@link #decode} accepts
     * after an extent ending at {@code end}: of a valid length, not before {@code end}, inside one group's
     * data blocks; else what is wrong with it.
     */
    static String problem(long fb, long dev, int len, long end, Geometry g) {
        if (len < 1 || fb < end || fb > MAX_FILE_BLOCKS - len) {
            return "[" + Long.toUnsignedString(fb) + ", +" + len + ") is empty, overlaps the one before, or ends past the largest file";
        }
        if (!g.isDataBlock(dev) || !g.isDataBlock(dev + len - 1) || g.agOfBlock(dev) != g.agOfBlock(dev + len - 1)) {
            return "[" + fb + ", +" + len + ") maps to device blocks [" + dev + ", +" + len + "), not inside one allocation group";
        }
        return null;
    }

    /**
     * The extent list of the record at {@code rec} of inode block {@code b}, checked: a whole number of
     * extents within the area's capacity, each of a valid length, inside one group's data blocks, sorted
     * and not overlapping. Anything else is corruption of the block.
     */
    static ExtentList decode(MemorySegment b, int rec, Geometry g) {
        ExtentList list = new ExtentList(capacity(InodeFormat.inlineCapacity((int) b.byteSize())));
        decodeInto(b, rec, g, list);
        return list;
    }

    /** {@link #decode} into {@code list}, cleared first, with the same checks, for a caller that reuses one. */
    static void decodeInto(MemorySegment b, int rec, Geometry g, ExtentList list) {
        int fork = InodeFormat.fork(b, rec);
        int used = InodeFormat.inlineUsed(b, rec);
        if (fork != InodeFormat.FORK_EXTENTS && (fork != InodeFormat.FORK_EMPTY || used != 0)) {
            throw corrupt(b, rec, "a regular file with data fork format " + fork + " using " + used + " inline bytes");
        }
        if (used % SIZE != 0) {
            throw corrupt(b, rec, "uses " + used + " bytes of its extent list, not a multiple of " + SIZE);
        }
        int area = rec + InodeFormat.INLINE;
        int n = used / SIZE;
        list.clear();
        long end = 0;
        for (int i = 0; i < n; i++) {
            long fb = fileBlock(b, area, i), dev = deviceBlock(b, area, i);
            int len = length(b, area, i);
            String problem = problem(fb, dev, len, end, g);
            if (problem != null) {
                throw corrupt(b, rec, "extent " + i + " " + problem);
            }
            list.add(fb, dev, len, unwritten(b, area, i));
            end = fb + len;
        }
    }

    /**
     * The in-place fast path's lookup, with no list decoded: the device block of file block {@code first}
     * if the regular file whose record is at {@code rec} has a written extent holding all of
     * {@code [first, end)} and its size reaches {@code end}; else -1 (also for anything that is not such
     * a file, or a file {@link InodeFormat#FLAG_SHARED flagged} as sharing blocks: the caller's full path
     * sorts that out), or {@link #IN_TREE} for a file whose extents are in its tree. The extent found is checked as {@link #decode}
     * checks it, so a hostile image cannot aim the write outside one group's data blocks.
     */
    static long writtenBlock(MemorySegment b, int rec, long first, long end, Geometry g) {
        if ((InodeFormat.mode(b, rec) & InodeFormat.S_IFMT) != InodeFormat.S_IFREG
                || Long.compareUnsigned(InodeFormat.size(b, rec), end * g.blockSize()) < 0
                || (InodeFormat.flags(b, rec) & InodeFormat.FLAG_SHARED) != 0) { // its blocks may be shared: no write in place unlooked
            return -1;
        }
        int fork = InodeFormat.fork(b, rec);
        if (fork != InodeFormat.FORK_EXTENTS) {
            return fork == InodeFormat.FORK_TREE ? IN_TREE : -1;
        }
        int area = rec + InodeFormat.INLINE;
        int lo = 0, hi = Math.min(InodeFormat.inlineUsed(b, rec) / SIZE, capacity(InodeFormat.inlineCapacity((int) b.byteSize()))) - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            long fb = fileBlock(b, area, mid);
            int len = length(b, area, mid);
            if (fb + len <= first) {
                lo = mid + 1;
            } else if (fb > first) {
                hi = mid - 1;
            } else {
                return mappedBlock(fb, b.get(U64, at(area, mid) + PACKED), first, end, false, g);
            }
        }
        return -1;
    }

    /**
     * The device block of file block {@code first} if the extent at file block {@code fb} with packed word
     * {@code word}, found holding {@code first}, is {@code unwritten} (or written, if false), holds
     * {@code [first, end)} and lies inside one group's data blocks; else -1.
     */
    static long mappedBlock(long fb, long word, long first, long end, boolean unwritten, Geometry g) {
        long dev = packedDevice(word);
        int len = packedLength(word);
        if (packedUnwritten(word) != unwritten || fb + len < end || len < 1 || !g.isDataBlock(dev) || !g.isDataBlock(dev + len - 1)
                || g.agOfBlock(dev) != g.agOfBlock(dev + len - 1)) {
            return -1;
        }
        return dev + (first - fb);
    }

    private static CorruptionException corrupt(MemorySegment b, int rec, String detail) {
        return new CorruptionException(BlockHeaderFormat.blockNo(b), InodeFormat.STRUCTURE, "record at " + rec + ": " + detail);
    }

    /**
     * Writes {@code list} into the record at {@code rec} (fork, used bytes, extents; the rest of what the
     * area used before zeroed).
     *
     * @return bytes from the record's start the change spans
     */
    static int encode(MemorySegment b, int rec, ExtentList list) {
        int area = rec + InodeFormat.INLINE;
        int before = InodeFormat.fork(b, rec) == InodeFormat.FORK_EXTENTS ? InodeFormat.inlineUsed(b, rec) : 0;
        int n = list.count();
        if (n > capacity(InodeFormat.inlineCapacity((int) b.byteSize()))) {
            throw new IllegalStateException(n + " extents do not fit inline");
        }
        for (int i = 0; i < n; i++) {
            set(b, area, i, list.fileBlock(i), list.deviceBlock(i), list.length(i), list.unwritten(i));
        }
        int used = n * SIZE;
        if (before > used) {
            b.asSlice(area + used, before - used).fill((byte) 0);
        }
        InodeFormat.setInlineUsed(b, rec, used);
        InodeFormat.setFork(b, rec, n == 0 ? InodeFormat.FORK_EMPTY : InodeFormat.FORK_EXTENTS);
        return InodeFormat.INLINE + Math.max(before, used);
    }
}
