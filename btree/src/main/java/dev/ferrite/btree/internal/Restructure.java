package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.btree.internal.BTree.Mode;
import dev.ferrite.btree.internal.BTree.Path;
import dev.ferrite.btree.internal.BTree.Seen;

import static dev.ferrite.btree.internal.BTree.INTERIOR_PRIORITY;
import static dev.ferrite.btree.internal.BTree.MAX_DEPTH;
import static dev.ferrite.btree.internal.BTree.atLevel;
import static dev.ferrite.btree.internal.BTree.backtrack;
import static dev.ferrite.btree.internal.BTree.logRemove;
import static dev.ferrite.btree.internal.BTree.logSlots;
import static dev.ferrite.btree.internal.BTree.logUsed;
import static dev.ferrite.btree.internal.BTree.logUsedChanged;
import static dev.ferrite.btree.internal.BTree.scratch;
import static dev.ferrite.btree.internal.BTreeNodeFormat.cellSize;
import static dev.ferrite.btree.internal.BTreeNodeFormat.childAt;
import static dev.ferrite.btree.internal.BTreeNodeFormat.count;
import static dev.ferrite.btree.internal.BTreeNodeFormat.freeTotal;
import static dev.ferrite.btree.internal.BTreeNodeFormat.interiorCellSize;
import static dev.ferrite.btree.internal.BTreeNodeFormat.isLeaf;
import static dev.ferrite.btree.internal.BTreeNodeFormat.keyLength;
import static dev.ferrite.btree.internal.BTreeNodeFormat.leafCellSize;
import static dev.ferrite.btree.internal.BTreeNodeFormat.search;
import static dev.ferrite.btree.internal.BTreeNodeFormat.used;

/**
 * The pessimistic paths of one {@link BTree}: a put whose leaf must split and a delete whose leaf would
 * underflow, with the splits, merges, borrows, root growth and root collapse they cause. {@link BTree}
 * calls in here only when its optimistic write found the leaf too full or too empty, after letting go
 * of the leaf it locked for that write (a leaf the transaction held before stays held).
 *
 * <p>Each attempt plans on optimistic reads (the path, the siblings that merge, the neighbours whose
 * links change), claims cache frames and allocates nothing yet, then locks exactly the planned nodes by
 * CAS from the versions it planned with: top-down from the highest node that changes (the header when the
 * root splits or collapses), left to right within a level (a merge partner before or after the path node,
 * whichever is left), the leaf-level neighbour whose sibling link changes last. A failed CAS lets go of
 * every lock this attempt took ({@link Locks}) and plans again after a backoff, so no writer ever waits
 * for a node while holding another. The changes then run bottom up in the caller's transaction.
 */
final class Restructure {
    private final BTree tree;
    private final BufferCache cache;
    private final BlockAllocator allocator;
    private final long id;
    private final int blockSize;
    /** Below this many bytes used, an interior node merges with a sibling if the two fit in one. */
    private final int mergeThreshold;
    /** The same for a leaf ({@link BTree#LEAF_MERGE_FRACTION}). */
    private final int leafMergeThreshold;

    Restructure(BTree tree, BufferCache cache, BlockAllocator allocator, long id, int blockSize, int mergeThreshold, int leafMergeThreshold) {
        this.tree = tree;
        this.cache = cache;
        this.allocator = allocator;
        this.id = id;
        this.blockSize = blockSize;
        this.mergeThreshold = mergeThreshold;
        this.leafMergeThreshold = leafMergeThreshold;
    }

    /**
     * A split's plan of a node's cells, each one's source (an index into the scratch copy, or -1 for the
     * new cell) and size: per thread, grown as needed (two arrays a split were most of a split's garbage but
     * its new buffer). Used only inside {@link #splitLeaf} or {@link #splitInterior}, which call nothing that
     * splits another node, so no two uses on a thread overlap.
     */
    private static final class CellPlan {
        private static final ThreadLocal<CellPlan> CURRENT = ThreadLocal.withInitial(CellPlan::new);

        int[] src = new int[0];
        int[] size = new int[0];

        /** The thread's plan, with room for {@code entries} cells (its arrays may be longer). */
        static CellPlan of(int entries) {
            CellPlan p = CURRENT.get();
            if (p.src.length < entries) {
                p.src = new int[entries];
                p.size = new int[entries];
            }
            return p;
        }
    }

    /** Locks taken by one attempt of a pessimistic change, so that a failed attempt lets all of them go. */
    private static final class Locks {
        final List<Buffer> taken = new ArrayList<>();

        boolean take(Txn txn, Buffer b, long v) {
            if (v == Buffer.HELD || txn.holds(b)) {
                return true;
            }
            if (!txn.tryUpgrade(b, v)) {
                return false;
            }
            taken.add(b);
            return true;
        }

        void releaseAll(Txn txn) {
            for (Buffer b : taken) {
                txn.releaseUnchanged(b);
            }
            taken.clear();
        }
    }

