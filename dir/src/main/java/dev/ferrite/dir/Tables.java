package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.internal.BufferPool;
import dev.ferrite.journal.ReservationExceededException;
import dev.ferrite.journal.internal.Journal;

/**
 * A volume's tables: named B-trees of keys and values, the key-value store a database embeds. A catalog
 * names them: a directory that no path reaches (group 0's AGI names its inode), whose entries name the
 * tables' inodes, made with the first table (the superblock's {@code INCOMPAT_TABLES} set just before,
 * so that a volume that never had a table stays readable by code without tables); each table's inode holds its B-tree as a directory's does, with the tree's block
 * reserve in the inode record. So tables share the volume's journal, caches, space and checker, and
 * dropping one is unlinking its inode: freed a step at a time at once, or at the last close of a handle
 * on it, or at the next mount after a crash.
 *
 * <pre>{@code
 * Tables tables = volume.tables();
 * try (Table users = tables.create("users"); Table byEmail = tables.create("users-by-email")) {
 *     try (WriteTransaction tx = tables.begin(Durability.SYNC)) {
 *         tx.put(users, id, record);
 *         tx.put(byEmail, email, id);
 *         tx.commit();
 *     }
 * }
 * }</pre>
 *
 * <p>Table names follow file names: 1 to 255 bytes of UTF-8, no '/' or NUL, not "." or "..". Thread-safe.
 */
public final class Tables {
    private static final System.Logger LOG = System.getLogger(Tables.class.getName());
    /** Keys a {@link Table#deleteRange} deletes per transaction. */
    static final int RANGE_BATCH = 1000;
    /** A {@link Table#deleteRange} transaction's medium values take at most this share of the log: a sixteenth. */
    private static final int RANGE_MEDIUM_SHARE = 16;
    /** The share of the log one transaction's changes may take ({@link WriteTransaction}). */
    private static final int LOG_SHARE = 4;
    /** Bytes a changed key is assumed to cost in the log beyond its key and value, for the size check before a commit. */
    private static final int CHANGE_OVERHEAD = 100;
    /** Each thread's buffer for a value read, a segment made once (a read wraps no array per call). */
    private static final ThreadLocal<MemorySegment> VALUES = ThreadLocal.withInitial(() -> MemorySegment.ofArray(new byte[Table.MAX_TREE_VALUE]));
    /** Each thread's buffer for a stored value (the tree's form: {@link TableValueFormat}). */
    private static final ThreadLocal<Views> STORED = ThreadLocal.withInitial(() -> new Views(Table.MAX_TREE_VALUE));
    /** Each thread's buffer for the key of a transaction's change as it applies (wrapping its array made a segment and a session per change). */
    private static final ThreadLocal<Views> KEYS = ThreadLocal.withInitial(() -> new Views(Table.MAX_KEY));
    /** Each thread's buffer for an extent value's stub looked up again after a read of part of the value. */
    private static final ThreadLocal<MemorySegment> STUB = ThreadLocal.withInitial(() -> MemorySegment.ofArray(new byte[TableValueFormat.EXTENT_SIZE]));

    private final Volume volume;
    private final Namespace namespace;
    private final BufferCache cache;
    private final DirContents dirs;
    private final InodeRecords records;
    /**
     * Each thread's engine for single writes (they record nothing to undo), of the tables it wrote through
     * last: one object, not one per write. Static: an instance's ThreadLocal would keep every volume a
     * long-lived thread ever wrote to, as its engine reaches back to the ThreadLocal.
     */
    private static final ThreadLocal<TableCommit[]> SINGLES = ThreadLocal.withInitial(() -> new TableCommit[1]);
    /**
     * Each thread's engine for transactions (they record what they did, to undo it), of the tables it
     * committed to last: a commit of a few keys would otherwise spend more on a new engine's buffers
     * than on its changes. Static, as {@link #SINGLES} is.
     */
    private static final ThreadLocal<TableCommit[]> GROUPS = ThreadLocal.withInitial(() -> new TableCommit[1]);
    /** Versions and prior values for snapshots. */
    final TableVersions versions = new TableVersions();
    /** Multi-key commits' prior values while they apply, for latest-state reads. */
    final TablePublication publication = new TablePublication();
    /** Forces the log for ASYNC commits. */
    private final AsyncCommits async;
    /** Values kept out of line: medium ones in the overflow tree, longer ones in blob files. */
    final TableBlobs blobs;
    final TableOverflow overflow;
    final TableExtents extents;
    /**
     * The log shares of the commits applying in journal groups: together within a quarter of the log, as
     * one group at a time was. Taken after the tables' locks and the keys' stripes (its holders wait for
     * none of those), so it adds no lock cycle.
     */
    private final GroupShares shares = new GroupShares();
    /**
     * Locks on keys by hash: a single write holds its key's for its change, a commit applying side by side
     * the stripes of all its keys until its group ends.
     */
    private final KeyStripes stripes = new KeyStripes(KeyStripes.KEY_STRIPES);
    /**
     * Each table's commit lock, by inode ({@link Table#commits}): held shared by the commits that apply side
     * by side in it for as long as they apply, exclusively by one that keeps the table to itself and by a
     * handle's close. One per table opened since the mount (a freed table's inode number, reused by a new
     * table, keeps its lock).
     */
    private final ConcurrentHashMap<Long, ReentrantReadWriteLock> commitLocks = new ConcurrentHashMap<>();

    /** The size of a buffer of {@link Staging#POOL}: a 16 KiB value's copy and 15 more; a longer value's copy goes on the heap. */
    static final int STAGING_BUFFER = 256 << 10;
    /** Buffers in {@link Staging#POOL}: 32 MiB of address space, memory only once used (two writers' batches of a thousand 16 KiB values). */
    static final int STAGING_BUFFERS = 128;

    /**
     * The buffers write transactions copy their values into until they end ({@link StagedValues}): one pool
     * for the process, made when the first transaction puts its first value and never freed, so that every
     * volume the process opens reuses memory touched once. A pool per volume paid a first touch of each of
     * its pages (up to 8,192, 6-30 us each on these VMs, more where the host had taken the memory back)
     * again in every volume opened.
     */
    private static final class Staging {
        static final BufferPool POOL = new BufferPool(STAGING_BUFFER, STAGING_BUFFERS);
    }

    Tables(Volume volume, Namespace namespace, BufferCache cache, VolumeOptions options) {
        this.volume = volume;
        this.namespace = namespace;
        this.cache = cache;
        this.dirs = namespace.dirs;
        this.records = namespace.records;
        this.async = new AsyncCommits(volume::journal, options.effectiveAsyncCommitMillis() * 1_000_000L);
        this.blobs = new TableBlobs(volume, namespace, versions);
        this.overflow = new TableOverflow(volume, namespace, cache);
        this.extents = new TableExtents(volume, cache, volume.geometry(), volume.pageCache());
        namespace.onTableFreed(this::release);
    }

