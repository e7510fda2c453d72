package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A block initialisation record: the logical log item ({@link BufferCache#INIT_TYPE}) that says "blocks
 * {@code [home, home + count)} were allocated and zero-filled with a fresh header of this magic and
 * owner", logged once for a run of new blocks instead of each block (XFS's icreate item). Its home block
 * is the run's first; it is logged as a single range at offset 0 of its item.
 *
 * <pre>
 *  0  u32 block count, 1 to {@value #MAX_BLOCKS}
 *  4  u32 magic of the blocks' headers ({@link BlockHeaderFormat})
 *  8  u64 owner of the blocks
 * 16  zero to the end of the range
 * </pre>
 */
final class BlockInitFormat {
    static final int SIZE = 16;
    /** Most blocks one record initialises. */
    static final int MAX_BLOCKS = 64;
    static final long COUNT = 0, MAGIC = 4, OWNER = 8;

    private BlockInitFormat() {
    }

    static void write(MemorySegment r, int count, int magic, long owner) {
        r.set(U32, COUNT, count);
        r.set(U32, MAGIC, magic);
        r.set(U64, OWNER, owner);
    }

    /** The record's block count, or 0 if it claims none or more than {@link #MAX_BLOCKS}. */
    static int count(MemorySegment r) {
        int count = r.get(U32, COUNT);
        return count >= 1 && count <= MAX_BLOCKS ? count : 0;
    }

    static int magic(MemorySegment r) {
        return r.get(U32, MAGIC);
    }

    static long owner(MemorySegment r) {
        return r.get(U64, OWNER);
    }
}