    /**
     * True if no node of the path, nor any of {@code seen}, changed since it was read: only then is an
     * exception met while planning on them real. Planning reads ancestors and siblings, not just the
     * leaf, so the leaf still validating proves nothing about a torn read of its parent.
     */
    private static boolean unchanged(Path p, Seen... seen) {
        for (int d = 0; d <= p.depth; d++) {
            if (!p.node[d].validate(p.version[d])) {
                return false;
            }
        }
        for (Seen s : seen) {
            if (s != null && !s.buffer().validate(s.version())) {
                return false;
            }
        }
        return true;
    }

    private Seen see(long block, Txn txn) {
        for (;;) {
            Buffer b = tree.node(block);
            long v = b.readVersion(txn);
            if (v != -1) {
                return new Seen(b, v);
            }
        }
    }

    /**
     * {@link #see} of {@code block}, read as child hint index {@code idx} of {@code parent} (which has
     * {@code fanout} children), through the parent's hints ({@link BTree#child}) as a descent reads it:
     * a merge reads its partner and the leaf beyond the pair this way, where the cache's hash table cost
     * each about as much as a whole level of the descent.
     */
    private Seen seeChild(Buffer parent, int idx, long block, int fanout, Txn txn) {
        for (;;) {
            Buffer b = tree.child(parent, idx, block, fanout);
            long v = b.readVersion(txn);
            if (v != -1) {
                return new Seen(b, v);
            }
        }
    }

    /** Longest key in a node (for the size of the separator its split may push up). Optimistic. */
    private static int longestKey(MemorySegment n) {
        int max = 0;
        for (int i = 0, c = count(n); i < c; i++) {
            max = Math.max(max, keyLength(n, i));
        }
        return max;
    }

    /**
     * Insert that needs the leaf split: plan which levels split, read the right neighbour, claim frames,
     * lock from the highest changing node down (header if the root splits), allocate, split bottom up.
     */
    boolean splitInsert(Txn txn, Path p, MemorySegment key, MemorySegment value, Mode mode) {
        int kl = (int) key.byteSize(), vl = (int) value.byteSize();
        Locks locks = new Locks();
        int[] frames = new int[MAX_DEPTH + 2];
        int framesHeld = 0;
        try {
            for (int attempt = 0; ; attempt++) {
                if (attempt > 0) {
                    backoff(attempt);
                    p.reset();
                }
                // the first attempt plans on the path the caller's write descended (the same key), which
                // descend resumes from its deepest node still unchanged: a split costs one descent, not
                // two; a path node changed since fails its lock, and the next attempt descends afresh
                tree.descend(p, key, txn);
                int leafD = p.depth;
                // Plan, optimistically: the leaf splits; each ancestor splits if it cannot take the
                // separator its child may push up (bounded by the child's longest key).
                int top;
                Seen right;
                boolean replace, append;
                try {
                    MemorySegment leafData = p.leaf().data();
                    int i = search(leafData, key);
                    replace = i >= 0;
                    // the tree's last leaf (no right sibling) taking a key above all of its own: an append
                    append = !replace && -i - 1 == count(leafData) && BTreeNodeFormat.right(leafData) == 0;
                    int room = freeTotal(leafData) + (replace ? cellSize(leafData, i) : 0);
                    if (room >= leafCellSize(kl, vl) || replace && mode == Mode.IF_ABSENT) {
                        if (!p.leaf().validate(p.leafVersion())) {
                            continue;
                        }
                        // the leaf changed meanwhile (room made, or the key inserted): the simple path decides
                        return tree.write(txn, key, value, mode, null, null) < 0;
                    }
                    int sepBound = Math.max(kl, longestKey(leafData));
                    top = leafD - 1;
                    while (top >= 1) {
                        MemorySegment n = p.node[top].data();
                        if (freeTotal(n) >= interiorCellSize(sepBound)) {
                            break;
                        }
                        sepBound = Math.max(sepBound, longestKey(n));
                        top--;
                    }
                    long rightBlock = BTreeNodeFormat.right(leafData);
                    if (backtrack(p, leafD) != leafD) {
                        continue;
                    }
                    right = rightBlock == 0 ? null : see(rightBlock, txn);
                    if (right != null && !atLevel(right.buffer(), right.version(), 0, p.leaf(), p.leafVersion())) {
                        continue;
                    }
                } catch (RuntimeException e) {
                    if (unchanged(p)) {
                        throw e;
                    }
                    continue;
                }
                int newNodes = leafD - top + (top == 0 ? 1 : 0);
                while (framesHeld < newNodes) {
                    frames[framesHeld++] = cache.reserveFrame();
                }
                // Lock top-down from the highest changing node (the header when the root splits), then
                // the leaf's right neighbour: level by level, left to right.
                boolean ok = true;
                for (int d = top; d <= leafD && ok; d++) {
                    ok = locks.take(txn, p.node[d], p.version[d]);
                }
                if (ok && right != null) {
                    ok = locks.take(txn, right.buffer(), right.version());
                }
                if (!ok) {
                    locks.releaseAll(txn);
                    continue;
                }
                long[] blocks = new long[newNodes];
                for (int k = 0; k < newNodes; k++) {
                    blocks[k] = allocator.allocate(txn);
                }
                int used = split(txn, p, right == null ? null : right.buffer(), key, value, replace, append, blocks, frames);
                // The plan bounds separators by the longest key; shorter ones may stop the split lower.
                for (int k = used; k < newNodes; k++) {
                    allocator.free(txn, blocks[k]);
                }
                framesHeld -= used;
                System.arraycopy(frames, used, frames, 0, framesHeld);
                return !replace;
            }
        } finally {
            for (int k = 0; k < framesHeld; k++) {
                cache.unreserveFrame(frames[k]);
            }
        }
    }