    /** The commit lock of table {@code ino} ({@link #commitLocks}). */
    ReentrantReadWriteLock commitLock(long ino) {
        return commitLocks.computeIfAbsent(ino, i -> new ReentrantReadWriteLock());
    }

    /**
     * At mount, after orphan recovery: deletes the blobs a crash left pending or doomed (returns how many)
     * and finds where the overflow tree's ids go on from.
     */
    int recover() {
        overflow.recover();
        return blobs.recover();
    }

    /**
     * Before orphaned table {@code table}'s keys go: deletes what its values hold outside its tree (blobs,
     * medium values' chunks). Those already gone are skipped, so a release a crash cut short runs again
     * at the next mount's orphan recovery without freeing anything twice.
     */
    private void release(Inode table) {
        if (blobs.directory() == 0 && overflow.inode() == 0 && !extents.inUse()) {
            return;
        }
        int area = records.rec(table.ino) + InodeFormat.INLINE;
        long header = records.readRecord(table.ino, (b, r) -> DirContents.isTree(b, r) ? DirEntryFormat.treeHeader(b, area) : 0L);
        if (header == 0) {
            return;
        }
        BTree tree = dirs.tree(table, header);
        Cursor c = tree.cursor(null, false);
        while (c.next()) {
            MemorySegment v = c.valueSegment();
            byte kind = TableValueFormat.kind(v, v.byteSize(), table.ino);
            if (kind == TableValueFormat.BLOB) {
                blobs.release(TableValueFormat.readBlob(v).id());
            } else if (kind == TableValueFormat.MEDIUM) {
                overflow.delete(TableValueFormat.readMedium(v));
            } else if (kind == TableValueFormat.EXTENT) { // its stub made inline with the free: never freed twice
                extents.release(tree, MemorySegment.ofArray(c.key()), TableValueFormat.readExtent(v));
            }
        }
    }

    // ------------------------------------------------------------------ the catalog

    /** Makes the catalog: a directory inode named by group 0's AGI, in the allocating transaction. */
    private void makeCatalog() {
        volume.allocInode(0, InodeFormat.S_IFDIR | 0700, 0, 0, 2, 1, (txn, ino) -> volume.group(0).setTablesInode(txn, AgHeaderFormat.CATALOG, ino));
    }

    /** The catalog's inode; made first (the volume's feature flag set before) if {@code make} and there is none. */
    private long catalog(boolean make) {
        long c = volume.group(0).catalog();
        if (c != 0 || !make) {
            return c;
        }
        synchronized (this) {
            c = volume.group(0).catalog();
            if (c == 0) {
                volume.requireIncompatFeature(SuperblockFormat.INCOMPAT_TABLES);
                makeCatalog();
                c = volume.group(0).catalog();
            }
            return c;
        }
    }

    /** The catalog's inode, or 0 if the volume has none (no table was ever made). */
    long catalogInode() {
        return catalog(false);
    }

    /**
     * Creates an empty table named {@code name} and opens it.
     *
     * @throws TableException TABLE_EXISTS if the name is taken
     * @throws NamespaceException EINVAL or ENAMETOOLONG for a bad name
     */
    public Table create(String name) {
        volume.requireOpen();
        PathResolver.requireName(name, true); // before the catalog is made for it
        long catalog = catalog(true);
        long ino;
        try {
            ino = namespace.createTableEntry(catalog, name);
        } catch (NamespaceException e) {
            if (e.errno() == Errno.EEXIST) {
                throw new TableException(TableException.Kind.TABLE_EXISTS, "table '" + name + "' exists");
            }
            throw e;
        }
        Table t = openIno(name, ino);
        tree(t); // the empty tree, now rather than at the first write
        return t;
    }

    /**
     * Opens table {@code name}.
     *
     * @throws TableException NO_SUCH_TABLE if there is none
     */
    public Table open(String name) {
        volume.requireOpen();
        DirContents.Found f = find(name);
        if (f == null) {
            throw noSuchTable(name);
        }
        return openIno(name, f.ino());
    }

    /** Opens table {@code name}, creating it empty if there is none. */
    public Table openOrCreate(String name) {
        for (;;) {
            try {
                return open(name);
            } catch (TableException e) {
                if (e.kind() != TableException.Kind.NO_SUCH_TABLE) {
                    throw e;
                }
            }
            try {
                return create(name);
            } catch (TableException e) {
                if (e.kind() != TableException.Kind.TABLE_EXISTS) {
                    throw e;
                }
            }
        }
    }

    /** True if a table named {@code name} exists. */
    public boolean exists(String name) {
        volume.requireOpen();
        return find(name) != null;
    }

    /** The tables' names, in the catalog's order (by name hash, not alphabetical). */
    public List<String> list() {
        volume.requireOpen();
        long catalog = catalog(false);
        List<String> names = new ArrayList<>();
        if (catalog != 0) {
            for (DirEntry e : dirs.allEntries(catalog)) {
                names.add(e.name());
            }
        }
        return names;
    }

    /**
     * Drops table {@code name}: its name goes at once; its space is freed now, a step at a time (a crash
     * part way finishes at the next mount), or, while handles on it are open, at the last close.
     *
     * @throws TableException NO_SUCH_TABLE if there is none
     */
    public void drop(String name) {
        volume.requireOpen();
        PathResolver.requireName(name, true);
        long catalog = catalog(false);
        if (catalog == 0) {
            throw noSuchTable(name);
        }
        try {
            namespace.removeTableEntry(catalog, name);
        } catch (NamespaceException e) {
            if (e.errno() == Errno.ENOENT) {
                throw noSuchTable(name);
            }
            throw e;
        }
    }

    /**
     * Renames table {@code from} to {@code to}; handles open on it stay open.
     *
     * @throws TableException NO_SUCH_TABLE if {@code from} does not exist, TABLE_EXISTS if {@code to} does
     */
    public void rename(String from, String to) {
        volume.requireOpen();
        if (find(from) == null) {
            throw noSuchTable(from);
        }
        if (find(to) != null) {
            throw new TableException(TableException.Kind.TABLE_EXISTS, "table '" + to + "' exists");
        }
        try {
            namespace.renameTableEntry(catalog(false), from, to);
        } catch (NamespaceException e) {
            if (e.errno() == Errno.ENOENT) {
                throw noSuchTable(from);
            }
            throw e;
        }
    }

    /**
     * A snapshot: every table as it is now, unaffected by later commits, for as long as it is open. Opening
     * one waits only for commits being applied at this moment (microseconds); while any is open, commits
     * record the prior values of the keys they change, in memory (see {@link Snapshot}).
     */
    public Snapshot snapshot() {
        volume.requireOpen();
        return new Snapshot(this, versions.open());
    }

    /** A write transaction whose commit waits for {@code durability}. */
    public WriteTransaction begin(Durability durability) {
        volume.requireOpen();
        if (durability == null) {
            throw new InvalidArgumentException("durability is required");
        }
        return new WriteTransaction(this, durability);
    }

