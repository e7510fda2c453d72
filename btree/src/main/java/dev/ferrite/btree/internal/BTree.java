package dev.ferrite.btree.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.journal.internal.DirtyMap;

import static dev.ferrite.btree.internal.BTreeNodeFormat.cellSize;
import static dev.ferrite.btree.internal.BTreeNodeFormat.childAt;
import static dev.ferrite.btree.internal.BTreeNodeFormat.childIndexFor;
import static dev.ferrite.btree.internal.BTreeNodeFormat.count;
import static dev.ferrite.btree.internal.BTreeNodeFormat.freeTotal;
import static dev.ferrite.btree.internal.BTreeNodeFormat.isLeaf;
import static dev.ferrite.btree.internal.BTreeNodeFormat.keyLength;
import static dev.ferrite.btree.internal.BTreeNodeFormat.leafCellSize;
import static dev.ferrite.btree.internal.BTreeNodeFormat.search;
import static dev.ferrite.btree.internal.BTreeNodeFormat.spans;
import static dev.ferrite.btree.internal.BTreeNodeFormat.used;

/**
 * A B+tree of variable-length keys and values in blocks of the buffer cache, every change logged
 * through the journal.
 *
 * <h2>Concurrency: optimistic lock coupling</h2>
 * Readers take no lock anywhere: they descend reading each node's version, the child pointer and the
 * child's version, and validate the parent after the child's version is in hand; a node that changed
 * under them sends them back only to its deepest ancestor that is still unchanged ("restart locally").
 * A writer descends the same way and locks the leaf in place by CAS from the version it read; only if
 * the leaf must split, or would underflow, does it go pessimistic: it plans which nodes change,
 * reserves cache frames and reads every block it will need while holding nothing, then locks exactly
 * those nodes, from the highest that changes down, left to right at each level, each by CAS from the
 * version it planned with. If any lock fails, it lets go of all of them and plans again; a writer thus
 * never waits for a node while holding another, so writers cannot deadlock and the root is locked only
 * when the root itself changes. Splits and merges proceed bottom up, all in the transaction of the
 * change that caused them.
 *
 * <p>The code follows that seam: this class holds the descent, the reads and the optimistic writes (a
 * change that fits in its leaf, which it locks alone); {@code Restructure} holds the pessimistic paths
 * (split, merge, borrow, root growth and collapse), entered only after the optimistic write let go of
 * the leaf it locked; {@link Cursor} holds its own lock-free descent to a leaf. Lock order on the
 * pessimistic paths: top-down from the highest node that changes (the header first when the root
 * changes), left to right within a level, the leaf-level neighbour whose sibling link changes last, and
 * allocator blocks after every node.
 *
 * <p>Keys are up to {@value BTreeNodeFormat#MAX_KEY} bytes, a key and its value up to
 * {@value BTreeNodeFormat#MAX_ENTRY} together ({@link #maxValue}; values up to
 * {@value BTreeNodeFormat#MAX_VALUE} on a cache without {@link BufferCache#wideCells()}); order is unsigned bytewise. Leaves are linked both ways for range
 * cursors. A leaf split chooses the shortest separator that divides the two halves (suffix truncation),
 * and node search compares only what follows the prefix a node's keys share.
 *
 * <p>Several operations may share a {@link Txn}, on this tree and others, but a transaction that holds
 * nodes from one operation must not run an operation that needs to lock nodes another transaction may
 * hold in the meantime; the simple rule is one changing operation per tree per transaction, or keys in
 * ascending order.
 */
public final class BTree {
    static final String NODE = "B-tree node";
    static final String HEADER = "B-tree header";
    static final int MAX_DEPTH = BTreeNodeFormat.MAX_LEVELS;
    /**
     * A thread's paths, one for each of the last {@link #PATHS_KEPT} trees it worked on, the most recent
     * first: a table's delete looks its key up, frees the value's blocks through both free-space trees of
     * its group, then deletes the key, which then starts at the leaf its lookup left (one path a thread
     * made it descend again from the header).
     */
    private static final ThreadLocal<Path[]> PATHS = ThreadLocal.withInitial(BTree::newPaths);
    private static final int PATHS_KEPT = 4;
    private static final ThreadLocal<MemorySegment> SCRATCH = new ThreadLocal<>();

    private final BufferCache cache;
    private final BlockAllocator allocator;
    private final long headerBlock;
    private final long id;
    private final int blockSize;
    /**
     * Below this many bytes used, a leaf merges with a sibling if the two fit in one: a sixteenth of a
     * node (about 250 bytes of a 4 KiB one). A quarter, as interior nodes keep and LMDB keeps for every
     * page, made deletes pay for most of a node's bytes again at each merge: the merged node is compacted
     * and logged whole, and the cells moved there move again at its next merge (a run of deletes logged
     * 131 B a delete, 31 B at this fraction). A leaf left between the two is only sparser: it keeps its
     * keys in order, takes inserts without a split until full, and every key's delete still ends in a
     * merge that frees the leaf.
     */
    static final int LEAF_MERGE_FRACTION = 16;
    /** Below this many bytes used, an interior node merges with a sibling if the two fit in one: a quarter. */
    private final int mergeThreshold;
    /** {@link #mergeThreshold} of a leaf ({@link #LEAF_MERGE_FRACTION}). */
    private final int leafMergeThreshold;
    /** The split and merge paths, entered only when the optimistic write finds the leaf too full or too empty. */
    private final Restructure restructure;

    /** CLOCK priority of headers and interior nodes: three sweeps of the hand to a leaf's one. */
    static final int INTERIOR_PRIORITY = 3;
    /**
     * The header's buffer as last looked up, while it stays cached (a buffer leaving the cache turns
     * obsolete): every change and every reservation reads the height, a table's single write three or four
     * headers' (its tree's, both free-space trees' of a value's group), so they skip the cache's lookup, as
     * a parent's {@linkplain #child hints} do. A plain field: a stale read only looks up again.
     */
    private Buffer headerHint;

    private BTree(BufferCache cache, BlockAllocator allocator, long headerBlock, long id) {
        this.cache = cache;
        this.allocator = allocator;
        this.headerBlock = headerBlock;
        this.id = id;
        this.blockSize = cache.blockSize();
        this.mergeThreshold = (blockSize - BTreeNodeFormat.SLOTS) / 4;
        this.leafMergeThreshold = (blockSize - BTreeNodeFormat.SLOTS) / LEAF_MERGE_FRACTION;
        if (blockSize < 4096) {
            throw new InvalidArgumentException("B-trees need blocks of at least 4096 bytes, not " + blockSize);
        }
        this.restructure = new Restructure(this, cache, allocator, id, blockSize, mergeThreshold, leafMergeThreshold);
    }

