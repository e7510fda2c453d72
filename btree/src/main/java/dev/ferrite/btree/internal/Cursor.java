package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import dev.ferrite.btree.internal.BTree.Seen;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.btree.internal.BTreeNodeFormat.childAt;
import static dev.ferrite.btree.internal.BTreeNodeFormat.count;
import static dev.ferrite.btree.internal.BTreeNodeFormat.isLeaf;
import static dev.ferrite.io.internal.OnDisk.U16;

/**
 * A forward or reverse range cursor. It copies each leaf it reaches into a page of its own, validating
 * the leaf's version once per copy, and then returns the page's entries without locking, validating or
 * copying anything per entry. It moves along the sibling links, and survives concurrent changes: whenever
 * a leaf changed under a copy or a move, it finds its place again by the last key it returned. Each key
 * is returned at most once and in order; a key inserted or deleted while the cursor runs may or may not
 * be seen (a page shows its leaf as it was when copied). Not thread-safe.
 *
 * <p>It finds a leaf with a descent of its own ({@code leafFor}, lock-free like the tree's), which does
 * not need the tree's per-thread path: it never writes and resumes by key, not by node.
 *
 * <p>A closed cursor is kept by its thread and reopened by that thread's next {@link #open}, with its
 * page and key buffers, so a short scan allocates none of them (they are 5 KiB; a scan of a few dozen
 * entries copies one or two leaves): no reference to a cursor may outlive its {@link #close()}.
 */
public final class Cursor implements AutoCloseable {
    /** The cursor each thread closed last, for its next {@link #open}. */
    private static final ThreadLocal<Cursor[]> SPARE = ThreadLocal.withInitial(() -> new Cursor[1]);

    private BTree tree;
    private boolean reverse;
    /** The start key (a copy, in a buffer kept across reopens), or null. */
    private MemorySegment start;
    /** Bound not to reach (exclusive; the cursor's direction decides which side), or null: a copy, as start. */
    private MemorySegment end;
    /** The buffers holding the copies of the start key and the bound, grown to the longest so far. */
    private MemorySegment startBytes = MemorySegment.NULL, endBytes = MemorySegment.NULL;
    /** Copy of the current leaf, consistent: taken between a version read and its validation. */
    private MemorySegment page;
    /** The last key returned, saved when the page holding it is about to be replaced. */
    private final MemorySegment lastKey = MemorySegment.ofArray(new byte[BTreeNodeFormat.MAX_KEY]);
    private int lastKeyLength;
    /** The entry at {@code index} of the page was returned and not yet saved in lastKey. */
    private boolean onEntry;
    private boolean started;
    private boolean exhausted;
    /** The leaf the page copies (null: no page, seek) and the version the copy is valid for. */
    private Buffer leaf;
    private long version;
    /** Position of the current entry in the page: before the first one to return when the page is new. */
    private int index;
    /** Forward: first index not to return; reverse: last index not to return. */
    private int stop;
    /** The bound falls inside the page: no leaf beyond it is visited. */
    private boolean boundHere;
    private int keyOffset;
    private int keyLength;
    private int valueOffset;
    private int valueLength;
    /** Leaf copies taken since the cursor was (re)opened: a caller checks what it must once per copy, not per entry. */
    private long copies;

    private Cursor(BTree tree, byte[] start, byte[] end, boolean reverse) {
        reopen(tree, start, end, reverse);
    }

    /** A cursor as {@link BTree#cursor(byte[], byte[], boolean)} makes it: the one this thread closed last, if any, reopened. */
    static Cursor open(BTree tree, byte[] start, byte[] end, boolean reverse) {
        Cursor[] spare = SPARE.get();
        Cursor c = spare[0];
        if (c == null) {
            return new Cursor(tree, start, end, reverse);
        }
        spare[0] = null;
        return c.reopen(tree, start, end, reverse);
    }

    /**
     * Done with this cursor: it drops its tree and becomes its thread's spare, for the next {@link #open}.
     * Nothing may use it after, nor close it again.
     */
    @Override
    public void close() {
        tree = null;
        leaf = null;
        start = null;
        end = null;
        exhausted = true;
        SPARE.get()[0] = this;
    }

    /**
     * Makes this cursor a new one over {@code tree} as {@link BTree#cursor(byte[], byte[], boolean)}
     * makes it, keeping its page and key buffers: a caller that runs one range after another (a
     * directory listing, page by page) allocates them once.
     */
    Cursor reopen(BTree tree, byte[] start, byte[] end, boolean reverse) {
        if (start != null) {
            BTree.requireKeyLength(start.length);
        }
        if (end != null) {
            BTree.requireKeyLength(end.length);
        }
        this.tree = tree;
        this.reverse = reverse;
        if (start != null && startBytes.byteSize() < start.length) {
            startBytes = MemorySegment.ofArray(new byte[start.length]);
        }
        if (end != null && endBytes.byteSize() < end.length) {
            endBytes = MemorySegment.ofArray(new byte[end.length]);
        }
        this.start = copy(start, startBytes);
        this.end = copy(end, endBytes);
        if (page == null || page.byteSize() != tree.blockSize()) {
            page = MemorySegment.ofArray(new byte[tree.blockSize()]);
        }
        lastKeyLength = 0;
        onEntry = false;
        started = false;
        exhausted = false;
        leaf = null;
        version = 0;
        index = 0;
        stop = 0;
        boundHere = false;
        copies = 0;
        return this;
    }