    private static void backoff(int attempt) {
        if (attempt < 4) {
            Thread.onSpinWait();
        } else if (attempt < 16) {
            Thread.yield();
        } else {
            LockSupport.parkNanos(Math.min(1_000_000L, 1_000L << Math.min(attempt - 16, 10)));
        }
    }

    /**
     * With the planned nodes of the path locked (the header too if the root may split) and the right
     * neighbour locked: inserts into the leaf, splitting it and each full ancestor, bottom up, until an
     * ancestor takes the separator. Returns how many of the new blocks (and frames) it used.
     *
     * <p>An {@code append} (the key goes past the end of the tree's last leaf) splits at the right edge,
     * as SQLite's and PostgreSQL's rightmost splits do: the full nodes keep their entries and the new ones
     * start nearly empty, so keys inserted in ascending order (rising ids, timestamps, a medium value's
     * chunks) leave nodes full behind them rather than half full. Only the tree's rightmost path splits
     * so, which random inserts reach no more often than any other, so they keep the even splits.
     */
    private int split(Txn txn, Path p, Buffer right, MemorySegment key, MemorySegment value,
                      boolean replace, boolean append, long[] blocks, int[] frames) {
        int leafD = p.depth;
        int used = 0;
        MemorySegment scratch = scratch(blockSize);
        // leaf
        Buffer leaf = p.node[leafD];
        Buffer newLeaf;
        MemorySegment sep;
        if (append) {
            newLeaf = cache.createEmpty(txn, blocks[used], BTreeNodeFormat.MAGIC, id, frames[used]);
            sep = appendLeaf(txn, leaf, newLeaf, key, value);
        } else {
            newLeaf = cache.createEmpty(txn, blocks[used], BTreeNodeFormat.MAGIC, id, frames[used]);
            sep = splitLeaf(leaf, newLeaf, right, key, value, replace, scratch);
            logUsedChanged(txn, leaf, scratch); // scratch: the leaf as it was
            logUsed(txn, newLeaf);
            if (right != null) {
                txn.log(right, BTreeNodeFormat.LEFT, 8);
            }
        }
        used++;
        Buffer newChild = newLeaf;
        // ancestors, bottom up
        for (int d = leafD - 1; d >= 1; d--) {
            Buffer parent = p.node[d];
            MemorySegment pn = parent.data();
            int pos = p.childIndex[d] + 1;
            int need = interiorCellSize((int) sep.byteSize());
            if (freeTotal(pn) >= need) {
                int made = BTreeNodeFormat.ensureRoom(pn, need, blockSize, scratch, false); // an interior node
                int skip = BTreeNodeFormat.skip(pn);
                int base = BTreeNodeFormat.base(pn);
                int cell = BTreeNodeFormat.insertInterior(pn, pos, sep, newChild.block());
                tree.logInsert(txn, parent, pos, skip, base, cell, need, made);
                BTree.childInserted(parent, pos + 1, newChild);
                return used;
            }
            Buffer sibling = cache.createEmpty(txn, blocks[used], BTreeNodeFormat.MAGIC, id, frames[used]);
            used++;
            sibling.priority = INTERIOR_PRIORITY;
            sep = splitInterior(parent, sibling, pos, sep, newChild.block(), append, scratch);
            logUsedChanged(txn, parent, scratch);
            logUsed(txn, sibling);
            newChild = sibling;
        }
        // the root split: a new root above the old one
        Buffer header = p.node[0];
        long oldRoot = BTreeHeaderFormat.root(header.data());
        int height = BTreeHeaderFormat.height(header.data());
        Buffer root = cache.createEmpty(txn, blocks[used], BTreeNodeFormat.MAGIC, id, frames[used]);
        root.priority = INTERIOR_PRIORITY;
        BTreeNodeFormat.init(root.data(), height, blockSize);
        BTreeNodeFormat.setLeftmost(root.data(), oldRoot);
        BTreeNodeFormat.insertInterior(root.data(), 0, sep, newChild.block());
        logUsed(txn, root);
        BTreeHeaderFormat.set(header.data(), root.block(), height + 1);
        txn.log(header, BTreeHeaderFormat.ROOT, 16);
        return used + 1;
    }

