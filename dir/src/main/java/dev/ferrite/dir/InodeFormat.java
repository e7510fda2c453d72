package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.ThreadLocalRandom;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.io.internal.OnDisk.U16;
import static dev.ferrite.io.internal.OnDisk.U8;
import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * Inode blocks and the fixed-size inode records in them. Inodes come in chunks of
 * {@value Geometry#CHUNK_BLOCKS} contiguous blocks ({@value Geometry#CHUNK_INODES} inodes) allocated from
 * the group's free space and recorded in its inode trees.
 *
 * <pre>
 * inode block
 *   0  block header ({@link BlockHeaderFormat}): magic 'FINO', owner = group number
 *  32..63 zero
 *  64  {@value Geometry#INODES_PER_BLOCK} records of (blockSize - 64) / 8 bytes (504 for 4 KiB blocks)
 *
 * inode record
 *   0  u16 mode: type (S_IFMT bits) and permissions; 0 = free slot
 *   2  u8  data fork format: 0 empty, 1 inline, 2 extent list, 3 extent tree, 4 remote (one block)
 *   3  u8  zero
 *   4  u32 uid
 *   8  u32 gid
 *  12  u32 link count
 *  16  u64 size in bytes
 *  24  u64 access time, ns since the epoch
 *  32  u64 modification time
 *  40  u64 change time
 *  48  u64 birth time
 *  56  u32 generation: bumped each time the slot is allocated (stale handles notice reuse); random
 *      at a slot's first allocation
 *  60  u32 flags: {@link #FLAG_SPECULATIVE} 1, {@link #FLAG_PREALLOC} 2, {@link #FLAG_SHARED} 4, {@link #FLAG_DOOMED} 8
 *  64  u64 blocks allocated to the inode (a tree's blocks and its reserve included)
 *  72  u16 bytes used in the inline area
 *  74..79 zero
 *  80  u64 parent directory's inode (directories only: what ".." names)
 *  88..95 zero
 *  96  inline area to the end of the record (408 bytes for 4 KiB blocks): a short directory's
 *      entries, a symlink's target, or an extent list, as the fork format says; for a tree fork, the
 *      tree's header block and reserve ({@link DirEntryFormat}, {@link ExtentTreeFormat}); for a remote fork,
 *      the u64 number of the one block holding the data (a long symlink target, {@link SymlinkFormat})
 * </pre>
 */
final class InodeFormat {
    static final int MAGIC = 0x4F4E4946; // "FINO"
    /** Header magic the blocks of a freed chunk get: "FINX". */
    static final int FREED_MAGIC = 0x584E4946;
    static final int BLOCK_HEADER = 64;
    /** What a {@link CorruptionException} in an inode block names. */
    static final String STRUCTURE = "inode block";

    static final int MODE = 0, FORK = 2, UID = 4, GID = 8, NLINK = 12, SIZE = 16, ATIME = 24, MTIME = 32,
            CTIME = 40, BTIME = 48, GENERATION = 56, FLAGS = 60, BLOCKS = 64, INLINE_USED = 72,
            PARENT = 80, INLINE = 96;

    /**
     * A regular file may have unwritten blocks past its end that a write allocated (speculative
     * preallocation, or a write's first transaction whose second never came): its last close, or its
     * first open after a crash, trims them and clears the flag.
     */
    static final int FLAG_SPECULATIVE = 1;
    /** fallocate with KEEP_SIZE asked for space past the end of the file: nothing past it is ever trimmed (XFS's PREALLOC). */
    static final int FLAG_PREALLOC = 2;
    /**
     * A regular file may map extents it shares with other files (or itself) through a clone (XFS's
     * REFLINK flag): its writes and frees look its blocks up in the groups' refcount trees. Set by the first
     * clone into or out of the file and never cleared; a file without it pays nothing for sharing.
     */
    static final int FLAG_SHARED = 4;
    /**
     * A table blob's file that no key names ({@link TableBlobs}): set when the file is made (cleared in the
     * group of the commit that names it), and in the group of the change that deleted or replaced its key,
     * so that the mount deletes it if no commit linked it or the reaper did not
     * ({@link SuperblockFormat#INCOMPAT_DOOMED_BLOBS}). Only blob files carry it.
     */
    static final int FLAG_DOOMED = 8;

    static final int S_IFMT = 0xF000, S_IFDIR = 0x4000, S_IFREG = 0x8000, S_IFLNK = 0xA000;
    /** A table ({@link Table}): its fork is a B-tree of the table's keys and values, like a directory's. Not a POSIX type. */
    static final int S_IFTABLE = 0x9000;
    static final int FORK_EMPTY = 0, FORK_INLINE = 1, FORK_EXTENTS = 2, FORK_TREE = 3, FORK_REMOTE = 4;

    private InodeFormat() {
    }

    static int recordSize(int blockSize) {
        return (blockSize - BLOCK_HEADER) / Geometry.INODES_PER_BLOCK;
    }

    /** Offset of slot {@code slot}'s record in its block. */
    static int recordOffset(int blockSize, int slot) {
        return BLOCK_HEADER + slot * recordSize(blockSize);
    }

    /** Bytes of a record's inline area. */
    static int inlineCapacity(int blockSize) {
        return recordSize(blockSize) - INLINE;
    }

    static int mode(MemorySegment b, int rec) {
        return Short.toUnsignedInt(b.get(U16, rec + MODE));
    }

    static int nlink(MemorySegment b, int rec) {
        return b.get(U32, rec + NLINK);
    }

    static int generation(MemorySegment b, int rec) {
        return b.get(U32, rec + GENERATION);
    }

    /**
     * Initializes a record for a newly allocated inode: the generation is bumped, everything else set.
     * A slot never used (in a chunk made anew, perhaps where a freed one lay) starts at a random
     * generation, so that an (inode, generation) pair kept from the old chunk does not name a new inode.
     *
     * @return how many bytes from the record's start the change spans: only they need logging
     */
    static int init(MemorySegment b, int rec, int recordSize, int mode, int uid, int gid, int nlink, long nowNanos) {
        int before = usedLength(b, rec, recordSize);
        int old = generation(b, rec);
        int generation = old != 0 ? old + 1 : ThreadLocalRandom.current().nextInt() | 1;
        zero(b, rec, recordSize);
        b.set(U16, rec + MODE, (short) mode);
        b.set(U32, rec + UID, uid);
        b.set(U32, rec + GID, gid);
        b.set(U32, rec + NLINK, nlink);
        b.set(U64, rec + ATIME, nowNanos);
        b.set(U64, rec + MTIME, nowNanos);
        b.set(U64, rec + CTIME, nowNanos);
        b.set(U64, rec + BTIME, nowNanos);
        b.set(U32, rec + GENERATION, generation);
        return Math.max(before, GENERATION + 4);
    }

    /**
     * Marks a record free, keeping its generation.
     *
     * @return how many bytes from the record's start the change spans: only they need logging
     */
    static int clear(MemorySegment b, int rec, int recordSize) {
        int before = usedLength(b, rec, recordSize);
        int generation = generation(b, rec);
        zero(b, rec, recordSize);
        b.set(U32, rec + GENERATION, generation);
        return Math.max(before, GENERATION + 4);
    }

    /** Zeroes a record (8-byte multiples) in place: a slice to fill would be an object per create and per free. */
    private static void zero(MemorySegment b, int rec, int recordSize) {
        for (int at = 0; at < recordSize; at += 8) {
            b.set(U64, rec + at, 0L);
        }
    }

    /** Bytes from the record's start to just past its last non-zero byte (records are 8-byte multiples). */
    static int usedLength(MemorySegment b, int rec, int recordSize) {
        for (int end = recordSize; end > 0; end -= 8) {
            long word = b.get(U64, rec + end - 8);
            if (word != 0) {
                return end - Long.numberOfLeadingZeros(word) / 8;
            }
        }
        return 0;
    }

    /**
     * Sets permissions (the type bits are kept), owner and times; -1 leaves a field as it is. The change
     * time becomes {@code nowNanos}. The fields changed all lie in {@code [rec + MODE, rec + BTIME)}.
     */
    static void setAttributes(MemorySegment b, int rec, int permissions, int uid, int gid, long atime, long mtime,
                              long nowNanos) {
        if (permissions >= 0) {
            b.set(U16, rec + MODE, (short) (mode(b, rec) & S_IFMT | permissions & ~S_IFMT));
        }
        if (uid >= 0) {
            b.set(U32, rec + UID, uid);
        }
        if (gid >= 0) {
            b.set(U32, rec + GID, gid);
        }
        if (atime >= 0) {
            b.set(U64, rec + ATIME, atime);
        }
        if (mtime >= 0) {
            b.set(U64, rec + MTIME, mtime);
        }
        b.set(U64, rec + CTIME, nowNanos);
    }

    /** Decodes a record (read under the block's lock or validated after). */
    static InodeStat stat(long ino, MemorySegment b, int rec) {
        return new InodeStat(ino, mode(b, rec), b.get(U32, rec + UID), b.get(U32, rec + GID), nlink(b, rec),
                b.get(U64, rec + SIZE), b.get(U64, rec + ATIME), b.get(U64, rec + MTIME), b.get(U64, rec + CTIME),
                b.get(U64, rec + BTIME), generation(b, rec), b.get(U32, rec + FLAGS), b.get(U64, rec + BLOCKS));
    }

    /** As {@link #stat}, into {@code out} (all but the inode number). */
    static void statInto(MemorySegment b, int rec, StatBuffer out) {
        out.set(0, mode(b, rec), b.get(U32, rec + UID), b.get(U32, rec + GID), nlink(b, rec), b.get(U64, rec + SIZE),
                b.get(U64, rec + ATIME), b.get(U64, rec + MTIME), b.get(U64, rec + CTIME), b.get(U64, rec + BTIME),
                generation(b, rec), b.get(U32, rec + FLAGS), b.get(U64, rec + BLOCKS));
    }

    // ------------------------------------------------------------------ namespace fields

    static int type(MemorySegment b, int rec) {
        return mode(b, rec) & S_IFMT;
    }

    static void setNlink(MemorySegment b, int rec, int nlink) {
        b.set(U32, rec + NLINK, nlink);
    }

    static long mtime(MemorySegment b, int rec) {
        return b.get(U64, rec + MTIME);
    }

    static long size(MemorySegment b, int rec) {
        return b.get(U64, rec + SIZE);
    }

    static void setSize(MemorySegment b, int rec, long size) {
        b.set(U64, rec + SIZE, size);
    }

    static int flags(MemorySegment b, int rec) {
        return b.get(U32, rec + FLAGS);
    }

    static void setFlags(MemorySegment b, int rec, int flags) {
        b.set(U32, rec + FLAGS, flags);
    }

    static long blocks(MemorySegment b, int rec) {
        return b.get(U64, rec + BLOCKS);
    }

    static void setBlocks(MemorySegment b, int rec, long blocks) {
        b.set(U64, rec + BLOCKS, blocks);
    }

    static int fork(MemorySegment b, int rec) {
        return Byte.toUnsignedInt(b.get(U8, rec + FORK));
    }

    static void setFork(MemorySegment b, int rec, int fork) {
        b.set(U8, rec + FORK, (byte) fork);
    }

    /**
     * Bytes used in the inline area; more than it holds is corruption of the block (a record is read in
     * whole blocks: {@code b} is one, and names itself in its header).
     */
    static int inlineUsed(MemorySegment b, int rec) {
        int used = Short.toUnsignedInt(b.get(U16, rec + INLINE_USED));
        int capacity = inlineCapacity((int) b.byteSize());
        if (used > capacity) {
            throw new CorruptionException(BlockHeaderFormat.blockNo(b), STRUCTURE, "record at " + rec + " uses "
                    + used + " bytes of its " + capacity + "-byte inline area");
        }
        return used;
    }

    static void setInlineUsed(MemorySegment b, int rec, int used) {
        b.set(U16, rec + INLINE_USED, (short) used);
    }

    /** The block a remote fork's data lives in. */
    static long remoteBlock(MemorySegment b, int rec) {
        return b.get(U64, rec + INLINE);
    }

    static void setRemoteBlock(MemorySegment b, int rec, long block) {
        b.set(U64, rec + INLINE, block);
    }

    static long parent(MemorySegment b, int rec) {
        return b.get(U64, rec + PARENT);
    }

    static void setParent(MemorySegment b, int rec, long parent) {
        b.set(U64, rec + PARENT, parent);
    }

    /** Sets the change time, and the modification time too if {@code modified}. */
    static void touch(MemorySegment b, int rec, long nowNanos, boolean modified) {
        if (modified) {
            b.set(U64, rec + MTIME, nowNanos);
        }
        b.set(U64, rec + CTIME, nowNanos);
    }
}
