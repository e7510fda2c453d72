/**
 * dir: the namespace. So far: volumes ({@link dev.ferrite.dir.Volume} format, mount, unmount), the
 * superblock and its mirror, allocation groups with their free-space and inode B-trees, inode records
 * and the lock-free inode cache; directories, regular files' data (direct and buffered I/O over extent maps, inline
 * or a per-inode tree) and
 * the {@link dev.ferrite.dir.Namespace} API (paths and {@link dev.ferrite.dir.Handle}s), orphans and the check
 * ({@link dev.ferrite.dir.CheckReport}). The CLI
 * builds on these.
 *
 * <p>The namespace is a façade ({@code Namespace}: the public API, and create, remove, link and rename,
 * which take the locks in the order its documentation gives: rename lock (1), per-inode locks (2), one
 * group's AGI (3), inode blocks (4), directory and file extent tree nodes (5)) over parts with one job each, each taking
 * only the locks named:
 * <ul>
 *   <li>{@code PathResolver}: paths walked and names validated in Linux's order; no lock.
 *   <li>{@code InodeRecords}: records read lock-free, locked by block number (4) in a transaction, and
 *       the per-inode locks (2) taken in ascending order.
 *   <li>{@code DirContents} (the xfs_dir2 role): a directory's entries, inline or in its tree, changed in
 *       the caller's transaction under its inode lock (its tree nodes, 5); converting and refilling its
 *       block reserve in transactions of their own, each taking the directory's lock (2), the group's AGF,
 *       then the record. The reserve's upkeep and a tree's taking down serve file extent trees too.
 *   <li>{@code NameLookup} and {@code EntryKey}: a thread's reused buffers for a lookup's key and answer and
 *       for a create's or unlink's key, value and stat, so that these allocate nothing per name; an
 *       {@code EntryKey} belongs to one operation from take to close, and one taken inside it is another.
 *   <li>{@code Creator}: the create transaction: the parent's lock (2), the AGI (3), the records (4), the
 *       parent's tree (5); a file or inline symlink in a tree directory instead enters beside the
 *       directory's other such creates ({@code Inode#writers}, as a table's single writers do), takes its
 *       name's stripe, then the AGI (3), an inode block below the parent's (4), the parent's tree (5), and
 *       the parent's record and any inode block above it (4) last.
 *   <li>{@code Orphans}: handles and the freeing of inodes without links, each step a transaction taking
 *       the orphan's lock (2), its group's AGI (3) or AGF, then its record (4); destroying an orphan's
 *       tree reads the nodes before locking the record, which nobody else can contend for an orphan.
 *   <li>{@code FileData} (the xfs_bmap role): regular files' direct reads, writes, appends and fallocate
 *       over their extents, which {@code ExtentMap} keeps inline ({@code ExtentFormat}) or in a per-inode
 *       tree ({@code ExtentTreeFormat}, the xfs_bmap_btree role); its I/O lock (shared by reads and writes,
 *       exclusive by truncate, fallocate, append and an orphan's freeing) is taken before the log
 *       reservation, then each extent change takes the file's lock (2), one group's AGF, then its record
 *       (4), then its tree's nodes (5).
 *   <li>{@code FileClone} and {@code CopyOnWrite} (the xfs_reflink role) over {@code Refcounts} (the
 *       xfs_refcount role, {@code RefcountFormat}): clones under both files' I/O locks held exclusively
 *       (the lower stripe first), then per transaction the destination's lock (2), the group's AGF (3), its
 *       record (4) and tree (5); a copy on write under the file's I/O lock held shared and its range of
 *       blocks held exclusively ({@code BlockRanges}, after the I/O lock, before the log reservation), its
 *       remap taking the file's lock (2), the AGFs of the old and new blocks' groups in group order (3), the
 *       record (4).
 *   <li>{@code BufferedIo} over {@code PageCache} and per-file {@code FilePages}: buffered reads and writes
 *       through off-heap block frames, and their write-back as {@code FileData}'s direct writes; a buffered
 *       call takes the file's I/O lock (shared), then its page lock; write-back takes the I/O lock
 *       exclusive; the cache's own lock is only taken to allocate or evict a frame and only try-locks a
 *       file's page lock. {@code TableExtentCache} keeps tables' extent values in the same frames, under
 *       64 striped page locks of its own, each held for one value's lookup and copy.
 *   <li>{@code Tables} and {@code TableCommit}: a single write of a value kept in the tree (or a delete)
 *       takes its key's stripe, then enters beside the table's other single writers with a claim on its
 *       tree's block reserve ({@code Inode#writers}), then its tree's nodes (5), and its record (4) only
 *       when a split or merge takes a reserve block, last (the nodes are locked by CAS, and a writer never
 *       waits for a node while it holds one, so this cannot deadlock). A write transaction of values kept
 *       in the tree takes each table's commit lock shared (inode order), the stripes of all its keys
 *       (ascending), then a log share ({@code GroupShares}), holds them to its group's end, and enters for
 *       each change as a single write does. A write transaction that holds its tables (a deleted range, a
 *       value kept out of line) takes each commit lock exclusively (inode order), then each inode
 *       exclusively, then the whole share. A refill or spill of a tree's reserve, such a transaction and
 *       the freeing of an orphan's tree hold the inode exclusively: its lock (2) with no single writer
 *       inside ({@code Inode#lockExclusive}); a spill's transaction then takes the AGFs of the groups its
 *       blocks lie in, in group order (3), as a copy on write's remap does, and the record (4) last.
 *   <li>{@code NamespaceChecker}: the namespace's part of the check; reads only, no lock.
 * </ul>
 * The allocation group is split the same way: {@code AllocationGroup} (headers, locking, orphans) over
 * {@code FreeSpace} (the xfs_alloc role) and {@code InodeAllocator} (the xfs_ialloc role), with
 * {@code GroupCheck} as the groups' part of the check.
 *
 * <p>Invariants:
 * <ul>
 *   <li>Everything but the superblock is a journaled block of the buffer cache: it changes only inside a
 *       transaction, and after a crash the journal brings it back to a committed state.
 *   <li>Unrelated allocations share no lock: each group has its own AGF (free space) and AGI (inode)
 *       header locks, taken AGI before AGF, held to commit.
 *   <li>Every block of a group is exactly one of: header, tree node, free-list entry, free (in both
 *       free-space trees), or allocated (inode chunk, directory or file extent tree block or reserve, long symlink
 *       target, file extent, a copy on write's staging block). A file data block is mapped by exactly as many
 *       extents as its group's refcount tree counts (1 without a record; 0 for a staging block).
 *   <li>A tree's node allocation only pops its header's free list, which every operation checks holds a
 *       reserve before it starts; refills run in transactions of their own.
 *   <li>Volume-wide counts are striped counters whose sums equal the group headers' counts; the
 *       superblock carries them only across a clean unmount.
 *   <li>A directory's entries, inline or in its B-tree, are keyed by (CRC32C of the name, name); its
 *       size field counts them and its link count is 2 plus its subdirectories. Its tree changes only
 *       under its inode's lock, or by creates entered with claims its reserve covers, and takes blocks
 *       from a reserve in its inode record, never from a group.
 *   <li>Namespace transactions take the rename lock (renames moving a directory only), then per-inode
 *       locks by inode number, then at most one group's AGI (and AGF), then inode blocks by block number,
 *       then directory tree nodes, in whichever of the parts above takes them (see
 *       {@link dev.ferrite.dir.Namespace}, which lists the locks each part takes).
 *   <li>An allocated inode with no links is in its group's orphan tree until it is freed.
 * </ul>
 */
package dev.ferrite.dir;