    /**
     * Splits a full leaf into itself and {@code fresh} (to its right) with the new cell in whichever half
     * it falls; returns the separator (the shortest key above the left half's last key, at most the right
     * half's first), copied out of the nodes.
     */
    private MemorySegment splitLeaf(Buffer leafBuf, Buffer fresh, Buffer right, MemorySegment key,
                                    MemorySegment value, boolean replace, MemorySegment scratch) {
        MemorySegment l = leafBuf.data();
        MemorySegment r = fresh.data();
        MemorySegment.copy(l, 0, scratch, 0, blockSize);
        int old = search(scratch, key);
        int n = count(scratch);
        // logical entries: the old cells (less the replaced one) with the new cell at its place
        int entries = replace ? n : n + 1;
        int newPos = old >= 0 ? old : -old - 1;
        int newSize = leafCellSize((int) key.byteSize(), (int) value.byteSize());
        CellPlan plan = CellPlan.of(entries);
        int[] src = plan.src;   // index into scratch, or -1 for the new cell
        int[] size = plan.size;
        for (int e = 0, s = 0; e < entries; e++) {
            if (e == newPos) {
                src[e] = -1;
                size[e] = newSize;
                if (replace) {
                    s++;
                }
            } else {
                src[e] = s;
                size[e] = cellSize(scratch, s);
                s++;
            }
        }
        int m = splitPoint(size, entries, false);
        long oldRight = BTreeNodeFormat.right(scratch);
        long oldLeft = BTreeNodeFormat.left(scratch);
        BTreeNodeFormat.init(l, 0, blockSize);
        BTreeNodeFormat.init(r, 0, blockSize);
        if (cache.floatingLeaves()) {
            // both halves will take inserts anywhere: each floats its slots above a front gap
            int leftBytes = 0, rightBytes = 0;
            for (int e = 0; e < entries; e++) {
                if (e < m) {
                    leftBytes += size[e];
                } else {
                    rightBytes += size[e];
                }
            }
            int capacity = blockSize - BTreeNodeFormat.SLOTS;
            BTreeNodeFormat.moveSlots(l, BTreeNodeFormat.SLOTS + BTreeNodeFormat.frontGapFor(capacity - leftBytes, m, leftBytes));
            BTreeNodeFormat.moveSlots(r, BTreeNodeFormat.SLOTS + BTreeNodeFormat.frontGapFor(capacity - rightBytes, entries - m, rightBytes));
        }
        presetHalf(l, scratch, src[0], src[m - 1], key);
        presetHalf(r, scratch, src[m], src[entries - 1], key);
        for (int e = 0; e < entries; e++) {
            MemorySegment to = e < m ? l : r;
            if (src[e] < 0) {
                BTreeNodeFormat.appendLeaf(to, key, value);
            } else {
                BTreeNodeFormat.appendCell(scratch, src[e], to);
            }
        }
        BTreeNodeFormat.setLeft(l, oldLeft);
        BTreeNodeFormat.setRight(l, fresh.block());
        BTreeNodeFormat.setLeft(r, leafBuf.block());
        BTreeNodeFormat.setRight(r, oldRight);
        if (right != null) {
            BTreeNodeFormat.setLeft(right.data(), fresh.block());
        }
        return separator(BTreeNodeFormat.key(l, m - 1), BTreeNodeFormat.key(r, 0));
    }

    /** The shortest key above {@code lastLeft} and at most {@code firstRight}, copied out of the nodes. */
    private static MemorySegment separator(MemorySegment lastLeft, MemorySegment firstRight) {
        int sepLen = Keys.shortestSeparatorLength(lastLeft, firstRight);
        byte[] sep = new byte[sepLen];
        MemorySegment.copy(firstRight, 0, MemorySegment.ofArray(sep), 0, sepLen);
        return MemorySegment.ofArray(sep);
    }

    /**
     * Splits the tree's last leaf, full, for a key above all of its own: the leaf keeps every cell and
     * changes only its right link, the new cell goes alone into {@code fresh} (made by
     * {@link BufferCache#createEmpty}: logged as rebuilt from zeros, so only its header fields, slot and
     * cell reach the log). Returns the separator.
     */
    private MemorySegment appendLeaf(Txn txn, Buffer leafBuf, Buffer fresh, MemorySegment key, MemorySegment value) {
        MemorySegment l = leafBuf.data();
        MemorySegment r = fresh.data();
        int kl = (int) key.byteSize();
        BTreeNodeFormat.init(r, 0, blockSize);
        BTreeNodeFormat.presetPrefix(r, key, 0, kl, key, 0, kl);
        BTreeNodeFormat.appendLeaf(r, key, value);
        BTreeNodeFormat.setLeft(r, leafBuf.block());
        BTreeNodeFormat.setRight(l, fresh.block());
        txn.log(leafBuf, BTreeNodeFormat.RIGHT, 8);
        logUsed(txn, fresh);
        return separator(BTreeNodeFormat.key(l, count(l) - 1), key);
    }