    /** Creates an empty tree (header and a root leaf) in {@code txn}, which must reserve {@link #CREATE_ITEMS}. */
    public static BTree create(Txn txn, BlockAllocator allocator, long treeId) {
        BufferCache cache = txn.cache();
        // frames first: claiming one may wait for write-back, which must not happen under the allocator's locks
        int headerFrame = -1, rootFrame = -1;
        Buffer h, r;
        try {
            headerFrame = cache.reserveFrame();
            rootFrame = cache.reserveFrame();
            long header = allocator.allocate(txn);
            long root = allocator.allocate(txn);
            int f = headerFrame;
            headerFrame = -1; // create lets go of its frame itself if it fails
            // both logged as rebuilt from zeros: the log carries their few set bytes, not two whole blocks
            h = cache.createEmpty(txn, header, BTreeHeaderFormat.MAGIC, treeId, f);
            f = rootFrame;
            rootFrame = -1;
            r = cache.createEmpty(txn, root, BTreeNodeFormat.MAGIC, treeId, f);
        } finally {
            if (headerFrame >= 0) {
                cache.unreserveFrame(headerFrame);
            }
            if (rootFrame >= 0) {
                cache.unreserveFrame(rootFrame);
            }
        }
        long root = r.block();
        BTreeNodeFormat.init(r.data(), 0, cache.blockSize());
        logUsed(txn, r);
        BTreeHeaderFormat.set(h.data(), root, 1);
        txn.log(h, BTreeHeaderFormat.ROOT, BTreeHeaderFormat.HEIGHT + 2 - BTreeHeaderFormat.ROOT);
        h.priority = INTERIOR_PRIORITY;
        return new BTree(cache, allocator, h.block(), treeId);
    }

    /** Items a {@link #create} transaction changes. */
    public static final int CREATE_ITEMS = 4;

    /** Opens the tree whose header is {@code headerBlock}, checking that the header is readable and belongs to it. */
    public static BTree open(BufferCache cache, BlockAllocator allocator, long headerBlock, long treeId) {
        Buffer h = cache.get(headerBlock, BTreeHeaderFormat.MAGIC, treeId, HEADER);
        h.priority = INTERIOR_PRIORITY;
        return new BTree(cache, allocator, headerBlock, treeId);
    }

    public long id() {
        return id;
    }

    public long headerBlock() {
        return headerBlock;
    }

    public BufferCache cache() {
        return cache;
    }

    /** Levels in the tree now: 1 for a lone leaf. */
    public int height() {
        for (;;) {
            Buffer h = header();
            long v = h.readVersion();
            int height = BTreeHeaderFormat.height(h.data());
            if (v >= 0 && h.validate(v)) {
                return height;
            }
        }
    }

    /**
     * Log items one changing operation may touch in the worst case now (a split or merge at every level,
     * a new root, sibling links, the allocator): what a {@link Txn} running one operation reserves.
     */
    public int reservation() {
        int h = height() + 1;
        return 3 * h + 4 + allocator.itemsPerChange() * (h + 1);
    }

    Buffer header() {
        Buffer h = headerHint;
        if (h != null && !h.isObsolete()) {
            cache.hit(h);
            return h;
        }
        h = cache.get(headerBlock, BTreeHeaderFormat.MAGIC, id, HEADER);
        if (h.priority != INTERIOR_PRIORITY) {
            h.priority = INTERIOR_PRIORITY; // read back from disk: the cache cannot tell what it holds
        }
        headerHint = h;
        return h;
    }

    Buffer node(long block) {
        Buffer b = cache.get(block, BTreeNodeFormat.MAGIC, id, NODE);
        // A node's level never changes while its block is allocated, so an unvalidated read is a sound hint.
        if (b.priority != INTERIOR_PRIORITY && !BTreeNodeFormat.isLeaf(b.data())) {
            b.priority = INTERIOR_PRIORITY;
        }
        return b;
    }

    /**
     * The buffer of {@code block}, child {@code idx} of {@code parent} (its index in the numbering of
     * {@link BTreeNodeFormat#childIndexFor} plus one, the leftmost child 0; a header's root is its child 0):
     * from the parent's hint if that is still the block's cached buffer (a buffer leaves the cache
     * obsolete), else looked up and remembered there, in an array of {@code fanout} hints or more: a
     * child past its end doubles it, so that a node gaining children one split at a time (a table filled
     * in key order) makes a new array only as its count doubles, not at every split.
     */
    Buffer child(Buffer parent, int idx, long block, int fanout) {
        Buffer[] hints = parent.children;
        if (hints != null && idx < hints.length) {
            Buffer h = hints[idx];
            if (h != null && h.block() == block && !h.isObsolete()) {
                cache.hit(h);
                return h;
            }
        }
        Buffer b = node(block);
        if (hints == null || idx >= hints.length) {
            int size = Math.max(idx + 1, fanout);
            Buffer[] grown = new Buffer[hints == null ? size : Math.max(size, 2 * hints.length)];
            if (hints != null) {
                System.arraycopy(hints, 0, grown, 0, hints.length);
            }
            parent.children = hints = grown;
        }
        hints[idx] = b;
        return b;
    }

    /**
     * A split put {@code child} into {@code parent} at hint index {@code idx} ({@link #child}'s: the
     * child's index plus one): the hints from there on move up one with their children, so that descents
     * to the children right of the new one still find theirs. Random inserts into a table of a million
     * keys split a child of each leaves' parent every few dozen descents through it, and each split
     * otherwise left every hint to its right naming a neighbour, passed over and looked up in the hash
     * table again one descent at a time. The last hint falls off an array that is full; a child past the
     * end grows it as ever. Under the parent's lock; a descent that read the node before the insert and
     * writes its hint meanwhile leaves it at the old index, where {@link #child} passes it over.
     */
    static void childInserted(Buffer parent, int idx, Buffer child) {
        Buffer[] hints = parent.children;
        if (hints != null && idx < hints.length) {
            System.arraycopy(hints, idx, hints, idx + 1, hints.length - idx - 1);
            hints[idx] = child;
        }
    }

    /**
     * A merge took the child at hint index {@code idx} out of {@code parent} (its separator removed, the
     * children right of it one to the left): the hints from there on move down one with their children, as
     * {@link #childInserted}'s move up. Deleting 100,000 keys of 1 KiB values in random order merged a
     * leaf away every two or three deletes, and each merge otherwise left every hint right of it naming its
     * right neighbour, passed over and looked up in the hash table again one descent at a time. The last
     * hint becomes empty. Under the parent's lock; a descent that read the node before the removal and
     * writes its hint meanwhile leaves it one index too far right, where {@link #child} passes it over.
     */
    static void childRemoved(Buffer parent, int idx) {
        Buffer[] hints = parent.children;
        if (hints != null && idx < hints.length) {
            System.arraycopy(hints, idx + 1, hints, idx, hints.length - idx - 1);
            hints[hints.length - 1] = null;
        }
    }

    static MemorySegment scratch(int blockSize) {
        MemorySegment s = SCRATCH.get();
        if (s == null || s.byteSize() < blockSize) {
            s = Arena.ofAuto().allocate(blockSize, 8);
            SCRATCH.set(s);
        }
        return s;
    }

