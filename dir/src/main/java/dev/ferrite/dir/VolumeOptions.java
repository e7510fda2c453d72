package dev.ferrite.dir;

import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.journal.JournalOptions;

/**
 * How to format and mount a volume. Zero means "choose":
 * <ul>
 *   <li>{@code agCount}: at format, {@code max(4, 2 × CPUs)} allocation groups, fewer on a device too small
 *       to give each at least 2048 blocks, more if a group would exceed 2<sup>28</sup> blocks. Ignored when
 *       mounting (the superblock says).
 *   <li>{@code logBlocks}: at format, 1/32 of the device, between 1024 blocks (4 MiB, also the
 *       least a log may have) and 262144 (1 GiB). Ignored when mounting.
 *   <li>{@code cacheBytes}: the buffer cache budget, 1/16 of the device between 16 MiB and 1 GiB.
 *   <li>{@code inodeClusterBlocks}: how many blocks of an inode chunk a miss on one of its inode blocks
 *       reads at once, {@value #DEFAULT_INODE_CLUSTER} (the whole chunk); 1 reads the block alone. A walk
 *       that stats a directory's entries meets their inodes in name-hash order, so each chunk is read once
 *       instead of block by block; a workload of scattered single lookups on a slow device may prefer 1.
 * </ul>
 *
 * @param agCount    allocation groups to format with, or 0
 * @param logBlocks  blocks of the journal region to format with, or 0
 * @param cacheBytes buffer cache budget in bytes, or 0
 * @param inodeClusterBlocks blocks read together on an inode block miss, 1 to {@value Geometry#CHUNK_BLOCKS}, or 0
 * @param journal    journal tuning
 * @throws InvalidArgumentException (from the constructor and every {@code with*}) for a negative count or
 *         budget, an inode cluster outside 0..{@value Geometry#CHUNK_BLOCKS}, or no journal options
 */
public record VolumeOptions(int agCount, int logBlocks, long cacheBytes, int inodeClusterBlocks, JournalOptions journal) {
    static final int DEFAULT_INODE_CLUSTER = Geometry.CHUNK_BLOCKS;
    public static final VolumeOptions DEFAULTS = new VolumeOptions(0, 0, 0, 0, JournalOptions.defaults());

    public VolumeOptions {
        if (agCount < 0 || logBlocks < 0 || cacheBytes < 0) {
            throw new InvalidArgumentException("volume options must not be negative: " + agCount + " groups, "
                    + logBlocks + " log blocks, " + cacheBytes + " cache bytes");
        }
        if (inodeClusterBlocks < 0 || inodeClusterBlocks > Geometry.CHUNK_BLOCKS) {
            throw new InvalidArgumentException("an inode cluster of " + inodeClusterBlocks + " blocks; it must be 1 to "
                    + Geometry.CHUNK_BLOCKS + " (0: " + DEFAULT_INODE_CLUSTER + ")");
        }
        if (journal == null) {
            throw new InvalidArgumentException("journal options are required");
        }
    }

    public static VolumeOptions defaults() {
        return DEFAULTS;
    }

    public VolumeOptions withAgCount(int agCount) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, inodeClusterBlocks, journal);
    }

    public VolumeOptions withLogBlocks(int logBlocks) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, inodeClusterBlocks, journal);
    }

    public VolumeOptions withCacheBytes(long cacheBytes) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, inodeClusterBlocks, journal);
    }

    public VolumeOptions withInodeClusterBlocks(int inodeClusterBlocks) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, inodeClusterBlocks, journal);
    }

    public VolumeOptions withJournal(JournalOptions journal) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, inodeClusterBlocks, journal);
    }

    /** Blocks an inode block miss reads. */
    int effectiveInodeCluster() {
        return inodeClusterBlocks > 0 ? inodeClusterBlocks : DEFAULT_INODE_CLUSTER;
    }

    /** The cache budget to use on a device of {@code deviceBytes}. */
    long effectiveCacheBytes(long deviceBytes) {
        return cacheBytes > 0 ? cacheBytes : Math.clamp(deviceBytes / 16, 16L << 20, 1L << 30);
    }
}