    /** Presets the prefix of a half being rebuilt from entries {@code first..last}: cells of {@code from}, or the new key (-1). */
    private static void presetHalf(MemorySegment n, MemorySegment from, int first, int last, MemorySegment key) {
        BTreeNodeFormat.presetPrefix(n,
                first < 0 ? key : from, first < 0 ? 0 : BTreeNodeFormat.keyOffset(from, first), first < 0 ? (int) key.byteSize() : keyLength(from, first),
                last < 0 ? key : from, last < 0 ? 0 : BTreeNodeFormat.keyOffset(from, last), last < 0 ? (int) key.byteSize() : keyLength(from, last));
    }

    /**
     * Splits a full interior node into itself and {@code fresh}, with the new separator ({@code sep},
     * {@code child}) at {@code pos}; the middle separator moves up (returned), its child becoming the new
     * node's leftmost. In an {@code append} (the node is on the tree's rightmost path and {@code sep} goes
     * last) the node keeps all but its last separator, which moves up, and {@code fresh} takes {@code sep}.
     */
    private MemorySegment splitInterior(Buffer nodeBuf, Buffer fresh, int pos, MemorySegment sep, long child,
                                        boolean append, MemorySegment scratch) {
        MemorySegment x = nodeBuf.data();
        MemorySegment y = fresh.data();
        MemorySegment.copy(x, 0, scratch, 0, blockSize);
        int n = count(scratch);
        int entries = n + 1;
        CellPlan plan = CellPlan.of(entries);
        int[] src = plan.src;
        int[] size = plan.size;
        for (int e = 0, s = 0; e < entries; e++) {
            if (e == pos) {
                src[e] = -1;
                size[e] = interiorCellSize((int) sep.byteSize());
            } else {
                src[e] = s;
                size[e] = cellSize(scratch, s);
                s++;
            }
        }
        int m = append && pos == n && entries >= 3 ? entries - 2 : splitPoint(size, entries, true);
        int level = BTreeNodeFormat.level(scratch);
        long leftmost = BTreeNodeFormat.leftmost(scratch);
        BTreeNodeFormat.init(x, level, blockSize);
        BTreeNodeFormat.init(y, level, blockSize);
        BTreeNodeFormat.setLeftmost(x, leftmost);
        byte[] up;
        if (src[m] < 0) {
            up = sep.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            BTreeNodeFormat.setLeftmost(y, child);
        } else {
            up = BTreeNodeFormat.key(scratch, src[m]).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            BTreeNodeFormat.setLeftmost(y, BTreeNodeFormat.child(scratch, src[m]));
        }
        for (int e = 0; e < entries; e++) {
            if (e == m) {
                continue;
            }
            MemorySegment to = e < m ? x : y;
            int at = e < m ? e : e - m - 1;
            if (src[e] < 0) {
                BTreeNodeFormat.insertInterior(to, at, sep, child);
            } else {
                BTreeNodeFormat.copyCell(scratch, src[e], to, at);
            }
        }
        BTreeNodeFormat.refreshPrefix(x);
        BTreeNodeFormat.refreshPrefix(y);
        return MemorySegment.ofArray(up);
    }

    /**
     * Where to divide entries of the given sizes so both halves fit a node and are as even as possible.
     * For an interior split the entry at the point moves up and belongs to neither half.
     */
    private int splitPoint(int[] size, int entries, boolean interior) {
        int capacity = blockSize - BTreeNodeFormat.SLOTS;
        long total = 0;
        for (int e = 0; e < entries; e++) {
            total += size[e];
        }
        int best = -1;
        long bestGap = Long.MAX_VALUE;
        long left = 0;
        // a leaf keeps at least one entry each side; an interior split also needs one to move up
        for (int m = 1, last = interior ? entries - 2 : entries - 1; m <= last; m++) {
            left += size[m - 1];
            long right = total - left - (interior ? size[m] : 0);
            if (left <= capacity && right <= capacity) {
                long gap = Math.abs(left - right);
                if (gap < bestGap) {
                    bestGap = gap;
                    best = m;
                }
            }
        }
        if (best < 0) {
            throw new IllegalStateException("no split point divides " + entries + " entries of " + total
                    + " bytes into two " + capacity + "-byte halves");
        }
        return best;
    }

