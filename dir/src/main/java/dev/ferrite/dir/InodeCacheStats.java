package dev.ferrite.dir;

/**
 * A snapshot of the in-memory inode cache's counters.
 *
 * @param capacity  unreferenced inodes it keeps before reclaiming
 * @param cached    inodes in it now, referenced or not
 * @param misses    lookups that found no live inode and made one (the only lookups that take a lock)
 * @param evictions unreferenced inodes reclaimed to stay under the capacity
 */
public record InodeCacheStats(int capacity, int cached, long misses, long evictions) {
}
