package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

import java.util.ArrayList;
import java.util.List;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BlockAllocator;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.TreeWalk;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.dir.InodeFormat.S_IFMT;
import static dev.ferrite.dir.InodeFormat.S_IFREG;

/**
 * Where a regular file's extents live, the xfs_bmap_btree role: the record's inline list
 * ({@link ExtentFormat}) while they fit, a tree of their own ({@link ExtentTreeFormat}) once they do not.
 * {@link FileData} works on {@link ExtentList}s either way: the whole inline list, or a window of the
 * tree loaded for the range an operation touches (O(log n + extents in the range)), which
 * {@link #store} writes back as the difference from what was loaded, a few keys per transaction
 * ({@link #TREE_OPS}; a batch of conversions, {@link Conversions}, stores several disjoint windows in one
 * transaction while the tree's reserve covers each). No operation decodes a whole large map.
 *
 * <p>An inline list that would outgrow the record becomes a tree in a transaction of its own
 * ({@link #makeRoom}); a tree left mapping few extents becomes an inline list again ({@link #revert})
 * after a truncate, punch, trim or an orphan's destruction frees from it.
 *
 * <h2>Locks</h2>
 * A tree changes only in transactions holding the inode's lock, which a window load takes too: a window
 * read over several leaves must not see half a change (a merge rewrites one key and deletes another).
 * The fast paths' single lookup ({@link #mappedBlock}) takes none: under the shared I/O lock
 * no change moves a mapped block, and any version of the extent it finds maps the block the same.
 */