    /** {@code key} copied into {@code into} (long enough): a view of its length; null for null. */
    private static MemorySegment copy(byte[] key, MemorySegment into) {
        if (key == null) {
            return null;
        }
        MemorySegment.copy(key, 0, into, ValueLayout.JAVA_BYTE, 0, key.length);
        return into.asSlice(0, key.length);
    }

    /** Moves to the next entry; false when there is none. */
    public boolean next() {
        if (exhausted) {
            return false;
        }
        for (;;) {
            if (leaf == null) {
                seek();
            }
            int i = reverse ? index - 1 : index + 1;
            if (reverse ? i > stop : i < stop) {
                int cell = BTreeNodeFormat.slot(page, i);
                keyLength = Short.toUnsignedInt(page.get(U16, cell));
                valueLength = Short.toUnsignedInt(page.get(U16, cell + 2L));
                keyOffset = cell + BTreeNodeFormat.LEAF_CELL_HEADER;
                valueOffset = keyOffset + keyLength;
                index = i;
                onEntry = true;
                started = true;
                return true;
            }
            long sibling = reverse ? BTreeNodeFormat.left(page) : BTreeNodeFormat.right(page);
            if (sibling == leaf.block()) {
                throw new CorruptionException(sibling, BTree.NODE, "the leaf is its own sibling");
            }
            if (boundHere || sibling == 0) {
                exhausted = true;
                leaf = null;
                return false;
            }
            if (!move(sibling)) {
                leaf = null;
            }
        }
    }

    /** Copies the sibling leaf into the page; false if the current leaf or the sibling changed meanwhile (seek). */
    private boolean move(long sibling) {
        saveKey();
        Buffer s = leaf.sibling;
        long sv;
        if (s != null && s.block() == sibling && (sv = s.readVersion()) >= 0) {
            s.cache.hit(s); // the cached buffer of the block: what the lookup would find, without its misses
        } else {
            try {
                s = tree.node(sibling);
            } catch (RuntimeException e) {
                if (leaf.validate(version)) {
                    throw e;
                }
                return false; // a stale link led to a block that is no longer ours
            }
            leaf.sibling = s;
            sv = s.readVersion();
        }
        // the link was current when the sibling's version was read: no leaf was split off in between
        if (sv < 0 || !leaf.validate(version) || !BTree.atLevel(s, sv, 0, leaf, version) || !copy(s, sv)) {
            s.cache.latches.restarted(s);
            return false;
        }
        index = reverse ? BTreeNodeFormat.count(page) : -1;
        requireBeyondLastKey();
        return true;
    }

    /**
     * Checks that the page just moved to (a consistent copy, reached by a link that was current) holds
     * keys beyond the last one returned: sibling links that loop back would otherwise run for ever.
     */
    private void requireBeyondLastKey() {
        int count = BTreeNodeFormat.count(page);
        if (!started || count == 0) {
            return;
        }
        int first = reverse ? count - 1 : 0;
        int from = BTreeNodeFormat.keyOffset(page, first); // compared in place: no views made per leaf
        int c = Keys.compare(page, from, from + BTreeNodeFormat.keyLength(page, first), lastKey, 0, lastKeyLength);
        if (reverse ? c >= 0 : c <= 0) {
            throw new CorruptionException(leaf.block(), BTree.NODE, "its keys do not lie " + (reverse ? "below" : "above")
                    + " those of the leaf linking to it");
        }
    }

    /** Copies {@code b} into the page and checks it stayed at version {@code v}; on success the page is b's. */
    private boolean copy(Buffer b, long v) {
        MemorySegment.copy(b.data(), 0, page, 0, page.byteSize());
        if (!b.validate(v)) {
            return false;
        }
        leaf = b;
        version = v;
        copies++;
        setStop();
        return true;
    }

    private void setStop() {
        int count = BTreeNodeFormat.count(page);
        if (end == null) {
            stop = reverse ? -1 : count;
            boundHere = false;
            return;
        }
        int r = BTreeNodeFormat.search(page, end);
        int at = r >= 0 ? r : -r - 1; // the bound's index, or where it would go
        if (reverse) {
            stop = r >= 0 ? r : at - 1;
            boundHere = stop >= 0;
        } else {
            stop = at;
            boundHere = at < count;
        }
    }

