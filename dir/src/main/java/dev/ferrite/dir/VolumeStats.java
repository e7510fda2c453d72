package dev.ferrite.dir;

/**
 * What statfs reports: a snapshot of the striped counters.
 *
 * @param blockSize   bytes per block
 * @param totalBlocks blocks of the device the volume covers
 * @param freeBlocks     blocks free for allocation: the groups' free-space trees hold these and
 *                       {@code reservedBlocks}
 * @param inodes         inode slots in allocated chunks
 * @param freeInodes     of those, free
 * @param agCount        allocation groups
 * @param reservedBlocks free blocks the groups hold back for their refcount trees' growth, offered to no
 *                       file (at most what the trees hold)
 */
public record VolumeStats(int blockSize, long totalBlocks, long freeBlocks, long inodes, long freeInodes, int agCount,
                          long reservedBlocks) {
}
