package dev.ferrite.dir;

/**
 * A table's figures at one moment.
 *
 * @param name          the name the table was opened by
 * @param ino           its inode number
 * @param keysEstimate  an estimate of its keys from the tree's shape ({@link Table#countEstimate()})
 * @param height        levels of its B-tree (1: a single leaf)
 * @param bytes         device space it holds: tree nodes and the blocks set aside for its growth
 */
public record TableStats(String name, long ino, long keysEstimate, int height, long bytes) {
}