    /**
     * A delete that leaves the leaf underfull: plan the merges (each level whose node underflows merges
     * with a sibling under the same parent, if the two fit in one), lock top-down and, per level, left to
     * right, then delete and merge bottom up; a root left with a single child is replaced by it.
     */
    boolean deleteAndMerge(Txn txn, Path p, MemorySegment key) {
        Locks locks = new Locks();
        attempts:
        for (int attempt = 0; ; attempt++) {
            if (attempt > 0) {
                backoff(attempt);
                p.reset();
            }
            tree.descend(p, key, txn); // resumed on the first attempt, as a split's (above)
            int leafD = p.depth;
            Seen[] partner = new Seen[leafD + 1];
            int[] mateAt = new int[leafD + 1]; // partner[d]'s index among its parent's children (-1: leftmost)
            Seen outer = null; // the neighbour beyond a merging leaf pair, whose sibling link changes
            int top;
            try {
                MemorySegment leafData = p.leaf().data();
                int i = search(leafData, key);
                if (i < 0) {
                    if (!p.leaf().validate(p.leafVersion())) {
                        continue;
                    }
                    return false;
                }
                int shrink = cellSize(leafData, i);
                top = leafD;
                for (int d = leafD; d >= 2; d--) {
                    MemorySegment n = p.node[d].data();
                    if (used(n, blockSize) - shrink >= (d == leafD ? leafMergeThreshold : mergeThreshold)) {
                        break;
                    }
                    MemorySegment parent = p.node[d - 1].data();
                    int j = p.childIndex[d - 1];
                    int pc = count(parent);
                    if (pc == 0) {
                        break; // an only child has no sibling to merge with
                    }
                    // a leaf merges into its left sibling where it has one under the same parent: its few
                    // cells go into that one's free gap (an emptied leaf only drops from the chain), where
                    // merged with its right sibling it would take in, compact and log all of that one's
                    int other = d == leafD && j >= 0 || j + 1 >= pc ? j - 1 : j + 1;
                    long mateBlock = childAt(parent, other);
                    if (!p.node[d - 1].validate(p.version[d - 1])) {
                        continue attempts; // follow only pointers read from a node still as planned
                    }
                    partner[d] = seeChild(p.node[d - 1], other + 1, mateBlock, pc + 1, txn);
                    mateAt[d] = other;
                    if (!atLevel(partner[d].buffer(), partner[d].version(), BTreeNodeFormat.level(n), p.node[d - 1], p.version[d - 1])) {
                        continue attempts;
                    }
                    int sepIndex = Math.max(j, other);
                    shrink = cellSize(parent, sepIndex);
                    top = d - 1;
                    if (d == leafD) {
                        Seen rightNode = other > j ? partner[d] : new Seen(p.leaf(), p.leafVersion());
                        long beyond = BTreeNodeFormat.right(rightNode.buffer().data());
                        if (!rightNode.buffer().validate(rightNode.version())) {
                            continue attempts;
                        }
                        // beyond is the parent's next child, unless the pair ends the parent's children
                        int next = sepIndex + 1;
                        outer = beyond == 0 ? null
                                : next < pc && childAt(parent, next) == beyond ? seeChild(p.node[d - 1], next + 1, beyond, pc + 1, txn)
                                : see(beyond, txn);
                        if (outer != null && !atLevel(outer.buffer(), outer.version(), 0, rightNode.buffer(), rightNode.version())) {
                            continue attempts;
                        }
                    }
                }
                if (top == 1 && count(p.node[1].data()) == 1 && !isLeaf(p.node[1].data()) && partner[2] != null) {
                    top = 0; // the root may lose its only separator: the header changes too
                }
                if (backtrack(p, leafD) != leafD) {
                    continue;
                }
            } catch (RuntimeException e) {
                if (unchanged(p, partner) && (outer == null || outer.buffer().validate(outer.version()))) {
                    throw e;
                }
                continue;
            }
            boolean ok = true;
            for (int d = top; d <= leafD && ok; d++) {
                Seen mate = partner[d];
                boolean mateLeft = mate != null && p.childIndex[d - 1] > mateAt[d];
                if (mate != null && mateLeft) {
                    ok = locks.take(txn, mate.buffer(), mate.version());
                }
                ok = ok && locks.take(txn, p.node[d], p.version[d]);
                if (ok && mate != null && !mateLeft) {
                    ok = locks.take(txn, mate.buffer(), mate.version());
                }
            }
            if (ok && outer != null) {
                ok = locks.take(txn, outer.buffer(), outer.version());
            }
            if (!ok) {
                locks.releaseAll(txn);
                continue;
            }
            Buffer leaf = p.leaf();
            MemorySegment n = leaf.data();
            int gone = search(n, key);
            int base = BTreeNodeFormat.base(n);
            BTreeNodeFormat.remove(n, gone, cache.floatingLeaves());
            logRemove(txn, leaf, gone, base);
            for (int d = leafD; d > top && d >= 2; d--) {
                if (partner[d] == null || !merge(txn, p, d, partner[d].buffer(), mateAt[d], d == leafD ? outer : null)) {
                    break;
                }
            }
            collapseRoot(txn, p);
            return true;
        }
    }