    /** Keeps the last key returned before the page holding it is overwritten. */
    private void saveKey() {
        if (onEntry) {
            MemorySegment.copy(page, keyOffset, lastKey, 0, keyLength);
            lastKeyLength = keyLength;
            onEntry = false;
        }
    }

    /** Finds the leaf and position from which the next entry follows: after the last key returned, or from the start key. */
    private void seek() {
        saveKey();
        MemorySegment target = started ? lastKey.asSlice(0, lastKeyLength) : start;
        for (;;) {
            Seen s = leafFor(tree, target, reverse);
            if (copy(s.buffer(), s.version())) {
                break;
            }
        }
        if (target == null) {
            index = reverse ? BTreeNodeFormat.count(page) : -1;
            return;
        }
        int r = BTreeNodeFormat.search(page, target);
        boolean found = r >= 0;
        int at = found ? r : -r - 1; // found: its index; else: the insertion point
        if (!reverse) {
            index = found && !started ? at - 1 : found ? at : at - 1;
        } else {
            index = found && !started ? at + 1 : at;
        }
    }

    /**
     * How many leaf copies the cursor has taken since it was opened. Every entry returned since this last
     * changed comes from the same copy, taken before it changed: a caller that must look at something
     * after the copy its entries come from (a commit's records) looks once per copy.
     */
    public long copies() {
        return copies;
    }

    /**
     * The last key returned before the current leaf copy was taken (a copy), or null if none was: the key
     * the cursor saved to find its place again, so a caller need not keep every key it was handed.
     */
    public byte[] keyBeforeCopy() {
        return lastKeyLength == 0 ? null : lastKey.asSlice(0, lastKeyLength).toArray(ValueLayout.JAVA_BYTE);
    }

    /** The current key (a copy). */
    public byte[] key() {
        return page.asSlice(keyOffset, keyLength).toArray(ValueLayout.JAVA_BYTE);
    }

    /** The current value (a copy). */
    public byte[] value() {
        return page.asSlice(valueOffset, valueLength).toArray(ValueLayout.JAVA_BYTE);
    }

    /** The current key, valid until the next move: a view of the cursor's page. */
    public MemorySegment keySegment() {
        return page.asSlice(keyOffset, keyLength);
    }

    /** The current value, valid until the next move. */
    public MemorySegment valueSegment() {
        return page.asSlice(valueOffset, valueLength);
    }

    /**
     * The cursor's copy of the current leaf, valid until the next move: the current value lies at
     * {@link #valueOffset()} for {@link #valueLength()} bytes, read there without a view made per entry.
     */
    public MemorySegment page() {
        return page;
    }

    public int valueOffset() {
        return valueOffset;
    }

    /** Where the current key lies in {@link #page()}: copied from there, it needs no view made per entry. */
    public int keyOffset() {
        return keyOffset;
    }

    public int keyLength() {
        return keyLength;
    }

    public int valueLength() {
        return valueLength;
    }

    /**
     * Copies the current value into {@code out} (as much as fits) and returns its length: what
     * {@link BTree#get(MemorySegment, MemorySegment)} does for one key, without a view made per entry.
     */
    public int value(MemorySegment out) {
        MemorySegment.copy(page, valueOffset, out, 0, Math.min(valueLength, out.byteSize()));
        return valueLength;
    }

    // ------------------------------------------------------------------ descent to a leaf

    /** Reads the root block and its version for a descent of {@code tree}; null if the header changed meanwhile. */
    private static Seen root(BTree tree) {
        Buffer h = tree.header();
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
            r = tree.child(h, 0, root, 1);
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

    /**
     * The leaf of {@code tree} holding {@code key} (or where it would go); with {@code key} null, the
     * leftmost or rightmost leaf. Returns the leaf and its version, read optimistically.
     */
    static Seen leafFor(BTree tree, MemorySegment key, boolean rightmost) {
        for (;;) {
            Seen s = root(tree);
            if (s == null) {
                tree.cache().latches.restarted(tree.header());
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
                    int count = count(n);
                    int idx = key != null ? BTreeNodeFormat.childIndexFor(n, key) : rightmost ? count - 1 : -1;
                    long child = childAt(n, idx);
                    if (!cur.validate(v)) {
                        restart = true;
                        break;
                    }
                    Buffer next = tree.child(cur, idx + 1, child, count + 1);
                    long nv = next.readVersion();
                    if (nv < 0 || !cur.validate(v) || !BTree.atLevel(next, nv, BTreeNodeFormat.level(n) - 1, cur, v)) {
                        restart = true;
                        break;
                    }
                    cur = next;
                    v = nv;
                } catch (CorruptionException e) {
                    if (cur.validate(v)) {
                        throw e;
                    }
                    restart = true; // a stale pointer led to a block freed before it was ever written home
                } catch (RuntimeException e) {
                    if (cur.validate(v)) {
                        throw BTree.unreadable(e, cur.block(), BTree.NODE);
                    }
                    restart = true;
                }
            }
            tree.cache().latches.restarted(cur);
        }
    }
}
