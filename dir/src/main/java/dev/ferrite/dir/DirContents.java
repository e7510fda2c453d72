package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.function.IntConsumer;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.dir.InodeRecords.Change;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFMT;
import static dev.ferrite.dir.InodeFormat.S_IFREG;
import static dev.ferrite.dir.InodeRecords.RETRIES;
import static dev.ferrite.dir.InodeRecords.addEntries;
import static dev.ferrite.dir.InodeRecords.logUsed;

/**
 * Directory contents (the xfs_dir2 role): a directory's entries, inline in its inode record or in its
 * own B-tree, looked up lock-free and changed in a caller's transaction under the directory's inode lock;
 * and the directory's blocks: converting an inline directory to a tree and keeping the tree's block
 * reserve between its marks, each step in a transaction of its own reserved before the directory's lock.
 */
final class DirContents {
    static final int RESERVE_LOW = 12, RESERVE_FILL = 20, RESERVE_HIGH = 28;
    /**
     * Usable blocks below which a writer entering a directory whose claim fits in them refills the reserve
     * beside the writers inside if nobody else does ({@link #enter}), before it runs short: the threads
     * arriving then go in beside that refill instead of waiting for it at the low mark.
     */
    static final int RESERVE_EARLY = 16;

    /**
     * A tree's reserve marks: refilled when fewer than {@code low} usable blocks are left (below
     * {@code early}, by a writer entering beside the others, {@link #enter}), up to {@code fill}; spilled
     * when it holds more than {@code high}, down to {@code fill}. {@code RESERVE_CAPACITY - high >= low},
     * so a refill always fits after the spill, and {@code low} covers a lone writer's claim (the tree's
     * height and two) at the heights the marks are for.
     */
    record Marks(int low, int fill, int high, int early) {
    }

    /** The marks of a directory's tree of more than one node, and of every table's and regular file's tree. */
    static final Marks TREE = new Marks(RESERVE_LOW, RESERVE_FILL, RESERVE_HIGH, RESERVE_EARLY);

    /**
     * The marks of a directory's tree of one node, a root leaf (issue 16: a small directory held its
     * header, its root and 20 blocks at rest, 80 KiB where XFS and ext4 take one block). A lone
     * writer's claim is 3 (its split takes a leaf and a new root), and the tree takes {@link #TREE}'s
     * once it has split, so the reserve only needs to hold that claim. The creates and unlinks inside
     * claim blocks only to split or merge ({@link #enter}), which a root leaf does once, so they share
     * the reserve as before. Not a table's: its single writes each claim the tree's height and two
     * ({@code Tables#single}), and a reserve of a claim or so would let them in one at a time.
     */
    static final Marks LEAF = new Marks(3, 4, 8, 3);

    /**
     * The marks of the tree in the record at {@code rec} of {@code b}: {@link #LEAF} for a directory's
     * tree of one node. The record counts the header, the nodes and the reserve in the directory's
     * blocks, so a count of one more than the header and the reserve is one node, a root leaf; read with
     * the reserve, so the two agree.
     */
    static Marks marks(MemorySegment b, int rec) {
        if ((InodeFormat.mode(b, rec) & S_IFMT) != S_IFDIR) {
            return TREE;
        }
        long nodes = InodeFormat.blocks(b, rec) - 1 - DirEntryFormat.reserveCount(b, rec + InodeFormat.INLINE);
        return nodes <= 1 ? LEAF : TREE;
    }

    /** An entry found: the inode it names and that inode's type. */
    record Found(long ino, int type) {
    }

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeCache inodes;
    private final InodeRecords records;
    private final int recordSize;
    final int inlineCapacity;
    /** The blocks spills beside directories' writers are freeing ({@link #spill}). */
    private final SpillingBlocks spills = new SpillingBlocks();