    /**
     * Merges path node {@code d} with its locked sibling {@code mate}, child {@code mateIndex} of the
     * locked parent as planned (-1: leftmost; the plan's index, where a search of the parent's children
     * for its block cost a merge about as much as its partner's look-up), if the two fit in one node: the right
     * one's entries move into the left one, the separator between them leaves the parent, the right block
     * is freed. False if they do not fit (the parent keeps its separator; an interior node left without
     * one borrows its sibling's instead, see {@link #borrow}).
     */
    private boolean merge(Txn txn, Path p, int d, Buffer mate, int mateIndex, Seen outer) {
        Buffer parent = p.node[d - 1];
        MemorySegment pn = parent.data();
        int j = p.childIndex[d - 1];
        if (BTreeNodeFormat.childAt(pn, mateIndex) != mate.block()) {
            throw new IllegalStateException("block " + mate.block() + " is not child " + mateIndex + " of the locked parent " + parent.block());
        }
        Buffer leftBuf = mateIndex < j ? mate : p.node[d];
        Buffer rightBuf = mateIndex < j ? p.node[d] : mate;
        int sepIndex = Math.max(j, mateIndex);
        MemorySegment l = leftBuf.data();
        MemorySegment r = rightBuf.data();
        boolean leaf = isLeaf(l);
        int sepCost = leaf ? 0 : interiorCellSize(keyLength(pn, sepIndex));
        int capacity = blockSize - BTreeNodeFormat.SLOTS;
        if (used(l, blockSize) + used(r, blockSize) + sepCost > capacity) {
            if (!leaf && count(p.node[d].data()) == 0) {
                borrow(txn, parent, sepIndex, leftBuf, rightBuf, leftBuf == p.node[d]);
            }
            return false;
        }
        if (leaf && count(r) == 0) {
            unlinkEmptyLeaf(txn, leftBuf, rightBuf, outer);
        } else {
            mergeInto(txn, leftBuf, rightBuf, pn, sepIndex, outer);
        }
        BTreeNodeFormat.remove(pn, sepIndex, false);
        BTree.childRemoved(parent, sepIndex + 1);
        logSlots(txn, parent, sepIndex);
        allocator.free(txn, rightBuf.block());
        cache.free(txn, rightBuf, BTreeNodeFormat.FREED_MAGIC);
        if (rightBuf == p.node[d]) {
            p.node[d] = leftBuf; // the path continues through the survivor
        }
        return true;
    }

    /** An empty right leaf leaves the chain: its left neighbour's link (and the one beyond's) change, no cell moves. */
    private static void unlinkEmptyLeaf(Txn txn, Buffer leftBuf, Buffer rightBuf, Seen outer) {
        long beyond = BTreeNodeFormat.right(rightBuf.data());
        BTreeNodeFormat.setRight(leftBuf.data(), beyond);
        txn.log(leftBuf, BTreeNodeFormat.RIGHT, 8);
        relinkOuter(txn, leftBuf, beyond, outer);
    }

    private static void relinkOuter(Txn txn, Buffer leftBuf, long beyond, Seen outer) {
        if (outer != null && outer.buffer().block() == beyond) {
            BTreeNodeFormat.setLeft(outer.buffer().data(), leftBuf.block());
            txn.log(outer.buffer(), BTreeNodeFormat.LEFT, 8);
        }
    }

    /**
     * The right node's entries (after the parent's separator, for interior nodes) move into the left one,
     * compacted first; a right leaf's go into the left's free gap if they fit there ({@link #mergeIntoGap}).
     */
    private void mergeInto(Txn txn, Buffer leftBuf, Buffer rightBuf, MemorySegment pn, int sepIndex, Seen outer) {
        MemorySegment l = leftBuf.data();
        MemorySegment r = rightBuf.data();
        boolean leaf = isLeaf(l);
        if (leaf && BTreeNodeFormat.freeContiguous(l) >= used(r, blockSize)) {
            mergeIntoGap(txn, leftBuf, r, outer);
            return;
        }
        MemorySegment scratch = scratch(blockSize);
        BTreeNodeFormat.compact(l, blockSize, scratch, blockSize); // the right node's entries need all the room
        int at = count(l);
        if (!leaf) {
            BTreeNodeFormat.insertInterior(l, at++, BTreeNodeFormat.key(pn, sepIndex), BTreeNodeFormat.leftmost(r));
        }
        for (int i = 0, c = count(r); i < c; i++) {
            BTreeNodeFormat.copyCell(r, i, l, at++);
        }
        BTreeNodeFormat.refreshPrefix(l);
        if (leaf) {
            long beyond = BTreeNodeFormat.right(r);
            BTreeNodeFormat.setRight(l, beyond);
            relinkOuter(txn, leftBuf, beyond, outer);
        }
        logUsed(txn, leftBuf);
    }