final class ExtentMap {
    /**
     * Most tree keys one transaction puts or deletes: a change inside one extent and its merges with both
     * neighbours. Its worst case of splits (one at every level and a new root, per key) fits the reserve's
     * low mark, {@link DirContents#RESERVE_LOW} blocks, while the tree is at most 3 levels high (some
     * millions of extents); the nodes its merges free fit between the high mark and the reserve's capacity.
     */
    static final int TREE_OPS = 3;
    /** Scratch for lookups, one per thread, looked up once per operation: a key in, a key and a value out. */
    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);
    private static final String TREE = "file extent tree";
    /** What an empty window was loaded as: shared, read only ({@link #store} compares with it; nothing changes it). */
    private static final ExtentList NOTHING_LOADED = new ExtentList(0);

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeCache inodes;
    private final InodeRecords records;
    private final DirContents trees;
    private final int recordSize;

    ExtentMap(Volume volume, BufferCache cache, Geometry geometry, InodeCache inodes, InodeRecords records, DirContents trees) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.inodes = inodes;
        this.records = records;
        this.trees = trees;
        this.recordSize = geometry.inodeSize();
    }

    /**
     * The regular file's record at {@code rec} of {@code b}: its inline list, or for a tree an empty window
     * naming the header, for {@link #window} to fill.
     */
    static ExtentList decode(MemorySegment b, int rec, Geometry g) {
        if (InodeFormat.fork(b, rec) != InodeFormat.FORK_TREE) {
            return ExtentFormat.decode(b, rec, g);
        }
        ExtentList w = new ExtentList(Integer.MAX_VALUE, DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE));
        w.loaded = NOTHING_LOADED;
        return w;
    }

    /** The tree of {@code i}, whose header is {@code header}. */
    private BTree tree(Inode i, long header) {
        return trees.tree(i, header);
    }

    /** Three 8-byte slots, sliced once (a slice per lookup and a thread-local lookup per slot were a sixth of a conversion's CPU). */
    private static final class Scratch {
        final MemorySegment in, key, value;
        /** Whether {@link #mappedBlock}'s last lookup found an entry, left in key and value. */
        boolean found;

        Scratch() {
            MemorySegment all = MemorySegment.ofArray(new long[3]);
            in = all.asSlice(0, 8);
            key = all.asSlice(8, 8);
            value = all.asSlice(16, 8);
        }
    }

    /**
     * {@code placeholder} ({@link #decode}) filled with every extent of {@code i}'s tree overlapping
     * {@code [from, to)}, the one holding or before {@code from - 1} and the first at or past {@code to};
     * an inline list as it is. The caller holds {@code i}'s I/O lock, so the tree stays the same tree.
     */
    ExtentList window(Inode i, ExtentList placeholder, long from, long to) {
        if (!placeholder.inTree() || from >= to) {
            return placeholder;
        }
        ExtentList w = new ExtentList(Integer.MAX_VALUE, placeholder.header);
        i.lock();
        try {
            BTree t = tree(i, w.header);
            Scratch sc = SCRATCH.get();
            MemorySegment in = sc.in, k = sc.key, v = sc.value;
            long next = from; // the smallest key not looked at yet
            if (from > 0) {
                ExtentTreeFormat.setKey(in, from - 1);
                long found = t.find(null, in, BTree.Match.FLOOR, k, v);
                if (found >= 0) {
                    requireEntry(t, found);
                    next = add(w, t, k, v, 0) + 1;
                }
            }
            // the few extents most operations touch by lookups; a long window by a cursor, a leaf at a time
            for (int n = 0; n < SHORT_WINDOW; n++) {
                ExtentTreeFormat.setKey(in, next);
                long found = t.find(null, in, BTree.Match.CEILING, k, v);
                if (found < 0) {
                    return loaded(w);
                }
                requireEntry(t, found);
                long fb = add(w, t, k, v, end(w));
                if (fb >= to) {
                    return loaded(w);
                }
                next = fb + 1;
            }
            byte[] key = new byte[ExtentTreeFormat.KEY];
            ExtentTreeFormat.setKey(MemorySegment.ofArray(key), next);
            Cursor c = t.cursor(key, null, false);
            while (c.next()) {
                if (add(w, t, c.keySegment(), c.valueSegment(), end(w)) >= to) {
                    break;
                }
            }
            return loaded(w);
        } finally {
            i.unlock();
        }
    }

    /** An empty window of the tree {@code placeholder} ({@link #decode}) names, for {@link #extend} to fill. */
    static ExtentList emptyWindow(ExtentList placeholder) {
        ExtentList w = new ExtentList(Integer.MAX_VALUE, placeholder.header);
        w.loaded = NOTHING_LOADED;
        return w;
    }

    /**
     * Adds to {@code y}, a window of {@code i}'s tree that earlier calls filled for ranges starting no later
     * than {@code from}, every extent overlapping {@code [from - 1, to]} it lacks: all that a change of
     * {@code [from, to)} reads or merges with. A range inside one extent and not at its ends costs one
     * lookup, an end at an extent's edge one more for the neighbour there; what earlier ranges loaded
     * costs none: {@code y} holds every extent overlapping each earlier span, so all of those up to the
     * end of its last extent. Reads nodes {@code txn} holds (the batch's earlier changes); the caller
     * holds {@code i}'s lock.
     */
    void extend(Txn txn, Inode i, ExtentList y, long from, long to) {
        BTree t = tree(i, y.header);
        Scratch sc = SCRATCH.get();
        MemorySegment in = sc.in, k = sc.key, v = sc.value;
        long span = Math.max(from - 1, 0), next = end(y); // below next, y holds what overlaps the span
        if (next <= span) {
            next = span;
            ExtentTreeFormat.setKey(in, span);
            long found = t.find(txn, in, BTree.Match.FLOOR, k, v);
            if (found >= 0) {
                requireEntry(t, found);
                if (ExtentTreeFormat.key(k) + ExtentFormat.packedLength(ExtentTreeFormat.value(v)) > span) { // holds it
                    add(y, t, k, v, end(y));
                    next = end(y);
                }
            }
        }
        while (next <= to) {
            ExtentTreeFormat.setKey(in, next);
            long found = t.find(txn, in, BTree.Match.CEILING, k, v);
            if (found < 0 || ExtentTreeFormat.key(k) > to) {
                return;
            }
            requireEntry(t, found);
            add(y, t, k, v, end(y));
            next = end(y);
        }
    }

    /** {@code w}, extents copied from a window, as a window of their own loaded so: a change of it {@link #store}s as a step. */
    static ExtentList asLoaded(ExtentList w) {
        return loaded(w);
    }

    /** Keys a {@link #store} of window {@code w} would put or delete. */
    static int changes(ExtentList w) {
        return diff(w.loaded, w, null, null);
    }

    /** Extents a window reads by lookups before it takes a cursor (which copies a whole leaf per step). */
    private static final int SHORT_WINDOW = 4;

    private static long end(ExtentList w) {
        return w.count() == 0 ? 0 : w.end(w.count() - 1);
    }

    private static ExtentList loaded(ExtentList w) {
        w.loaded = w.copy();
        return w;
    }

    /** Every extent of regular file {@code ino}, checked as it is read: a whole tree for the checker and dumps. */
    ExtentList all(long ino) {
        ExtentList x = records.readRecord(ino, (b, rec) -> decode(b, rec, geometry));
        if (!x.inTree()) {
            return x;
        }
        Inode i = inodes.acquire(ino);
        try {
            return window(i, x, 0, Long.MAX_VALUE);
        } finally {
            inodes.release(i);
        }
    }

    /** The window of {@code i}'s tree holding only its last extent (what trimming from the end changes); an inline list as it is. */
    ExtentList tail(Inode i, ExtentList placeholder) {
        if (!placeholder.inTree()) {
            return placeholder;
        }
        ExtentList w = new ExtentList(Integer.MAX_VALUE, placeholder.header);
        i.lock();
        try {
            BTree t = tree(i, w.header);
            Scratch sc = SCRATCH.get();
            MemorySegment in = sc.in, k = sc.key, v = sc.value;
            ExtentTreeFormat.setKey(in, Long.MAX_VALUE);
            long found = t.find(null, in, BTree.Match.FLOOR, k, v);
            if (found >= 0) {
                requireEntry(t, found);
                add(w, t, k, v, 0);
            }
        } finally {
            i.unlock();
        }
        w.loaded = w.copy();
        return w;
    }

    private static void requireEntry(BTree t, long found) {
        if (BTree.foundKeyLength(found) != ExtentTreeFormat.KEY || BTree.foundValueLength(found) != ExtentTreeFormat.VALUE) {
            throw new CorruptionException(t.headerBlock(), TREE, "tree of inode " + t.id() + " has an entry of a "
                    + BTree.foundKeyLength(found) + "-byte key and a " + BTree.foundValueLength(found) + "-byte value");
        }
    }

    /** Appends the entry {@code (key, value)} of {@code t} to {@code w}, checked as an inline extent after one ending at {@code end}. */
    private long add(ExtentList w, BTree t, MemorySegment key, MemorySegment value, long end) {
        requireEntry(t, (long) key.byteSize() << 32 | value.byteSize());
        long fb = ExtentTreeFormat.key(key), word = ExtentTreeFormat.value(value);
        long dev = ExtentFormat.packedDevice(word);
        int len = ExtentFormat.packedLength(word);
        String problem = ExtentFormat.problem(fb, dev, len, end, geometry);
        if (problem != null) {
            throw new CorruptionException(t.headerBlock(), TREE, "tree of inode " + t.id() + " has an extent " + problem);
        }
        w.add(fb, dev, len, ExtentFormat.packedUnwritten(word));
        return fb;
    }

    /**
     * The fast paths' lookup in {@code i}'s tree: the device block of file block {@code first} if one
     * extent holds {@code [first, end)}, {@code unwritten} or (if false) written; else -1. One descent, no
     * lock, nothing decoded but the extent found; the caller checked the size and that the file has a
     * tree. Under the shared I/O lock no change moves a mapped block: any version of the extent found
     * maps the block the same (a conversion meanwhile only flips its state).
     */
    long mappedBlock(Inode i, long first, long end, boolean unwritten) {
        BTree t = i.dirTree;
        if (t == null) {
            long header = records.readRecord(i.ino, (b, rec) -> InodeFormat.fork(b, rec) == InodeFormat.FORK_TREE
                    ? DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE) : 0L);
            if (header == 0) {
                return -1;
            }
            t = tree(i, header);
        }
        Scratch sc = SCRATCH.get();
        MemorySegment in = sc.in, k = sc.key, v = sc.value;
        ExtentTreeFormat.setKey(in, first);
        long found = t.find(null, in, BTree.Match.FLOOR, k, v);
        sc.found = found >= 0 && BTree.foundKeyLength(found) == ExtentTreeFormat.KEY && BTree.foundValueLength(found) == ExtentTreeFormat.VALUE;
        return foundBlock(first, end, unwritten); // -1 for a bad entry too: the full path reports it
    }

    /**
     * {@link #mappedBlock} answered from the extent this thread's last call of it found, for the same
     * range: the write path asks for a written block, then for an unwritten one, and one descent answers
     * both (a conversion between the two asks would only have flipped the state, as after a descent).
     */
    long foundBlock(long first, long end, boolean unwritten) {
        Scratch sc = SCRATCH.get();
        return sc.found ? ExtentFormat.mappedBlock(ExtentTreeFormat.key(sc.key), ExtentTreeFormat.value(sc.value), first, end, unwritten, geometry)
                : -1;
    }

    /** Log items a {@link #store} of {@code y} may touch beyond the record. */
    int items(Inode i, ExtentList y) {
        return y.inTree() ? TREE_OPS * tree(i, y.header).reservation() : 0;
    }

    /**
     * True unless the tree's reserve must first be brought between its marks ({@link #prepare}) for a change
     * of {@code y}: enough blocks for its splits, and room for the nodes its merges free (another writer
     * may have refilled or drained it since this one prepared). Call under {@code i}'s lock, where the
     * answer stays true.
     */
    boolean ready(Inode i, ExtentList y) {
        return ready(i, y, false);
    }

    /**
     * {@link #ready}; for a {@code removal} (extents deleted, or one's length changed in place: a trim from
     * the end), which takes no block, room for the nodes its merges free only ({@link DirContents#REMOVAL}).
     */
    boolean ready(Inode i, ExtentList y, boolean removal) {
        return !y.inTree() || trees.step(i, removal ? DirContents.REMOVAL : 0) == DirContents.READY;
    }

    /**
     * {@link #ready} judged on {@code m}, the block holding the record at {@code rec} that a transaction
     * holds: whether, after the changes it made, its tree's reserve still covers another change.
     */
    boolean readyIn(MemorySegment m, int rec) {
        return trees.readyIn(m, rec);
    }

    /** Brings the reserve of {@code i}'s tree between its marks (nothing for an inline list), holding no lock. */
    void prepare(Inode i) {
        prepare(i, false);
    }

    /**
     * {@link #prepare}; for a {@code removal} ({@link #ready(Inode, ExtentList, boolean)}) only a spill, never
     * a refill: a truncate or trim takes no block, promised or not, whatever its tree's reserve holds.
     */
    void prepare(Inode i, boolean removal) {
        trees.prepare(i, removal ? DirContents.REMOVAL : 0);
    }

    /**
     * Writes {@code y}, a list or window of {@code i} changed under its lock, into the record in {@code b}
     * (held by {@code txn}) or the tree: an inline list whole, a window as the keys that differ from what
     * was loaded (at most {@link #TREE_OPS}) and the tree's extent count.
     *
     * @return bytes from the record's start that need logging
     */
    int store(Txn txn, Inode i, Buffer b, ExtentList y) {
        MemorySegment m = b.data();
        int rec = records.rec(i.ino);
        if (!y.inTree()) {
            return ExtentFormat.encode(m, rec, y);
        }
        ExtentList x = y.loaded;
        if (diff(x, y, null, null) > TREE_OPS) {
            throw new IllegalStateException("inode " + i.ino + ": a change of " + x + " to " + y + " puts or deletes more than "
                    + TREE_OPS + " keys");
        }
        diff(x, y, txn, tree(i, y.header));
        int area = rec + InodeFormat.INLINE;
        ExtentTreeFormat.setCount(m, area, ExtentTreeFormat.count(m, area) + y.count() - x.count());
        txn.log(b, area + ExtentTreeFormat.COUNT, 4);
        return InodeFormat.INLINE;
    }

    /** Keys that differ between {@code x} and {@code y}; with {@code t}, put or deleted there in ascending order. */
    private static int diff(ExtentList x, ExtentList y, Txn txn, BTree t) {
        Scratch sc = SCRATCH.get();
        MemorySegment k = sc.in, v = sc.key;
        int a = 0, c = 0, ops = 0;
        while (a < x.count() || c < y.count()) {
            long ka = a < x.count() ? x.fileBlock(a) : Long.MAX_VALUE, kc = c < y.count() ? y.fileBlock(c) : Long.MAX_VALUE;
            boolean same = ka == kc && x.deviceBlock(a) == y.deviceBlock(c) && x.length(a) == y.length(c)
                    && x.unwritten(a) == y.unwritten(c);
            if (!same) {
                ops++;
                if (t != null) {
                    ExtentTreeFormat.setKey(k, Math.min(ka, kc));
                    if (ka < kc) {
                        t.delete(txn, k);
                    } else {
                        ExtentTreeFormat.setValue(v, ExtentFormat.pack(kc, y.deviceBlock(c), y.length(c), y.unwritten(c)));
                        t.put(txn, k, v);
                    }
                }
            }
            if (ka <= kc) {
                a++;
            }
            if (kc <= ka) {
                c++;
            }
        }
        return ops;
    }

    /**
     * Makes room for more extents than {@code i}'s inline list holds: turns it into a tree (setting the
     * superblock's incompatible feature first) in a transaction of its own, unless it is one already. The
     * caller holds the I/O lock and no other, and looks at the file again after.
     */
    void makeRoom(Inode i) {
        if (records.readRecord(i.ino, (b, rec) -> InodeFormat.fork(b, rec) == InodeFormat.FORK_TREE)) {
            return;
        }
        volume.requireIncompatFeature(SuperblockFormat.INCOMPAT_EXTENT_TREE);
        trees.convert(i, 1, () -> records.readRecord(i.ino, (b, rec) -> (InodeFormat.mode(b, rec) & S_IFMT) == S_IFREG
                && InodeFormat.fork(b, rec) != InodeFormat.FORK_TREE), (m, rec, keys, values) -> {
                    ExtentList x = ExtentFormat.decode(m, rec, geometry);
                    for (int n = 0; n < x.count(); n++) {
                        byte[] key = new byte[ExtentTreeFormat.KEY], value = new byte[ExtentTreeFormat.VALUE];
                        ExtentTreeFormat.setKey(MemorySegment.ofArray(key), x.fileBlock(n));
                        ExtentTreeFormat.setValue(MemorySegment.ofArray(value),
                                ExtentFormat.pack(x.fileBlock(n), x.deviceBlock(n), x.length(n), x.unwritten(n)));
                        keys.add(key);
                        values.add(value);
                    }
                });
    }

    /** What a destroy frees, collected: the blocks of a tree that becomes an inline list. */
    private static final class Collector implements BlockAllocator {
        final List<Long> freed = new ArrayList<>();

        @Override
        public long allocate(Txn txn) {
            throw new IllegalStateException("a tree being turned into an inline list allocates no block");
        }

        @Override
        public void free(Txn txn, long block) {
            freed.add(block);
        }

        @Override
        public long freeBlocks() {
            return 0;
        }

        @Override
        public int itemsPerChange() {
            return 0;
        }
    }

    /**
     * Turns {@code i}'s tree back into an inline list once it maps at most half of what the list holds
     * (XFS converts back when the extents fit; half, so that a file near the limit does not go back and
     * forth), and its blocks with its extents fit the list: the reserve freed a block per transaction,
     * then in one the tree destroyed, its extents written inline and its own blocks mapped past every
     * extent and the end of the file, unwritten, the inode flagged {@link InodeFormat#FLAG_SPECULATIVE}
     * (unless {@link InodeFormat#FLAG_PREALLOC}: such a file keeps what lies past its end). The caller
     * frees those from the file block returned as it trims a file; a crash before that leaves them to the
     * trim at the file's next open, as any speculative preallocation. Each step leaves a sound file.
     * The caller holds the I/O lock exclusively.
     *
     * @return the first file block the tree's blocks are mapped at, or -1 if the file keeps its tree or has none
     */
    long revert(Inode i) {
        int rec = records.rec(i.ino);
        int area = rec + InodeFormat.INLINE;
        int capacity = ExtentFormat.capacity(InodeFormat.inlineCapacity(geometry.blockSize()));
        long header = records.readRecord(i.ino, (b, r) -> InodeFormat.fork(b, r) == InodeFormat.FORK_TREE
                && ExtentTreeFormat.count(b, area) <= capacity / 2 ? DirEntryFormat.treeHeader(b, area) : -1L);
        if (header < 0) {
            return -1;
        }
        int[] nodes = {0};
        TreeWalk.blocks(tree(i, header), b -> nodes[0]++);
        ExtentList placeholder = records.readRecord(i.ino, (b, r) -> decode(b, r, geometry));
        ExtentList all = window(i, placeholder, 0, Long.MAX_VALUE);
        long eof = records.readRecord(i.ino, (b, r) -> (InodeFormat.size(b, r) + geometry.blockSize() - 1) / geometry.blockSize());
        if (all.count() + nodes[0] > capacity
                || Math.max(eof, all.count() == 0 ? 0 : all.end(all.count() - 1)) > ExtentFormat.MAX_FILE_BLOCKS - nodes[0]) {
            return -1; // no room in the list, or past the last extent of the largest file, for the tree's blocks
        }
        while (trees.spill(i, 0, 0)) {
            // a batch per transaction
        }
        Collector freed = new Collector();
        BTree doomed = BTree.open(cache, freed, header, i.ino);
        try (Txn txn = Txn.begin(cache, 8 + 2 * nodes[0])) {
            i.lock();
            try {
                ExtentList x = window(i, placeholder, 0, Long.MAX_VALUE);
                doomed.destroy(txn); // before the record: it reads the tree's nodes, and the record's block is shared
                i.dirTree = null;
                Buffer b = records.lockRecord(txn, i.ino);
                MemorySegment m = b.data();
                long from = Math.max(eof, x.count() == 0 ? 0 : x.end(x.count() - 1));
                ExtentList y = new ExtentList(capacity);
                for (int n = 0; n < x.count(); n++) {
                    y.add(x.fileBlock(n), x.deviceBlock(n), x.length(n), x.unwritten(n));
                }
                long at = from;
                for (long block : freed.freed) {
                    y.insert(at++, block, 1, true);
                }
                m.asSlice(area, DirEntryFormat.treeAreaSize()).fill((byte) 0);
                InodeFormat.setInlineUsed(m, rec, 0);
                ExtentFormat.encode(m, rec, y);
                int flags = InodeFormat.flags(m, rec);
                if ((flags & InodeFormat.FLAG_PREALLOC) == 0) {
                    InodeFormat.setFlags(m, rec, flags | InodeFormat.FLAG_SPECULATIVE);
                }
                txn.log(b, rec, recordSize);
                long seq = txn.commit();
                i.lastSeq = seq;
                i.lastDataSeq = seq;
                return from;
            } finally {
                i.unlock();
            }
        }
    }
}
