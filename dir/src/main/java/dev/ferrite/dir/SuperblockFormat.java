package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.UUID;

import dev.ferrite.btree.internal.BlockHeaderFormat;

import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * The superblock: what the volume is and where everything lies. The primary copy is block
 * {@value #PRIMARY}, the mirror block {@value #MIRROR}, identical but for the block number in the header.
 * It is not journaled: it is written in place at format, at mount (clean flag cleared) and at unmount
 * (counters folded in, clean flag set), the primary written and flushed before the mirror, so a crash or
 * a torn write damages at most one copy.
 *
 * <pre>
 *   0  block header ({@link BlockHeaderFormat}): magic 'FSB1', crc32c, block number, owner 0, LSN 0
 *  32  u32 format version ({@value #VERSION})
 *  36  u32 block size
 *  40  u64 device blocks the volume was formatted for
 *  48  16 bytes volume UUID (most significant half first)
 *  64  u64 log start block
 *  72  u32 log blocks (anchor included)
 *  76  u32 allocation group count
 *  80  u32 blocks per allocation group (the last one may be shorter)
 *  84  u32 inode size in bytes
 *  88  u64 first block of allocation group 0
 *  96  u64 compatible feature flags: unknown ones are ignored
 * 104  u64 incompatible feature flags: unknown ones refuse the mount
 * 112  u32 clean: 1 once unmounted cleanly (the counters below are exact), 0 while mounted
 * 116  u32 zero
 * 120  u64 free blocks    } folded in from the striped counters at unmount; rebuilt from the
 * 128  u64 free inodes    } allocation group headers when the volume was not unmounted cleanly
 * 136  u64 inodes         }
 * 144  u64 root directory inode number
 * 152  u64 mount count
 * 160  zero to the end of the block
 * </pre>
 */
final class SuperblockFormat {
    static final int MAGIC = 0x31425346; // "FSB1"
    /** 2: B-tree nodes keep 6-byte key heads in 8-byte slots after a shared prefix (version 1 had 2-byte slots). */
    static final int VERSION = 2;
    static final long PRIMARY = 0, MIRROR = 1;
    /**
     * Incompatible feature: some regular file keeps its extents in a tree ({@link ExtentTreeFormat}). Set,
     * and never cleared, before the first tree is made, so code without extent trees (which knows no
     * incompatible feature) refuses the volume instead of reading such a file as corrupt; a volume
     * without one stays readable by it.
     */
    static final long INCOMPAT_EXTENT_TREE = 1;
    /**
     * Incompatible feature: the volume holds a table catalog ({@link Tables}), named by group 0's AGI. Set
     * before the catalog is made, so code without tables refuses the volume instead of reporting the
     * catalog and its tables as inodes without names.
     */
    static final long INCOMPAT_TABLES = 2;
    /**
     * Incompatible log feature: the log may hold block initialisation records (new inode chunks logged as
     * one record each, not block by block), which code from before them would refuse as damage in the
     * middle of the log. Set by every mount, in the superblock write that marks the volume in use, and
     * cleared by a clean unmount, whose log is empty: a cleanly unmounted volume stays readable by such
     * code, one in use or crashed is refused with {@link IncompatibleVolumeException} (XFS's log
     * incompatible features).
     */
    static final long INCOMPAT_LOG_INIT_RECORDS = 4;
    /**
     * Incompatible feature: some table value may be kept in a data extent ({@link TableValueFormat#EXTENT}).
     * Set, and never cleared, before the first such value is written, so code without them refuses the
     * volume instead of reading their keys as damaged; a volume without one keeps its medium values in the
     * overflow tree and stays readable by it.
     */
    static final long INCOMPAT_TABLE_EXTENTS = 8;
    /**
     * Incompatible feature: B-tree leaves may keep their slot array above a front gap (a slot base in the
     * leaf's header; see the B-tree node format). Set by the format, so code whose leaves start their slots
     * right after the header refuses the volume instead of reading such leaves as damaged; a volume
     * formatted without it keeps its leaves' slots there and stays readable by that code.
     */
    static final long INCOMPAT_FLOATING_SLOTS = 16;
    /**
     * Incompatible feature: a B-tree leaf cell bounds its key and value together (a value may take up to
     * 1,984 bytes less its key's length; a table keeps a 1 KiB value beside a short key in the tree). Set by
     * the format, so code that refuses a leaf value over 960 bytes as damage refuses the volume instead; a
     * volume formatted without it keeps values of its trees to 960 bytes and stays readable by that code.
     */
    static final long INCOMPAT_WIDE_CELLS = 32;
    /**
     * Incompatible log feature: the log may hold inline records (a small checkpoint's payload in its header
     * block, log record version 3), which code from before them would take for damage at the end of the log
     * and so drop a committed checkpoint. Kept like {@link #INCOMPAT_LOG_INIT_RECORDS}: set by every mount,
     * cleared by a clean unmount.
     */
    static final long INCOMPAT_LOG_INLINE_RECORDS = 64;
    /**
     * Incompatible feature: some group has a refcount tree ({@link RefcountFormat}): files may share data
     * extents ({@link Namespace#cloneRange}). Set, and never cleared, before the first clone, so code without
     * reference counts refuses the volume instead of freeing a shared extent under a file still using it; a
     * volume never cloned into stays readable by that code.
     */
    static final long INCOMPAT_REFLINK = 128;
    /**
     * Incompatible feature: a group's AGF may hold pending frees ({@link AgHeaderFormat}, offset 68 and its
     * list): extents whose owner is gone but which the free-space trees still hold as allocated, freed by a
     * drain ({@link FreeSpace#drainPending}). Set, and never cleared, before the first is appended, so code
     * that knows no such list refuses the volume instead of leaking those extents (and its checker reporting
     * them lost).
     */
    static final long INCOMPAT_PENDING_FREES = 256;
    /**
     * Incompatible feature: a table blob's file may be doomed (or pending: made so, until its commit) by its
     * inode's {@link InodeFormat#FLAG_DOOMED} under its live name ({@code l<id>}) rather than named
     * {@code d<id>} (or {@code p<id>}); the mount deletes such files. Set, and never cleared, before the
     * first flag is set, so code that knows no such flag refuses the volume
     * instead of keeping a doomed blob as live (its space lost for good).
     */
    static final long INCOMPAT_DOOMED_BLOBS = 512;
    /** The log features: what the log of a volume in use or crashed may hold, none once cleanly unmounted. */
    static final long LOG_INCOMPAT = INCOMPAT_LOG_INIT_RECORDS | INCOMPAT_LOG_INLINE_RECORDS;
    /** Incompatible features this code understands. */
    static final long KNOWN_INCOMPAT = INCOMPAT_EXTENT_TREE | INCOMPAT_TABLES | INCOMPAT_LOG_INIT_RECORDS | INCOMPAT_TABLE_EXTENTS
            | INCOMPAT_FLOATING_SLOTS | INCOMPAT_WIDE_CELLS | INCOMPAT_LOG_INLINE_RECORDS | INCOMPAT_REFLINK
            | INCOMPAT_PENDING_FREES | INCOMPAT_DOOMED_BLOBS;

