package dev.ferrite.dir;

/**
 * A table's figures at one moment.
 *
 * @param name          the name the table was opened by
 * @param ino           its inode number
 * @param keysEstimate  an estimate of its keys from the tree's shape ({@link Table#countEstimate()})
 * @param height        levels of its B-tree (1: a single leaf)
 * @param bytes         device space it holds: tree nodes and the blocks set aside for its growth
 * @param extentValues  its medium values kept in data extents (exact, by a scan), which {@code bytes} leaves out
 * @param extentBlocks  the device blocks those values take (each value's length rounded up to blocks)
 */
public record TableStats(String name, long ino, long keysEstimate, int height, long bytes, long extentValues, long extentBlocks) {
}