    /**
     * What to throw for {@code e}, raised while reading a node that then validated: the node's own bytes
     * are inconsistent (an accessor ran out of bounds) and it is corrupt; anything the cache or device
     * said (an I/O error, an interrupted wait, a corrupt child) goes up as it is.
     */
    static RuntimeException unreadable(RuntimeException e, long block, String structure) {
        return e instanceof IndexOutOfBoundsException || e instanceof IllegalArgumentException
                ? new CorruptionException(block, structure, "unreadable: " + e) : e;
    }

    /**
     * True if {@code b} (read at {@code bv}), reached from {@code from} (read at {@code fromV}), is at
     * {@code level}; false if either changed meanwhile (look again). A wrong level in nodes that did not
     * change is corruption: a child must be one level below its parent and a sibling at its level, or
     * walks would not end or would read one kind of node as the other.
     */
    static boolean atLevel(Buffer b, long bv, int level, Buffer from, long fromV) {
        int found = BTreeNodeFormat.level(b.data());
        if (found == level) {
            return true;
        }
        if (b.validate(bv) && from.validate(fromV)) {
            throw new CorruptionException(b.block(), NODE, "level " + found + " where block " + from.block()
                    + " leads to one of level " + level);
        }
        return false;
    }

    static void requireKey(MemorySegment key) {
        requireKeyLength(key.byteSize());
    }

    /** As {@link #requireKey(MemorySegment)} for a key of {@code length} bytes (no view made of an array). */
    static void requireKeyLength(long length) {
        if (length < 1 || length > BTreeNodeFormat.MAX_KEY) {
            throw new InvalidArgumentException("key of " + length + " bytes: keys are 1 to "
                    + BTreeNodeFormat.MAX_KEY + " bytes");
        }
    }

    /** Refuses a value longer than a leaf cell takes beside {@code key} (checked already). */
    private void requireValue(MemorySegment key, MemorySegment value) {
        int max = maxValue((int) key.byteSize());
        if (value.byteSize() > max) {
            throw new InvalidArgumentException("value of " + value.byteSize() + " bytes: " + (cache.wideCells()
                    ? "a key and its value are at most " + BTreeNodeFormat.MAX_ENTRY + " bytes together (" + max
                    + " beside this " + key.byteSize() + "-byte key)" : "values are at most " + max + " bytes"));
        }
    }

    /** The longest value this tree takes beside a key of {@code keyLength} bytes ({@link BTreeNodeFormat#maxValue}). */
    public int maxValue(int keyLength) {
        return BTreeNodeFormat.maxValue(keyLength, cache.wideCells());
    }

    // ------------------------------------------------------------------ descent

    private static Path[] newPaths() {
        Path[] paths = new Path[PATHS_KEPT];
        for (int i = 0; i < paths.length; i++) {
            paths[i] = new Path();
        }
        return paths;
    }

    /** This thread's path for this tree ({@link #PATHS}): the one it last used here, else its least recently used one. */
    private Path path() {
        Path[] paths = PATHS.get();
        Path p = paths[0];
        if (p.tree == this) {
            return p;
        }
        int i = 1;
        while (i < paths.length - 1 && paths[i].tree != this) {
            i++;
        }
        p = paths[i];
        System.arraycopy(paths, 0, paths, 1, i);
        paths[0] = p;
        return p;
    }

    /** A root-to-leaf path: entry 0 is the header, entry {@code depth} the node reached. Reused per thread and tree. */
    static final class Path {
        final Buffer[] node = new Buffer[MAX_DEPTH + 2];
        final long[] version = new long[MAX_DEPTH + 2];
        /** Index followed in node[d] to reach node[d + 1]: -1 for the leftmost child (0 in the header). */
        final int[] childIndex = new int[MAX_DEPTH + 2];
        int depth = -1;
        /** The tree whose nodes {@link #node} holds (paths are per thread, shared by every tree). */
        BTree tree;

        void reset() {
            depth = -1;
        }

        /**
         * Begins an operation of {@code t} on {@code key}. The previous operation's path is kept when it is
         * {@code t}'s, from its deepest node that is unchanged since it was read and whose keys (a leaf's)
         * or separators (an interior node's) reach from below {@code key} to above it: no node beside it
         * at its level can be on {@code key}'s path, so the descent starts there, at the leaf (an unlink
         * looks its name up, then deletes it; a walk stats names in key order) or above it (a commit's
         * sorted keys, a few leaves apart, whose own change of the leaf before changed its version).
         * Otherwise it starts at the header. Versions a transaction read as {@link Buffer#HELD} are only
         * good inside it, so such paths go.
         */
        void start(BTree t, MemorySegment key) {
            depth = tree != t || depth < 1 ? -1 : spanning(key);
            tree = t;
        }

        /** The depth of the deepest node of the path that still holds {@code key} inside its first and last keys, or -1. */
        private int spanning(MemorySegment key) {
            for (int d = 0; d <= depth; d++) {
                if (version[d] == Buffer.HELD) {
                    return -1;
                }
            }
            for (int d = depth; d >= 1; d--) {
                Buffer b = node[d];
                long v = version[d];
                if (!b.validate(v)) {
                    continue; // changed since (a leaf by this thread's own last write): its parent may do
                }
                try {
                    // only a consistent read proves the node's range holds the key; every ancestor the
                    // descent may back up to from here has a range holding the node's
                    if (spans(b.data(), key) && b.validate(v)) {
                        return d;
                    }
                } catch (RuntimeException e) {
                    // torn read of a node that changed: try its parent
                }
            }
            return -1;
        }

        Buffer leaf() {
            return node[depth];
        }

        long leafVersion() {
            return version[depth];
        }
    }

    /**
     * A node read optimistically, with the version it must still have when validated or locked: by a
     * cursor's descent, and by a restructure's plan.
     */
    record Seen(Buffer buffer, long version) {
    }

    /** Deepest entry of the path at or above {@code d} that still validates, or -1. */
    static int backtrack(Path p, int d) {
        while (d >= 0 && !p.node[d].validate(p.version[d])) {
            d--;
        }
        return d;
    }

