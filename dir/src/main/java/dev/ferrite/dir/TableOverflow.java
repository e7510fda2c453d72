package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;

/**
 * Medium table values ({@link TableValueFormat#MAX_INLINE} + 1 to {@link TableValueFormat#MAX_MEDIUM}
 * bytes) not kept in a data extent ({@link TableExtents}: those written by code from before extents, and
 * those for which no allocation group had the blocks contiguous), kept as chunks in one volume-wide B-tree: a table-type inode that no catalog names (group 0's
 * AGI does), made with the first medium value. A value's chunks are keyed by its id and chunk number
 * ({@link TableValueFormat#chunkKey}), each holding up to a tree cell's worth of its bytes.
 *
 * <p>Chunks change only inside a commit's journal group, with the key that names them: inserted before
 * it, deleted after it is changed, so a crash leaves none without a key and no key without its chunks,
 * and nothing is pending at mount. Ids are volume-wide and rise: taken while the commit applies alone
 * among those that keep their tables (each takes the whole of the log's group shares, {@link GroupShares};
 * commits applying side by side write no chunks), from the largest id in the tree at mount (one descent) upward, so values are
 * appended at the tree's right edge. An id a mount finds no more may be taken again: no reader or
 * snapshot outlives a mount.
 *
 * <p>A value's chunks change in a few transactions, each reserved before the tree's inode lock is taken
 * (the innermost lock: under a table's lock and the commit's log share) and taking chunks in key order while its
 * reservation (at most {@link Tables#GROUP_TXN_ITEMS} items, what a group's budget is sized for) and the
 * tree's block reserve cover one more worst-case change, so a value of any medium size fits the log. Reads
 * are lock-free, one cursor over the value's chunk keys: a read that finds a chunk missing or of the wrong
 * length says so, and the caller looks the key up again ({@link Tables#copy}).
 */
final class TableOverflow {
    private static final ThreadLocal<Reader> READERS = ThreadLocal.withInitial(Reader::new);

    private final Volume volume;
    private final Namespace namespace;
    private final BufferCache cache;
    private final DirContents dirs;
    private final InodeRecords records;
    /** The last id taken. */
    private final AtomicLong ids = new AtomicLong();
    /** A handle on the tree's inode, open for the volume's life once the tree exists (it has a link: an unmount leaves nothing to free). */
    private volatile Handle handle;
    private volatile BTree tree;
    /** The tree's inode once known to exist: it stays for the volume's life. */
    private volatile long known;

    TableOverflow(Volume volume, Namespace namespace, BufferCache cache) {
        this.volume = volume;
        this.namespace = namespace;
        this.cache = cache;
        this.dirs = namespace.dirs;
        this.records = namespace.records;
    }

    /** The tree's inode number, 0 if the volume has none (read on every table change: the header only until it is made). */
    long inode() {
        long i = known;
        if (i == 0) {
            known = i = volume.group(0).overflowTree();
        }
        return i;
    }

    /** The tree, or null if the volume has none and {@code make} is false (else made first, before the commit takes any lock). */
    BTree tree(boolean make) {
        BTree t = tree;
        if (t != null) {
            return t;
        }
        Handle h = handle(make);
        return h == null ? null : (tree = Tables.treeOf(dirs, records, h.inode));
    }

    private synchronized Handle handle(boolean make) {
        if (handle != null) {
            return handle;
        }
        long ino = inode();
        if (ino == 0) {
            if (!make) {
                return null;
            }
            ino = volume.allocInode(0, InodeFormat.S_IFTABLE | 0600, 0, 0, 1, 1,
                    (txn, i) -> volume.group(0).setTablesInode(txn, AgHeaderFormat.OVERFLOW, i));
        }
        Handle h = namespace.openInode(ino);
        if (h == null) {
            throw new CorruptionException(records.block(ino), "table overflow tree", "group 0 names inode " + ino + ", which has no links");
        }
        return handle = h;
    }

    /** At mount: ids go on from the largest in the tree. */
    void recover() {
        BTree t = tree(false);
        byte[] last = t == null ? null : t.lastKey();
        if (last != null && last.length != TableValueFormat.CHUNK_KEY) {
            throw new CorruptionException(t.headerBlock(), "table overflow tree", "its last key is " + last.length
                    + " bytes long, not a chunk key's " + TableValueFormat.CHUNK_KEY);
        }
        ids.set(last == null ? 0 : TableValueFormat.chunkId(MemorySegment.ofArray(last)));
    }

    /** A new medium value's id, length and CRC; inside a commit's group, the table's lock held. */
    TableValueFormat.Medium describe(MemorySegment value) {
        CRC32C crc = new CRC32C();
        crc.update(value.asByteBuffer());
        return new TableValueFormat.Medium(ids.incrementAndGet(), (int) value.byteSize(), (int) crc.getValue());
    }

    /**
     * Stores {@code value} as medium value {@code m}: a new one, or one {@link #delete} took away, again
     * (chunks still there are rewritten). A failure part way is undone by {@link #delete}.
     */
    void write(TableValueFormat.Medium m, MemorySegment value) {
        BTree t = tree(true);
        MemorySegment key = MemorySegment.ofArray(new byte[TableValueFormat.CHUNK_KEY]);
        for (int c = 0; c < m.chunks(); ) {
            c = change(t, m, c, key, value);
        }
    }

    /** Deletes value {@code m}'s chunks; those already gone are skipped (a release resumed after a crash). */
    void delete(TableValueFormat.Medium m) {
        BTree t = tree(false);
        if (t == null) {
            return;
        }
        MemorySegment key = MemorySegment.ofArray(new byte[TableValueFormat.CHUNK_KEY]);
        for (int c = 0; c < m.chunks(); ) {
            c = change(t, m, c, key, null);
        }
    }

