package dev.ferrite.dir;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.InvalidArgumentException;

/**
 * Where everything lies on a volume, and what inode numbers mean.
 *
 * <pre>
 * block 0                  primary superblock
 * block 1                  superblock mirror
 * [logStart, dataStart)    the journal (anchor, then the circular log)
 * [dataStart, end)         allocation groups: agCount - 1 of agBlocks blocks, the last one takes the rest
 * </pre>
 *
 * <p>An inode number is {@code ag << (agBits + 3) | agBlock << 3 | slot}: the allocation group, the block
 * within it and the slot within that block ({@value #INODES_PER_BLOCK} inodes per block), so finding an
 * inode's record needs no lookup. {@code agBits} is just wide enough for the largest group's block
 * numbers. Block 0 of every group is its free-space header, so no inode number is 0.
 *
 * @param blockSize    bytes per block
 * @param deviceBlocks blocks the volume covers
 * @param logStart     first block of the journal region
 * @param logBlocks    blocks of the journal region
 * @param agCount      allocation groups
 * @param agBlocks     blocks per allocation group except the last
 * @param dataStart    first block of allocation group 0
 */
record Geometry(int blockSize, long deviceBlocks, long logStart, int logBlocks, int agCount, int agBlocks,
                long dataStart) {
    static final int MIN_BLOCK_SIZE = 4096;
    static final int MIN_AG_BLOCKS = 512;
    static final int MAX_AG_BLOCKS = 1 << 28;
    static final int MIN_LOG_BLOCKS = 1024;
    static final int MAX_LOG_BLOCKS = 1 << 20;
    static final int INODES_PER_BLOCK = 8;
    static final int CHUNK_BLOCKS = 8;
    static final int CHUNK_INODES = CHUNK_BLOCKS * INODES_PER_BLOCK;

    /** Checks a decoded geometry for consistency (IllegalArgumentException: the caller names the block). */
    Geometry {
        if (blockSize < MIN_BLOCK_SIZE || Integer.bitCount(blockSize) != 1) {
            throw new IllegalArgumentException("block size " + blockSize);
        }
        if (logStart != SuperblockFormat.MIRROR + 1 || logBlocks < MIN_LOG_BLOCKS || logBlocks > MAX_LOG_BLOCKS
                || dataStart != logStart + logBlocks) {
            throw new IllegalArgumentException("log of " + logBlocks + " blocks at " + logStart + " with data from "
                    + dataStart);
        }
        if (agCount < 1 || agBlocks < MIN_AG_BLOCKS || (long) agBlocks * agCount > deviceBlocks - dataStart) {
            throw new IllegalArgumentException(agCount + " allocation groups of " + agBlocks + " blocks from "
                    + dataStart + " in " + deviceBlocks + " blocks");
        }
        if (deviceBlocks - dataStart - (long) agBlocks * (agCount - 1) > MAX_AG_BLOCKS) {
            throw new IllegalArgumentException("the last allocation group has more than " + MAX_AG_BLOCKS + " blocks");
        }
    }

    /**
     * The layout {@code options} ask for on {@code device}, with the defaults {@link VolumeOptions}
     * documents.
     *
     * @throws InvalidArgumentException if the device is too small or the options do not fit it
     */
    static Geometry plan(BlockDevice device, VolumeOptions options) {
        int bs = device.blockSize();
        long blocks = device.blockCount();
        if (bs < MIN_BLOCK_SIZE) {
            throw new InvalidArgumentException(device.name() + ": volumes need blocks of at least " + MIN_BLOCK_SIZE
                    + " bytes, not " + bs);
        }
        long logStart = SuperblockFormat.MIRROR + 1;
        long minimum = logStart + MIN_LOG_BLOCKS + MIN_AG_BLOCKS;
        if (blocks < minimum) {
            throw new InvalidArgumentException(device.name() + " holds " + blocks + " blocks of " + bs
                    + " bytes; a volume needs at least " + minimum);
        }
        int log = options.logBlocks() > 0 ? options.logBlocks()
                : (int) Math.min(Math.clamp(blocks / 32, MIN_LOG_BLOCKS, 262_144), (blocks - minimum) / 4 + MIN_LOG_BLOCKS);
        if (log < MIN_LOG_BLOCKS || log > MAX_LOG_BLOCKS || logStart + log + MIN_AG_BLOCKS > blocks) {
            throw new InvalidArgumentException("a log of " + log + " blocks does not fit " + device.name() + " of "
                    + blocks + " blocks: it must be " + MIN_LOG_BLOCKS + " to " + MAX_LOG_BLOCKS + " blocks and leave "
                    + MIN_AG_BLOCKS + " for data");
        }
        long dataStart = logStart + log;
        long data = blocks - dataStart;
        int fewest = (int) Math.max(1, (data + MAX_AG_BLOCKS - 1) / MAX_AG_BLOCKS);
        int count;
        if (options.agCount() > 0) {
            count = options.agCount();
            if (count < fewest || data / count < MIN_AG_BLOCKS) {
                throw new InvalidArgumentException(count + " allocation groups do not fit the " + data + " data blocks of "
                        + device.name() + ": each needs " + MIN_AG_BLOCKS + " to " + MAX_AG_BLOCKS + " blocks");
            }
        } else {
            int wanted = Math.max(4, 2 * Runtime.getRuntime().availableProcessors());
            count = (int) Math.max(fewest, Math.min(wanted, data / (4L * MIN_AG_BLOCKS)));
            count = Math.max(1, count);
        }
        return new Geometry(bs, blocks, logStart, log, count, (int) (data / count), dataStart);
    }

    /** First block of allocation group {@code ag}. */
    long agStart(int ag) {
        return dataStart + (long) ag * agBlocks;
    }

    /** The allocation group device block {@code block} (at or past the data start) lies in. */
    int agOfBlock(long block) {
        return (int) Math.min((block - dataStart) / agBlocks, agCount - 1);
    }

    /** Blocks of allocation group {@code ag}: the last one takes what the others leave. */
    int agLength(int ag) {
        return ag < agCount - 1 ? agBlocks : (int) (deviceBlocks - agStart(ag));
    }

    /** Bytes per inode record: the block after its header, in {@value #INODES_PER_BLOCK} slots. */
    int inodeSize() {
        return InodeFormat.recordSize(blockSize);
    }

    /** Bits of an AG-relative block number in an inode number. */
    int agBits() {
        return 32 - Integer.numberOfLeadingZeros(agLength(agCount - 1) - 1);
    }

    long inodeNumber(int ag, int agIno) {
        return (long) ag << (agBits() + 3) | Integer.toUnsignedLong(agIno);
    }

    int agOfInode(long ino) {
        return (int) (ino >>> (agBits() + 3));
    }

    /** The inode's number within its group: its AG-relative block and slot. */
    int agInode(long ino) {
        return (int) (ino & ((1L << (agBits() + 3)) - 1));
    }

    /** Device block holding inode {@code ino}'s record. */
    long inodeBlock(long ino) {
        return agStart(agOfInode(ino)) + (agInode(ino) >>> 3);
    }

    static int inodeSlot(long ino) {
        return (int) (ino & (INODES_PER_BLOCK - 1));
    }

    /** True if {@code block} lies in the allocation groups (past the superblocks and the log). */
    boolean isDataBlock(long block) {
        return block >= dataStart() && block < deviceBlocks();
    }

    /**
     * True if {@code ino} names a slot inside some group (not necessarily an allocated inode).
     */
    boolean isValidInode(long ino) {
        if (ino <= 0 || ino >>> (agBits() + 3) >= agCount) { // compared as a long: a huge number's group is no int
            return false;
        }
        int ag = agOfInode(ino);
        return (agInode(ino) >>> 3) < agLength(ag) && (agInode(ino) >>> 3) >= AgHeaderFormat.FIRST_FREE;
    }
}