    DirContents(Volume volume, BufferCache cache, Geometry geometry, InodeCache inodes, InodeRecords records) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.inodes = inodes;
        this.records = records;
        this.recordSize = geometry.inodeSize();
        this.inlineCapacity = InodeFormat.inlineCapacity(geometry.blockSize());
    }

    private static int inlineFind(MemorySegment b, int rec, EntryKey key) {
        return inlineFind(b, rec, key.segment(), key.length());
    }

    /**
     * Offset of the entry whose key is the first {@code keyLength} bytes of {@code key} in an inline directory,
     * or -(insertion offset) - 1.
     */
    static int inlineFind(MemorySegment b, int rec, MemorySegment key, int keyLength) {
        int at = rec + InodeFormat.INLINE;
        int end = at + InodeFormat.inlineUsed(b, rec);
        while (at < end) {
            int size = DirEntryFormat.entrySize(b, at, end); // checked before the key is read
            int c = DirEntryFormat.compareEntryKey(b, at, key, keyLength);
            if (c == 0) {
                return at;
            }
            if (c > 0) {
                break;
            }
            at += size;
        }
        return -at - 1;
    }

    static boolean isTree(MemorySegment b, int rec) {
        return InodeFormat.fork(b, rec) == InodeFormat.FORK_TREE;
    }

    /** The directory's tree (header {@code header}), opened once per cached inode. */
    BTree tree(Inode dir, long header) {
        BTree t = dir.dirTree;
        if (t == null || t.headerBlock() != header) {
            records.requireDataBlock(dir.ino, header, "directory tree header");
            t = BTree.open(cache, new DirAllocator(cache, records.block(dir.ino), geometry.agOfInode(dir.ino), records.rec(dir.ino), () -> spills.of(dir)),
                    header, dir.ino);
            dir.dirTree = t;
        }
        return t;
    }

    Found find(long dir, EntryKey key) {
        return found(find(dir, null, NameLookup.current(), key, false, false));
    }

    /** The entry {@code key} of directory {@code dir}, or null. Lock-free. */
    Found find(Inode dir, EntryKey key) {
        return find(dir, key, false);
    }

    /**
     * As {@link #find(Inode, EntryKey)}, with {@code locked} if the caller holds {@code dir}'s lock: its
     * tree then cannot be dissolved during the lookup, which saves reading the record again.
     */
    Found find(Inode dir, EntryKey key, boolean locked) {
        return found(findEntry(dir, key, locked));
    }

    /**
     * As {@link #find(Inode, EntryKey, boolean)}, answered in the thread's {@link NameLookup} ({@code ino},
     * {@code type}) instead of a new {@link Found}: read it before the thread's next lookup.
     */
    NameLookup findEntry(Inode dir, EntryKey key, boolean locked) {
        return find(dir.ino, dir, NameLookup.current(), key, locked, false);
    }

    private static Found found(NameLookup l) {
        return l == null ? null : new Found(l.ino, l.type);
    }

    /**
     * A path walk's step: the entry of the name {@code l} holds in directory {@code dir}, into {@code l}
     * (false if there is none); ENOTDIR or ENOENT first if {@code dir} is not a directory or was removed,
     * read from the same record as the entry. Lock-free, and allocates nothing once the directory's
     * blocks are cached (and its tree open).
     */
    boolean lookup(long dir, NameLookup l) {
        return find(dir, null, l, null, false, true) != null;
    }

    /**
     * The entry of {@code key} (null: the key {@code l} holds) in directory {@code dir} ({@code held}: its
     * inode if the caller has it), answered in {@code l}, or null. With {@code requireDir}, first ENOTDIR or
     * ENOENT as {@link InodeRecords#requireDir}.
     */
    private NameLookup find(long dir, Inode held, NameLookup l, EntryKey key, boolean locked, boolean requireDir) {
        if (key != null) {
            l.key(key);
        }
        for (;;) {
            records.readRecord(dir, requireDir ? l.dirEntry : l.entry);
            if (l.state == NameLookup.NOT_A_DIRECTORY) {
                records.requireDir(dir); // throws, unless it became one again meanwhile
                continue;
            }
            if (l.state == NameLookup.ABSENT) {
                return null;
            }
            if (l.state == NameLookup.INLINE) {
                l.ino = requireEntryInode(dir, l.ino);
                return l;
            }
            long header = l.header;
            if (header == 0) {
                return null; // a removed directory whose tree is being freed
            }
            Inode d = held != null ? held : inodes.acquire(dir);
            int n;
            try {
                n = tree(d, header).get(l.key(), l.value);
            } finally {
                if (held == null) {
                    inodes.release(d);
                }
            }
            if (!locked) {
                records.readRecord(dir, l.treeHeader);
                if (l.headerAgain != header) {
                    continue; // dissolved meanwhile
                }
            }
            if (n < 0) {
                return null;
            }
            l.ino = requireEntryInode(dir, DirEntryFormat.valueInode(l.value));
            l.type = DirEntryFormat.valueType(l.value);
            return l;
        }
    }

    /** {@code ino}, named by an entry of directory {@code dir}, if it is an inode number of this volume; else corruption. */
    private long requireEntryInode(long dir, long ino) {
        if (!geometry.isValidInode(ino)) {
            throw new CorruptionException(records.block(dir), "directory", "directory " + dir + " has an entry naming inode "
                    + Long.toUnsignedString(ino) + ", which lies outside the volume");
        }
        return ino;
    }

    DirPage readdirIno(long dir, DirCookie after, int max) {
        if (max < 1) {
            throw new NamespaceException(Errno.EINVAL, "readdir of " + max + " entries");
        }
        DirBuffer page = new DirBuffer(max);
        page.startAfter(after.key());
        boolean end = list(dir, page);
        List<DirEntry> out = new ArrayList<>(page.size());
        for (int i = 0; i < page.size(); i++) {
            out.add(new DirEntry(page.name(i), page.ino(i), page.type(i)));
        }
        NameLookup scratch = NameLookup.current();
        DirCookie next = page.size() == 0 ? after : DirCookie.after(scratch.listedKey, scratch.listedKeyLength);
        return new DirPage(Collections.unmodifiableList(out), next, end);
    }

    /**
     * Fills {@code into} with the entries of directory {@code dir} after its place, up to its capacity, and
     * leaves it resuming after the last of them. Allocates nothing per entry once {@code into} has grown to them.
     */
    void fill(long dir, DirBuffer into) {
        boolean end = list(dir, into);
        NameLookup scratch = NameLookup.current();
        into.filled(end, scratch.listedKey, scratch.listedKeyLength);
    }

    /**
     * Lists the entries of directory {@code dir} after {@code out}'s place into it, up to its capacity; true if
     * the directory holds none after them. The last one's key (the place to resume after) is left in the
     * thread's {@link NameLookup#listedKey}, of length 0 if none came.
     */
    private boolean list(long dir, DirBuffer out) {
        records.requireDir(dir);
        NameLookup scratch = NameLookup.current();
        Inode d = inodes.acquire(dir);
        try {
            scratch.listDir = dir;
            scratch.listInto = out;
            for (;;) {
                long header = records.readLong(dir, inlineLister);
                if (header > 0) {
                    BTree t = tree(d, header);
                    byte[] from = out.after();
                    Cursor c = scratch.listing = scratch.listing == null ? t.cursor(from, null, false)
                            : t.cursor(scratch.listing, from, null, false);
                    MemorySegment cookie = out.afterSegment();
                    while (out.size() < out.room() && c.next()) {
                        MemorySegment page = c.page(); // read in place: no view made per entry
                        int key = c.keyOffset(), length = c.keyLength(), v = c.valueOffset();
                        if (cookie != null && MemorySegment.mismatch(page, key, key + length, cookie, 0, cookie.byteSize()) < 0) {
                            continue;
                        }
                        if (out.size() < out.capacity()) {
                            MemorySegment.copy(page, ValueLayout.JAVA_BYTE, key, scratch.listedKey, 0, length);
                            scratch.listedKeyLength = length;
                        }
                        out.add(page, key + DirEntryFormat.HASH, length - DirEntryFormat.HASH,
                                requireEntryInode(dir, DirEntryFormat.valueInode(page, v)), DirEntryFormat.valueType(page, v));
                    }
                    long again = records.readLong(dir, treeHeaderAgain);
                    if (again != header) {
                        continue;
                    }
                }
                boolean end = out.size() < out.room();
                if (!end) {
                    out.removeLast();
                }
                return end;
            }
        } finally {
            scratch.listInto = null;
            inodes.release(d);
        }
    }

    /** The tree header a directory's record names (-1: inline). */
    private static final InodeRecords.LongRecordReader treeHeaderAgain =
            (b, rec) -> isTree(b, rec) ? DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE) : -1;

    /**
     * Reads an inline directory's entries into the thread's {@link NameLookup#listInto} (its tree's header
     * instead if it has one: -1 for a removed directory whose tree is being freed, else 0).
     */
    private final InodeRecords.LongRecordReader inlineLister = (b, rec) -> {
        NameLookup scratch = NameLookup.current();
        DirBuffer out = scratch.listInto;
        out.clear();
        scratch.listedKeyLength = 0;
        if (isTree(b, rec)) {
            long h = DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE);
            return h == 0 ? -1L : h;
        }
        MemorySegment from = out.afterSegment();
        int end = rec + InodeFormat.INLINE + InodeFormat.inlineUsed(b, rec);
        int at = from == null ? rec + InodeFormat.INLINE : inlineFind(b, rec, from, (int) from.byteSize());
        if (at < 0) {
            at = -at - 1;
        } else if (from != null) {
            at += DirEntryFormat.entrySize(b, at, end);
        }
        int lastAt = -1;
        for (int size; at < end && out.size() < out.room(); at += size) {
            size = DirEntryFormat.entrySize(b, at, end); // checked before the key is read
            if (out.size() < out.capacity()) {
                lastAt = at;
            }
            out.add(b, DirEntryFormat.entryNameOffset(at), DirEntryFormat.entryKeyLength(b, at) - DirEntryFormat.HASH,
                    requireEntryInode(scratch.listDir, DirEntryFormat.entryInode(b, at)), DirEntryFormat.entryType(b, at));
        }
        if (lastAt >= 0) { // the cookie: only the last entry's key is kept
            scratch.listedKeyLength = DirEntryFormat.entryKey(b, lastAt, scratch.listedKey);
        }
        return 0L;
    };

    List<DirEntry> allEntries(long dir) {
        List<DirEntry> all = new ArrayList<>();
        DirCookie c = DirCookie.START;
        for (;;) {
            DirPage p = readdirIno(dir, c, 4096);
            all.addAll(p.entries());
            if (p.end()) {
                return all;
            }
            c = p.next();
        }
    }

    /**
     * In {@code txn}, holding {@code dir}'s record: adds {@code key} (with room made by {@link #prepare}).
     * False, with nothing changed, if a tree directory holds it already; an inline one must not.
     */
    boolean insertEntry(Txn txn, Inode dir, EntryKey key, long ino, int type) {
        Buffer b = records.lockRecord(txn, dir.ino);
        MemorySegment m = b.data();
        int rec = records.rec(dir.ino);
        if (isTree(m, rec)) {
            BTree t = tree(dir, DirEntryFormat.treeHeader(m, rec + InodeFormat.INLINE));
            if (!t.putIfAbsent(txn, key.segment(), key.value(ino, type))) {
                return false;
            }
            addEntries(txn, b, rec, 1); // the tree logs its own changes
            return true;
        }
        int at = inlineFind(m, rec, key);
        int used = InodeFormat.inlineUsed(m, rec);
        int size = DirEntryFormat.inlineSize(key.length());
        if (at >= 0 || used + size > inlineCapacity) {
            throw new IllegalStateException("inline directory " + dir.ino + " cannot take the entry being added");
        }
        int pos = -at - 1;
        int end = rec + InodeFormat.INLINE + used;
        MemorySegment.copy(m, pos, m, pos + size, end - pos);
        DirEntryFormat.writeEntry(m, pos, key.bytes(), key.length(), ino, type);
        InodeFormat.setInlineUsed(m, rec, used + size);
        InodeFormat.setFork(m, rec, InodeFormat.FORK_INLINE);
        InodeFormat.setSize(m, rec, InodeFormat.size(m, rec) + 1);
        logUsed(txn, b, rec);
        return true;
    }

    /** In {@code txn}: adds {@code key}, known to be absent (under {@code dir}'s lock). */
    void insertAbsent(Txn txn, Inode dir, EntryKey key, long ino, int type) {
        if (!insertEntry(txn, dir, key, ino, type)) {
            throw new IllegalStateException("directory " + dir.ino + " already holds the entry being added");
        }
    }

    /** In {@code txn}: removes the present entry {@code key} of {@code dir}. */
    void deleteEntry(Txn txn, Inode dir, EntryKey key) {
        Buffer b = records.lockRecord(txn, dir.ino);
        MemorySegment m = b.data();
        int rec = records.rec(dir.ino);
        if (isTree(m, rec)) {
            if (!tree(dir, DirEntryFormat.treeHeader(m, rec + InodeFormat.INLINE)).delete(txn, key.segment())) {
                throw new IllegalStateException("directory " + dir.ino + " lost the entry being removed");
            }
        } else {
            int at = inlineFind(m, rec, key);
            if (at < 0) {
                throw new IllegalStateException("inline directory " + dir.ino + " lost the entry being removed");
            }
            int used = InodeFormat.inlineUsed(m, rec);
            int end = rec + InodeFormat.INLINE + used;
            int size = DirEntryFormat.entrySize(m, at, end);
            MemorySegment.copy(m, at + size, m, at, end - at - size);
            m.asSlice(end - size, size).fill((byte) 0);
            InodeFormat.setInlineUsed(m, rec, used - size);
            // the count of bytes used, the entries moved and the freed tail zeroed
            txn.log(b, rec + InodeFormat.INLINE_USED, InodeFormat.INLINE - InodeFormat.INLINE_USED + used);
        }
        addEntries(txn, b, rec, -1);
    }

    /** In {@code txn}: points the present entry {@code key} of {@code dir} at another inode. */
    void replaceEntry(Txn txn, Inode dir, EntryKey key, long ino, int type) {
        Buffer b = records.lockRecord(txn, dir.ino);
        MemorySegment m = b.data();
        int rec = records.rec(dir.ino);
        if (isTree(m, rec)) {
            BTree t = tree(dir, DirEntryFormat.treeHeader(m, rec + InodeFormat.INLINE));
            if (t.put(txn, key.segment(), key.value(ino, type))) {
                throw new IllegalStateException("directory " + dir.ino + " lost the entry being replaced");
            }
        } else {
            int at = inlineFind(m, rec, key);
            if (at < 0) {
                throw new IllegalStateException("inline directory " + dir.ino + " lost the entry being replaced");
            }
            DirEntryFormat.setEntryValue(m, at, ino, type);
            logUsed(txn, b, rec);
        }
    }

    /** Items a change of {@code dir}'s entries may touch. */
    int dirItems(Inode dir) {
        BTree t = treeOrNull(dir);
        return t == null ? 1 : 1 + t.reservation();
    }

    /**
     * {@code dir}'s tree, or null if its record holds none (inline, or a removed directory's tree freed).
     * Lock-free; the answer stays true while the caller holds the directory or is entered in it ({@link #enter}).
     */
    BTree treeOrNull(Inode dir) {
        long header = records.readLong(dir.ino, (b, rec) -> isTree(b, rec) ? DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE) : 0L);
        return header == 0 ? null : tree(dir, header);
    }

    /** What {@link #step} says a directory needs before a change of its entries. */
    static final int READY = 0, CONVERT = 1, SPILL = 2, REFILL = 3;

    /**
     * The step {@code dir} needs before an entry of {@code keyLength} more bytes (0: none) goes in or one
     * comes out: an inline directory without room becomes a tree; a tree's block reserve is brought
     * between its marks ({@link #marks}), spilling first (busy entries first) so that a refill always fits
     * ({@code RESERVE_CAPACITY - high >= low}). Lock-free; under the directory's lock
     * the answer stays true.
     */
    int step(Inode dir, int keyLength) {
        for (;;) {
            long[] spilling = spills.of(dir);
            long f = spilling == null ? records.readLong(dir.ino, stepFacts) : records.readLong(dir.ino, (b, rec) -> stepFacts(b, rec, spilling));
            if (f >= 0) {
                return keyLength > 0 && f + DirEntryFormat.inlineSize(keyLength) > inlineCapacity ? CONVERT : READY;
            }
            if (f == TREE_SPILL) {
                return SPILL;
            }
            if (f != TREE_BAD_RESERVE) {
                return f == TREE_REFILL && keyLength != REMOVAL ? REFILL : READY;
            }
            int area = records.rec(dir.ino) + InodeFormat.INLINE;
            records.readRecord(dir.ino, (b, rec) -> isTree(b, rec) ? requireReserve(dir.ino, b, area) : 0); // throws, unless changed meanwhile
        }
    }

    /** Whether the tree in the record at {@code rec} of {@code b} (a block the caller holds) is {@link #READY} for a change. */
    boolean readyIn(MemorySegment b, int rec) {
        return stepFacts(b, rec, null) == TREE_READY;
    }

    /** What {@link #stepFacts} finds of a tree directory (an inline one: its used bytes, not negative). */
    private static final long TREE_READY = -1, TREE_SPILL = -2, TREE_REFILL = -3, TREE_BAD_RESERVE = -4;

    /**
     * {@link #step}'s read of the record with no spill beside the writers, made once: a reader capturing the
     * step's arguments would be allocated per call.
     */
    private final InodeRecords.LongRecordReader stepFacts = (b, rec) -> stepFacts(b, rec, null);

    /**
     * An inline directory's used bytes; for a tree, whether its reserve needs a spill or a refill
     * ({@code TREE_*}), or holds a block outside the groups (named by {@link #requireReserve}); the
     * blocks a spill beside the writers is freeing ({@code spilling}, or null) counted as gone.
     */
    private long stepFacts(MemorySegment b, int rec, long[] spilling) {
        if (!isTree(b, rec)) {
            return InodeFormat.inlineUsed(b, rec);
        }
        int area = rec + InodeFormat.INLINE;
        if (badReserveEntry(b, area) >= 0) {
            return TREE_BAD_RESERVE;
        }
        Marks m = marks(b, rec);
        if (DirEntryFormat.reserveCount(b, area) - (spilling == null ? 0 : spilling.length) > m.high()) {
            return TREE_SPILL;
        }
        return DirAllocator.usable(cache, b, area, m.low(), spilling) < m.low() ? TREE_REFILL : TREE_READY;
    }

    /**
     * For writers that apply side by side ({@link #enter}): {@code -1} if the
     * tree's reserve needs a spill first, {@link #NOT_A_TREE} if the record holds no tree, else
     * the blocks it can give (usable, counted up to its fill mark; not counted, 0, for a
     * {@code removal}, which takes none; below its low mark, a change that adds needs a refill) in
     * the high half and those it can take back (room to {@link DirEntryFormat#RESERVE_CAPACITY}) in the
     * low half. Lock-free.
     */
    long room(Inode table, boolean removal) {
        long f = roomAndMarks(table, removal);
        return f < 0 ? f : f & ~LEAF_MARKS;
    }

    /** {@link #room}, with {@link #LEAF_MARKS} set if the tree's marks are {@link #LEAF}'s. */
    private long roomAndMarks(Inode table, boolean removal) {
        long[] spilling = spills.of(table);
        long f = spilling == null ? records.readLong(table.ino, removal ? removalRoomFacts : roomFacts)
                : records.readLong(table.ino, (b, rec) -> roomFacts(b, rec, !removal, spilling));
        return f == NOT_A_TREE ? f : Math.max(f, -1);
    }

    /**
     * Admits a writer to {@code i}'s tree beside the others ({@link Inode#writers}): claims {@code claim}
     * blocks of the tree's reserve (what its change may take, or with {@code removal} give back), and
     * enters only while the reserve can give those of every writer inside that takes blocks, or take back
     * those of every one that gives them back: the two kinds are counted apart ({@link Inode#TAKES},
     * {@link Inode#GIVES}), since a change that takes blocks (a split) gives none back and a removal (a
     * merge) takes none. A writer alone of its kind needs only the reserve between its marks, as every
     * change of a tree does; a reserve that needs a refill
     * or a spill gets it first ({@link #prepare}), which keeps the writers out meanwhile
     * ({@link Inode#lockExclusive}), as does any holder of that, except a directory's refill and spill,
     * which run beside them (a spill holds entries only while it chooses its blocks, {@link Inode#HELD}).
     * A claim of no block (a change that neither takes nor gives one) waits for no room: it is counted
     * only as there ({@link Inode#PRESENT}). Claimed as one block, it was held against the 12–20 usable
     * blocks or free places the reserve has, and with 16 threads creating or unlinking in one directory
     * those beyond spun and yielded in here (issue 21). Returns the claim as
     * {@link Inode#writers} counts it, for {@link Inode#leave}; or -1, entering nothing, if {@code i}'s record holds no tree.
     */
    int enter(Inode i, int claim, boolean removal) {
        boolean refill = !removal; // until an early refill finds the volume without room for it
        for (int attempt = 0; ; attempt++) {
            long seen = i.writers();
            if ((seen & Inode.EXCLUSIVE) != 0) {
                i.lock(); // wait for the exclusive holder
                i.unlock();
                continue;
            }
            if ((seen & Inode.HELD) != 0) {
                Inode.backoff(attempt); // a spill chooses its blocks: a moment
                continue;
            }
            long room = roomAndMarks(i, removal);
            if (room == NOT_A_TREE) {
                return -1;
            }
            long inside = removal ? (seen & Inode.GIVES) / Inode.GIVE : seen & Inode.TAKES; // the other kind needs other room
            long limit = room < 0 ? 0 : removal ? room & 0xffff_ffffL : (room & ~LEAF_MARKS) >>> 32;
            Marks m = (room & LEAF_MARKS) != 0 ? LEAF : TREE;
            boolean low = !removal && room >= 0 && limit < m.low();
            if (refill && room >= 0 && limit < m.early() && inside + claim <= limit && sharesTree(i)
                    && !volume.journal().holdsGroup()) {
                // the reserve runs low, but this claim fits in the usable blocks left: refill it
                // unless another thread does (holds the lock), and then go in beside that refill rather
                // than wait for it, and for its holder's time slice if it is descheduled. Not inside a
                // table's journal group: blocks freed since its context began stay busy until it ends,
                // and an early refill finding only those would force the log at each change, in vain
                if (!i.isLocked()) {
                    // a refill that found no room goes in without it, but reads the count again first:
                    // the refill's own enter and leave moved it, so the entry below would fail its CAS,
                    // and the refill tried again, forever once the volume is full (CreatorTest, 1 in 8)
                    refill = refillEarly(i, low);
                    continue;
                }
            } else if (room < 0 || low) {
                prepare(i, removal ? REMOVAL : 0);
                continue;
            }
            if (claim > 0 && inside != 0 && inside + claim > limit) {
                if (spills.of(i) != null) {
                    i.lock(); // a spill beside the writers makes room when it commits: wait for it
                    i.unlock();
                } else {
                    Inode.backoff(attempt); // the others leave soon
                }
                continue;
            }
            int claimed = claim == 0 ? (int) Inode.PRESENT : removal ? claim * (int) Inode.GIVE : claim;
            if (i.tryEnter(seen, claimed)) {
                return claimed;
            }
        }
    }

    /**
     * Whether {@code i}'s tree is changed by writers side by side ({@link #enter}): a directory's (creates
     * and unlinks) or a table's (single writes, side-by-side commits), whose refills and spills then run
     * beside them. A regular file's extent tree is changed holding the file.
     */
    private boolean sharesTree(Inode i) {
        int type = records.modeOf(i.ino) & S_IFMT;
        return type == S_IFDIR || type == InodeFormat.S_IFTABLE;
    }

    /**
     * {@link #enter}'s refill of directory or table {@code dir}'s reserve before it is {@code low} (below
     * its low mark), or at it, unless another thread holds the lock: true if it tried, false if the
     * volume had no room for it and the reserve is not low yet (the writer goes in without it).
     */
    private boolean refillEarly(Inode dir, boolean low) {
        try {
            refillBeside(dir, 0, false);
            return true;
        } catch (NoSpaceException e) {
            if (low) {
                throw e;
            }
            return false;
        }
    }

    /** What {@link #room} says of a record without a tree. */
    static final long NOT_A_TREE = -2;

    /** The bit of {@link #room} that says the tree's marks are {@link #LEAF}'s. */
    private static final long LEAF_MARKS = 1L << 62;

    /**
     * {@link #room}'s reads of the record with no spill beside the writers, made once (allocation-free). A
     * removal's skips counting the usable blocks: that asks the cache about each reserve entry while
     * freed blocks await their checkpoint, as they do all through a run of deletes whose merges free leaves.
     */
    private final InodeRecords.LongRecordReader roomFacts = (b, rec) -> roomFacts(b, rec, true, null);
    private final InodeRecords.LongRecordReader removalRoomFacts = (b, rec) -> roomFacts(b, rec, false, null);

    /**
     * {@link #room} of the record at {@code rec} of {@code b}: the usable blocks counted if {@code give}, the
     * blocks a spill beside the writers is freeing ({@code spilling}, or null) neither usable nor past the
     * high mark; still in the reserve's capacity.
     */
    private long roomFacts(MemorySegment b, int rec, boolean give, long[] spilling) {
        int area = rec + InodeFormat.INLINE;
        if (!isTree(b, rec)) {
            return NOT_A_TREE;
        }
        if (badReserveEntry(b, area) >= 0) {
            return -1; // named by prepare's step
        }
        int count = DirEntryFormat.reserveCount(b, area);
        Marks m = marks(b, rec);
        if (count - (spilling == null ? 0 : spilling.length) > m.high()) {
            return -1;
        }
        long usable = give ? DirAllocator.usable(cache, b, area, m.fill(), spilling) : 0;
        return usable << 32 | (m == LEAF ? LEAF_MARKS : 0) | (DirEntryFormat.RESERVE_CAPACITY - count);
    }

    /**
     * The {@code keyLength} of {@link #step} and {@link #prepare} for a change that only removes entries: a
     * B-tree delete never allocates (merges free blocks into the reserve), so it needs room in the reserve
     * (a spill) but no refill, and goes on when the volume is full, as the undo of a group must.
     */
    static final int REMOVAL = -1;

    /**
     * Brings {@code dir} to {@link #READY}, each step in a transaction of its own reserved before the
     * directory's lock is taken (the entries stay the same). The operation that follows finds it ready
     * under the lock, or comes back here if a concurrent change came between. For a regular file's extent
     * tree ({@link ExtentTreeFormat}, keyLength 0) it keeps the reserve between its marks.
     */
    void prepare(Inode dir, int keyLength) {
        for (int s; (s = step(dir, keyLength)) != READY; ) {
            if (s == SPILL) {
                spill(dir, null, sharesTree(dir) && !dir.isHeldExclusively());
            } else if (s == CONVERT) {
                addBlocks(dir, TREE_BLOCKS + LEAF.fill(), () -> step(dir, keyLength) == CONVERT, DirContents::inlineEntries);
            } else if (sharesTree(dir) && !dir.isHeldExclusively()) {
                refillBeside(dir, keyLength, true);
            } else {
                int n = refillCount(dir, false);
                addBlocks(dir, n, () -> step(dir, keyLength) == REFILL
                        && records.readRecord(dir.ino, (b, rec) -> DirEntryFormat.reserveCount(b, rec + InodeFormat.INLINE)) + n
                        <= DirEntryFormat.RESERVE_CAPACITY, null);
            }
        }
    }

    /**
     * The blocks a refill of {@code dir}'s reserve adds: up to its fill mark usable, within its capacity
     * (0: no tree; with {@code early}, 0 too if it holds its early mark's usable blocks).
     */
    private int refillCount(Inode dir, boolean early) {
        int area = records.rec(dir.ino) + InodeFormat.INLINE;
        return records.readRecord(dir.ino, (b, rec) -> {
            if (!isTree(b, rec)) {
                return 0;
            }
            Marks m = marks(b, rec);
            int usable = DirAllocator.usable(cache, b, area, m.fill());
            return early && usable >= m.early() ? 0 : Math.min(m.fill() - usable, DirEntryFormat.RESERVE_CAPACITY - DirEntryFormat.reserveCount(b, area));
        });
    }

    /**
     * {@link #prepare}'s refill of a directory's tree reserve beside the creates and unlinks inside it,
     * rather than keeping them out: a refill only adds blocks, so those inside lose nothing, and it enters
     * as they do with a claim of the capacity its blocks take ({@link #enterToAdd}), so that their merges
     * cannot overfill the reserve meanwhile. It holds the directory's lock (not exclusively) so that one
     * thread refills while the others that found the reserve short wait for it and then find it full;
     * whatever must keep the writers out takes that lock and so waits for the refill too. Its transaction
     * reserves before the lock, then takes the group's free space and the directory's record block last,
     * as the exclusive refill did: nothing inside takes a group's AGF or free-space trees, so no cycle.
     * With nobody else in the directory, this costs what the exclusive refill did; beside others it does
     * not wait for them to leave, which with more threads than CPUs meant waiting for a descheduled one,
     * while every thread arriving waited behind the refill (issue 21). Returns when the reserve was
     * refilled or needs something else (the caller steps again); unless {@code wait}, also at once if
     * another thread holds the lock (it refills, or keeps the writers out). When no group holds the blocks
     * together it takes half as many, down to one ({@link #halving}), as {@link #addBlocks} does.
     */
    private void refillBeside(Inode dir, int keyLength, boolean wait) {
        try {
            refillBeside(dir, keyLength, wait, RESERVE_FILL);
        } catch (NoSpaceException full) {
            halving(full, RESERVE_FILL, 1, most -> refillBeside(dir, keyLength, wait, most));
        }
    }

    /** {@link #refillBeside} of at most {@code most} blocks, together. */
    private void refillBeside(Inode dir, int keyLength, boolean wait, int most) {
        eachGroup(dir, most, ag -> {
            try (Txn txn = Txn.begin(cache, ag.blockItems() + 2)) {
                if (wait) {
                    dir.lock();
                } else if (!dir.tryLock()) {
                    return AllocOutcome.DONE;
                }
                try {
                    if ((records.modeOf(dir.ino) & S_IFMT) == S_IFDIR) {
                        records.requireDir(dir.ino); // a directory may be removed meanwhile; a table's tree goes only once it is freed
                    }
                    int n = refillCount(dir, !wait);
                    if (n < 1 || wait && step(dir, keyLength) != REFILL) {
                        return AllocOutcome.DONE; // refilled meanwhile
                    }
                    n = Math.min(n, most);
                    int claim = enterToAdd(dir, n);
                    if (claim < 0) {
                        return AllocOutcome.DONE; // the reserve needs a spill first: the caller steps again
                    }
                    try {
                        AllocOutcome r = allocTree(txn, ag, dir, n);
                        if (r == AllocOutcome.DONE) {
                            fillReserve(txn, dir, ag.allocatedBlock(txn), n, 0, null);
                            dir.noteSeq(txn.commit());
                        }
                        return r;
                    } finally {
                        dir.leave(claim);
                    }
                } finally {
                    dir.unlock();
                }
            }
        });
    }

    /**
     * {@link #enter} for {@link #refillBeside}, holding {@code dir}'s lock (so nobody else keeps the writers
     * out): claims {@code n} of the reserve's capacity, as a removal does, entering only while it has room
     * for those and the removals' claims inside, lone or not (the count read before entering may have grown
     * since); the writers that take blocks need none of that room. Returns the claim for {@link Inode#leave}; -1,
     * entering nothing, if the reserve needs a spill (or holds no tree): a spill reserves log space, which
     * the caller holds already.
     */
    private int enterToAdd(Inode dir, int n) {
        for (int attempt = 0; ; attempt++) {
            long seen = dir.writers();
            long room = room(dir, true);
            if (room < 0) {
                return -1;
            }
            if ((seen & Inode.GIVES) / Inode.GIVE + n > (room & 0xffff_ffffL)) {
                Inode.backoff(attempt); // those inside leave soon
                continue;
            }
            if (dir.tryEnter(seen, n * (int) Inode.GIVE)) {
                return n * (int) Inode.GIVE;
            }
        }
    }

    /** Reads an inline fork's contents as the entries of the tree it becomes, before the area is cleared. */
    interface Converter {
        void read(MemorySegment m, int rec, List<byte[]> keys, List<byte[]> values);
    }

    /** An inline directory's entries. */
    private static void inlineEntries(MemorySegment m, int rec, List<byte[]> keys, List<byte[]> values) {
        int area = rec + InodeFormat.INLINE;
        int end = area + InodeFormat.inlineUsed(m, rec);
        for (int at = area, size; at < end; at += size) {
            size = DirEntryFormat.entrySize(m, at, end); // checked before the key is read
            keys.add(DirEntryFormat.entryKey(m, at));
            values.add(DirEntryFormat.value(DirEntryFormat.entryInode(m, at), DirEntryFormat.entryType(m, at)));
        }
    }

    /**
     * Turns {@code owner}'s inline fork into a tree of the entries {@code convert} reads from it, with a
     * full reserve, in a transaction of its own reserving {@code extraItems} more items, if {@code still}
     * says so under its lock.
     */
    void convert(Inode owner, int extraItems, BooleanSupplier still, Converter convert) {
        addBlocks(owner, RESERVE_FILL, extraItems, still, convert);
    }

    private void addBlocks(Inode owner, int n, BooleanSupplier still, Converter convert) {
        addBlocks(owner, n, 0, still, convert);
    }

    /** Blocks a new tree takes: its header and its root ({@link BTree#create}). */
    private static final int TREE_BLOCKS = 2;

    /**
     * Allocates {@code n} blocks into {@code owner}'s reserve, from its own group if it can, if
     * {@code still} says so under its lock; with {@code convert}, turns the inline fork into a tree in the
     * same transaction. ENOENT if a directory went meanwhile. When no group holds {@code n} free blocks
     * together (a full volume's free space in pieces, while what a file's pages reserved for its tree is
     * there in sum), it takes half as many, down to one for a refill and, for a conversion, to the new
     * tree's {@link #TREE_BLOCKS}, taken apart if need be ({@link FreeSpace#allocPair}): the tree is made
     * with a reserve below its low mark, and the caller's next step ({@link #prepare}) refills the rest, a
     * transaction and a piece at a time, before any change of the tree takes a block.
     */
    private void addBlocks(Inode owner, int n, int extraItems, BooleanSupplier still, Converter convert) {
        try {
            addRun(owner, n, extraItems, still, convert);
        } catch (NoSpaceException full) {
            halving(full, n, convert != null ? Math.min(n, TREE_BLOCKS) : 1, k -> addRun(owner, k, extraItems, still, convert));
        }
    }

    /**
     * After an attempt for {@code n} blocks found no group holding them together ({@code full}): runs
     * {@code attempt} for half as many each time, down to {@code least}, else throws what the last one
     * threw. Busy blocks too ({@link SpaceBusyException}): inside a journal group whose frees left the free
     * space in pieces, shorter runs that are not busy remain. Off the common path, so that its lambda is
     * made only then.
     */
    private static void halving(NoSpaceException full, int n, int least, IntConsumer attempt) {
        for (int k = n; k > least; ) {
            k = Math.max(least, k / 2);
            try {
                attempt.accept(k);
                return;
            } catch (NoSpaceException again) {
                full = again;
            }
        }
        throw full;
    }

    /**
     * {@link #addBlocks} of {@code n} blocks together, but a conversion's {@link #TREE_BLOCKS} as a pair that
     * may lie apart: from one group if one has two ({@link FreeSpace#allocPair}), else a block from each of
     * two ({@link #pairApart}).
     */
    private void addRun(Inode owner, int n, int extraItems, BooleanSupplier still, Converter convert) {
        boolean pair = convert != null && n == TREE_BLOCKS;
        try {
            runIn(owner, n, extraItems, still, convert, pair);
        } catch (SpaceBusyException busy) {
            throw busy; // inside a journal group: its retry after the group finds them
        } catch (NoSpaceException full) {
            if (!pair || !pairApart(owner, extraItems, still, convert)) {
                throw full;
            }
        }
    }

    /** {@link #addRun}'s blocks from one group, each group tried in turn ({@link #eachGroup}). */
    private void runIn(Inode owner, int n, int extraItems, BooleanSupplier still, Converter convert, boolean pair) {
        eachGroup(owner, n, ag -> {
            int items = (pair ? ag.pairItems() : ag.blockItems()) + 2 + extraItems + (convert != null ? BTree.CREATE_ITEMS + 4 : 0);
            try (Txn txn = Txn.begin(cache, items)) {
                if (!owner.lockExclusiveIf(() -> needed(owner, n, still))) {
                    return AllocOutcome.DONE; // changed meanwhile (another thread's refill): the caller looks again
                }
                try {
                    long[] two = pair ? new long[TREE_BLOCKS] : null;
                    AllocOutcome r = pair ? ag.allocPair(txn, !promised(owner), two) : allocTree(txn, ag, owner, n);
                    if (r == AllocOutcome.DONE) {
                        long first = pair ? two[0] : ag.allocatedBlock(txn);
                        boolean apart = pair && two[1] != first + 1;
                        fillReserve(txn, owner, first, apart ? 1 : n, apart ? two[1] : 0, convert);
                        owner.lastSeq = txn.commit();
                    }
                    return r;
                } finally {
                    owner.unlockExclusive();
                }
            }
        });
    }

    /** What one {@link #pairApart} attempt found. */
    private static final int PAIR_MADE = 0, FIRST_HAS_NONE = 1, SECOND_HAS_NONE = 2, PAIR_UNCLAIMED = 3;

    /**
     * A conversion's pair from two groups, a block from each, where no group has two past those it holds
     * back: a full volume whose free space is down to single blocks with the set-aside pool drawn dry, so
     * that blocks promised (a file's pages') are left one to a group (the format allows a tree's blocks in
     * any groups). The groups that seem to have a block (a hint) are tried two at a time in group order,
     * their AGFs locked in that order after the owner's lock, and both blocks found before either is taken.
     * True once made, or no longer needed; false if no two groups gave a block each.
     */
    private boolean pairApart(Inode owner, int extraItems, BooleanSupplier still, Converter convert) {
        List<AllocationGroup> some = new ArrayList<>();
        for (int g = 0; g < geometry.agCount(); g++) {
            AllocationGroup ag = volume.group(g);
            if (ag.freeBlockCount() > ag.heldBack()) {
                some.add(ag);
            }
        }
        firsts:
        for (int i = 0; i < some.size(); i++) {
            for (int j = i + 1; j < some.size(); j++) {
                int r = pairApart(owner, some.get(i), some.get(j), extraItems, still, convert);
                if (r != SECOND_HAS_NONE) {
                    if (r == FIRST_HAS_NONE) {
                        continue firsts;
                    }
                    return r == PAIR_MADE;
                }
            }
        }
        return false;
    }

    /** One attempt of {@link #pairApart} at a block from each of groups {@code a} and {@code b}, {@code a} first in group order. */
    private int pairApart(Inode owner, AllocationGroup a, AllocationGroup b, int extraItems, BooleanSupplier still, Converter convert) {
        for (AllocationGroup ag : List.of(a, b)) {
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
        }
        boolean claiming = !promised(owner);
        if (claiming && !a.claimPair()) {
            return PAIR_UNCLAIMED;
        }
        try (Txn txn = Txn.begin(cache, a.blockItems() + b.blockItems() + 2 + extraItems + BTree.CREATE_ITEMS + 4)) {
            if (!owner.lockExclusiveIf(() -> needed(owner, TREE_BLOCKS, still))) {
                return PAIR_MADE; // another thread's conversion came first
            }
            try {
                long[] x = a.findHalf(txn);
                if (x == null) {
                    return FIRST_HAS_NONE;
                }
                long[] y = b.findHalf(txn);
                if (y == null) {
                    return SECOND_HAS_NONE; // the transaction ends with nothing changed: a's AGF let go
                }
                long first = a.takeHalf(txn, x);
                fillReserve(txn, owner, first, 1, b.takeHalf(txn, y), convert);
                owner.lastSeq = txn.commit();
                return PAIR_MADE;
            } finally {
                owner.unlockExclusive();
            }
        } finally {
            if (claiming) {
                a.releasePair();
            }
        }
    }

    /**
     * {@code n} blocks of group {@code ag} for {@code owner}'s tree reserve. A regular file's extent tree
     * takes blocks already promised ({@link Counters#claim}) by whoever changes its mapping: its dirty
     * pages' {@link PageCache#FILE_META_BLOCKS}, a direct write's or fallocate's claim. A directory's or a
     * table's tree claims them as it takes them.
     */
    private AllocOutcome allocTree(Txn txn, AllocationGroup ag, Inode owner, int n) {
        return promised(owner) ? ag.allocBlocks(txn, n) : ag.allocClaiming(txn, n);
    }

    /** Whether {@code owner}'s tree takes blocks already promised ({@link #allocTree}): a regular file's. */
    private boolean promised(Inode owner) {
        return (records.modeOf(owner.ino) & S_IFMT) == S_IFREG;
    }


    /**
     * Runs {@code attempt} in {@code owner}'s group, then in the others, until it answers DONE, retrying in
     * each as the group's answer says ({@link AllocationGroup#recover}, with no lock held); NoSpaceException
     * if no group has {@code n} free blocks for its tree, {@link SpaceBusyException} if inside a journal
     * group some had them busy (freed in the context the group pins, which no wait inside it makes durable).
     */
    private void eachGroup(Inode owner, int n, Function<AllocationGroup, AllocOutcome> attempt) {
        boolean busyMet = false;
        int groups = geometry.agCount();
        int first = geometry.agOfInode(owner.ino);
        for (int k = 0; k < groups; k++) {
            AllocationGroup ag = volume.group((first + k) % groups);
            int[] busy = {0};
            for (int tries = 0, used; tries < RETRIES; tries += used) {
                if (ag.needsRefill()) {
                    ag.refillFreeList();
                }
                AllocOutcome r = attempt.apply(ag);
                if (r == AllocOutcome.DONE) {
                    return;
                }
                busyMet |= r == AllocOutcome.BUSY;
                if ((used = ag.recover(r, busy)) < 0) {
                    break;
                }
            }
        }
        String what = "no allocation group has " + n + " free blocks for the tree of inode " + owner.ino;
        if (busyMet && volume.journal().holdsGroup()) {
            throw new SpaceBusyException(what + " that are not busy until its journal group ends");
        }
        throw new NoSpaceException(what);
    }

    /** Whether {@link #addBlocks} of {@code n} blocks into {@code owner} is {@code still} needed; ENOENT if a directory went. */
    private boolean needed(Inode owner, int n, BooleanSupplier still) {
        int type = records.modeOf(owner.ino) & S_IFMT;
        if (type != S_IFREG && type != InodeFormat.S_IFTABLE) {
            records.requireDir(owner.ino);
        }
        return n >= 1 && still.getAsBoolean();
    }

    /**
     * In {@code txn}, {@code owner}'s lock held: blocks {@code [r, r + n)} and {@code apart} (0: none; a
     * pair's second block, {@link FreeSpace#allocPair}) join its reserve (converting it to a tree).
     */
    private void fillReserve(Txn txn, Inode owner, long r, int n, long apart, Converter convert) {
        Buffer b = records.lockRecord(txn, owner.ino);
        MemorySegment m = b.data();
        int rec = records.rec(owner.ino);
        int area = rec + InodeFormat.INLINE;
        List<byte[]> keys = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        int count = 0;
        if (convert != null) {
            convert.read(m, rec, keys, values);
            m.asSlice(area, inlineCapacity).fill((byte) 0);
            InodeFormat.setFork(m, rec, InodeFormat.FORK_TREE);
            InodeFormat.setInlineUsed(m, rec, DirEntryFormat.treeAreaSize());
        } else {
            count = DirEntryFormat.reserveCount(m, area);
        }
        if (apart != 0) { // popped last
            DirEntryFormat.setReserveEntry(m, area, count++, apart);
        }
        for (int i = n - 1; i >= 0; i--) { // pops come in ascending order
            DirEntryFormat.setReserveEntry(m, area, count++, r + i);
        }
        DirEntryFormat.setReserveCount(m, area, count);
        InodeFormat.setBlocks(m, rec, InodeFormat.blocks(m, rec) + n + (apart != 0 ? 1 : 0));
        if (convert != null && (InodeFormat.mode(m, rec) & S_IFMT) == S_IFREG) {
            ExtentTreeFormat.setCount(m, area, keys.size());
        }
        txn.log(b, rec, recordSize);
        if (convert != null) {
            BTree t = BTree.create(txn, new DirAllocator(cache, records.block(owner.ino), geometry.agOfInode(owner.ino), rec, () -> spills.of(owner)), owner.ino);
            DirEntryFormat.setTreeHeader(m, area, t.headerBlock());
            txn.log(b, area, 8);
            for (int i = 0; i < keys.size(); i++) {
                t.put(txn, MemorySegment.ofArray(keys.get(i)), MemorySegment.ofArray(values.get(i)));
            }
            owner.dirTree = t;
        }
    }

    /**
     * Items a spill reserves beyond one free-space change and the record: the frees after the first go on
     * while one more could not pass the reservation, which they rarely near, as they mostly change the
     * nodes the first one locked. Kept small: a spill may run inside a group (an undo's), whose budget
     * covers transactions of about {@link Tables#GROUP_TXN_ITEMS} items.
     */
    private static final int SPILL_ROOM = 40;

    /**
     * Items a spill reserves for each group past the first whose blocks it frees: that group's AGF and the
     * few leaves of its trees its frees change (each free still goes on only while the worst case of one
     * more fits the reservation, {@link FreeSpace#releaseSingles}).
     */
    private static final int SPILL_GROUP_ROOM = 8;

    /**
     * Frees blocks of {@code dir}'s reserve if it holds more than {@code above}: down to {@code downTo},
     * busy ones first, as many as one transaction takes (neighbours as one extent; the blocks of every
     * group the reserve holds, their AGFs in group order), so that
     * the blocks merges freed go back to the free-space trees a batch at a time rather than a transaction
     * each, keeping the writers out meanwhile ({@link Inode#lockExclusiveIf}). False if the reserve holds
     * no more than {@code above} (nothing changed); true if it changed or may have (the caller looks again).
     */
    boolean spill(Inode dir, int above, int downTo) {
        return spill(dir, new Marks(0, downTo, above, 0), false); // only the high and fill marks count to a spill
    }

    /**
     * {@link #spill}, or with {@code beside} (a directory's or a table's, from {@link #prepare}) beside the
     * creates and unlinks, or a table's single writes and side-by-side commits, inside it rather than
     * keeping them out (issue 21; tables, issue 17): the unlinks' and deletes' merges give blocks back to
     * the reserve, and with 16 threads on 2 CPUs each exclusive spill waited for a descheduled writer
     * inside while every thread arriving waited behind it (two threads deleting 300,000 keys of a table, four times over,
     * parked about 600 times for its spills; beside them, about 80, those that came before the blocks
     * were chosen). Beside them it holds the directory's lock (not
     * exclusively), as a refill does, so that one thread spills while the others that found the reserve
     * full wait for it and whatever keeps the writers out waits too; chooses the blocks and marks them
     * ({@link #withhold}) so that no split inside takes them and no writer entering counts them; and in
     * one transaction frees them and then takes them out of the directory's record, the groups' free
     * space first (each group's AGF in group order) and the record block last, as the refill's does
     * (nothing inside takes a group's AGF or free-space trees, so no cycle). Merges give back blocks of
     * whichever groups the tree's nodes lie in, so a spill of one group's blocks a transaction took 3.8
     * of the 9 past the fill mark (100,000 deletes of 1 KiB values over four groups: 11,365 spills),
     * and the next spill came that many merges sooner; all groups' at once, 9 (4,784 spills). Of the
     * blocks no writer is freeing (not busy) it takes only those
     * past the fill mark and the claims of the writers inside, who entered claiming no more than there
     * were, so they still find theirs. It spills from past {@code marks}' high mark down to their fill,
     * or (null) the record's own ({@link #marks}): a tree that shrank to a root leaf spills down to
     * {@link #LEAF}'s.
     */
    private boolean spill(Inode dir, Marks marks, boolean beside) {
        int rec = records.rec(dir.ino);
        int area = rec + InodeFormat.INLINE;
        long[] blocks = new long[DirEntryFormat.RESERVE_CAPACITY];
        int[] refused = new int[DirEntryFormat.RESERVE_CAPACITY]; // groups that freed none of theirs
        int refusing = 0;
        for (int attempt = 0; ; attempt++) {
            refill(refused, refusing);
            refusing = 0;
            // the reserve's entries as they are now, holding nothing, for the reservation: the groups they
            // lie in, the tallest trees among them (blocks merges add meanwhile are freed only while they fit)
            int present = records.readRecord(dir.ino, (b, r) -> {
                if (!isTree(b, r) || requireReserve(dir.ino, b, area) <= marksOr(marks, b, r).high()) {
                    return 0;
                }
                int count = DirEntryFormat.reserveCount(b, area);
                for (int k = 0; k < count; k++) {
                    blocks[k] = DirEntryFormat.reserveEntry(b, area, k);
                }
                return count;
            });
            if (present == 0) {
                return attempt > 0;
            }
            int items = 2 + SPILL_ROOM - SPILL_GROUP_ROOM;
            long groupsSeen = 0; // the first 64 groups' bits: past those a group may count twice, reserving more
            int most = 0;
            for (int k = 0; k < present; k++) {
                int agno = geometry.agOfBlock(blocks[k]);
                if (agno >= 64 || (groupsSeen & 1L << agno) == 0) {
                    groupsSeen |= agno < 64 ? 1L << agno : 0;
                    most = Math.max(most, volume.group(agno).blockItems());
                    items += SPILL_GROUP_ROOM;
                }
            }
            items += most;
            int freed = 0;
            try (Txn txn = Txn.begin(cache, items)) {
                if (beside) {
                    dir.lock();
                } else if (!dir.lockExclusiveIf(() -> records.readRecord(dir.ino, (b, r) -> isTree(b, r)
                        && DirEntryFormat.reserveCount(b, area) > marksOr(marks, b, r).high()))) {
                    return true; // spilled meanwhile (another thread's spill)
                }
                try {
                    int n = beside ? withhold(dir, area, marks, blocks)
                            : records.readRecord(dir.ino, (b, r) -> {
                                Marks m = marksOr(marks, b, r);
                                return isTree(b, r) && DirEntryFormat.reserveCount(b, area) > m.high()
                                        ? DirAllocator.spillOrder(cache, b, area, m.fill(), 0, blocks) : 0;
                            });
                    if (n == 0) {
                        return true; // changed meanwhile
                    }
                    // each group's blocks in one run of the sorted array, the groups in ascending order (the
                    // AGFs' lock order); what a group frees moves down to the freed prefix
                    Arrays.sort(blocks, 0, n);
                    for (int i = 0, j; i < n; i = j) {
                        int agno = geometry.agOfBlock(blocks[i]);
                        for (j = i + 1; j < n && geometry.agOfBlock(blocks[j]) == agno; j++) {
                        }
                        AllocationGroup ag = volume.group(agno);
                        long[] part = Arrays.copyOfRange(blocks, i, j);
                        int k = ag.releaseSingles(txn, part, j - i, items);
                        if (k == 0) {
                            refused[refusing++] = agno; // its free list short, or no room left for its frees
                        }
                        System.arraycopy(part, 0, blocks, freed, k);
                        freed += k;
                    }
                    if (freed > 0) {
                        Buffer b = records.lockRecord(txn, dir.ino);
                        MemorySegment m = b.data();
                        for (int k = 0; k < freed; k++) {
                            DirAllocator.remove(m, area, DirAllocator.indexOf(m, area, blocks[k]));
                        }
                        InodeFormat.setBlocks(m, rec, InodeFormat.blocks(m, rec) - freed);
                        txn.log(b, rec, recordSize);
                        dir.noteSeq(txn.commit());
                    }
                } finally {
                    if (beside) {
                        spills.set(dir, null); // after the commit took them out of the record
                        dir.unlock();
                    } else {
                        dir.unlockExclusive();
                    }
                }
            }
            if (freed > 0) {
                refill(refused, refusing); // for the spill after this one
                return true;
            }
            if (attempt == RETRIES) {
                throw new NoSpaceException("allocation groups " + Arrays.toString(Arrays.copyOf(refused, refusing))
                        + " cannot refill the free lists of their free-space trees");
            }
        }
    }

    /** Refills the free lists of those of groups {@code agnos[0..n)} that need it, holding nothing as a refill must. */
    private void refill(int[] agnos, int n) {
        for (int g = 0; g < n; g++) {
            AllocationGroup ag = volume.group(agnos[g]);
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
        }
    }

    /** {@code marks}, or if null those of the tree in the record at {@code rec} of {@code b}. */
    private static Marks marksOr(Marks marks, MemorySegment b, int rec) {
        return marks != null ? marks : marks(b, rec);
    }

    /**
     * For {@link #spill} beside the writers, holding {@code dir}'s lock: chooses the blocks of group
     * {@code ag} to spill from {@code dir}'s reserve if it holds more than {@code marks}' high mark (null:
     * the record's), down to their fill (into {@code blocks}), keeping that many usable and the claims of
     * the writers inside that take blocks (made under a larger tree's marks if it shrank since), and
     * publishes them ({@link SpillingBlocks}); their number, 0 (nothing published) if the reserve no
     * longer needs a spill. No writer enters while it chooses
     * ({@link Inode#holdEntries}): one that counted a chosen block as usable could be left short. A split
     * that locked the record before the publication may have taken a chosen block; the record is read
     * again once it committed (the read waits for the block's lock), and such blocks are dropped. A split
     * that locks the record later reads them after its lock's CAS, and this reads the record's version
     * after the publication and a full fence, so one of the two sees the other.
     */
    private int withhold(Inode dir, int area, Marks marks, long[] blocks) {
        int n;
        dir.holdEntries();
        try {
            int takes = (int) (dir.writers() & Inode.TAKES); // no writer enters meanwhile
            n = records.readRecord(dir.ino, (b, r) -> {
                Marks m = marksOr(marks, b, r);
                return isTree(b, r) && DirEntryFormat.reserveCount(b, area) > m.high()
                        ? DirAllocator.spillOrder(cache, b, area, m.fill(), Math.max(m.fill(), takes), blocks) : 0;
            });
            if (n > 0) {
                spills.set(dir, Arrays.copyOf(blocks, n)); // a copy: releaseSingles reorders blocks
            }
        } finally {
            dir.releaseEntries();
        }
        if (n == 0) {
            return 0;
        }
        VarHandle.fullFence();
        long[] chosen = spills.of(dir);
        int kept = records.readRecord(dir.ino, (b, r) -> {
            int k = 0;
            for (long e : chosen) {
                if (DirAllocator.inReserve(b, area, e)) {
                    blocks[k++] = e;
                }
            }
            return k;
        });
        if (kept < n) {
            spills.set(dir, kept == 0 ? null : Arrays.copyOf(blocks, kept));
        }
        return kept;
    }

    /**
     * Deletes every key of {@code owner}'s tree (an orphaned table's), a key per transaction, each
     * leaving a consistent inode: so that {@link #takeDown} meets a tree of one leaf however large it was,
     * and a crash part way is finished by running this again. Nobody else may use the tree meanwhile.
     */
    void emptyTree(Inode owner) {
        int area = records.rec(owner.ino) + InodeFormat.INLINE;
        for (;;) {
            long header = records.readRecord(owner.ino, (b, r) -> isTree(b, r) ? DirEntryFormat.treeHeader(b, area) : 0L);
            if (header == 0) {
                return;
            }
            BTree t = tree(owner, header);
            List<byte[]> keys = new ArrayList<>();
            Cursor c = t.cursor(null, false);
            while (keys.size() < 1024 && c.next()) {
                keys.add(c.key());
            }
            if (keys.isEmpty()) {
                return;
            }
            for (byte[] k : keys) {
                for (boolean done = false; !done; ) {
                    prepare(owner, 0);
                    try (Txn txn = Txn.begin(cache, 2 + t.reservation())) {
                        owner.lockExclusive();
                        try {
                            if (step(owner, 0) == READY) { // read before the record is locked, stable under the inode's lock
                                records.lockRecord(txn, owner.ino);
                                if (t.delete(txn, MemorySegment.ofArray(k))) {
                                    owner.lastSeq = txn.commit();
                                }
                                done = true;
                            }
                        } finally {
                            owner.unlockExclusive();
                        }
                    }
                }
            }
        }
    }

    /**
     * Frees {@code owner}'s tree (an orphaned directory's) and its reserve, leaving
     * its fork a tree with no header and an empty reserve: the reserve spilled a batch per transaction,
     * the tree's nodes freed into it in one, then spilled too. Each step leaves a consistent inode, so a
     * crash part way is finished by running this again. Nobody else may use the tree meanwhile.
     */
    void takeDown(Inode owner) {
        int rec = records.rec(owner.ino);
        int area = rec + InodeFormat.INLINE;
        long header = records.readRecord(owner.ino, (b, r) -> isTree(b, r) ? DirEntryFormat.treeHeader(b, area) : 0L);
        if (header != 0) {
            while (spill(owner, 0, 0)) {
                // a batch per transaction
            }
            BTree t = tree(owner, header);
            try (Txn txn = Txn.begin(cache, 8 + 3 * DirEntryFormat.RESERVE_CAPACITY)) {
                owner.lockExclusive();
                try {
                    t.destroy(txn); // first: it reads the tree's nodes, and the record's block is shared
                    Buffer b = records.lockRecord(txn, owner.ino);
                    DirEntryFormat.setTreeHeader(b.data(), area, 0);
                    txn.log(b, rec, recordSize);
                    owner.lastSeq = txn.commit();
                } finally {
                    owner.unlockExclusive();
                }
            }
            owner.dirTree = null;
        }
        while (spill(owner, 0, 0)) {
            // the tree's nodes came back to the reserve
        }
    }

    /**
     * Frees device block {@code blk} of {@code owner} to its group and runs {@code then} in the same
     * transaction (which may change {@code items} more items), reserved before {@code owner}'s lock is
     * taken; under the lock, {@code still} says whether the block is still to be freed (if not, nothing
     * changes). Fixes the group's free list first when it is short.
     */
    void freeBlock(Inode owner, long blk, int items, BooleanSupplier still, Change then) {
        AllocationGroup ag = volume.group(geometry.agOfBlock(blk));
        for (int attempt = 0; ; attempt++) {
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
            try (Txn txn = Txn.begin(cache, ag.blockItems() + items)) {
                owner.lockExclusive();
                try {
                    if (!still.getAsBoolean()) {
                        return;
                    }
                    if (ag.releaseBlocks(txn, blk, 1) == AllocOutcome.DONE) {
                        then.apply(txn);
                        owner.lastSeq = txn.commit();
                        return;
                    }
                } finally {
                    owner.unlockExclusive();
                }
            }
            if (attempt == RETRIES) {
                throw new NoSpaceException("allocation group " + ag.agno + " cannot refill the free list of its free-space trees");
            }
            ag.refillFreeList();
        }
    }

    /** Log items a change of {@code touched}'s records (a directory's entries) and {@code ag}'s inode trees may touch. */
    int changeItems(AllocationGroup ag, Inode... touched) {
        int items = baseItems(ag);
        for (Inode i : touched) {
            items += dirChangeItems(i);
        }
        return items;
    }

    /** {@link #changeItems(AllocationGroup, Inode...)} of two inodes (an unlink's, a link's) without the array. */
    int changeItems(AllocationGroup ag, Inode a, Inode b) {
        return baseItems(ag) + dirChangeItems(a) + dirChangeItems(b);
    }

    /** The records' items and {@code ag}'s inode trees' (null: none) of a change. */
    private static int baseItems(AllocationGroup ag) {
        return 8 + (ag == null ? 0 : ag.freeInodeItems() + ag.orphanItems());
    }

    /** Items a change of {@code i}'s entries may touch if it is a directory (null: none). */
    private int dirChangeItems(Inode i) {
        return i != null && (records.modeOf(i.ino) & S_IFMT) == S_IFDIR ? dirItems(i) : 0;
    }

    /**
     * The count of tree directory {@code ino}'s reserve (record at {@code area} of {@code b}), each entry
     * checked to lie in the allocation groups: its blocks become tree nodes or go back to free space.
     */
    int requireReserve(long ino, MemorySegment b, int area) {
        int bad = badReserveEntry(b, area);
        if (bad >= 0) { // named only on failure: this runs per change
            records.requireDataBlock(ino, DirEntryFormat.reserveEntry(b, area, bad), "directory block reserve entry " + bad);
        }
        return DirEntryFormat.reserveCount(b, area);
    }

    /** The first entry of the reserve (at {@code area} of {@code b}) that lies outside the allocation groups, or -1. */
    private int badReserveEntry(MemorySegment b, int area) {
        for (int i = 0, n = DirEntryFormat.reserveCount(b, area); i < n; i++) {
            if (!geometry.isDataBlock(DirEntryFormat.reserveEntry(b, area, i))) {
                return i;
            }
        }
        return -1;
    }
}