    /**
     * Right leaf {@code r}'s cells go after the left leaf's, in its free gap, which holds them: not compacted
     * nor re-prefixed (the prefix may stay shorter than the keys share), the left leaf logs its header
     * fields, its new slots (every slot if a key shortened the prefix, which rewrites each head) and its new
     * cells, not its old ones: a merge of a leaf under a sixteenth into its left sibling logs about what it moves.
     */
    private static void mergeIntoGap(Txn txn, Buffer leftBuf, MemorySegment r, Seen outer) {
        MemorySegment l = leftBuf.data();
        int from = count(l), skip = BTreeNodeFormat.skip(l), cells = BTreeNodeFormat.cellStart(l);
        for (int i = 0, at = from, c = count(r); i < c; i++) {
            BTreeNodeFormat.copyCell(r, i, l, at++);
        }
        long beyond = BTreeNodeFormat.right(r);
        BTreeNodeFormat.setRight(l, beyond);
        txn.log(leftBuf, BTreeNodeFormat.RIGHT, 8);
        logSlots(txn, leftBuf, BTreeNodeFormat.skip(l) == skip ? from : -1);
        if (BTreeNodeFormat.cellStart(l) < cells) {
            txn.log(leftBuf, BTreeNodeFormat.cellStart(l), cells - BTreeNodeFormat.cellStart(l));
        }
        relinkOuter(txn, leftBuf, beyond, outer);
    }

    /**
     * An interior node left with no separator by a merge below it, whose sibling is too full to merge
     * with (long separators), takes the sibling's nearest entry through the parent: the parent's separator
     * comes down into it and the sibling's nearest key goes up in its place. Without this its only child
     * could never merge (it has no sibling), so deleting every key would leave empty leaves behind. Skipped
     * if the sibling has fewer than two entries to give or the parent has no room for the key going up.
     */
    private void borrow(Txn txn, Buffer parent, int sepIndex, Buffer leftBuf, Buffer rightBuf, boolean intoLeft) {
        MemorySegment pn = parent.data();
        MemorySegment l = leftBuf.data();
        MemorySegment r = rightBuf.data();
        MemorySegment donor = intoLeft ? r : l;
        int given = intoLeft ? 0 : count(l) - 1;
        if (count(donor) < 2) {
            return;
        }
        byte[] down = BTreeNodeFormat.key(pn, sepIndex).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        byte[] up = BTreeNodeFormat.key(donor, given).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        if (freeTotal(pn) + interiorCellSize(down.length) < interiorCellSize(up.length)) {
            return;
        }
        MemorySegment scratch = scratch(blockSize);
        MemorySegment taker = intoLeft ? l : r;
        BTreeNodeFormat.ensureRoom(taker, interiorCellSize(down.length), blockSize, scratch, false);
        if (intoLeft) {
            // l gets (down, r's leftmost); r's first child becomes its leftmost
            BTreeNodeFormat.insertInterior(l, 0, MemorySegment.ofArray(down), BTreeNodeFormat.leftmost(r));
            BTreeNodeFormat.setLeftmost(r, BTreeNodeFormat.child(r, 0));
            BTreeNodeFormat.remove(r, 0, false);
        } else {
            // r gets (down, its old leftmost); l's last child becomes r's leftmost
            BTreeNodeFormat.insertInterior(r, 0, MemorySegment.ofArray(down), BTreeNodeFormat.leftmost(r));
            BTreeNodeFormat.setLeftmost(r, BTreeNodeFormat.child(l, given));
            BTreeNodeFormat.remove(l, given, false);
        }
        BTreeNodeFormat.remove(pn, sepIndex, false);
        BTreeNodeFormat.ensureRoom(pn, interiorCellSize(up.length), blockSize, scratch, false);
        BTreeNodeFormat.insertInterior(pn, sepIndex, MemorySegment.ofArray(up), rightBuf.block());
        logUsed(txn, leftBuf);
        logUsed(txn, rightBuf);
        logUsed(txn, parent);
    }

    /** If the root is an interior node with no separator left, its only child becomes the root. */
    private void collapseRoot(Txn txn, Path p) {
        Buffer header = p.node[0];
        if (!txn.holds(header) || p.depth < 2) {
            return;
        }
        Buffer root = p.node[1];
        MemorySegment rn = root.data();
        if (isLeaf(rn) || count(rn) != 0) {
            return;
        }
        long child = BTreeNodeFormat.leftmost(rn);
        int height = BTreeHeaderFormat.height(header.data());
        BTreeHeaderFormat.set(header.data(), child, height - 1);
        txn.log(header, BTreeHeaderFormat.ROOT, 16);
        allocator.free(txn, root.block());
        cache.free(txn, root, BTreeNodeFormat.FREED_MAGIC);
    }
}