    /**
     * Fills {@code p} from the header down to the leaf for {@code key}, resuming below the deepest node
     * of the previous path that is still unchanged. Nodes {@code txn} holds read as {@link Buffer#HELD}.
     */
    void descend(Path p, MemorySegment key, Txn txn) {
        int d = p.depth < 0 ? -1 : backtrack(p, p.depth);
        p.depth = -1; // entries below d are being replaced: no path to resume until the leaf is reached
        for (int spins = 0; ; spins++) {
            if (d < 0) {
                Buffer h = header();
                long hv = h.readVersion(txn);
                if (hv == -1) {
                    continue;
                }
                p.node[0] = h;
                p.version[0] = hv;
                d = 0;
            }
            Buffer cur = p.node[d];
            long v = p.version[d];
            long child;
            int idx;
            int fanout = 1;
            try {
                MemorySegment data = cur.data();
                if (d == 0) {
                    child = BTreeHeaderFormat.root(data);
                    idx = 0;
                } else if (isLeaf(data)) {
                    if (cur.validate(v)) {
                        p.depth = d;
                        return;
                    }
                    cache.latches.restarted(cur);
                    d = backtrack(p, d - 1);
                    continue;
                } else {
                    idx = childIndexFor(data, key);
                    child = childAt(data, idx);
                    fanout = count(data) + 1;
                }
            } catch (RuntimeException e) {
                if (cur.validate(v)) {
                    throw unreadable(e, cur.block(), d == 0 ? HEADER : NODE);
                }
                cache.latches.restarted(cur);
                d = backtrack(p, d - 1);
                continue;
            }
            if (!cur.validate(v)) {
                cache.latches.restarted(cur);
                d = backtrack(p, d - 1);
                continue;
            }
            Buffer next;
            try {
                next = child(cur, d == 0 ? 0 : idx + 1, child, fanout);
            } catch (CorruptionException e) {
                if (cur.validate(v)) {
                    throw e;
                }
                cache.latches.restarted(cur);
                d = backtrack(p, d - 1); // a stale pointer led to a block that is no longer a node of ours
                continue;
            }
            long nv = next.readVersion(txn);
            if (nv == -1 || !cur.validate(v)) {
                cache.latches.restarted(nv == -1 ? next : cur);
                d = backtrack(p, d);
                continue;
            }
            if (d == MAX_DEPTH) {
                throw new CorruptionException(cur.block(), NODE, "the tree is deeper than " + MAX_DEPTH + " levels: a cycle?");
            }
            p.childIndex[d] = idx;
            p.node[d + 1] = next;
            p.version[d + 1] = nv;
            d++;
        }
    }

    // ------------------------------------------------------------------ reads

    /**
     * Copies the value of {@code key} into {@code out} (as much as fits) and returns its length, or -1 if
     * the key is absent. Lock-free; allocates nothing when the blocks are cached.
     */
    public int get(MemorySegment key, MemorySegment out) {
        requireKey(key);
        Path p = path();
        p.start(this, key);
        for (;;) {
            descend(p, key, null);
            Buffer leaf = p.leaf();
            long v = p.leafVersion();
            try {
                MemorySegment n = leaf.data();
                int i = search(n, key);
                int len = -1;
                if (i >= 0) {
                    len = BTreeNodeFormat.valueLength(n, i);
                    MemorySegment.copy(n, BTreeNodeFormat.valueOffset(n, i), out, 0, Math.min(len, out.byteSize()));
                }
                if (leaf.validate(v)) {
                    return len;
                }
            } catch (RuntimeException e) {
                if (leaf.validate(v)) {
                    throw e;
                }
            }
            cache.latches.restarted(leaf);
        }
    }

    /** The value of {@code key}, or null. */
    public byte[] get(byte[] key) {
        requireKeyLength(key.length);
        byte[] buf = new byte[maxValue(key.length)];
        int len = get(MemorySegment.ofArray(key), MemorySegment.ofArray(buf));
        return len < 0 ? null : Arrays.copyOf(buf, len);
    }

    /** A cursor positioned before the first key at or after {@code from} (forward) or at or before it (reverse). */
    public Cursor cursor(byte[] from, boolean reverse) {
        return Cursor.open(this, from, null, reverse);
    }

    /**
     * A cursor as {@link #cursor(byte[], boolean)} that stops before {@code to}: it returns the keys in
     * {@code [from, to)} forward, {@code (to, from]} in reverse. Null bounds are the ends of the tree.
     * The bound is checked once per leaf, not per key.
     */
    public Cursor cursor(byte[] from, byte[] to, boolean reverse) {
        return Cursor.open(this, from, to, reverse);
    }

    /** {@link #cursor(byte[], byte[], boolean)} made of {@code reuse}, a cursor of any tree of this cache that is done with. */
    public Cursor cursor(Cursor reuse, byte[] from, byte[] to, boolean reverse) {
        return reuse.reopen(this, from, to, reverse);
    }

    /** The smallest key, or null for an empty tree. */
    public byte[] firstKey() {
        try (Cursor c = Cursor.open(this, null, null, false)) {
            return c.next() ? c.key() : null;
        }
    }

    /** The largest key, or null for an empty tree. */
    public byte[] lastKey() {
        try (Cursor c = Cursor.open(this, null, null, true)) {
            return c.next() ? c.key() : null;
        }
    }

    /** Paths {@link #countEstimate} follows, at evenly spaced places in the key order. */
    static final int ESTIMATE_PATHS = 8;

    /**
     * An estimate of the number of keys: the mean over {@value #ESTIMATE_PATHS} paths, spread evenly over
     * the key order, of the fan-outs along each path multiplied (each an unbiased estimate of the count
     * where the path is a random one, as Knuth estimated a search tree's size). Exact for a tree of one
     * leaf. The middle path alone was off by eight times in a deep tree of keys that fit one or two to a
     * leaf (6,343 keys estimated at 768, in a stress run): each node of two children on it where most have
     * four halves the product. A tree whose fan-out differs much by key range (long keys in one, short ones
     * in another) can still be off by more; {@code TreeCheck} counts.
     */
    public long countEstimate() {
        double sum = 0;
        for (int p = 0; p < ESTIMATE_PATHS; p++) {
            sum += pathEstimate((p + 0.5) / ESTIMATE_PATHS);
        }
        return Math.round(sum / ESTIMATE_PATHS);
    }

    /**
     * The fan-outs along the path to the key at {@code at} (0 to 1) of the key order, multiplied; each node
     * on the way splits {@code at} among its children as if they held as many keys each.
     */
    private double pathEstimate(double at) {
        for (;;) {
            Buffer h = header();
            long hv = h.readVersion();
            if (hv < 0) {
                continue;
            }
            long root = BTreeHeaderFormat.root(h.data());
            if (!h.validate(hv)) {
                continue;
            }
            double estimate = 1, place = at;
            Buffer cur = node(root);
            long v = cur.readVersion();
            boolean ok = v >= 0;
            while (ok) {
                try {
                    MemorySegment n = cur.data();
                    int c = count(n);
                    if (isLeaf(n)) {
                        estimate *= c;
                        ok = cur.validate(v);
                        break;
                    }
                    estimate *= c + 1;
                    int i = Math.min(c, (int) (place * (c + 1))); // of children 0 (the leftmost) to c
                    place = place * (c + 1) - i;
                    long child = childAt(n, i - 1);
                    if (!cur.validate(v)) {
                        ok = false;
                        break;
                    }
                    Buffer next = node(child);
                    long nv = next.readVersion();
                    ok = nv >= 0 && cur.validate(v) && atLevel(next, nv, BTreeNodeFormat.level(n) - 1, cur, v);
                    cur = next;
                    v = nv;
                } catch (RuntimeException e) {
                    if (cur.validate(v)) {
                        throw unreadable(e, cur.block(), NODE);
                    }
                    ok = false;
                }
            }
            if (ok) {
                return estimate;
            }
        }
    }

    // ------------------------------------------------------------------ writes

