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
 * </ul>
 *
 * @param agCount    allocation groups to format with, or 0
 * @param logBlocks  blocks of the journal region to format with, or 0
 * @param cacheBytes buffer cache budget in bytes, or 0
 * @param journal    journal tuning
 */
public record VolumeOptions(int agCount, int logBlocks, long cacheBytes, JournalOptions journal) {
    public static final VolumeOptions DEFAULTS = new VolumeOptions(0, 0, 0, JournalOptions.defaults());

    public VolumeOptions {
        if (agCount < 0 || logBlocks < 0 || cacheBytes < 0) {
            throw new InvalidArgumentException("volume options must not be negative: " + agCount + " groups, "
                    + logBlocks + " log blocks, " + cacheBytes + " cache bytes");
        }
        if (journal == null) {
            throw new InvalidArgumentException("journal options are required");
        }
    }

    public static VolumeOptions defaults() {
        return DEFAULTS;
    }

    public VolumeOptions withAgCount(int agCount) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, journal);
    }

    public VolumeOptions withLogBlocks(int logBlocks) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, journal);
    }

    public VolumeOptions withCacheBytes(long cacheBytes) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, journal);
    }

    public VolumeOptions withJournal(JournalOptions journal) {
        return new VolumeOptions(agCount, logBlocks, cacheBytes, journal);
    }

    /** The cache budget to use on a device of {@code deviceBytes}. */
    long effectiveCacheBytes(long deviceBytes) {
        return cacheBytes > 0 ? cacheBytes : Math.clamp(deviceBytes / 16, 16L << 20, 1L << 30);
    }
}
