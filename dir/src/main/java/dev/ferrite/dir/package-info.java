/**
 * dir: the namespace. So far: volumes ({@link dev.ferrite.dir.Volume} format, mount, unmount), the
 * superblock and its mirror, allocation groups with their free-space and inode B-trees, inode records
 * and the lock-free inode cache. Directories, the path API, the checker and the CLI build on these.
 *
 * <p>Invariants:
 * <ul>
 *   <li>Everything but the superblock is a journaled block of the buffer cache: it changes only inside a
 *       transaction, and after a crash the journal brings it back to a committed state.
 *   <li>Unrelated allocations share no lock: each group has its own AGF (free space) and AGI (inode)
 *       header locks, taken AGI before AGF, held to commit.
 *   <li>Every block of a group is exactly one of: header, tree node, free-list entry, free (in both
 *       free-space trees), or allocated (inode chunk; later directory and file blocks).
 *   <li>A tree's node allocation only pops its header's free list, which every operation checks holds a
 *       reserve before it starts; refills run in transactions of their own.
 *   <li>Volume-wide counts are striped counters whose sums equal the group headers' counts; the
 *       superblock carries them only across a clean unmount.
 * </ul>
 */
package dev.ferrite.dir;