    /** IF_ABSENT_IN_PLACE: IF_ABSENT only into a leaf with room, {@link #WOULD_SPLIT} otherwise. */
    enum Mode { PUT, IF_ABSENT, IF_ABSENT_IN_PLACE }

    /** What {@link #putIfAbsentUnlessSplitting} returns when the insert would split nodes. */
    public static final int WOULD_SPLIT = -2;

    /** Inserts or replaces; true if the key was new. Holds the changed nodes in {@code txn} until it commits. */
    public boolean put(Txn txn, MemorySegment key, MemorySegment value) {
        return write(txn, key, value, Mode.PUT, null, null) < 0;
    }

    /**
     * {@link #put}, copying the value it replaces into {@code priorOut} (as much as fits), read under the
     * leaf's lock in the same descent: returns that value's length, or -1 if the key was new. The copy is
     * the key's value just before this change only if the caller keeps other writers off {@code key}
     * (a table's key stripe, or the table held exclusively), as a split's second descent lets the leaf go.
     */
    public int replace(Txn txn, MemorySegment key, MemorySegment value, MemorySegment priorOut) {
        return write(txn, key, value, Mode.PUT, priorOut, null);
    }

    /**
     * {@link #replace} only if {@code check} allows the value it would replace (an absent key is put): one
     * descent where a look-up and a put took two, for a caller that must know what the key held before it
     * commits to the change. Returns the prior value's length, -1 if the key was new, or {@link #REFUSED}
     * with nothing changed.
     */
    public int replaceIf(Txn txn, MemorySegment key, MemorySegment value, MemorySegment priorOut, PriorCheck check) {
        return write(txn, key, value, Mode.PUT, priorOut, check);
    }

    /** Inserts if absent; true if inserted. */
    public boolean putIfAbsent(Txn txn, MemorySegment key, MemorySegment value) {
        return write(txn, key, value, Mode.IF_ABSENT, null, null) < 0;
    }

    /**
     * {@link #putIfAbsent} only if it takes no block: the key's leaf has room for the entry. Returns -1 if
     * it inserted, the present value's length if the key was there, or {@link #WOULD_SPLIT}, with nothing
     * changed. For a caller that claimed none of the tree's allocator's blocks, and claims them only for
     * the inserts that split.
     */
    public int putIfAbsentUnlessSplitting(Txn txn, MemorySegment key, MemorySegment value) {
        return write(txn, key, value, Mode.IF_ABSENT_IN_PLACE, null, null);
    }

    /** Puts in a transaction of its own; returns its commit sequence (force it for durability). */
    public long put(byte[] key, byte[] value) {
        try (Txn txn = Txn.begin(cache, reservation())) {
            put(txn, MemorySegment.ofArray(key), MemorySegment.ofArray(value));
            return txn.commit();
        }
    }

    /** Deletes in a transaction of its own; returns its commit sequence, or -1 if the key was absent. */
    public long delete(byte[] key) {
        try (Txn txn = Txn.begin(cache, reservation())) {
            boolean found = delete(txn, MemorySegment.ofArray(key));
            long seq = txn.commit();
            return found ? seq : -1;
        }
    }

    /**
     * Puts or (IF_ABSENT) inserts; returns -1 if the key was absent, else the length of the value it had
     * (copied into {@code priorOut} as much as fits, unless that is null), which IF_ABSENT leaves as it is;
     * or, IF_ABSENT_IN_PLACE, {@link #WOULD_SPLIT} with nothing changed.
     */
    int write(Txn txn, MemorySegment key, MemorySegment value, Mode mode, MemorySegment priorOut, PriorCheck check) {
        requireKey(key);
        requireValue(key, value);
        Path p = path();
        int kl = (int) key.byteSize(), vl = (int) value.byteSize();
        Buffer leaf = lockedLeaf(txn, p, key);
        boolean held = p.leafVersion() == Buffer.HELD;
        MemorySegment n = leaf.data();
        int i = search(n, key);
        int prior = i < 0 ? -1 : copyValue(n, i, priorOut);
        if (i >= 0 && check != null && !check.allows(priorOut, prior)) {
            if (!held) {
                txn.releaseUnchanged(leaf);
            }
            return REFUSED;
        }
        if (i >= 0 && mode != Mode.PUT) {
            if (!held) {
                txn.releaseUnchanged(leaf);
            }
            return prior;
        }
        if (i >= 0 && prior == vl) {
            int off = BTreeNodeFormat.valueOffset(n, i);
            MemorySegment.copy(value, 0, n, off, vl);
            if (vl > 0) {
                txn.log(leaf, off, vl);
            }
            return prior;
        }
        int need = leafCellSize(kl, vl);
        int room = freeTotal(n) + (i >= 0 ? cellSize(n, i) : 0);
        if (room >= need) {
            insertIntoLeaf(txn, leaf, i, key, value);
            return prior;
        }
        if (!held) {
            txn.releaseUnchanged(leaf);
        }
        if (mode == Mode.IF_ABSENT_IN_PLACE) {
            return WOULD_SPLIT;
        }
        return restructure.splitInsert(txn, p, key, value, mode) ? -1 : Math.max(prior, 0);
    }

    /**
     * Replaces the entry of {@code key} by {@code newKey} and {@code newValue} in place, if that keeps the
     * order without moving it ({@link BTreeNodeFormat#replaceableInPlace}: as when a free-space tree's
     * extent grows or shrinks without reaching its neighbours): one descent and the cell's bytes and slot
     * changed, where a delete and an insert take two and move slots. False, with nothing changed, if the
     * key is absent or the entry cannot change in place: the caller then deletes and inserts.
     */
    public boolean replaceInPlace(Txn txn, MemorySegment key, MemorySegment newKey, MemorySegment newValue) {
        requireKey(key);
        requireKey(newKey);
        Path p = path();
        Buffer leaf = lockedLeaf(txn, p, key);
        MemorySegment n = leaf.data();
        int i = search(n, key);
        if (i < 0 || !BTreeNodeFormat.replaceableInPlace(n, i, newKey, (int) newValue.byteSize())) {
            if (p.leafVersion() != Buffer.HELD) {
                txn.releaseUnchanged(leaf);
            }
            return false;
        }
        int cell = BTreeNodeFormat.replaceInPlace(n, i, newKey, newValue);
        txn.log(leaf, BTreeNodeFormat.base(n) + BTreeNodeFormat.SLOT * i, BTreeNodeFormat.SLOT);
        txn.log(leaf, cell + BTreeNodeFormat.LEAF_CELL_HEADER, (int) (newKey.byteSize() + newValue.byteSize()));
        return true;
    }

    /**
     * Descends path {@code p} to {@code key}'s leaf and locks it for {@code txn}, descending again (backing
     * up from where it changed) while the leaf changed since it was read. {@code p.leafVersion()} is then
     * {@link Buffer#HELD} if {@code txn} held the leaf already, so that a caller that changes nothing
     * releases it only otherwise.
     */
    private Buffer lockedLeaf(Txn txn, Path p, MemorySegment key) {
        p.start(this, key);
        for (;;) {
            descend(p, key, txn);
            Buffer leaf = p.leaf();
            if (txn.tryUpgrade(leaf, p.leafVersion())) {
                return leaf;
            }
        }
    }

