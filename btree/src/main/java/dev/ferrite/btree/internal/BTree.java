package dev.ferrite.btree.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;

import static dev.ferrite.btree.internal.BTreeNodeFormat.cellSize;
import static dev.ferrite.btree.internal.BTreeNodeFormat.childAt;
import static dev.ferrite.btree.internal.BTreeNodeFormat.childIndexFor;
import static dev.ferrite.btree.internal.BTreeNodeFormat.count;
import static dev.ferrite.btree.internal.BTreeNodeFormat.freeTotal;
import static dev.ferrite.btree.internal.BTreeNodeFormat.interiorCellSize;
import static dev.ferrite.btree.internal.BTreeNodeFormat.isLeaf;
import static dev.ferrite.btree.internal.BTreeNodeFormat.keyLength;
import static dev.ferrite.btree.internal.BTreeNodeFormat.leafCellSize;
import static dev.ferrite.btree.internal.BTreeNodeFormat.search;
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
 * <p>Keys are up to {@value BTreeNodeFormat#MAX_KEY} bytes, values up to
 * {@value BTreeNodeFormat#MAX_VALUE}; order is unsigned bytewise. Leaves are linked both ways for range
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
    private static final int MAX_DEPTH = BTreeNodeFormat.MAX_LEVELS;
    private static final ThreadLocal<Path> PATHS = ThreadLocal.withInitial(Path::new);
    private static final ThreadLocal<MemorySegment> SCRATCH = new ThreadLocal<>();

    private final BufferCache cache;
    private final BlockAllocator allocator;
    private final long headerBlock;
    private final long id;
    private final int blockSize;
    /** Below this many bytes used, a node merges with a sibling if the two fit in one. */
    private final int mergeThreshold;

    /** CLOCK priority of headers and interior nodes: three sweeps of the hand to a leaf's one. */
    static final int INTERIOR_PRIORITY = 3;

    private BTree(BufferCache cache, BlockAllocator allocator, long headerBlock, long id) {
        this.cache = cache;
        this.allocator = allocator;
        this.headerBlock = headerBlock;
        this.id = id;
        this.blockSize = cache.blockSize();
        this.mergeThreshold = (blockSize - BTreeNodeFormat.SLOTS) / 4;
        if (blockSize < 4096) {
            throw new InvalidArgumentException("B-trees need blocks of at least 4096 bytes, not " + blockSize);
        }
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
            h = cache.create(txn, header, BTreeHeaderFormat.MAGIC, treeId, f);
            f = rootFrame;
            rootFrame = -1;
            r = cache.create(txn, root, BTreeNodeFormat.MAGIC, treeId, f);
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
        BTreeHeaderFormat.set(h.data(), root, 1);
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

    private Buffer header() {
        Buffer h = cache.get(headerBlock, BTreeHeaderFormat.MAGIC, id, HEADER);
        if (h.priority != INTERIOR_PRIORITY) {
            h.priority = INTERIOR_PRIORITY; // read back from disk: the cache cannot tell what it holds
        }
        return h;
    }

    private Buffer node(long block) {
        Buffer b = cache.get(block, BTreeNodeFormat.MAGIC, id, NODE);
        // A node's level never changes while its block is allocated, so an unvalidated read is a sound hint.
        if (b.priority != INTERIOR_PRIORITY && !BTreeNodeFormat.isLeaf(b.data())) {
            b.priority = INTERIOR_PRIORITY;
        }
        return b;
    }

    private static MemorySegment scratch(int blockSize) {
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
    private static RuntimeException unreadable(RuntimeException e, long block, String structure) {
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

    static void checkKey(MemorySegment key) {
        if (key.byteSize() < 1 || key.byteSize() > BTreeNodeFormat.MAX_KEY) {
            throw new InvalidArgumentException("key of " + key.byteSize() + " bytes: keys are 1 to "
                    + BTreeNodeFormat.MAX_KEY + " bytes");
        }
    }

    static void checkValue(MemorySegment value) {
        if (value.byteSize() > BTreeNodeFormat.MAX_VALUE) {
            throw new InvalidArgumentException("value of " + value.byteSize() + " bytes: values are at most "
                    + BTreeNodeFormat.MAX_VALUE + " bytes");
        }
    }

    // ------------------------------------------------------------------ descent

    /** A root-to-leaf path: entry 0 is the header, entry {@code depth} the node reached. Reused per thread. */
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
         * {@code t}'s, its leaf is unchanged since it was read, and {@code key} sorts between the leaf's
         * first and last keys: no other leaf can hold it, so the descent starts there (an unlink looks its
         * name up, then deletes it; a walk stats names in key order). Otherwise it starts at the header.
         * Versions a transaction read as {@link Buffer#HELD} are only good inside it, so such paths go.
         */
        void start(BTree t, MemorySegment key) {
            if (tree != t || depth < 1 || !leafCovers(key)) {
                depth = -1;
            }
            tree = t;
        }

        private boolean leafCovers(MemorySegment key) {
            for (int d = 0; d <= depth; d++) {
                if (version[d] == Buffer.HELD) {
                    return false;
                }
            }
            Buffer leaf = node[depth];
            long v = version[depth];
            try {
                MemorySegment n = leaf.data();
                int i = search(n, key);
                boolean inside = i >= 0 || -i - 1 > 0 && -i - 1 < count(n);
                // only a consistent read proves the leaf's range holds the key; every ancestor the descent
                // may back up to from here has a range holding the leaf's
                return leaf.validate(v) && inside;
            } catch (RuntimeException e) {
                return false; // torn read of a leaf that changed
            }
        }

        Buffer leaf() {
            return node[depth];
        }

        long leafVersion() {
            return version[depth];
        }
    }

    /** Deepest entry of the path at or above {@code d} that still validates, or -1. */
    private static int backtrack(Path p, int d) {
        while (d >= 0 && !p.node[d].validate(p.version[d])) {
            d--;
        }
        return d;
    }

    /**
     * Fills {@code p} from the header down to the leaf for {@code key}, resuming below the deepest node
     * of the previous path that is still unchanged. Nodes {@code txn} holds read as {@link Buffer#HELD}.
     */
    private void descend(Path p, MemorySegment key, Txn txn) {
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
                    d = backtrack(p, d - 1);
                    continue;
                } else {
                    idx = childIndexFor(data, key);
                    child = childAt(data, idx);
                }
            } catch (RuntimeException e) {
                if (cur.validate(v)) {
                    throw unreadable(e, cur.block(), d == 0 ? HEADER : NODE);
                }
                d = backtrack(p, d - 1);
                continue;
            }
            if (!cur.validate(v)) {
                d = backtrack(p, d - 1);
                continue;
            }
            Buffer next;
            try {
                next = node(child);
            } catch (CorruptionException e) {
                if (cur.validate(v)) {
                    throw e;
                }
                d = backtrack(p, d - 1); // a stale pointer led to a block that is no longer a node of ours
                continue;
            }
            long nv = next.readVersion(txn);
            if (nv == -1 || !cur.validate(v)) {
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
        checkKey(key);
        Path p = PATHS.get();
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
        }
    }

    /** The value of {@code key}, or null. */
    public byte[] get(byte[] key) {
        byte[] buf = new byte[BTreeNodeFormat.MAX_VALUE];
        int len = get(MemorySegment.ofArray(key), MemorySegment.ofArray(buf));
        return len < 0 ? null : Arrays.copyOf(buf, len);
    }

    /** A cursor positioned before the first key at or after {@code from} (forward) or at or before it (reverse). */
    public Cursor cursor(byte[] from, boolean reverse) {
        return new Cursor(this, from, null, reverse);
    }

    /**
     * A cursor as {@link #cursor(byte[], boolean)} that stops before {@code to}: it returns the keys in
     * {@code [from, to)} forward, {@code (to, from]} in reverse. Null bounds are the ends of the tree.
     * The bound is checked once per leaf, not per key.
     */
    public Cursor cursor(byte[] from, byte[] to, boolean reverse) {
        return new Cursor(this, from, to, reverse);
    }

    /** The smallest key, or null for an empty tree. */
    public byte[] firstKey() {
        Cursor c = new Cursor(this, null, null, false);
        return c.next() ? c.key() : null;
    }

    /** The largest key, or null for an empty tree. */
    public byte[] lastKey() {
        Cursor c = new Cursor(this, null, null, true);
        return c.next() ? c.key() : null;
    }

    /**
     * An estimate of the number of keys: the fan-outs along the path to the middle key, multiplied.
     * Exact for a tree of one leaf.
     */
    public long countEstimate() {
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
            double estimate = 1;
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
                    long child = childAt(n, c / 2 - (c % 2 == 0 ? 1 : 0));
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
                return Math.round(estimate);
            }
        }
    }

    // ------------------------------------------------------------------ writes

    private enum Mode { PUT, IF_ABSENT }

    /** Inserts or replaces; true if the key was new. Holds the changed nodes in {@code txn} until it commits. */
    public boolean put(Txn txn, MemorySegment key, MemorySegment value) {
        return write(txn, key, value, Mode.PUT);
    }

    /** Inserts if absent; true if inserted. */
    public boolean putIfAbsent(Txn txn, MemorySegment key, MemorySegment value) {
        return write(txn, key, value, Mode.IF_ABSENT);
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

    private boolean write(Txn txn, MemorySegment key, MemorySegment value, Mode mode) {
        checkKey(key);
        checkValue(value);
        Path p = PATHS.get();
        p.start(this, key);
        int kl = (int) key.byteSize(), vl = (int) value.byteSize();
        for (;;) {
            descend(p, key, txn);
            Buffer leaf = p.leaf();
            long v = p.leafVersion();
            boolean held = v == Buffer.HELD;
            if (!txn.tryUpgrade(leaf, v)) {
                continue; // changed since read: the next descent backs up from it
            }
            MemorySegment n = leaf.data();
            int i = search(n, key);
            if (i >= 0 && mode == Mode.IF_ABSENT) {
                if (!held) {
                    txn.releaseUnchanged(leaf);
                }
                return false;
            }
            if (i >= 0 && BTreeNodeFormat.valueLength(n, i) == vl) {
                int off = BTreeNodeFormat.valueOffset(n, i);
                MemorySegment.copy(value, 0, n, off, vl);
                if (vl > 0) {
                    txn.log(leaf, off, vl);
                }
                return false;
            }
            int need = leafCellSize(kl, vl);
            int room = freeTotal(n) + (i >= 0 ? cellSize(n, i) : 0);
            if (room >= need) {
                insertIntoLeaf(txn, leaf, i, key, value);
                return i < 0;
            }
            if (!held) {
                txn.releaseUnchanged(leaf);
            }
            return splitInsert(txn, p, key, value, mode);
        }
    }

    /** Under the leaf's lock, with room known: replaces cell {@code i} (if found) or inserts, and logs. */
    private void insertIntoLeaf(Txn txn, Buffer leaf, int i, MemorySegment key, MemorySegment value) {
        MemorySegment n = leaf.data();
        int pos = i;
        if (i >= 0) {
            BTreeNodeFormat.remove(n, i);
        } else {
            pos = -i - 1;
        }
        int need = leafCellSize((int) key.byteSize(), (int) value.byteSize());
        boolean compacted = BTreeNodeFormat.freeContiguous(n) < need;
        BTreeNodeFormat.ensureRoom(n, need, blockSize, scratch(blockSize));
        int skip = BTreeNodeFormat.skip(n);
        int cell = BTreeNodeFormat.insertLeaf(n, pos, key, value);
        logInsert(txn, leaf, pos, skip, cell, need, compacted);
    }

    /**
     * Logs a cell of {@code need} bytes (slot included) inserted at {@code pos}: the whole node if it was
     * compacted first, else its header fields, the slots from {@code pos} up (all of them if the insert
     * shortened the prefix from {@code skipBefore}, rewriting every head) and the cell.
     */
    private void logInsert(Txn txn, Buffer node, int pos, int skipBefore, int cell, int need, boolean compacted) {
        if (compacted) {
            txn.log(node, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
        } else {
            logSlots(txn, node, BTreeNodeFormat.skip(node.data()) == skipBefore ? pos : -1);
            txn.log(node, cell, need - BTreeNodeFormat.SLOT);
        }
    }

    /** Logs the node's header fields and its slots from index {@code from} up (-1: the prefix and every slot). */
    private static void logSlots(Txn txn, Buffer node, int from) {
        MemorySegment n = node.data();
        txn.log(node, BTreeNodeFormat.LEVEL, BTreeNodeFormat.LEFT - BTreeNodeFormat.LEVEL);
        int start = from < 0 ? BTreeNodeFormat.PREFIX : BTreeNodeFormat.SLOTS + BTreeNodeFormat.SLOT * from;
        int end = BTreeNodeFormat.slotsEnd(n);
        if (end > start) {
            txn.log(node, start, end - start);
        }
    }

    /** Deletes {@code key}; true if it was there. Holds the changed nodes in {@code txn} until it commits. */
    public boolean delete(Txn txn, MemorySegment key) {
        checkKey(key);
        Path p = PATHS.get();
        p.start(this, key);
        for (;;) {
            descend(p, key, txn);
            Buffer leaf = p.leaf();
            long v = p.leafVersion();
            boolean held = v == Buffer.HELD;
            if (!txn.tryUpgrade(leaf, v)) {
                continue;
            }
            MemorySegment n = leaf.data();
            int i = search(n, key);
            if (i < 0) {
                if (!held) {
                    txn.releaseUnchanged(leaf);
                }
                return false;
            }
            int after = used(n, blockSize) - cellSize(n, i);
            if (p.depth == 1 || after >= mergeThreshold) {
                BTreeNodeFormat.remove(n, i);
                logSlots(txn, leaf, i);
                return true;
            }
            if (!held) {
                txn.releaseUnchanged(leaf);
            }
            return deleteAndMerge(txn, p, key);
        }
    }

    // ------------------------------------------------------------------ pessimistic paths

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

    /** A node read optimistically while planning, with the version it must still have when locked. */
    record Seen(Buffer buffer, long version) {
    }

    private Seen see(long block, Txn txn) {
        for (;;) {
            Buffer b = node(block);
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
    private boolean splitInsert(Txn txn, Path p, MemorySegment key, MemorySegment value, Mode mode) {
        int kl = (int) key.byteSize(), vl = (int) value.byteSize();
        Locks locks = new Locks();
        int[] frames = new int[MAX_DEPTH + 2];
        int framesHeld = 0;
        try {
            for (int attempt = 0; ; attempt++) {
                if (attempt > 0) {
                    backoff(attempt);
                }
                p.reset();
                descend(p, key, txn);
                int leafD = p.depth;
                // Plan, optimistically: the leaf splits; each ancestor splits if it cannot take the
                // separator its child may push up (bounded by the child's longest key).
                int top;
                Seen right;
                boolean replace;
                try {
                    MemorySegment leafData = p.leaf().data();
                    int i = search(leafData, key);
                    replace = i >= 0;
                    int room = freeTotal(leafData) + (replace ? cellSize(leafData, i) : 0);
                    if (room >= leafCellSize(kl, vl) || replace && mode == Mode.IF_ABSENT) {
                        if (!p.leaf().validate(p.leafVersion())) {
                            continue;
                        }
                        // the leaf changed meanwhile (room made, or the key inserted): the simple path decides
                        return write(txn, key, value, mode);
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
                int used = split(txn, p, right == null ? null : right.buffer(), key, value, replace, blocks, frames);
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
     */
    private int split(Txn txn, Path p, Buffer right, MemorySegment key, MemorySegment value,
                      boolean replace, long[] blocks, int[] frames) {
        int leafD = p.depth;
        int used = 0;
        MemorySegment scratch = scratch(blockSize);
        // leaf
        Buffer leaf = p.node[leafD];
        Buffer newLeaf = cache.create(txn, blocks[used], BTreeNodeFormat.MAGIC, id, frames[used]);
        used++;
        MemorySegment sep = splitLeaf(leaf, newLeaf, right, key, value, replace, scratch);
        txn.log(leaf, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
        txn.log(newLeaf, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
        if (right != null) {
            txn.log(right, BTreeNodeFormat.LEFT, 8);
        }
        long newChild = newLeaf.block();
        // ancestors, bottom up
        for (int d = leafD - 1; d >= 1; d--) {
            Buffer parent = p.node[d];
            MemorySegment pn = parent.data();
            int pos = p.childIndex[d] + 1;
            int need = interiorCellSize((int) sep.byteSize());
            if (freeTotal(pn) >= need) {
                boolean compacted = BTreeNodeFormat.freeContiguous(pn) < need;
                BTreeNodeFormat.ensureRoom(pn, need, blockSize, scratch);
                int skip = BTreeNodeFormat.skip(pn);
                int cell = BTreeNodeFormat.insertInterior(pn, pos, sep, newChild);
                logInsert(txn, parent, pos, skip, cell, need, compacted);
                return used;
            }
            Buffer sibling = cache.create(txn, blocks[used], BTreeNodeFormat.MAGIC, id, frames[used]);
            used++;
            sibling.priority = INTERIOR_PRIORITY;
            sep = splitInterior(parent, sibling, pos, sep, newChild, scratch);
            txn.log(parent, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
            txn.log(sibling, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
            newChild = sibling.block();
        }
        // the root split: a new root above the old one
        Buffer header = p.node[0];
        long oldRoot = BTreeHeaderFormat.root(header.data());
        int height = BTreeHeaderFormat.height(header.data());
        Buffer root = cache.create(txn, blocks[used], BTreeNodeFormat.MAGIC, id, frames[used]);
        root.priority = INTERIOR_PRIORITY;
        BTreeNodeFormat.init(root.data(), height, blockSize);
        BTreeNodeFormat.setLeftmost(root.data(), oldRoot);
        BTreeNodeFormat.insertInterior(root.data(), 0, sep, newChild);
        txn.log(root, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
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
        int[] src = new int[entries];   // index into scratch, or -1 for the new cell
        int[] size = new int[entries];
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
        MemorySegment lastLeft = BTreeNodeFormat.key(l, m - 1);
        MemorySegment firstRight = BTreeNodeFormat.key(r, 0);
        int sepLen = Keys.shortestSeparatorLength(lastLeft, firstRight);
        byte[] sep = new byte[sepLen];
        MemorySegment.copy(firstRight, 0, MemorySegment.ofArray(sep), 0, sepLen);
        return MemorySegment.ofArray(sep);
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
     * node's leftmost.
     */
    private MemorySegment splitInterior(Buffer nodeBuf, Buffer fresh, int pos, MemorySegment sep, long child,
                                        MemorySegment scratch) {
        MemorySegment x = nodeBuf.data();
        MemorySegment y = fresh.data();
        MemorySegment.copy(x, 0, scratch, 0, blockSize);
        int n = count(scratch);
        int entries = n + 1;
        int[] src = new int[entries];
        int[] size = new int[entries];
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
        int m = splitPoint(size, entries, true);
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
    private boolean deleteAndMerge(Txn txn, Path p, MemorySegment key) {
        Locks locks = new Locks();
        attempts:
        for (int attempt = 0; ; attempt++) {
            if (attempt > 0) {
                backoff(attempt);
            }
            p.reset();
            descend(p, key, txn);
            int leafD = p.depth;
            Seen[] partner = new Seen[leafD + 1];
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
                    if (used(n, blockSize) - shrink >= mergeThreshold) {
                        break;
                    }
                    MemorySegment parent = p.node[d - 1].data();
                    int j = p.childIndex[d - 1];
                    int pc = count(parent);
                    if (pc == 0) {
                        break; // an only child has no sibling to merge with
                    }
                    int other = j + 1 < pc ? j + 1 : j - 1;
                    long mateBlock = childAt(parent, other);
                    if (!p.node[d - 1].validate(p.version[d - 1])) {
                        continue attempts; // follow only pointers read from a node still as planned
                    }
                    partner[d] = see(mateBlock, txn);
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
                        outer = beyond == 0 ? null : see(beyond, txn);
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
                boolean mateLeft = mate != null && p.childIndex[d - 1] > childIndexOf(p, d - 1, mate);
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
            BTreeNodeFormat.remove(n, search(n, key));
            txn.log(leaf, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
            for (int d = leafD; d > top && d >= 2; d--) {
                if (partner[d] == null || !merge(txn, p, d, partner[d].buffer(), d == leafD ? outer : null)) {
                    break;
                }
            }
            collapseRoot(txn, p);
            return true;
        }
    }

    /** Index of {@code mate}'s block among the children of path node {@code d} (-1: leftmost). */
    private static int childIndexOf(Path p, int d, Seen mate) {
        MemorySegment n = p.node[d].data();
        long block = mate.buffer().block();
        if (BTreeNodeFormat.leftmost(n) == block) {
            return -1;
        }
        for (int i = 0, c = count(n); i < c; i++) {
            if (BTreeNodeFormat.child(n, i) == block) {
                return i;
            }
        }
        return Integer.MIN_VALUE;
    }

    /**
     * Merges path node {@code d} with its locked sibling {@code mate} if the two fit in one node: the right
     * one's entries move into the left one, the separator between them leaves the parent, the right block
     * is freed. False if they do not fit (the parent keeps its separator; an interior node left without
     * one borrows its sibling's instead, see {@link #borrow}).
     */
    private boolean merge(Txn txn, Path p, int d, Buffer mate, Seen outer) {
        Buffer parent = p.node[d - 1];
        MemorySegment pn = parent.data();
        int j = p.childIndex[d - 1];
        int mateIndex = BTreeNodeFormat.leftmost(pn) == mate.block() ? -1 : indexOfChild(pn, mate.block());
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
        MemorySegment scratch = scratch(blockSize);
        BTreeNodeFormat.compact(l, blockSize, scratch);
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
            if (outer != null && outer.buffer().block() == beyond) {
                BTreeNodeFormat.setLeft(outer.buffer().data(), leftBuf.block());
                txn.log(outer.buffer(), BTreeNodeFormat.LEFT, 8);
            }
        }
        txn.log(leftBuf, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
        BTreeNodeFormat.remove(pn, sepIndex);
        logSlots(txn, parent, sepIndex);
        allocator.free(txn, rightBuf.block());
        cache.free(txn, rightBuf, BTreeNodeFormat.FREED_MAGIC);
        if (rightBuf == p.node[d]) {
            p.node[d] = leftBuf; // the path continues through the survivor
        }
        return true;
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
        BTreeNodeFormat.ensureRoom(taker, interiorCellSize(down.length), blockSize, scratch);
        if (intoLeft) {
            // l gets (down, r's leftmost); r's first child becomes its leftmost
            BTreeNodeFormat.insertInterior(l, 0, MemorySegment.ofArray(down), BTreeNodeFormat.leftmost(r));
            BTreeNodeFormat.setLeftmost(r, BTreeNodeFormat.child(r, 0));
            BTreeNodeFormat.remove(r, 0);
        } else {
            // r gets (down, its old leftmost); l's last child becomes r's leftmost
            BTreeNodeFormat.insertInterior(r, 0, MemorySegment.ofArray(down), BTreeNodeFormat.leftmost(r));
            BTreeNodeFormat.setLeftmost(r, BTreeNodeFormat.child(l, given));
            BTreeNodeFormat.remove(l, given);
        }
        BTreeNodeFormat.remove(pn, sepIndex);
        BTreeNodeFormat.ensureRoom(pn, interiorCellSize(up.length), blockSize, scratch);
        BTreeNodeFormat.insertInterior(pn, sepIndex, MemorySegment.ofArray(up), rightBuf.block());
        txn.log(leftBuf, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
        txn.log(rightBuf, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
        txn.log(parent, BTreeNodeFormat.LEVEL, blockSize - BTreeNodeFormat.LEVEL);
    }

    private static int indexOfChild(MemorySegment n, long block) {
        for (int i = 0, c = count(n); i < c; i++) {
            if (BTreeNodeFormat.child(n, i) == block) {
                return i;
            }
        }
        throw new IllegalStateException("block " + block + " is not a child of the locked parent");
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

    // ------------------------------------------------------------------ cursor support

    /** Reads the root block and its version for a cursor's descent; null if the header changed meanwhile. */
    Seen rootForCursor() {
        Buffer h = header();
        long hv = h.readVersion();
        if (hv < 0) {
            return null;
        }
        long root = BTreeHeaderFormat.root(h.data());
        if (!h.validate(hv)) {
            return null;
        }
        Buffer r;
        try {
            r = node(root);
        } catch (CorruptionException e) {
            if (h.validate(hv)) {
                throw e;
            }
            return null;
        }
        long rv = r.readVersion();
        if (rv < 0 || !h.validate(hv)) {
            return null;
        }
        return new Seen(r, rv);
    }

    Buffer nodeForCursor(long block) {
        return node(block);
    }

    /**
     * The leaf holding {@code key} (or where it would go); with {@code key} null, the leftmost or rightmost
     * leaf. Returns the leaf and its version, read optimistically.
     */
    Seen leafFor(MemorySegment key, boolean rightmost) {
        for (;;) {
            Seen s = rootForCursor();
            if (s == null) {
                continue;
            }
            Buffer cur = s.buffer();
            long v = s.version();
            boolean restart = false;
            while (!restart) {
                try {
                    MemorySegment n = cur.data();
                    if (isLeaf(n)) {
                        if (cur.validate(v)) {
                            return new Seen(cur, v);
                        }
                        restart = true;
                        break;
                    }
                    long child = key != null ? BTreeNodeFormat.childFor(n, key)
                            : rightmost ? childAt(n, count(n) - 1) : BTreeNodeFormat.leftmost(n);
                    if (!cur.validate(v)) {
                        restart = true;
                        break;
                    }
                    Buffer next = node(child);
                    long nv = next.readVersion();
                    if (nv < 0 || !cur.validate(v) || !atLevel(next, nv, BTreeNodeFormat.level(n) - 1, cur, v)) {
                        restart = true;
                        break;
                    }
                    cur = next;
                    v = nv;
                } catch (CorruptionException e) {
                    throw e;
                } catch (RuntimeException e) {
                    if (cur.validate(v)) {
                        throw unreadable(e, cur.block(), NODE);
                    }
                    restart = true;
                }
            }
        }
    }

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

    /** The header buffer, for the checker. */
    Buffer headerBuffer() {
        return header();
    }

    Buffer nodeBuffer(long block) {
        return node(block);
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
        checkKey(key);
        Path p = PATHS.get();
        p.start(this, key);
        long found;
        do {
            descend(p, key, txn);
            found = findIn(txn, p.leaf(), p.leafVersion(), key, match, keyOut, valueOut);
        } while (found == RETRY);
        return found;
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
