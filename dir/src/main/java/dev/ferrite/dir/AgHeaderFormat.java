package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * The two header blocks at the start of every allocation group, each with its own lock (its buffer's):
 * the free-space header (AGF) at group block 0 and the inode header (AGI) at group block 1, so that
 * inode allocation and block allocation in one group do not serialize on one block. When a transaction
 * needs both it locks the AGI first.
 *
 * <p>Each holds a free list: a stack of group blocks set aside for the nodes of the trees it heads, so
 * that a tree split never has to allocate through the very trees being changed (XFS's AGFL). The
 * free-space trees draw on the AGF's, the inode trees on the AGI's; both lists are refilled from, and
 * spilled back to, the free-space trees between tree operations.
 *
 * <pre>
 * AGF, group block 0
 *   0  block header ({@code BlockHeaderFormat}): magic 'FAGF', owner = group number
 *  32  u32 group number
 *  36  u32 group length in blocks
 *  40  u32 group block of the by-start free-space tree's header
 *  44  u32 group block of the by-length free-space tree's header
 *  48  u64 free blocks held in the free-space trees (the free list not counted)
 *  56  u32 free-list entries
 *  60  u32 group block of the refcount tree's header ({@link RefcountFormat}); 0 until the first clone
 *      of the group's blocks (volumes from before clones have 0 here)
 *  64  u32 refcount tree blocks the group's reservation for the tree has paid for ({@link Refcounts#reserve});
 *      0 on volumes from before the reservation: the mount's walk of the tree settles the difference
 *  68  u32 pending-free entries ({@link SuperblockFormat#INCOMPAT_PENDING_FREES}); 0 on volumes from before them
 *  72..127 zero
 * 128  u32 free list, entries [0, count): group blocks, at most {@link #listCapacity} of them
 * 2048 pending-free list, entries [0, count): u32 group block, u32 length in blocks. Extents single
 *      deletes freed whose blocks the free-space trees still hold as allocated; a drain frees them in bulk
 *      ({@link FreeSpace#drainPending}). Before the list the free list could reach this far; it never holds
 *      more than a few times {@link AllocationGroup#LIST_MOST}, far below the {@link #listCapacity} left it.
 *
 * AGI, group block 1
 *   0  block header: magic 'FAGI', owner = group number
 *  32  u32 group number
 *  36  u32 zero
 *  40  u32 group block of the inode tree's header (every inode chunk)
 *  44  u32 group block of the free-inode tree's header (chunks with a free inode)
 *  48  u64 inodes (slots in allocated chunks)
 *  56  u64 free inodes
 *  64  u32 group block of the orphan tree's header (unlinked inodes still open); 0 until the first
 *  68  u32 free-list entries
 *  72  u64 group 0 only: inode number of the table catalog ({@link Tables}), 0 until it is made
 *  80  u64 group 0 only: inode number of the tables' blob directory ({@link TableBlobs}), 0 until it is made
 *  88  u64 group 0 only: inode number of the tables' overflow tree ({@link TableOverflow}), 0 until it is made
 *  96..127 zero
 * 128  u32 free list: group blocks for the inode and orphan trees
 * </pre>
 */
final class AgHeaderFormat {
    static final int AGF_MAGIC = 0x46474146; // "FAGF"
    static final int AGI_MAGIC = 0x49474146; // "FAGI"
    static final int AGF_BLOCK = 0, AGI_BLOCK = 1;
    /** First group block that is neither header. */
    static final int FIRST_FREE = 2;

    static final int AG_NUMBER = 32;
    // AGF
    static final int AG_LENGTH = 36, BNO_TREE = 40, CNT_TREE = 44, FREE_BLOCKS = 48, AGF_LIST_COUNT = 56, REFCOUNT_TREE = 60,
            REFCOUNT_PAID = 64, PENDING_COUNT = 68;
    // AGI
    static final int INO_TREE = 40, FINO_TREE = 44, INODES = 48, FREE_INODES = 56, ORPHAN_TREE = 64,
            AGI_LIST_COUNT = 68, CATALOG = 72, BLOBS = 80, OVERFLOW = 88;
    static final int LIST = 128;
    /** Offset of the AGF's pending-free list. */
    static final int PENDING = 2048;
    /** Bytes of a pending-free entry. */
    static final int PENDING_ENTRY = 8;

    private AgHeaderFormat() {
    }

    /** Free-list entries a header block holds: up to the AGF's pending-free list, in either header. */
    static int listCapacity() {
        return (PENDING - LIST) / 4;
    }

    /** Pending-free entries the AGF holds. */
    static int pendingCapacity(int blockSize) {
        return (blockSize - PENDING) / PENDING_ENTRY;
    }

    static int pendingStartOffset(int i) {
        return PENDING + PENDING_ENTRY * i;
    }

    static int pendingLengthOffset(int i) {
        return PENDING + PENDING_ENTRY * i + 4;
    }

    static int u32(MemorySegment h, int offset) {
        return h.get(U32, offset);
    }

    static void setU32(MemorySegment h, int offset, int v) {
        h.set(U32, offset, v);
    }

    static long u64(MemorySegment h, int offset) {
        return h.get(U64, offset);
    }

    static void setU64(MemorySegment h, int offset, long v) {
        h.set(U64, offset, v);
    }

    static int listEntryOffset(int i) {
        return LIST + 4 * i;
    }
}
