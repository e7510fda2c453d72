package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * Records of an allocation group's B-trees. Keys are big-endian so that the trees' unsigned bytewise
 * order is numeric order; values are little-endian like every other on-disk field.
 *
 * <pre>
 * by-start free-space tree  key: u32 BE start block (group-relative)     value: u32 length
 * by-length free-space tree key: u32 BE length, u32 BE start block       value: none
 * inode tree                key: u32 BE first group inode of the chunk   value: u64 free mask (bit i: slot i free)
 * free-inode tree           the same records, for the chunks with a free inode only
 * orphan tree               key: u32 BE group inode (unlinked, still open or being freed)  value: none
 * refcount tree             see {@link RefcountFormat}
 * </pre>
 *
 * Tree ids (the owner in each node's header) are {@code TREE_ID_BASE | group << 8 | kind}: distinct per
 * tree on the volume and disjoint from inode numbers, which later own directory and extent trees.
 */
final class AgTreeFormat {
    static final int BNO = 1, CNT = 2, INO = 3, FINO = 4, ORPHAN = 5, REFCOUNT = 6;
    /** Bytes of the records above: a one-number key, a by-length key, a length value, a free mask value. */
    static final int KEY32 = 4, CNT_KEY = 8, LENGTH_VALUE = 4, MASK_VALUE = 8;
    static final long TREE_ID_BASE = 1L << 62;

    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private AgTreeFormat() {
    }

    static long treeId(int ag, int kind) {
        return TREE_ID_BASE | (long) ag << 8 | kind;
    }

    /** The key of the by-start and inode trees: one group-relative number (a start block, a chunk's first inode). */
    static void key32(MemorySegment k, int v) {
        k.set(BE32, 0, v);
    }

    static int key32(MemorySegment k) {
        return k.get(BE32, 0);
    }

    static void cntKey(MemorySegment k, int length, int start) {
        k.set(BE32, 0, length);
        k.set(BE32, 4, start);
    }

    static int cntLength(MemorySegment k) {
        return k.get(BE32, 0);
    }

    static int cntStart(MemorySegment k) {
        return k.get(BE32, 4);
    }

    static void lengthValue(MemorySegment v, int length) {
        v.set(U32, 0, length);
    }

    static int length(MemorySegment v) {
        return v.get(U32, 0);
    }

    static void maskValue(MemorySegment v, long freeMask) {
        v.set(U64, 0, freeMask);
    }

    static long mask(MemorySegment v) {
        return v.get(U64, 0);
    }
}