    /** Value {@code i} of locked leaf {@code n}: its length, its bytes copied into {@code out} (if any) as far as they fit. */
    private static int copyValue(MemorySegment n, int i, MemorySegment out) {
        int vl = BTreeNodeFormat.valueLength(n, i);
        if (out != null) {
            MemorySegment.copy(n, BTreeNodeFormat.valueOffset(n, i), out, 0, Math.min(vl, out.byteSize()));
        }
        return vl;
    }

    /** Under the leaf's lock, with room known: replaces cell {@code i} (if found) or inserts, and logs. */
    private void insertIntoLeaf(Txn txn, Buffer leaf, int i, MemorySegment key, MemorySegment value) {
        MemorySegment n = leaf.data();
        int base = BTreeNodeFormat.base(n);
        int pos = i;
        if (i >= 0) {
            BTreeNodeFormat.remove(n, i, cache.floatingLeaves());
        } else {
            pos = -i - 1;
        }
        int need = leafCellSize((int) key.byteSize(), (int) value.byteSize());
        int made = BTreeNodeFormat.ensureRoom(n, need, blockSize, scratch(blockSize), cache.floatingLeaves());
        int skip = BTreeNodeFormat.skip(n);
        int cell = BTreeNodeFormat.insertLeaf(n, pos, key, value);
        if (i >= 0 && made == BTreeNodeFormat.ROOM && BTreeNodeFormat.base(n) == base && BTreeNodeFormat.skip(n) == skip) {
            // the delete and the insert moved the same slots away and back: only slot i is new
            txn.log(leaf, BTreeNodeFormat.LEVEL, BTreeNodeFormat.LEFT - BTreeNodeFormat.LEVEL);
            txn.log(leaf, BTreeNodeFormat.base(n) + BTreeNodeFormat.SLOT * pos, BTreeNodeFormat.SLOT);
            txn.log(leaf, cell, need - BTreeNodeFormat.SLOT);
        } else {
            logInsert(txn, leaf, pos, skip, i >= 0 ? -1 : base, cell, need, made);
        }
    }

    /**
     * Logs a cell of {@code need} bytes (slot included) inserted at {@code pos} once {@code made} room
     * ({@link BTreeNodeFormat#ensureRoom}): the node's used bytes if it was compacted ({@link #logUsed}),
     * else its header fields, the slots that moved (the slots below and at {@code pos} if the slot base
     * moved down from {@code baseBefore}; the ones from {@code pos} up if not; all of them and the prefix
     * if the slots slid, if the insert shortened the prefix from {@code skipBefore}, rewriting every head,
     * or if {@code baseBefore} is -1: unknown), and the cell.
     */
    void logInsert(Txn txn, Buffer node, int pos, int skipBefore, int baseBefore, int cell, int need, int made) {
        MemorySegment n = node.data();
        if (made == BTreeNodeFormat.COMPACTED) {
            logUsed(txn, node);
            return;
        }
        if (made == BTreeNodeFormat.SLID || BTreeNodeFormat.skip(n) != skipBefore || baseBefore < 0) {
            logSlots(txn, node, -1);
        } else if (BTreeNodeFormat.base(n) != baseBefore) {
            logFront(txn, node, pos + 1);
        } else {
            logSlots(txn, node, pos);
        }
        txn.log(node, cell, need - BTreeNodeFormat.SLOT);
    }

    /**
     * Logs the node's header fields and its slots from index {@code from} up (-1: the prefix, a leaf's
     * slot base and every slot).
     */
    static void logSlots(Txn txn, Buffer node, int from) {
        MemorySegment n = node.data();
        txn.log(node, BTreeNodeFormat.LEVEL, BTreeNodeFormat.LEFT - BTreeNodeFormat.LEVEL);
        int start = BTreeNodeFormat.base(n) + BTreeNodeFormat.SLOT * Math.max(from, 0);
        if (from < 0) {
            logBase(txn, node);
            txn.log(node, BTreeNodeFormat.PREFIX, 8);
        }
        int end = BTreeNodeFormat.slotsEnd(n);
        if (end > start) {
            txn.log(node, start, end - start);
        }
    }

    /** Logs a leaf's header fields, its slot base and its slots below index {@code to}: what moved with the base. */
    static void logFront(Txn txn, Buffer node, int to) {
        txn.log(node, BTreeNodeFormat.LEVEL, BTreeNodeFormat.LEFT - BTreeNodeFormat.LEVEL);
        logBase(txn, node);
        if (to > 0) {
            txn.log(node, BTreeNodeFormat.base(node.data()), BTreeNodeFormat.SLOT * to);
        }
    }

    /** Logs a leaf's slot base (an interior node's leftmost child stays as it was). */
    private static void logBase(Txn txn, Buffer node) {
        if (BTreeNodeFormat.isLeaf(node.data())) {
            txn.log(node, BTreeNodeFormat.BASE, 2);
        }
    }

    /** Logs the slots that {@link BTreeNodeFormat#remove} of index {@code i} moved, the slot base before it given. */
    static void logRemove(Txn txn, Buffer node, int i, int baseBefore) {
        if (BTreeNodeFormat.base(node.data()) != baseBefore) {
            logFront(txn, node, i);
        } else {
            logSlots(txn, node, i);
        }
    }

    /**
     * Logs a node rewritten in place (compacted, split, merged) or built in a new block: its header
     * fields and slots, and its cells, but not the free gap between them, which nothing reads and no
     * change writes (so a gap chunk left out is either as the log last had it or as home has it), and
     * which is most of a half-full node.
     */
    static void logUsed(Txn txn, Buffer node) {
        MemorySegment n = node.data();
        txn.log(node, BTreeNodeFormat.LEVEL, BTreeNodeFormat.SLOTS - BTreeNodeFormat.LEVEL);
        int base = BTreeNodeFormat.base(n), slotsEnd = BTreeNodeFormat.slotsEnd(n);
        if (slotsEnd > base) {
            txn.log(node, base, slotsEnd - base);
        }
        int cells = BTreeNodeFormat.cellStart(n), end = (int) n.byteSize();
        if (cells < end) {
            txn.log(node, cells, end - cells);
        }
    }

    /**
     * As {@link #logUsed}, for a node rebuilt in place whose image before the change is {@code before}:
     * only the parts that differ from it, in the journal's chunks ({@link DirtyMap#CHUNKS} to a block). A part the
     * rebuild wrote back as it was is as the log last had it or as home has it, as the free gap is: a
     * split's left half keeps its first cells where they were whenever no key below them came in since
     * the leaf was last rebuilt.
     */
    static void logUsedChanged(Txn txn, Buffer node, MemorySegment before) {
        MemorySegment n = node.data();
        logChanged(txn, node, before, BTreeNodeFormat.LEVEL, BTreeNodeFormat.SLOTS);
        logChanged(txn, node, before, BTreeNodeFormat.base(n), BTreeNodeFormat.slotsEnd(n));
        logChanged(txn, node, before, BTreeNodeFormat.cellStart(n), (int) n.byteSize());
    }

