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
 *   <li>{@code dataCacheBytes}: the data page cache's budget (file blocks cached for buffered I/O and
 *       tables' medium values kept in extents, apart from the buffer cache's metadata), {@value #DEFAULT_DATA_CACHE_BYTES} bytes (64 MiB); at least
 *       16 blocks are used. Frames are allocated as first needed. A writer that finds more than half of
 *       it dirty writes back before it dirties more.
 *   <li>{@code dirtyExpireMillis}: how old a file's oldest dirty page may get before the background
 *       write-back thread writes the file back, {@value #DEFAULT_DIRTY_EXPIRE_MILLIS} ms. Buffered data
 *       not fsync'd is lost in a crash; this bounds how much.
 *   <li>{@code inodeClusterBlocks}: how many blocks of an inode chunk a miss on one of its inode blocks
 *       reads at once, {@value #DEFAULT_INODE_CLUSTER} (the whole chunk); 1 reads the block alone. A walk
 *       that stats a directory's entries meets their inodes in name-hash order, so each chunk is read once
 *       instead of block by block; a workload of scattered single lookups on a slow device may prefer 1.
 *   <li>{@code asyncCommitMillis}: how long after it returns a table commit with {@link Durability#ASYNC}
 *       becomes durable at the latest, {@value #DEFAULT_ASYNC_COMMIT_MILLIS} ms: a background thread forces
 *       the log that often while such commits wait.
 *   <li>{@code nameCacheEntries}: names the path walks' name cache ({@code NameCache}, Linux's dcache role)
 *       holds, rounded up to a power of two: one per 4 KiB of the buffer cache budget, between
 *       {@value #MIN_NAME_CACHE} and {@value #MAX_NAME_CACHE}; 72 bytes of heap each.
 * </ul>
 *
 * @param agCount    allocation groups to format with, or 0
 * @param logBlocks  blocks of the journal region to format with, or 0
 * @param cacheBytes buffer cache budget in bytes, or 0
 * @param dataCacheBytes data page cache budget in bytes, or 0
 * @param dirtyExpireMillis age in milliseconds at which dirty file pages are written back, or 0
 * @param inodeClusterBlocks blocks read together on an inode block miss, 1 to {@value Geometry#CHUNK_BLOCKS}, or 0
 * @param asyncCommitMillis most milliseconds a table commit with {@link Durability#ASYNC} stays not durable, or 0
 * @param nameCacheEntries names the path walks' name cache holds, or 0
 * @param journal    journal tuning
 * @throws InvalidArgumentException (from the constructor and every {@code with*}) for a negative count or
 *         budget, an inode cluster outside 0..{@value Geometry#CHUNK_BLOCKS}, or no journal options
 */
public record VolumeOptions(int agCount, int logBlocks, long cacheBytes, long dataCacheBytes, long dirtyExpireMillis,
                            int inodeClusterBlocks, long asyncCommitMillis, int nameCacheEntries, JournalOptions journal) {
    static final int DEFAULT_INODE_CLUSTER = Geometry.CHUNK_BLOCKS;
    static final long DEFAULT_DATA_CACHE_BYTES = 64L << 20;
    static final long DEFAULT_DIRTY_EXPIRE_MILLIS = 5000;
    static final long DEFAULT_ASYNC_COMMIT_MILLIS = 20;
    static final int MIN_NAME_CACHE = 4096, MAX_NAME_CACHE = 1 << 20;
    public static final VolumeOptions DEFAULTS = new VolumeOptions(0, 0, 0, 0, 0, 0, 0, 0, JournalOptions.defaults());

    public VolumeOptions {
        if (agCount < 0 || logBlocks < 0 || cacheBytes < 0 || dataCacheBytes < 0 || dirtyExpireMillis < 0 || asyncCommitMillis < 0
                || nameCacheEntries < 0) {
            throw new InvalidArgumentException("volume options must not be negative: " + agCount + " groups, "
                    + logBlocks + " log blocks, " + cacheBytes + " cache bytes, " + dataCacheBytes + " data cache bytes, "
                    + dirtyExpireMillis + " ms dirty expiry, " + asyncCommitMillis + " ms async commit delay, "
                    + nameCacheEntries + " name cache entries");
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
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    public VolumeOptions withLogBlocks(int logBlocks) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    public VolumeOptions withCacheBytes(long cacheBytes) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    public VolumeOptions withDataCacheBytes(long dataCacheBytes) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    public VolumeOptions withDirtyExpireMillis(long dirtyExpireMillis) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    public VolumeOptions withInodeClusterBlocks(int inodeClusterBlocks) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    public VolumeOptions withAsyncCommitMillis(long asyncCommitMillis) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    public VolumeOptions withNameCacheEntries(int nameCacheEntries) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    public VolumeOptions withJournal(JournalOptions journal) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, dataCacheBytes, dirtyExpireMillis, inodeClusterBlocks, asyncCommitMillis, nameCacheEntries, journal);
    }

    /** Blocks an inode block miss reads. */
    int effectiveInodeCluster() {
        return inodeClusterBlocks > 0 ? inodeClusterBlocks : DEFAULT_INODE_CLUSTER;
    }

    long effectiveDataCacheBytes() {
        return dataCacheBytes > 0 ? dataCacheBytes : DEFAULT_DATA_CACHE_BYTES;
    }

    long effectiveAsyncCommitMillis() {
        return asyncCommitMillis > 0 ? asyncCommitMillis : DEFAULT_ASYNC_COMMIT_MILLIS;
    }

    long effectiveDirtyExpireMillis() {
        return dirtyExpireMillis > 0 ? dirtyExpireMillis : DEFAULT_DIRTY_EXPIRE_MILLIS;
    }

    /**
     * The name cache's entries on a device of {@code deviceBytes}: as asked, else one per 4 KiB of the buffer
     * cache budget (72 bytes each: under 2% of it in heap), between {@value #MIN_NAME_CACHE} and {@value #MAX_NAME_CACHE}.
     */
    int effectiveNameCacheEntries(long deviceBytes) {
        return nameCacheEntries > 0 ? nameCacheEntries
                : (int) Math.clamp(effectiveCacheBytes(deviceBytes) / 4096, MIN_NAME_CACHE, MAX_NAME_CACHE);
    }

    /** The cache budget to use on a device of {@code deviceBytes}. */
    long effectiveCacheBytes(long deviceBytes) {
        return cacheBytes > 0 ? cacheBytes : Math.clamp(deviceBytes / 16, 16L << 20, 1L << 30);
    }
}