    /**
     * Puts (from {@code value}) or deletes (null) value {@code m}'s chunks from chunk {@code from} on, in
     * key order, in one transaction, the tree's block reserve made ready first: as many as it can take
     * (one at least). Returns the chunk it stopped before.
     */
    private int change(BTree t, TableValueFormat.Medium m, int from, MemorySegment key, MemorySegment value) {
        Inode o = handle.inode;
        int step = value == null ? DirContents.REMOVAL : 0;
        int area = records.rec(o.ino) + InodeFormat.INLINE;
        for (;;) {
            // read before the transaction holds any node: one change's worst case, every level splitting or
            // merging (the tree may grow a level meanwhile: a reservation counts one more), and a new root
            int each = t.reservation();
            int blocks = t.height() + 2;
            int items = (int) Math.min(Tables.GROUP_TXN_ITEMS, 2 + (long) (m.chunks() - from) * each);
            dirs.prepare(o, step);
            try (Txn txn = Txn.begin(cache, items)) {
                o.lock();
                try {
                    if (dirs.step(o, step) == DirContents.READY) { // read before the record is locked, stable under the inode's lock
                        MemorySegment record = records.lockRecord(txn, o.ino).data();
                        boolean changed = false;
                        int c = from;
                        do {
                            TableValueFormat.chunkKey(key, m.id(), c);
                            if (value != null) {
                                t.put(txn, key, value.asSlice((long) c * TableValueFormat.CHUNK, m.chunkLength(c)));
                                changed = true;
                            } else {
                                changed |= t.delete(txn, key);
                            }
                            c++;
                        } while (c < m.chunks() && txn.held() + each <= items && reserveCovers(record, area, value != null, blocks));
                        if (changed) {
                            o.lastSeq = txn.commit();
                        }
                        return c;
                    }
                } finally {
                    o.unlock();
                }
            }
        }
    }

    /**
     * True if the tree's block reserve, in {@code record} (held), covers one more change of up to
     * {@code blocks} splits (a put) or merges (a delete): the step made it ready for the first change only.
     */
    private boolean reserveCovers(MemorySegment record, int area, boolean put, int blocks) {
        return put ? DirAllocator.usable(cache, record, area, blocks) >= blocks
                : DirEntryFormat.reserveCount(record, area) + blocks <= DirEntryFormat.RESERVE_CAPACITY;
    }

    /** A thread's cursor over the chunks of the value it reads, and the bounds it reopens it with. */
    private static final class Reader {
        final byte[] from = new byte[TableValueFormat.CHUNK_KEY], to = new byte[TableValueFormat.CHUNK_KEY];
        final MemorySegment fromKey = MemorySegment.ofArray(from), toKey = MemorySegment.ofArray(to);
        Cursor cursor;
    }

    /**
     * Copies bytes {@code [offset, offset + out.byteSize())} of value {@code m} (as many as there are) into
     * {@code out}, reading only the chunks they lie in, with one cursor over their keys; checks the CRC when
     * the whole value is read. Lock-free (the caller's transaction, if any, holds no node of this tree).
     * False if a chunk is missing or not its length, or the CRC does not match: the value was deleted
     * meanwhile (or is damaged; the caller tells which).
     */
    boolean read(TableValueFormat.Medium m, long offset, MemorySegment out) {
        BTree t = tree(false);
        if (t == null) {
            return false;
        }
        long want = Math.max(0, Math.min(out.byteSize(), m.length() - offset));
        if (want == 0) {
            return true;
        }
        int first = (int) (offset / TableValueFormat.CHUNK);
        Reader r = READERS.get();
        TableValueFormat.chunkKey(r.fromKey, m.id(), first);
        TableValueFormat.chunkKey(r.toKey, m.id(), (int) ((offset + want - 1) / TableValueFormat.CHUNK) + 1);
        Cursor cur = r.cursor = r.cursor == null ? t.cursor(r.from, r.to, false) : t.cursor(r.cursor, r.from, r.to, false);
        int in = (int) (offset - (long) first * TableValueFormat.CHUNK);
        for (int c = first; ; c++) {
            if (!cur.next() || cur.keySegment().byteSize() != TableValueFormat.CHUNK_KEY
                    || TableValueFormat.chunkNumber(cur.keySegment()) != c) {
                return false; // the bounds hold the value's id: a chunk number out of turn (or no chunk key) is one missing
            }
            MemorySegment v = cur.valueSegment();
            if (v.byteSize() != m.chunkLength(c)) {
                return false;
            }
            long done = (long) c * TableValueFormat.CHUNK + in - offset;
            int n = (int) Math.min(v.byteSize() - in, want - done);
            MemorySegment.copy(v, in, out, done, n);
            in = 0;
            if (done + n == want) {
                break;
            }
        }
        if (offset == 0 && want == m.length()) {
            CRC32C crc = new CRC32C();
            crc.update(out.asSlice(0, want).asByteBuffer());
            return (int) crc.getValue() == m.crc();
        }
        return true;
    }

    /** A medium value a key names that a read under the table's lock did not find whole. */
    static CorruptionException damaged(Table t, MemorySegment key, TableValueFormat.Medium m) {
        return new CorruptionException(-1, "table overflow tree", t + " key " + Tables.hex(key) + " names medium value "
                + m.id() + " of " + m.length() + " bytes in " + m.chunks() + " chunks, which are missing, short or do not match its checksum");
    }
}
