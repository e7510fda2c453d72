package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;

/**
 * Medium table values ({@link TableValueFormat#MAX_INLINE} + 1 to {@link TableValueFormat#MAX_MEDIUM}
 * bytes), kept as chunks in one volume-wide B-tree: a table-type inode that no catalog names (group 0's
 * AGI does), made with the first medium value. A value's chunks are keyed by its id and chunk number
 * ({@link TableValueFormat#chunkKey}), each holding up to a tree cell's worth of its bytes.
 *
 * <p>Chunks change only inside a commit's journal group, with the key that names them: inserted before
 * it, deleted after it is changed, so a crash leaves none without a key and no key without its chunks,
 * and nothing is pending at mount. Ids are volume-wide and rise: taken while the commit holds the
 * volume's group lock, from the largest id in the tree at mount (one descent) upward, so values are
 * appended at the tree's right edge. An id a mount finds no more may be taken again: no reader or
 * snapshot outlives a mount.
 *
 * <p>Each chunk's change is a transaction of its own, reserved before the tree's inode lock is taken
 * (the innermost lock: under a table's lock and the group lock), so a value of any medium size fits the
 * log however small one transaction's reservation is. Reads are lock-free: a read that finds a chunk
 * missing or of the wrong length says so, and the caller looks the key up again ({@link Tables#copy}).
 */
final class TableOverflow {
    private static final ThreadLocal<MemorySegment> KEYS = ThreadLocal.withInitial(() -> MemorySegment.ofArray(new byte[TableValueFormat.CHUNK_KEY]));
    private static final ThreadLocal<MemorySegment> CHUNKS = ThreadLocal.withInitial(() -> MemorySegment.ofArray(new byte[TableValueFormat.CHUNK]));

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

    /** The tree, or null if the volume has none and {@code make} is false (else made first: the caller holds the group lock). */
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
        ids.set(last == null ? 0 : TableValueFormat.chunkId(MemorySegment.ofArray(last)));
    }

    /** A new medium value's id, length and CRC; inside a commit's group, the table's lock held. */
    TableValueFormat.Medium describe(MemorySegment value) {
        CRC32C crc = new CRC32C();
        crc.update(value.asByteBuffer());
        return new TableValueFormat.Medium(ids.incrementAndGet(), (int) value.byteSize(), (int) crc.getValue());
    }

    /**
     * Stores {@code value} as medium value {@code m}, a transaction per chunk: a new one, or one
     * {@link #delete} took away, again (chunks still there are rewritten). A failure part way is undone by
     * {@link #delete}.
     */
    void write(TableValueFormat.Medium m, MemorySegment value) {
        BTree t = tree(true);
        MemorySegment key = MemorySegment.ofArray(new byte[TableValueFormat.CHUNK_KEY]);
        for (int c = 0, n = m.chunks(); c < n; c++) {
            TableValueFormat.chunkKey(key, m.id(), c);
            change(t, key, value.asSlice((long) c * TableValueFormat.CHUNK, m.chunkLength(c)));
        }
    }

    /** Deletes value {@code m}'s chunks, a transaction each; those already gone are skipped (a release resumed after a crash). */
    void delete(TableValueFormat.Medium m) {
        BTree t = tree(false);
        if (t == null) {
            return;
        }
        MemorySegment key = MemorySegment.ofArray(new byte[TableValueFormat.CHUNK_KEY]);
        for (int c = 0, n = m.chunks(); c < n; c++) {
            TableValueFormat.chunkKey(key, m.id(), c);
            change(t, key, null);
        }
    }

    /** Puts ({@code value}) or deletes (null) one chunk in a transaction of its own, the tree's block reserve made ready first. */
    private void change(BTree t, MemorySegment key, MemorySegment value) {
        Inode o = handle.inode;
        int step = value == null ? DirContents.REMOVAL : 0;
        for (;;) {
            dirs.prepare(o, step);
            try (Txn txn = Txn.begin(cache, 2 + t.reservation())) {
                o.lock.lock();
                try {
                    if (dirs.step(o, step) == DirContents.READY) { // read before the record is locked, stable under the inode's lock
                        records.lockRecord(txn, o.ino);
                        boolean changed = true;
                        if (value != null) {
                            t.put(txn, key, value);
                        } else {
                            changed = t.delete(txn, key);
                        }
                        if (changed) {
                            o.lastSeq = txn.commit();
                        }
                        return;
                    }
                } finally {
                    o.lock.unlock();
                }
            }
        }
    }

    /**
     * Copies bytes {@code [offset, offset + out.byteSize())} of value {@code m} (as many as there are) into
     * {@code out}, reading only the chunks they lie in; checks the CRC when the whole value is read.
     * Lock-free. False if a chunk is missing or not its length, or the CRC does not match: the value was
     * deleted meanwhile (or is damaged; the caller tells which).
     */
    boolean read(TableValueFormat.Medium m, long offset, MemorySegment out) {
        BTree t = tree(false);
        if (t == null) {
            return false;
        }
        long want = Math.max(0, Math.min(out.byteSize(), m.length() - offset));
        MemorySegment key = KEYS.get(), chunk = CHUNKS.get();
        for (long done = 0; done < want; ) {
            long at = offset + done;
            int c = (int) (at / TableValueFormat.CHUNK), in = (int) (at % TableValueFormat.CHUNK);
            int n = (int) Math.min(m.chunkLength(c) - in, want - done);
            TableValueFormat.chunkKey(key, m.id(), c);
            boolean whole = in == 0 && n == m.chunkLength(c);
            if (t.get(key, whole ? out.asSlice(done, n) : chunk) != m.chunkLength(c)) {
                return false;
            }
            if (!whole) {
                MemorySegment.copy(chunk, in, out, done, n);
            }
            done += n;
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
