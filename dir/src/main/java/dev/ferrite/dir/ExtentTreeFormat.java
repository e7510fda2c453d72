package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A regular file's extent tree (XFS's bmap btree), which holds its extents once they outgrow the
 * record's inline list ({@link ExtentFormat}): fork format {@link InodeFormat#FORK_TREE}, a B-tree of
 * the btree module (self-describing blocks whose header owner is the inode number) and a block reserve
 * its splits pop and its merges push, in the inline area laid out as a tree directory's
 * ({@link DirEntryFormat}), so that {@link DirAllocator} and the reserve's upkeep serve both.
 *
 * <pre>
 * inline area (fork TREE, used bytes {@link DirEntryFormat#treeAreaSize})
 *   0  u64 the tree's header block
 *   8  u32 blocks in the reserve
 *  12  u32 extents in the tree (0 in a directory's area)
 *  16  u64 reserve[{@value DirEntryFormat#RESERVE_CAPACITY}]
 *
 * tree entry
 *   key    u64 BIG-endian file block (unsigned byte order is then numeric order)
 *   value  u64 the packed word of an inline extent: device block, length, unwritten ({@link ExtentFormat#pack})
 * </pre>
 * The record's blocks field counts the data blocks, the tree's blocks and the reserve (as XFS's
 * di_nblocks counts bmbt blocks). A tree that maps few extents again becomes an inline list, its own
 * blocks mapped for a moment as unwritten extents past the end of the file ({@link ExtentMap#revert}). The superblock's {@link SuperblockFormat#INCOMPAT_EXTENT_TREE} is set
 * before the first file's tree is made, so code that knows no extent trees refuses the volume.
 */
final class ExtentTreeFormat {
    static final int COUNT = 12;
    static final int KEY = 8, VALUE = 8;
    private static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private ExtentTreeFormat() {
    }

    /** Extents in the tree of the record whose inline area is at {@code area} of {@code b}. */
    static int count(MemorySegment b, int area) {
        int n = b.get(U32, area + COUNT);
        if (n < 0) {
            throw new CorruptionException(BlockHeaderFormat.blockNo(b), InodeFormat.STRUCTURE, "extent tree at " + area
                    + " counts " + Integer.toUnsignedString(n) + " extents");
        }
        return n;
    }

    static void setCount(MemorySegment b, int area, int n) {
        b.set(U32, area + COUNT, n);
    }

    static void setKey(MemorySegment k, long fileBlock) {
        k.set(BE64, 0, fileBlock);
    }

    static long key(MemorySegment k) {
        return k.get(BE64, 0);
    }

    static void setValue(MemorySegment v, long word) {
        v.set(U64, 0, word);
    }

    static long value(MemorySegment v) {
        return v.get(U64, 0);
    }
}