    private DirContents.Found find(String name) {
        EntryKey key = EntryKey.of(PathResolver.requireName(name, false)); // a bad name is refused with or without a catalog
        long catalog = catalog(false);
        return catalog == 0 ? null : dirs.find(catalog, key);
    }

    private Table openIno(String name, long ino) {
        Handle h = namespace.openInode(ino);
        if (h == null) {
            throw noSuchTable(name); // dropped meanwhile
        }
        int mode = records.modeOf(ino);
        if ((mode & InodeFormat.S_IFMT) != InodeFormat.S_IFTABLE) { // a damaged catalog: its tree is no table's
            h.close();
            throw new CorruptionException(records.block(ino), "table catalog", "table '" + name + "' names inode " + ino
                    + " of mode 0" + Integer.toOctalString(mode) + ", not a table");
        }
        Inode i = h.inode;
        if (i.unlinked) { // a table dropped before, whose inode and object this one reuses
            i.lock(); // a drop sets it holding this lock, after its commit: the link count read here agrees
            try {
                i.unlinked = records.readRecord(ino, InodeFormat::nlink) == 0;
            } finally {
                i.unlock();
            }
        }
        return new Table(this, name, h);
    }

    private static TableException noSuchTable(String name) {
        return new TableException(TableException.Kind.NO_SUCH_TABLE, "no table '" + name + "'");
    }

    // ------------------------------------------------------------------ what tables use

    /** The table's tree, made now if a crash came between the table's creation and its tree's. */
    BTree tree(Table t) {
        BTree cached = t.cachedTree;
        if (cached != null) {
            return cached; // a table's tree header never moves: its tree is never dissolved, as a directory's may be
        }
        return t.cachedTree = treeOf(dirs, records, t.inode);
    }

    /** The tree of table-type inode {@code i} (a table or the overflow tree), made now if it has none yet. */
    static BTree treeOf(DirContents dirs, InodeRecords records, Inode i) {
        int area = records.rec(i.ino) + InodeFormat.INLINE;
        for (;;) {
            long header = records.readRecord(i.ino, (b, rec) -> DirContents.isTree(b, rec) ? DirEntryFormat.treeHeader(b, area) : 0L);
            if (header != 0) {
                return dirs.tree(i, header);
            }
            dirs.convert(i, 0, () -> !records.readRecord(i.ino, DirContents::isTree), (m, rec, keys, values) -> { });
        }
    }

    InodeStat statOf(long ino) {
        return records.statIno(ino);
    }

    int blockSize() {
        return cache.blockSize();
    }

    void requireVolumeOpen() {
        volume.requireOpen();
    }

    void requireOwn(Table t) {
        if (t.tables() != this) {
            throw new InvalidArgumentException(t + " belongs to another volume");
        }
    }

    /**
     * The value whose stored form is {@code stored} (kept out of line: read whole), the form {@code key}
     * had in {@code t} (in the view of cursor or snapshot records {@code at}, or its latest with null); null if absent.
     */
    byte[] decode(Table t, MemorySegment key, TableCursor.Records at, byte[] stored) {
        boolean locked = false;
        try {
            for (;;) {
                if (stored == null) {
                    return null;
                }
                MemorySegment m = MemorySegment.ofArray(stored);
                byte kind = TableValueFormat.kind(m, stored.length, t.inode.ino);
                if (kind == TableValueFormat.INLINE) {
                    return Arrays.copyOfRange(stored, 1, stored.length);
                }
                if (kind == TableValueFormat.BLOB) {
                    TableValueFormat.Blob b = TableValueFormat.readBlob(m);
                    byte[] v = new byte[(int) b.length()];
                    if (blobs.read(b, 0, MemorySegment.ofArray(v), t.inode.ino) >= 0) {
                        return v;
                    }
                    // deleted under the read (its key changed, the reaper took it): again from the key
                    byte[] now = storedAt(t, key, at);
                    if (Arrays.equals(now, stored)) {
                        throw TableBlobs.gone(b, t.inode.ino);
                    }
                    stored = now;
                    continue;
                }
                byte[] v = new byte[TableValueFormat.mediumLength(m)];
                if (kind == TableValueFormat.EXTENT ? extents.read(TableValueFormat.readExtent(m), 0, MemorySegment.ofArray(v))
                        : overflow.read(TableValueFormat.readMedium(m), 0, MemorySegment.ofArray(v))) {
                    return v;
                }
                // the chunks or blocks went under the read (a writer replaced or deleted the value): again from the key
                byte[] now = storedAt(t, key, at);
                if (Arrays.equals(now, stored)) {
                    if (locked) {
                        throw damaged(t, key, m);
                    }
                    locked = lockForRead(t);
                    now = storedAt(t, key, at);
                }
                stored = now;
            }
        } finally {
            if (locked) {
                t.inode.unlock();
            }
        }
    }