    static final long VERSION_OFF = 32, BLOCK_SIZE = 36, DEVICE_BLOCKS = 40, UUID_OFF = 48, LOG_START = 64,
            LOG_BLOCKS = 72, AG_COUNT = 76, AG_BLOCKS = 80, INODE_SIZE = 84, DATA_START = 88, COMPAT = 96,
            INCOMPAT = 104, CLEAN = 112, FREE_BLOCKS = 120, FREE_INODES = 128, INODES = 136, ROOT = 144,
            MOUNTS = 152;

    private SuperblockFormat() {
    }

    /** What a superblock says, decoded. */
    record Fields(int version, Geometry geometry, UUID uuid, long compat, long incompat, boolean clean,
                  long freeBlocks, long freeInodes, long inodes, long rootInode, long mounts) {
        Fields withState(boolean clean, long freeBlocks, long freeInodes, long inodes, long mounts) {
            return new Fields(version, geometry, uuid, compat, incompat, clean, freeBlocks, freeInodes, inodes,
                    rootInode, mounts);
        }

        Fields withIncompat(long incompat) {
            return new Fields(version, geometry, uuid, compat, incompat, clean, freeBlocks, freeInodes, inodes,
                    rootInode, mounts);
        }
    }

    /** Fills {@code b} (a whole block) as the copy for {@code blockNo}, checksum included. */
    static void write(MemorySegment b, long blockNo, Fields f) {
        b.fill((byte) 0);
        BlockHeaderFormat.init(b, MAGIC, blockNo, 0);
        Geometry g = f.geometry();
        b.set(U32, VERSION_OFF, f.version());
        b.set(U32, BLOCK_SIZE, g.blockSize());
        b.set(U64, DEVICE_BLOCKS, g.deviceBlocks());
        b.set(U64, UUID_OFF, f.uuid().getMostSignificantBits());
        b.set(U64, UUID_OFF + 8, f.uuid().getLeastSignificantBits());
        b.set(U64, LOG_START, g.logStart());
        b.set(U32, LOG_BLOCKS, g.logBlocks());
        b.set(U32, AG_COUNT, g.agCount());
        b.set(U32, AG_BLOCKS, g.agBlocks());
        b.set(U32, INODE_SIZE, g.inodeSize());
        b.set(U64, DATA_START, g.dataStart());
        b.set(U64, COMPAT, f.compat());
        b.set(U64, INCOMPAT, f.incompat());
        b.set(U32, CLEAN, f.clean() ? 1 : 0);
        b.set(U64, FREE_BLOCKS, f.freeBlocks());
        b.set(U64, FREE_INODES, f.freeInodes());
        b.set(U64, INODES, f.inodes());
        b.set(U64, ROOT, f.rootInode());
        b.set(U64, MOUNTS, f.mounts());
        BlockHeaderFormat.stamp(b, 0);
    }

    static int magic(MemorySegment b) {
        return BlockHeaderFormat.magic(b);
    }

    static int version(MemorySegment b) {
        return b.get(U32, VERSION_OFF);
    }

    /**
     * Decodes a copy whose checksum, magic and block number were verified. The geometry is checked for
     * consistency by {@link Geometry}'s constructor.
     */
    static Fields read(MemorySegment b) {
        Geometry g = new Geometry(b.get(U32, BLOCK_SIZE), b.get(U64, DEVICE_BLOCKS), b.get(U64, LOG_START),
                b.get(U32, LOG_BLOCKS), b.get(U32, AG_COUNT), b.get(U32, AG_BLOCKS), b.get(U64, DATA_START));
        if (b.get(U32, INODE_SIZE) != g.inodeSize()) {
            throw new IllegalArgumentException("inode size " + b.get(U32, INODE_SIZE) + ", expected " + g.inodeSize()
                    + " for " + g.blockSize() + "-byte blocks");
        }
        return new Fields(version(b), g, new UUID(b.get(U64, UUID_OFF), b.get(U64, UUID_OFF + 8)), b.get(U64, COMPAT),
                b.get(U64, INCOMPAT), b.get(U32, CLEAN) == 1, b.get(U64, FREE_BLOCKS), b.get(U64, FREE_INODES),
                b.get(U64, INODES), b.get(U64, ROOT), b.get(U64, MOUNTS));
    }
}
