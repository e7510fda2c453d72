/**
 * The buffer cache and the concurrent B+tree every namespace structure is built from, exported only to
 * the layer above (dir).
 *
 * <p>Face to the layer above: {@link BufferCache} (block number to {@link Buffer},
 * lock-free lookups, CLOCK reclaim with priorities, write-back back-pressure),
 * {@link Txn} (a journal transaction with the buffers it holds),
 * {@link BTree} with {@link Cursor}, {@link Keys},
 * {@link BlockAllocator} and the simple {@link BitmapAllocator},
 * {@link BufferReplayer} (journal recovery of cached blocks),
 * {@link TreeCheck}, {@link BlockHeaderFormat}.
 *
 * <p>Invariants:
 * <ul>
 *   <li>Every cached block starts with the common header (magic, checksum, block number, owner, LSN),
 *       verified on every read from the device and stamped on every write home. Nodes and tree headers
 *       are checked whole on that read too (every count, offset, length, level and pointer), so code
 *       reading cached nodes can trust their layout; damage is a {@code CorruptionException} naming the block.
 *   <li>A buffer's image changes only under its lock, held by a {@code Txn} until commit; readers never
 *       lock, they validate versions. A locked, pinned or not-yet-written-home buffer is never evicted.
 *   <li>No I/O under a node lock within an operation: blocks and frames a change needs are read and
 *       claimed before it locks anything ({@code destroy} reads each node before it locks and frees it,
 *       and locks the allocator last); allocating a block a stale reader is still loading does not wait
 *       for that read; allocator metadata is resident. A transaction running several operations still
 *       holds the earlier ones' locks while later ones read.
 *   <li>Writers lock nodes top-down and left to right, each by CAS from the version they planned with,
 *       and let go of everything when one fails: no writer waits while holding a node. A write that fits
 *       in its leaf locks only the leaf ({@code BTree}); a split or merge locks, in this order, the
 *       highest node that changes (the header first when the root does) down to the leaf, a merge
 *       partner in its left-to-right place at each level, then the leaf-level neighbour whose sibling
 *       link changes, then allocator blocks ({@code Restructure}, the pessimistic paths).
 *   <li>A newly allocated block is logged whole; a freed one is logged as freed and never written home,
 *       and not allocated again until the free is in a checkpoint ({@link BufferCache#isBusy}).
 * </ul>
 */
package dev.ferrite.btree.internal;