    /**
     * Copies bytes from {@code offset} of the value stored as {@code stored} ({@code len} bytes), {@code key}'s
     * in {@code t} (in the view of records {@code at}, or its latest with null), into {@code out}, as many as fit or
     * remain; returns the value's whole length, or -1 if the key is now absent (a medium value's key
     * deleted while it was read).
     */
    long copy(Table t, MemorySegment key, TableCursor.Records at, MemorySegment stored, long len, long offset, MemorySegment out) {
        byte kind = TableValueFormat.kind(stored, len, t.inode.ino);
        if (kind == TableValueFormat.INLINE) {
            long n = Math.max(0, Math.min(out.byteSize(), len - 1 - offset));
            if (n > 0) { // an offset past the end copies nothing
                MemorySegment.copy(stored, 1 + offset, out, 0, n);
            }
            return len - 1;
        }
        if (kind == TableValueFormat.BLOB) {
            TableValueFormat.Blob b = TableValueFormat.readBlob(stored);
            if (out.byteSize() == 0 || offset >= b.length() || blobs.read(b, offset, out, t.inode.ino) >= 0) {
                return b.length();
            }
            // deleted under the read (its key changed, the reaper took it): again from the key
            byte[] s = stored.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE), now = storedAt(t, key, at);
            if (Arrays.equals(now, s)) {
                throw TableBlobs.gone(b, t.inode.ino);
            }
            return now == null ? -1 : copy(t, key, at, MemorySegment.ofArray(now), now.length, offset, out);
        }
        int length = TableValueFormat.mediumLength(stored);
        if (out.byteSize() == 0 || offset >= length) {
            return length;
        }
        byte[] s = null;
        boolean locked = false;
        try {
            for (MemorySegment m = stored; ; ) {
                boolean extent = m.get(ValueLayout.JAVA_BYTE, 0) == TableValueFormat.EXTENT;
                boolean read = extent ? extents.read(TableValueFormat.readExtent(m), offset, out)
                        : overflow.read(TableValueFormat.readMedium(m), offset, out);
                if (read && (!extent || locked || offset == 0 && out.byteSize() >= length)) {
                    return length; // chunks found are the value's; a whole extent's CRC matched; under the lock no commit frees it
                }
                if (read && at == null && namesStub(t, key, m)) {
                    return length; // part of an extent, and the key's latest value is still its stub: as below, allocating nothing
                }
                // the chunks or blocks went under the read (a writer replaced or deleted the value), or part of an
                // extent was read, valid if the key still names it: again from the key
                if (s == null) {
                    s = stored.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE);
                }
                byte[] now = storedAt(t, key, at);
                if (Arrays.equals(now, s)) {
                    if (read) {
                        return length; // the stub outlived the read: its blocks were not freed before it ended
                    }
                    if (locked) {
                        throw damaged(t, key, m); // missed under the lock too
                    }
                    locked = lockForRead(t); // and read again
                    continue;
                }
                if (now == null) {
                    return -1;
                }
                s = now;
                m = MemorySegment.ofArray(now);
                if (!isMedium(now)) {
                    return copy(t, key, at, m, now.length, offset, out);
                }
                length = TableValueFormat.mediumLength(m);
                if (offset >= length) {
                    return length;
                }
            }
        } finally {
            if (locked) {
                t.inode.unlock();
            }
        }
    }

    /** The damage a read under {@code t}'s lock found in the medium value stored as {@code m}, {@code key}'s. */
    private CorruptionException damaged(Table t, MemorySegment key, MemorySegment m) {
        return m.get(ValueLayout.JAVA_BYTE, 0) == TableValueFormat.EXTENT ? extents.damaged(t, key, TableValueFormat.readExtent(m))
                : TableOverflow.damaged(t, key, TableValueFormat.readMedium(m));
    }

    /**
     * Takes {@code t}'s lock for a read that found a medium value's chunks missing while its key still
     * names it: an undo put the key back meanwhile (its chunks back first), or the chunks are damaged.
     * Under the lock no commit changes them, so a second miss is damage. Only then does a read wait.
     */
    private static boolean lockForRead(Table t) {
        t.inode.lock();
        return true;
    }

    /** A medium value's stored form: chunks in the overflow tree or an extent. */
    private static boolean isMedium(byte[] stored) {
        return stored != null && stored.length > 0 && (stored[0] == TableValueFormat.MEDIUM || stored[0] == TableValueFormat.EXTENT);
    }

    /** Whether {@code key}'s latest value in {@code t} is the extent stub {@code m}, looked up into a thread's buffer. */
    private static boolean namesStub(Table t, MemorySegment key, MemorySegment m) {
        MemorySegment now = STUB.get();
        return t.tree().get(key, now) == TableValueFormat.EXTENT_SIZE && MemorySegment.mismatch(now, 0, TableValueFormat.EXTENT_SIZE, m, 0, TableValueFormat.EXTENT_SIZE) == -1;
    }

    /** {@code key}'s stored form in {@code t} in the view of records {@code at} (null: its latest published); null if absent. */
    private static byte[] storedAt(Table t, MemorySegment key, TableCursor.Records at) {
        byte[] k = key.toArray(ValueLayout.JAVA_BYTE);
        byte[] now = t.storedValue(k); // the tree first, then the records: a change seen above has its record below
        TableVersions.Undo u = at == null ? null : at.at(k);
        return u == null ? now : u.before;
    }

    /**
     * The medium values a table's tree keeps in data extents ({@link TableExtents}) and the blocks they take,
     * {values, blocks}: a scan of its leaves, taking no lock (exact at some moment of the scan).
     */
    static long[] extentFigures(BTree tree, int blockSize) {
        long values = 0, blocks = 0;
        Cursor c = tree.cursor(null, false);
        while (c.next()) {
            MemorySegment v = c.valueSegment();
            if (TableValueFormat.isExtent(v, v.byteSize())) {
                values++;
                blocks += TableValueFormat.readExtent(v).blocks(blockSize);
            }
        }
        return new long[] {values, blocks};
    }

    static String hex(MemorySegment key) {
        return HexFormat.of().formatHex(key.toArray(ValueLayout.JAVA_BYTE));
    }

    /** The longest value kept in a table's tree beside a key of {@code keyLength} bytes ({@link TableValueFormat#maxInline}). */
    int maxInline(long keyLength) {
        return TableValueFormat.maxInline((int) keyLength, cache.wideCells());
    }

    /** True if a value of {@code length} bytes beside a key of {@code keyLength} is a medium value ({@link TableValueFormat#isMedium(int, long, boolean)}). */
    private boolean isMedium(long keyLength, long length) {
        return TableValueFormat.isMedium((int) keyLength, length, cache.wideCells());
    }

    /** A thread's buffer for a value read. */
    static MemorySegment valueBuffer() {
        return VALUES.get();
    }

    /** A single write ({@link Table#put} and the others): a transaction of its own. */
    boolean single(Table t, byte[] key, byte[] value, int op) {
        return single(t, MemorySegment.ofArray(key), value == null ? null : MemorySegment.ofArray(value), op);
    }

    /** This thread's engine for single writes through these tables (a new one if it last wrote through another volume's). */
    private TableCommit single() {
        TableCommit[] mine = SINGLES.get();
        TableCommit c = mine[0];
        if (c == null || !c.writesThrough(cache)) {
            mine[0] = c = new TableCommit(cache, dirs, records, versions, blobs, overflow, extents, false);
        }
        return c;
    }

    /**
     * This thread's engine for a transaction through these tables, claimed ({@link TableCommit#claim}):
     * release it when the commit ends. A new one if the thread's is another volume's or in use.
     */
    private TableCommit group() {
        TableCommit[] mine = GROUPS.get();
        TableCommit c = mine[0];
        if (c != null && c.writesThrough(cache) && c.claim()) {
            return c;
        }
        c = new TableCommit(cache, dirs, records, versions, blobs, overflow, extents, true);
        c.claim();
        if (mine[0] == null || !mine[0].writesThrough(cache)) {
            mine[0] = c;
        }
        return c;
    }

    /**
     * {@link #single(Table, byte[], byte[], int)} for a key and value in segments. One of an inline value
     * (or a delete) applies beside the table's other single writes: the B-tree's latches order changes to
     * one leaf, the key's stripe orders changes to one key (so that the prior value a snapshot needs is
     * recorded in version order), and its claim on the tree's block reserve ({@link #enter}) keeps a split
     * from finding the reserve dry. One that writes a value out of line or replaces one goes through
     * {@link #commit} (a group: the blobs' flags, or the medium value's chunks, go with the key's change),
     * but for a delete or inline put over an extent value with no snapshot open, which frees the value's
     * blocks in its own transaction ({@link TableCommit#apply}), and a put of a medium value over an absent,
     * inline or extent value, which allocates its extent there, and frees the one it replaces
     * ({@link TableCommit#putExtent}).
     */
    boolean single(Table t, MemorySegment key, MemorySegment value, int op) {
        return single(t, key, value, op, t.durability());
    }

    /**
     * {@link #single(Table, MemorySegment, MemorySegment, int)}, durable as {@code d} says: also a
     * {@link WriteTransaction} of one key's change, which is all or nothing as any single write is, and so
     * applies beside the table's single writes instead of holding the table and the volume's groups.
     */
    boolean single(Table t, MemorySegment key, MemorySegment value, int op, Durability d) {
        t.requireOpen();
        // a medium value's extent goes in the key's own transaction when the write-back has room for it,
        // reserved here, holding nothing (see TableCommit#putExtent)
        boolean extent = value != null && op == TableCommit.PUT && isMedium(key.byteSize(), value.byteSize())
                && extents.prepareSingle(value.byteSize());
        if (value == null || value.byteSize() <= maxInline(key.byteSize()) || extent) {
            TableCommit c = single();
            int outcome = TableCommit.NEEDS_GROUP;
            int stripe = KeyStripes.of(t.inode.ino, key);
            int crc = extent ? TableExtents.crc(value) : 0;
            try {
                for (;;) {
                    stripes.lock(stripe);
                    try {
                        int claim = enter(t, value == null);
                        long v = versions.beginApply();
                        try {
                            Runnable hook = onApply;
                            if (hook != null) {
                                hook.run();
                            }
                            c.version = v;
                            outcome = extent ? c.putExtent(t, key, value, crc) : c.apply(t, key, value == null ? null : stored(value), op);
                        } finally {
                            versions.endApply(v);
                            t.inode.leave(claim);
                        }
                    } finally {
                        stripes.unlock(stripe);
                    }
                    if (outcome != TableCommit.NO_LOG_SPACE) {
                        break;
                    }
                    c.awaitLogSpace(t); // waiting entered could wait for ever: see TableCommit#change
                }
            } finally {
                if (extent && outcome != TableCommit.CHANGED) {
                    extents.unprepareSingle(value.byteSize()); // its room: the group reserves its own
                }
            }
            if (outcome == TableCommit.CHANGED) {
                durable(c.seq, d);
            } else if (outcome != TableCommit.NEEDS_GROUP) {
                durableSoFar(d); // it changed nothing, yet is a SYNC or ASYNC commit for what came before it
            }
            if (outcome != TableCommit.NEEDS_GROUP) {
                return outcome == TableCommit.CHANGED;
            }
        }
        WriteTransaction.Writes w = new WriteTransaction.Writes(t);
        w.add(new WriteTransaction.Op(key.toArray(ValueLayout.JAVA_BYTE), op, value)); // the commit reads the value, keeping nothing past its end
        return commit(List.of(w), d, false) > 0; // it writes a value out of line, or its key names one
    }

    /** Tests: runs inside each single write's apply, beside the others (null: nothing). */
    volatile Runnable onApply;
    /** Tests: runs after each key's change a group commit applies, before its next (null: nothing). */
    volatile Runnable onGroupChange;

    /**
     * Admits a single write to {@code t}'s apply beside the others: claims the blocks its change may take
     * from the tree's reserve (a put's split: a node a level and a new root, plus a level for a root that
     * splits meanwhile) or give back to it (a delete's merges), and enters only while the reserve can
     * give or take those of every writer inside. A lone writer needs only the reserve between its marks,
     * as every change of a tree does; a reserve that needs a refill or a spill gets it first, which keeps
     * the writers out meanwhile ({@link Inode#lockExclusive}). Returns the claim, for {@link Inode#leave}.
     */
    private int enter(Table t, boolean removal) {
        int claim = dirs.enter(t.inode, t.tree().height() + 2, removal);
        if (claim < 0) { // a table's tree is made with it and goes only once it is freed
            throw new CorruptionException(records.block(t.inode.ino), "table", t + "'s inode " + t.inode.ino + " holds no tree");
        }
        return claim;
    }

    /** The inline stored form of {@code value} in this thread's buffer (valid until its next use). */
    private static MemorySegment stored(MemorySegment value) {
        MemorySegment buf = STORED.get().view(1 + (int) value.byteSize());
        buf.set(ValueLayout.JAVA_BYTE, 0, TableValueFormat.INLINE);
        MemorySegment.copy(value, 0, buf, 1, value.byteSize());
        return buf;
    }

    /** {@code key} in this thread's key buffer (valid until its next use), wrapping nothing. */
    private static MemorySegment keyView(byte[] key) {
        MemorySegment buf = KEYS.get().view(key.length);
        MemorySegment.copy(key, 0, buf, ValueLayout.JAVA_BYTE, 0, key.length);
        return buf;
    }

    /**
     * A thread's buffer for a stored inline value or a key, with a view of each length it has used: a put
     * of a length seen before makes no segment (a slice per write was most of what a replacing put allocated).
     */
    private static final class Views {
        private final MemorySegment whole;
        private final MemorySegment[] views;

        Views(int capacity) {
            whole = MemorySegment.ofArray(new byte[capacity]);
            views = new MemorySegment[capacity + 1];
        }

        MemorySegment view(int length) {
            MemorySegment v = views[length];
            if (v == null) {
                views[length] = v = whole.asSlice(0, length);
            }
            return v;
        }
    }

    /**
     * {@link Table#deleteRange}: transactions of up to {@link #RANGE_BATCH} keys, ended early once their
     * medium values reach {@link #RANGE_MEDIUM_SHARE} of the log: deleting a chunk logs about twice its
     * bytes (a leaf merge now and then), and the undo holds the values, so the batch stays well inside a
     * group's quarter of the log ({@link #requireRoom}).
     */
    long deleteRange(Table t, byte[] from, byte[] to) {
        long n = 0;
        long mediumLimit = volume.journal().logBytes() / RANGE_MEDIUM_SHARE;
        for (;;) {
            t.requireOpen();
            WriteTransaction.Writes w = new WriteTransaction.Writes(t);
            Cursor c = t.tree().cursor(from, to, false);
            long medium = 0;
            int keys = 0;
            while (keys < RANGE_BATCH && medium < mediumLimit && c.next()) {
                w.add(new WriteTransaction.Op(c.key(), TableCommit.DELETE, null));
                keys++;
                MemorySegment v = c.valueSegment();
                if (TableValueFormat.kind(v, v.byteSize(), t.inode.ino) == TableValueFormat.MEDIUM) {
                    medium += TableValueFormat.readMedium(v).length();
                }
            }
            if (keys == 0) {
                return n;
            }
            n += commit(List.of(w), t.durability());
            from = w.changes()[keys - 1].key();
        }
    }

    /**
     * Applies a transaction's changes ({@code ws}, in table inode order): values too long for the tree are
     * written to blobs first, then everything is applied in one journal group. Returns how many keys changed.
     * A transaction of values kept in the tree (and deletes), with no deleted range, applies side by side
     * with others on its tables ({@link #apply}); if it meets a value kept out of line, or needs more of
     * the log than its share and cannot get it, it undoes what it did and applies again holding its tables.
     */
    int commit(List<WriteTransaction.Writes> ws, Durability durability) {
        return commit(ws, durability, true);
    }

    /** {@link #commit(List, Durability)}, side by side only if {@code sideBySide} (not for a change known to meet a value kept out of line). */
    private int commit(List<WriteTransaction.Writes> ws, Durability durability, boolean sideBySide) {
        Journal journal = volume.journal();
        long limit = journal.logBytes() / LOG_SHARE;
        long changes = 0, bytes = 0;
        boolean medium = false, inExtents = extents.enabled, inTree = sideBySide;
        for (WriteTransaction.Writes w : ws) {
            changes += w.changes().length;
            inTree &= w.ranges.isEmpty();
            for (WriteTransaction.Op o : w.changes()) {
                MemorySegment v = o.value();
                long vl = v == null ? -1 : v.byteSize();
                int kl = o.key().length;
                bytes += kl;
                if (v != null && isMedium(kl, vl)) {
                    medium = true;
                    bytes += inExtents ? TableValueFormat.EXTENT_SIZE + CHANGE_OVERHEAD // its stub and its allocation
                            : vl + (vl / TableValueFormat.CHUNK) * CHANGE_OVERHEAD; // a change per chunk
                } else if (v != null) {
                    bytes += Math.min(vl, TableValueFormat.BLOB_SIZE + maxInline(kl));
                }
                inTree &= v == null || vl <= maxInline(kl);
            }
        }
        long size = bytes + changes * CHANGE_OVERHEAD;
        if (size > limit) {
            throw tooLarge(changes, size, limit);
        }
        if (medium && !inExtents) {
            overflow.tree(true); // made before any lock is taken, as the blob directory is (with extents, only if one has no room)
        }
        // the blobs' stored forms, blobs written (durably) before any lock is taken
        List<Long> written = new ArrayList<>();
        List<List<byte[]>> stored = new ArrayList<>(ws.size());
        TableCommit c = null;
        try {
            for (WriteTransaction.Writes w : ws) {
                List<byte[]> forms = new ArrayList<>(w.changes().length);
                for (WriteTransaction.Op o : w.changes()) {
                    MemorySegment v = o.value();
                    int kl = o.key().length;
                    if (v == null || v.byteSize() <= maxInline(kl) || isMedium(kl, v.byteSize())) {
                        forms.add(null); // a delete; an inline value, its form made as it applies; a medium value, written as it applies
                    } else {
                        TableValueFormat.Blob b = blobs.write(v);
                        written.add(b.id());
                        forms.add(TableValueFormat.blob(b));
                    }
                }
                stored.add(forms);
            }
            c = group();
            Applied done;
            try {
                done = apply(ws, stored, c, inTree, limit, size);
            } catch (SpaceBusyException busy) { // undone, its group ended: the frees that context held can now be made durable
                journal.forceAll();
                volume.drainPending(); // and space pending free put back in the trees, where refills find it
                c.release();
                c.claim();
                done = apply(ws, stored, c, inTree, limit, size);
            }
            written.removeAll(c.linked); // what is left was not linked (a putIfAbsent that found its key)
            blobs.doomed(c.doomed);
            if (c.freedBlocks >= PUSH_FREED && durability != Durability.SYNC) {
                journal.requestPush(); // its frees busy only until durable: soon, not when the log fills
            }
            durable(done.seq(), durability);
            return done.changed();
        } finally {
            if (c != null) {
                c.release();
            }
            for (long id : written) {
                try {
                    blobs.discard(id);
                } catch (RuntimeException e) { // not the commit's failure: the next mount deletes pending blobs
                    LOG.log(System.Logger.Level.WARNING, "could not delete pending table blob " + id + ": " + e);
                }
            }
        }
    }

    /**
     * {@link #apply(List, List, TableCommit, int[], long, long)} side by side if {@code inTree}, holding the
     * tables if that meets a value kept out of line or runs out of log share, or at once if not {@code inTree}.
     */
    private Applied apply(List<WriteTransaction.Writes> ws, List<List<byte[]>> stored, TableCommit c, boolean inTree,
                          long limit, long size) {
        if (inTree) {
            try {
                long budget = groupBudget(volume.journal(), limit, size);
                return apply(ws, stored, c, stripesOf(ws), Math.max(budget, limit / MOST_SIDE_BY_SIDE), budget);
            } catch (HoldTables again) { // undone: nothing changed
                c.release();
                c.claim();
            }
        }
        return apply(ws, stored, c, null, limit, groupBudget(volume.journal(), limit, size));
    }

    /**
     * A side-by-side commit's log share is its group's budget ({@link #groupBudget}), which it reserves
     * from the log when it starts, and at least this fraction of the quarter of the log (at most this many
     * small groups apply at once): the shares then bound all the log the open groups hold, their budgets
     * too, so groups side by side never take more of it than one group of a quarter did (on the fixtures'
     * 4 MiB log a budget is the whole quarter, and multi-key commits take turns; on a 32 MiB log five
     * small ones apply at once).
     */
    private static final int MOST_SIDE_BY_SIDE = 16;

    /** What a group applied: its checkpoint's commit sequence and how many keys it changed. */
    private record Applied(long seq, int changed) {
    }

    /**
     * Thrown inside a side-by-side commit that must apply holding its tables instead (a value kept out of
     * line met, its log share passed); its changes are undone before it leaves {@link #apply}.
     */
    private static final class HoldTables extends RuntimeException {
        HoldTables() {
            super(null, null, false, false);
        }
    }

    /**
     * Applies {@code ws} (blobs by their {@code stored} forms, other values made into theirs as they apply)
     * in one journal group with engine {@code c}, which reserves {@code budget} bytes of log ({@link #groupBudget}).
     * With {@code keys} (the stripes of every key, ascending) it applies <em>side by side</em>: each table's
     * commit lock shared (in inode order), then the keys' stripes (in stripe order), then a log share of
     * {@code share} bytes; each change then enters its table as a single write does, beside the table's
     * other writers and commits. Without, it holds its tables: each commit lock exclusively (in inode
     * order), then each table exclusively (no single write inside), then the whole quarter of the log
     * ({@code share}), so it applies alone, as every commit once did. Stripes and shares are held to the
     * group's end, after it is published, so no other commit changes its keys before it is whole or undone.
     *
     * @throws HoldTables (side by side only, everything undone) if it must apply holding its tables
     */
    private Applied apply(List<WriteTransaction.Writes> ws, List<List<byte[]>> stored, TableCommit c, int[] keys, long share,
                          long budget) {
        Journal journal = volume.journal();
        long limit = journal.logBytes() / LOG_SHARE;
        boolean shared = keys != null;
        int locked = 0, excluded = 0, changed = 0;
        long version = 0;
        boolean striped = false, sharing = false, applying = false;
        c.shared = shared;
        try {
            for (WriteTransaction.Writes w : ws) {
                ReentrantReadWriteLock l = w.table.commits;
                (shared ? l.readLock() : l.writeLock()).lock();
                locked++;
                w.table.requireOpen(); // a handle's close waits for the commit lock: the table stays open to the end
            }
            if (shared) {
                stripes.lockAll(keys);
                striped = true;
            } else {
                // only once every commit lock is held: a single write kept out of a held table may hold a
                // stripe that a side-by-side commit needs, whose commit lock this one would wait for
                for (WriteTransaction.Writes w : ws) {
                    w.table.inode.lockExclusive();
                    excluded++;
                }
            }
            shares.take(share, limit); // last: see the field
            sharing = true;
            version = versions.beginApply();
            applying = true;
            c.version = version;
            if (multiKey(ws)) {
                c.published = publication.begin(ws);
            }
            int blocks = groupBlocks();
            c.mediumBlocks = mediumBlocks(ws);
            try (Journal.Pin pin = journal.pin(budget, cache.capacity() / 8)) {
                try {
                    for (int i = 0; i < ws.size(); i++) {
                        WriteTransaction.Writes w = ws.get(i);
                        for (byte[][] r : w.ranges) {
                            List<byte[]> found = new ArrayList<>();
                            Cursor cur = w.table.tree().cursor(r[0], r[1], false);
                            while (cur.next()) {
                                found.add(cur.key());
                            }
                            for (byte[] k : found) {
                                changed += c.apply(w.table, k, keyView(k), null, TableCommit.DELETE) == TableCommit.CHANGED ? 1 : 0;
                                share = requireRoom(pin, limit, budget, blocks, share);
                            }
                        }
                        int j = 0;
                        for (WriteTransaction.Op o : w.changes()) {
                            byte[] form = stored.get(i).get(j++);
                            MemorySegment v = o.value();
                            byte[] key = o.key();
                            int outcome;
                            if (v != null && isMedium(key.length, v.byteSize())) {
                                outcome = c.applyMedium(w.table, key, keyView(key), v, o.kind()); // the array itself: its record keeps it, found at once
                            } else {
                                // the key and an inline value in this thread's buffers: the change only reads them
                                MemorySegment value = form != null ? MemorySegment.ofArray(form) : v != null ? stored(v) : null;
                                outcome = c.apply(w.table, key, keyView(key), value, o.kind());
                            }
                            if (outcome == TableCommit.NEEDS_GROUP) {
                                throw new HoldTables(); // a shared group met a value kept out of line
                            }
                            changed += outcome == TableCommit.CHANGED ? 1 : 0;
                            share = requireRoom(pin, limit, budget, blocks, share);
                            Runnable hook = onGroupChange;
                            if (hook != null) {
                                hook.run();
                            }
                        }
                    }
                    c.finish(() -> requireBudget(pin, limit, budget, blocks)); // frees: in a group holding its tables, its share the limit
                    share = requireRoom(pin, limit, budget, blocks, share);
                } catch (RuntimeException e) {
                    try {
                        c.undoAll();
                    } catch (RuntimeException again) { // the group must not reach the log half applied
                        journal.shutdown(again);
                        if (e instanceof HoldTables) {
                            throw again;
                        }
                        e.addSuppressed(again);
                    }
                    if (e instanceof ReservationExceededException) {
                        throw logFull(e);
                    }
                    throw e;
                }
                return new Applied(pin.seq(), changed);
            }
        } finally {
            if (c.published != null) {
                publication.end(c.published); // every change applied, or undone; before its keys are let go
            }
            if (applying) {
                versions.endApply(version);
            }
            if (sharing) {
                shares.give(share);
            }
            if (striped) {
                stripes.unlockAll(keys);
            }
            for (int i = 0; i < excluded; i++) {
                ws.get(i).table.inode.unlockExclusive();
            }
            for (int i = 0; i < locked; i++) {
                ReentrantReadWriteLock l = ws.get(i).table.commits;
                (shared ? l.readLock() : l.writeLock()).unlock();
            }
            if (c.published != null) {
                c.releaseFrees(publication); // its copies, if any, hold no lock (the blocks stay busy until it)
            }
            c.recycle(publication); // last: after the publication, whose records its prior values are
        }
    }

    /**
     * Blocks of extent values a group commit frees past which it asks the log for a checkpoint (not
     * waiting for it): the blocks stay busy, no value's to take, until their free is durable, and a batch
     * of puts over medium values frees as much as it allocates, so without a checkpoint the next batches
     * find their group's free space busy and search it block by block ({@code FreeSpace#findUsableAnywhere}).
     */
    private static final int PUSH_FREED = 256;

    /** The blocks of the medium values {@code ws} puts, each in an extent of its own ({@link TableCommit#applyMedium}). */
    private long mediumBlocks(List<WriteTransaction.Writes> ws) {
        long n = 0;
        for (WriteTransaction.Writes w : ws) {
            for (WriteTransaction.Op o : w.changes()) {
                MemorySegment v = o.value();
                if (v != null && isMedium(o.key().length, v.byteSize())) {
                    n += extents.blocks(v.byteSize());
                }
            }
        }
        return n;
    }

    /** Key stripe waits and their nanoseconds ({@link StripeStats}). */
    long[] stripeWaits() {
        return new long[] {stripes.waits(), stripes.waitNanos()};
    }

    /** The stripes of every key {@code ws} changes, ascending, each once: the order a side-by-side commit takes them in. */
    private static int[] stripesOf(List<WriteTransaction.Writes> ws) {
        int n = 0;
        for (WriteTransaction.Writes w : ws) {
            n += w.changes().length;
        }
        int[] s = new int[n];
        int i = 0;
        for (WriteTransaction.Writes w : ws) {
            for (WriteTransaction.Op o : w.changes()) {
                s[i++] = KeyStripes.of(w.table.inode.ino, o.key());
            }
        }
        Arrays.sort(s);
        int distinct = 0;
        for (int j = 0; j < n; j++) {
            if (j == 0 || s[j] != s[j - 1]) {
                s[distinct++] = s[j];
            }
        }
        return distinct == n ? s : Arrays.copyOf(s, distinct);
    }

    /** True if the transaction may change more than one key: its changes then publish together ({@link TablePublication}). */
    private static boolean multiKey(List<WriteTransaction.Writes> ws) {
        int keys = 0;
        for (WriteTransaction.Writes w : ws) {
            keys += w.changes().length + (w.ranges.isEmpty() ? 0 : 2);
        }
        return keys > 1;
    }

    /**
     * {@code key}'s stored value in {@code t} as latest-state reads see it, the tree's {@code stored} (null:
     * absent) read first: its prior value if a multi-key commit applying now has changed the key.
     */
    byte[] published(Table t, byte[] key, byte[] stored) {
        if (publication.applying() == null) {
            return stored;
        }
        int counted = publication.enter(); // before the look: the commit keeps the record's array until it is left
        try {
            TableVersions.Undo u = publication.prior(t.inode.ino, key);
            return u == null ? stored : u.before == null ? null : u.before.clone(); // the commit's array may be its next's
        } finally {
            publication.leave(counted);
        }
    }

    /** True if a multi-key commit is applying now: a latest-state read must then look at its records. */
    boolean applying() {
        return publication.applying() != null;
    }

    /**
     * Counts a latest-state read that looks at the applying commits' records ({@link #unpublished}) and
     * uses what it found before {@link #leaveRecords}: a commit ending meanwhile then keeps its prior
     * values' arrays for no later commit ({@code TableCommit#recycle}). Returns the count's stripe.
     */
    int enterRecords() {
        return publication.enter();
    }

    /** Ends the count {@link #enterRecords} took in {@code stripe}. */
    void leaveRecords(int stripe) {
        publication.leave(stripe);
    }

    /**
     * The record of {@code key}'s value before the multi-key commit applying now that changed it, or null if
     * none did; a read that uses its value counts itself first ({@link #enterRecords}).
     */
    TableVersions.Undo unpublished(Table t, MemorySegment key) {
        return publication.applying() == null ? null : publication.prior(t.inode.ino, key.toArray(ValueLayout.JAVA_BYTE));
    }

    /**
     * Checks, after each change, that the group stays within a quarter of the log, that its context keeps
     * at most {@code blocks} blocks in memory ({@link #groupBlocks}), and that it has not used half its
     * budget ({@link Journal#pin(long)}): the other half is for undoing what it did. A group past
     * its log share ({@link #shares}: less than the quarter only side by side) takes more if the others
     * leave room now (it never waits for it, holding its keys), else it must apply holding its tables
     * ({@link HoldTables}). Returns the share it now holds.
     */
    private long requireRoom(Journal.Pin pin, long limit, long budget, int blocks, long share) {
        requireBudget(pin, limit, budget, blocks);
        if (pin.bytes() <= share) {
            return share;
        }
        long more = Math.min(limit, 2 * pin.bytes());
        if (!shares.tryGrow(share, more, limit)) {
            throw new HoldTables();
        }
        return more;
    }

    /** {@link #requireRoom} but for the group's share of the log. */
    private static void requireBudget(Journal.Pin pin, long limit, long budget, int blocks) {
        if (pin.bytes() > limit) {
            throw new TableException(TableException.Kind.TOO_LARGE, "the transaction's changes passed " + limit
                    + " bytes of log (a quarter of the log) before they were all applied; nothing was changed");
        }
        if (pin.contextItems() > blocks) {
            throw new TableException(TableException.Kind.TOO_LARGE, "the transaction's changes, with those committed beside it, "
                    + "held " + pin.contextItems() + " blocks in memory until it ends, more than the " + blocks
                    + " its buffer cache allows (three quarters of its frames) before they were all applied; nothing was changed");
        }
        if (pin.budgetLeft() < budget / 2) {
            throw logFull(null);
        }
    }

    /**
     * The most blocks a group's context may hold, its own changes' and those committed beside it: each
     * stays dirty in the buffer cache, neither written home nor evicted, until the group ends, so a group
     * whose changes filled the cache would wait for ever for a buffer only its own end can free (a push
     * of its context waits for it). Three quarters of the cache's frames, the last quarter left for the
     * blocks the changes read on their way, for the writers beside it, and for the undo should the group
     * stop here. A group
     * starts on a context holding at most an eighth of the frames ({@link Journal#pin(long, int)}).
     */
    private int groupBlocks() {
        return cache.capacity() - cache.capacity() / 4;
    }

    /**
     * The log bytes a group reserves before it pins its context ({@code limit} at most, a quarter of the
     * log): what its transactions may still take once the log is full, and then the undo. Once full, the
     * log stays full until the group ends whenever a block its context holds pins the tail (as with random
     * keys over a tree the log cannot hold), and the group must then finish on its budget alone. Half of
     * the budget is kept for the undo ({@link #requireRoom}), so the other half is {@link #LOG_MARGIN}
     * times the transaction's estimate ({@code size}), and at least two of the largest transactions a
     * table change makes. (Four of those alone, whatever the transaction's size, left 830 KB to 1,000 puts
     * of 1 KiB that log 1.2 MB: two threads committing them on a 64 MiB log met LOG_FULL in half the runs,
     * on a 16 MiB log within seconds; {@code TableLogFullConcurrencyTest}.)
     */
    private static long groupBudget(Journal journal, long limit, long size) {
        long perTxn = journal.reservationBytes(GROUP_TXN_ITEMS);
        return Math.min(limit, 2 * Math.max(2 * perTxn, LOG_MARGIN * size));
    }

    /**
     * How many times its size estimate a group may log once the log is full: a change may log more than
     * the estimate's 100 bytes (slots, chunk rounding, splits: 1 KiB puts into fresh keys log 1.9 KB
     * each, overwrites 1.1 KB). The budget, twice this, is then the four times the estimate a side-by-side
     * share always was ({@link #MOST_SIDE_BY_SIDE}), so the shares are as they were: the budget only
     * takes more of its share.
     */
    private static final int LOG_MARGIN = 2;

    /**
     * Items of the largest transaction inside a group: the refill of a tree's block reserve
     * ({@code DirContents.addBlocks}, about 80), and a transaction of a medium value's chunks
     * ({@link TableOverflow}), which reserves at most this many.
     */
    static final int GROUP_TXN_ITEMS = 96;

    private static TableException logFull(RuntimeException cause) {
        TableException e = new TableException(TableException.Kind.LOG_FULL, "the log was full while the transaction "
                + "applied and could not be freed before it ended; nothing was changed; it may succeed when retried");
        if (cause != null) {
            e.initCause(cause);
        }
        return e;
    }

    private static TableException tooLarge(long changes, long bytes, long limit) {
        return new TableException(TableException.Kind.TOO_LARGE, "a transaction of " + changes + " changes needs about "
                + bytes + " bytes of log; one transaction may take " + limit + " (a quarter of the log); nothing was changed");
    }

    /** Waits for commit sequence {@code seq} as {@code d} says. */
    /**
     * Makes everything committed so far durable as {@code d} says: a commit that changed nothing (an empty
     * transaction, a delete of an absent key) still is "the next SYNC commit" of {@link Durability#NONE}.
     */
    void durableSoFar(Durability d) {
        if (d != Durability.NONE) {
            durable(volume.journal().allSeq(), d);
        }
    }

    private void durable(long seq, Durability d) {
        switch (d) {
            case SYNC -> volume.journal().force(seq);
            case ASYNC -> async.request(seq);
            case NONE -> { }
        }
    }

    /**
     * Unmount, before the journal closes (which makes everything durable) and while the volume still takes
     * operations: stops the ASYNC commits' thread, the blob reaper and the values' background write, and
     * deletes the blobs still doomed.
     */
    void stop() {
        async.stop();
        blobs.stop();
        extents.writeBack.stop();
    }

    /** A new transaction's store for copies of its values, off the heap ({@link Staging#POOL}). */
    static StagedValues stagedValues() {
        return new StagedValues(Staging.POOL);
    }

    /** Tests: buffers of {@link Staging#POOL} not lent to a transaction now. */
    static int stagingAvailable() {
        return Staging.POOL.available();
    }
}