    /**
     * Logs the runs of chunks of {@code [from, to)} of {@code node} that differ from {@code before}, or
     * that lay partly in one of {@code before}'s free gaps: bytes there were not logged as the node had
     * them, so a rebuild that happens to write the same bytes still logs them.
     */
    private static void logChanged(Txn txn, Buffer node, MemorySegment before, int from, int to) {
        MemorySegment n = node.data();
        int chunk = (int) n.byteSize() / DirtyMap.CHUNKS;
        int slotsFrom = BTreeNodeFormat.base(before), slotsTo = BTreeNodeFormat.slotsEnd(before), cells = BTreeNodeFormat.cellStart(before);
        int run = -1;
        for (int at = from; at < to; ) {
            int end = Math.min(to, (at & -chunk) + chunk);
            boolean differs = !usedIn(at & -chunk, (at & -chunk) + chunk, slotsFrom, slotsTo, cells)
                    || MemorySegment.mismatch(n, at, end, before, at, end) >= 0;
            if (differs && run < 0) {
                run = at;
            } else if (!differs && run >= 0) {
                txn.log(node, run, at - run);
                run = -1;
            }
            at = end;
        }
        if (run >= 0) {
            txn.log(node, run, to - run);
        }
    }

    /** Whether every byte of {@code [from, to)} lay in a node's header, its slots {@code [slotsFrom, slotsTo)} or its cells from {@code cells}. */
    private static boolean usedIn(int from, int to, int slotsFrom, int slotsTo, int cells) {
        for (int at = from; at < to; ) {
            if (at < BTreeNodeFormat.SLOTS) {
                at = BTreeNodeFormat.SLOTS;
            } else if (at >= slotsFrom && at < slotsTo) {
                at = slotsTo;
            } else {
                return at >= cells;
            }
        }
        return true;
    }

    /** Deletes {@code key}; true if it was there. Holds the changed nodes in {@code txn} until it commits. */
    public boolean delete(Txn txn, MemorySegment key) {
        return delete(txn, key, null) >= 0;
    }

    /**
     * {@link #delete}, copying the value deleted into {@code priorOut} (as much as fits; null: not copied),
     * read under the leaf's lock in the same descent: returns its length, or -1 if the key was absent. As
     * for {@link #replace}, the caller keeps other writers off {@code key}.
     */
    public int delete(Txn txn, MemorySegment key, MemorySegment priorOut) {
        return delete(txn, key, priorOut, true, null);
    }

    /** A condition on the value a {@link #deleteIf} would delete (a {@link #replaceIf} replace), checked under its leaf's lock. */
    @FunctionalInterface
    public interface PriorCheck {
        /** Whether the delete goes ahead, given the value (as much as fits of it in the caller's buffer) and its length. */
        boolean allows(MemorySegment prior, int length);
    }

    /** What {@link #deleteIf} and {@link #replaceIf} return when their check refused the change. */
    public static final int REFUSED = -3;

    /**
     * {@link #delete(Txn, MemorySegment, MemorySegment)} only if {@code check} allows it, looking at the
     * value copied into {@code priorOut} before anything changes: one descent where a look-up and a delete
     * took two, for a caller that must know what the key held before it commits to the delete. Returns the
     * value's length, -1 if the key was absent, or {@link #REFUSED} with nothing changed.
     */
    public int deleteIf(Txn txn, MemorySegment key, MemorySegment priorOut, PriorCheck check) {
        return delete(txn, key, priorOut, true, check);
    }

    /** What {@link #deleteUnlessMerging} returns when the delete would merge nodes. */
    public static final int WOULD_MERGE = -2;

    /**
     * {@link #delete} of {@code key} only if it frees no block: the key's leaf (the root, or one that stays
     * at or above the leaf merge threshold) loses it in place. Returns the value's length, -1 if the key was
     * absent, or {@link #WOULD_MERGE} with nothing changed. For a caller that claimed no room in the
     * tree's allocator for the blocks a merge gives back, and claims it only for the deletes that need it.
     */
    public int deleteUnlessMerging(Txn txn, MemorySegment key) {
        return delete(txn, key, null, false, null);
    }

    private int delete(Txn txn, MemorySegment key, MemorySegment priorOut, boolean merge, PriorCheck check) {
        requireKey(key);
        Path p = path();
        Buffer leaf = lockedLeaf(txn, p, key);
        boolean held = p.leafVersion() == Buffer.HELD;
        MemorySegment n = leaf.data();
        int i = search(n, key);
        if (i < 0) {
            if (!held) {
                txn.releaseUnchanged(leaf);
            }
            return -1;
        }
        int prior = copyValue(n, i, priorOut);
        if (check != null && !check.allows(priorOut, prior)) {
            if (!held) {
                txn.releaseUnchanged(leaf);
            }
            return REFUSED;
        }
        int after = used(n, blockSize) - cellSize(n, i);
        if (p.depth == 1 || after >= leafMergeThreshold) {
            int base = BTreeNodeFormat.base(n);
            BTreeNodeFormat.remove(n, i, cache.floatingLeaves());
            logRemove(txn, leaf, i, base);
            return prior;
        }
        if (!held) {
            txn.releaseUnchanged(leaf);
        }
        if (!merge) {
            return WOULD_MERGE;
        }
        return restructure.deleteAndMerge(txn, p, key) ? prior : -1;
    }

    // ------------------------------------------------------------------ the whole tree

    int blockSize() {
        return blockSize;
    }

    /**
     * Frees every block of the tree (nodes and header) in {@code txn}, through its allocator and the
     * cache, so that none is ever written home again. The caller guarantees that nothing else uses the
     * tree from now on; {@code txn} reserves an item per block and per allocator change.
     *
     * <p>No read happens while this holds a lock anyone else could wait for: each block is read, then
     * locked and freed at once, and a freed buffer leaves the cache, so nobody can find it to wait on it;
     * the allocator's blocks, which every writer sharing the allocator needs, are locked only after the
     * last read (allocator blocks last is also the lock order). Locks the caller's transaction already
     * holds are the caller's: take them after this.
     *
     * @return the blocks freed
     */
    public int destroy(Txn txn) {
        Buffer h;
        do {
            h = header();
        } while (!txn.lock(h));
        long root = BTreeHeaderFormat.root(h.data());
        int height = BTreeHeaderFormat.height(h.data());
        cache.free(txn, h, BTreeHeaderFormat.FREED_MAGIC);
        long[] freed = new long[16];
        freed[0] = headerBlock;
        int count = 1;
        // (block, level) pairs still to free, parents before children
        long[] todo = {root, height - 1};
        int pending = 1;
        while (pending > 0) {
            pending--;
            long block = todo[2 * pending];
            int level = (int) todo[2 * pending + 1];
            if (cache.isBusy(block)) { // freed already: by this destroy (a second parent) or before it
                throw new CorruptionException(block, NODE, "a node of tree " + id + " is reached twice or was freed");
            }
            Buffer b;
            do {
                b = node(block);
            } while (!txn.lock(b));
            MemorySegment n = b.data();
            if (BTreeNodeFormat.level(n) != level) {
                throw new CorruptionException(block, NODE, "level " + BTreeNodeFormat.level(n) + " where its parent says " + level);
            }
            if (level > 0) {
                int c = count(n);
                if (2 * (pending + c + 1) > todo.length) {
                    todo = Arrays.copyOf(todo, Math.max(2 * todo.length, 2 * (pending + c + 1)));
                }
                for (int i = c - 1; i >= -1; i--) { // leftmost popped first
                    todo[2 * pending] = childAt(n, i);
                    todo[2 * pending + 1] = level - 1;
                    pending++;
                }
            }
            cache.free(txn, b, BTreeNodeFormat.FREED_MAGIC);
            if (count == freed.length) {
                freed = Arrays.copyOf(freed, 2 * count);
            }
            freed[count++] = block;
        }
        Arrays.sort(freed, 0, count); // allocator blocks in ascending order
        for (int i = 0; i < count; i++) {
            allocator.free(txn, freed[i]);
        }
        return count;
    }

