/**
 * dir: the namespace. So far: volumes ({@link dev.ferrite.dir.Volume} format, mount, unmount), the
 * superblock and its mirror, allocation groups with their free-space and inode B-trees, inode records
 * and the lock-free inode cache; directories and the {@link dev.ferrite.dir.Namespace} API (paths and
 * {@link dev.ferrite.dir.Handle}s), orphans and the check ({@link dev.ferrite.dir.CheckReport}). The CLI
 * builds on these.
 *
 * <p>The namespace is a façade ({@code Namespace}: the public API, and create, remove, link and rename)
 * over parts with one job each: {@code PathResolver} (paths and names), {@code InodeRecords} (inode
 * records and per-inode locks), {@code DirContents} (a directory's entries, inline or in its tree, and its
 * block reserve), {@code Creator} (the create transaction), {@code Orphans} (handles, and freeing inodes
 * without links) and {@code NamespaceChecker} (the namespace's part of the check).
 *
 * <p>Invariants:
 * <ul>
 *   <li>Everything but the superblock is a journaled block of the buffer cache: it changes only inside a
 *       transaction, and after a crash the journal brings it back to a committed state.
 *   <li>Unrelated allocations share no lock: each group has its own AGF (free space) and AGI (inode)
 *       header locks, taken AGI before AGF, held to commit.
 *   <li>Every block of a group is exactly one of: header, tree node, free-list entry, free (in both
 *       free-space trees), or allocated (inode chunk, directory tree block or reserve; later file blocks).
 *   <li>A tree's node allocation only pops its header's free list, which every operation checks holds a
 *       reserve before it starts; refills run in transactions of their own.
 *   <li>Volume-wide counts are striped counters whose sums equal the group headers' counts; the
 *       superblock carries them only across a clean unmount.
 *   <li>A directory's entries, inline or in its B-tree, are keyed by (CRC32C of the name, name); its
 *       size field counts them and its link count is 2 plus its subdirectories. Its tree changes only
 *       under its inode's lock and takes blocks from a reserve in its inode record, never from a group.
 *   <li>Namespace transactions take the rename lock (renames moving a directory only), then per-inode
 *       locks by inode number, then at most one group's AGI (and AGF), then inode blocks by block number,
 *       then directory tree nodes, in whichever of the parts above takes them (see
 *       {@link dev.ferrite.dir.Namespace}, which lists the locks each part takes).
 *   <li>An allocated inode with no links is in its group's orphan tree until it is freed.
 * </ul>
 */
package dev.ferrite.dir;
