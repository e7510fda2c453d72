package dev.ferrite.dir;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

import dev.ferrite.btree.internal.BTreeNodeFormat;

import static dev.ferrite.io.internal.OnDisk.U32;

/**
 * Records of a group's refcount tree (XFS's refcount btree): how many file extents map each group block
 * that more than one maps. A block no record covers is used by at most one extent (count 1 if allocated
 * to a file), so a volume that never cloned has no tree and its files pay nothing; records never overlap.
 * A record of count 0 is a <em>staging</em> extent: blocks a copy-on-write allocated and is writing, not
 * yet mapped by any file; the mount frees those a crash left (XFS's CoW staging extents).
 *
 * <pre>
 * key   (4 bytes)  0  u32 BE first group block of the record (big-endian: bytewise order is numeric order)
 * value (8 bytes)  0  u32 length in blocks, 1 to 2^31 - 1
 *                  4  u32 count: 2 or more file extents map every block of it; 0 for a staging extent
 * </pre>
 *
 * The tree is a B-tree of the btree module (self-describing nodes: magic, block number, owner
 * {@code AgTreeFormat.treeId(group, REFCOUNT)}, LSN, CRC32C), headed from the AGF's
 * {@link AgHeaderFormat#REFCOUNT_TREE} field, its nodes drawn from the AGF's free list as the free-space
 * trees' are. Values are little-endian like every other on-disk field.
 */
final class RefcountFormat {
    static final int KEY = 4, VALUE = 8;
    /** The count of a staging extent: allocated by a copy-on-write, mapped by nobody yet. */
    static final int STAGING = 0;

    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final StructLayout RECORD = MemoryLayout.structLayout(U32.withName("length"), U32.withName("count"));
    private static final VarHandle LENGTH = RECORD.varHandle(MemoryLayout.PathElement.groupElement("length"));
    private static final VarHandle COUNT = RECORD.varHandle(MemoryLayout.PathElement.groupElement("count"));

    private RefcountFormat() {
    }

    /**
     * Blocks a refcount tree may take at most (its header included) in a group of {@code records}
     * blocks past its headers, with blocks of {@code blockSize} bytes: what its group holds back for it
     * (XFS's per-group metadata reservation for its refcount btree). Records never overlap and cover a
     * block at least, so there are at most as many as blocks; leaves and interior nodes are counted half
     * full, as a split leaves them (XFS counts its minimum records a block); and a split under way takes
     * a node at each level and a new root. 4 KiB blocks: 167 records a leaf, so about 1.2% of the group.
     */
    static int maxTreeBlocks(int blockSize, int records) {
        long perLeaf = BTreeNodeFormat.leafCapacity(blockSize, KEY, VALUE) / 2;
        long perNode = BTreeNodeFormat.interiorCapacity(blockSize, KEY) / 2;
        long level = Math.ceilDiv(records, perLeaf), blocks = 1 + level;
        int height = 1;
        while (level > 1) {
            level = Math.ceilDiv(level, perNode);
            blocks += level;
            height++;
        }
        return Math.toIntExact(blocks + height + 1);
    }

    static void setKey(MemorySegment k, int groupBlock) {
        k.set(BE32, 0, groupBlock);
    }

    static int key(MemorySegment k) {
        return k.get(BE32, 0);
    }

    static void setValue(MemorySegment v, int length, int count) {
        LENGTH.set(v, 0L, length);
        COUNT.set(v, 0L, count);
    }

    static int length(MemorySegment v) {
        return (int) LENGTH.get(v, 0L);
    }

    static int count(MemorySegment v) {
        return (int) COUNT.get(v, 0L);
    }
}
