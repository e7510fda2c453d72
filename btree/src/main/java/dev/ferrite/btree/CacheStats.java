package dev.ferrite.btree;

/**
 * A snapshot of the buffer cache's counters.
 *
 * @param frames            blocks the budget holds
 * @param cached            frames holding a block now
 * @param hits              lookups that found the block cached
 * @param misses            lookups that read it from the device
 * @param readAhead         blocks cached by a cluster read beside the one a lookup missed
 * @param leafEvictions     buffers of priority 1 (leaves, data) evicted
 * @param interiorEvictions buffers of higher priority (interior nodes, headers) evicted
 * @param writeBacks        buffers the AIL wrote home
 * @param dirtyWaits        times a miss found no clean buffer to evict and waited for write-back
 */
public record CacheStats(int frames, int cached, long hits, long misses, long readAhead, long leafEvictions, long interiorEvictions,
                         long writeBacks, long dirtyWaits) {
    public double hitRatio() {
        long total = hits + misses;
        return total == 0 ? 0 : (double) hits / total;
    }
}