    /** A checker's view: walks the tree (call while no one changes it). */
    public TreeCheck check() {
        return TreeCheck.run(this, cache, allocator instanceof BitmapAllocator b ? b : null);
    }

    // ------------------------------------------------------------------ reads inside a transaction

    /** Which entry {@link #find} returns for a key. */
    public enum Match {
        /** The key itself. */
        EXACT,
        /** The smallest key at or above it. */
        CEILING,
        /** The largest key at or below it. */
        FLOOR
    }

    /** The key length in a {@link #find} result. */
    public static int foundKeyLength(long found) {
        return (int) (found >>> 32);
    }

    /** The value length in a {@link #find} result. */
    public static int foundValueLength(long found) {
        return (int) found;
    }

    /**
     * Finds the entry {@code match} names for {@code key} and copies its key into {@code keyOut} and its
     * value into {@code valueOut} (as much as fits of each). Unlike the plain readers it reads nodes that
     * {@code txn} holds (a plain reader would wait on them for ever), so a transaction can read what it has
     * just changed; {@code txn} may be null. Lock-free otherwise: it validates and retries like {@link #get}.
     *
     * @return -1 if there is no such entry, else the key and value lengths packed for
     *         {@link #foundKeyLength} and {@link #foundValueLength}
     */
    public long find(Txn txn, MemorySegment key, Match match, MemorySegment keyOut, MemorySegment valueOut) {
        requireKey(key);
        Path p = path();
        p.start(this, key);
        long found;
        for (;;) {
            descend(p, key, txn);
            found = findIn(txn, p.leaf(), p.leafVersion(), key, match, keyOut, valueOut);
            if (found != RETRY) {
                return found;
            }
            cache.latches.restarted(p.leaf());
        }
    }

    /**
     * {@link #find} of the {@link Match#FLOOR} and the {@link Match#CEILING} entries of {@code key} in one
     * descent (a free-space change looks at both neighbours of the extent it frees): the floor's key and
     * value go to {@code floorKey} and {@code floorValue}, the ceiling's to the other two, and their
     * results (as {@link #find}'s) to {@code found[0]} and {@code found[1]}. Both are the key itself if the
     * tree holds it.
     */
    public void findAround(Txn txn, MemorySegment key, MemorySegment floorKey, MemorySegment floorValue,
                           MemorySegment ceilingKey, MemorySegment ceilingValue, long[] found) {
        requireKey(key);
        Path p = path();
        p.start(this, key);
        for (;;) {
            descend(p, key, txn);
            Buffer leaf = p.leaf();
            long v = p.leafVersion();
            long floor = RETRY, ceiling;
            try {
                int r = search(leaf.data(), key);
                floor = findFrom(txn, leaf, v, r >= 0 ? r : -r - 2, true, floorKey, floorValue);
                ceiling = floor == RETRY ? RETRY : findFrom(txn, leaf, v, r >= 0 ? r : -r - 1, false, ceilingKey, ceilingValue);
            } catch (RuntimeException e) {
                if (leaf.validate(v)) {
                    throw e;
                }
                ceiling = RETRY;
            }
            if (ceiling != RETRY) {
                found[0] = floor;
                found[1] = ceiling;
                return;
            }
            cache.latches.restarted(leaf);
        }
    }

    /** {@link #find} in the leaf {@code key} leads to, read at version {@code v}; {@link #RETRY} if it changed. */
    private long findIn(Txn txn, Buffer leaf, long v, MemorySegment key, Match match, MemorySegment keyOut,
                        MemorySegment valueOut) {
        try {
            int r = search(leaf.data(), key);
            if (r < 0 && match == Match.EXACT) {
                return leaf.validate(v) ? -1 : RETRY;
            }
            int i = r >= 0 ? r : match == Match.CEILING ? -r - 1 : -r - 2;
            return findFrom(txn, leaf, v, i, match == Match.FLOOR, keyOut, valueOut);
        } catch (RuntimeException e) {
            if (leaf.validate(v)) {
                throw e;
            }
            return RETRY;
        }
    }

    private static final long RETRY = -2;

    /**
     * Copies entry {@code i} of {@code leaf} (read at version {@code v}) out, or, when {@code i} lies past
     * either end, the nearest entry of the leaves beyond in the direction of the search.
     */
    private long findFrom(Txn txn, Buffer leaf, long v, int i, boolean leftward, MemorySegment keyOut,
                          MemorySegment valueOut) {
        for (;;) {
            MemorySegment n = leaf.data();
            int c = count(n);
            if (i >= 0 && i < c) {
                int kl, vl;
                try {
                    kl = keyLength(n, i);
                    vl = BTreeNodeFormat.valueLength(n, i);
                    MemorySegment.copy(n, BTreeNodeFormat.keyOffset(n, i), keyOut, 0, Math.min(kl, keyOut.byteSize()));
                    MemorySegment.copy(n, BTreeNodeFormat.valueOffset(n, i), valueOut, 0, Math.min(vl, valueOut.byteSize()));
                } catch (RuntimeException e) {
                    if (leaf.validate(v)) {
                        throw e;
                    }
                    return RETRY;
                }
                return leaf.validate(v) ? (long) kl << 32 | vl : RETRY;
            }
            long sibling = leftward ? BTreeNodeFormat.left(n) : BTreeNodeFormat.right(n);
            if (!leaf.validate(v)) {
                return RETRY;
            }
            if (sibling == 0) {
                return -1;
            }
            Buffer next = node(sibling);
            long nv = next.readVersion(txn);
            if (nv == -1 || !leaf.validate(v) || !atLevel(next, nv, 0, leaf, v)) {
                return RETRY;
            }
            leaf = next;
            v = nv;
            i = leftward ? count(next.data()) - 1 : 0;
        }
    }
}
