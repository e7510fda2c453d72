package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongFunction;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFLNK;
import static dev.ferrite.dir.InodeFormat.S_IFMT;

/**
 * Inode records: reading one without a lock (validated against concurrent change), locking records'
 * blocks in a transaction in block order, a long symlink's target block, and the per-inode locks of the
 * inode cache in ascending inode order. The namespace's other parts reach records only through here.
 */
final class InodeRecords {
    /** Attempts an operation makes against one group, fixing its free lists between them, before it moves on or gives up. */
    static final int RETRIES = 8;
    static final String SYMLINK_BLOCK = "symlink target block";

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeCache inodes;
    /** Inodes with a buffered write's {@link Inode#pendingSize}: while none, stat looks for none. */
    final AtomicInteger pendingSizes = new AtomicInteger();
    /** Inodes with a modification time not yet logged ({@link Inode#modified}): while none, stat looks for none. */
    final AtomicInteger modifiedTimes = new AtomicInteger();
    /** {@link #inodeBuffer} for {@link #readStable}, made once: record reads are the hottest path. */
    private final LongFunction<Buffer> inodeBuffers = this::inodeBuffer;

    InodeRecords(Volume volume, BufferCache cache, Geometry geometry, InodeCache inodes) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.inodes = inodes;
    }

    long block(long ino) {
        return geometry.inodeBlock(ino);
    }

    int rec(long ino) {
        return InodeFormat.recordOffset(geometry.blockSize(), Geometry.inodeSlot(ino));
    }

    /** The cached (else read) buffer of inode {@code ino}'s block, unlocked: read it optimistically or lock it. */
    Buffer inodeBuffer(long ino) {
        try {
            return volume.inodeBuffer(ino);
        } catch (InvalidArgumentException e) {
            throw new NamespaceException(Errno.ENOENT, e.getMessage());
        }
    }

    Buffer lockRecord(Txn txn, long ino) {
        for (;;) {
            Buffer b = inodeBuffer(ino);
            if (txn.lock(b)) {
                return b;
            }
        }
    }

    /** Locks the blocks of {@code inos} (0s ignored) in ascending block order. */
    void lockRecords(Txn txn, long... inos) {
        long[] blocks = new long[inos.length];
        for (int i = 0; i < inos.length; i++) {
            blocks[i] = inos[i] == 0 ? 0 : block(inos[i]);
        }
        int n = distinctSorted(blocks);
        for (int k = 0; k < n; k++) {
            for (long ino : inos) {
                if (ino != 0 && block(ino) == blocks[k]) {
                    lockRecord(txn, ino);
                    break;
                }
            }
        }
    }

    /** {@link #lockRecords(Txn, long...)} of two inodes, without its arrays: creates and unlinks lock these two. */
    void lockRecords(Txn txn, long a, long b) {
        long ba = a == 0 ? 0 : block(a), bb = b == 0 ? 0 : block(b);
        if (ba == 0 || bb == 0 || ba == bb) {
            long only = ba != 0 ? a : b;
            if (only != 0) {
                lockRecord(txn, only);
            }
        } else {
            lockRecord(txn, ba < bb ? a : b);
            lockRecord(txn, ba < bb ? b : a);
        }
    }

    /**
     * Sorts the nonzero values of the short array {@code a} ascending and without repeats into its front
     * (insertion sort: two to four values); returns how many there are.
     */
    private static int distinctSorted(long[] a) {
        int n = 0;
        for (long x : a) {
            if (x == 0) {
                continue;
            }
            int at = n;
            while (at > 0 && a[at - 1] > x) {
                at--;
            }
            if (at > 0 && a[at - 1] == x) {
                continue;
            }
            System.arraycopy(a, at, a, at + 1, n - at);
            a[at] = x;
            n++;
        }
        return n;
    }

    interface RecordReader<T> extends KeyedRecordReader<T> {
        T read(MemorySegment b, int rec);

        @Override
        default T read(long key, MemorySegment b, int rec) {
            return read(b, rec);
        }
    }

    /**
     * A {@link RecordReader} given the number the block was fetched by as well (an inode's): a method
     * reference to such a reader captures nothing, where a lambda passing the number on is a new object
     * on every read ({@link #statIno}: 24 of its 120 bytes).
     */
    interface KeyedRecordReader<T> {
        T read(long key, MemorySegment b, int rec);
    }

    private static final KeyedRecordReader<InodeStat> STAT = InodeFormat::stat;

    /** A {@link RecordReader} of a number: the hottest record reads, without boxing it. */
    interface LongRecordReader extends RangeRecordReader {
        long read(MemorySegment b, int rec);

        @Override
        default long read(MemorySegment b, int rec, long first, long end) {
            return read(b, rec);
        }
    }

    /**
     * A {@link LongRecordReader} given a range of file blocks as well: held in a field, it reads a range
     * without a lambda capturing it on each call.
     */
    interface RangeRecordReader {
        long read(MemorySegment b, int rec, long first, long end);
    }

    /** Reads inode {@code ino}'s record without locking, validated against concurrent changes. */
    <T> T readRecord(long ino, RecordReader<T> reader) {
        return readStable(inodeBuffers, requireValid(ino), rec(ino), reader);
    }

    /** {@link #readRecord} of a number. */
    long readLong(long ino, LongRecordReader reader) {
        return readLong(ino, 0, 0, reader);
    }

    /** {@link #readLong} of {@code reader} given {@code [first, end)}. */
    long readLong(long ino, long first, long end, RangeRecordReader reader) {
        int rec = rec(requireValid(ino));
        for (int spins = 0; ; spins++) {
            Buffer b = inodeBuffers.apply(ino);
            long v = b.readVersion();
            if (v < 0) {
                backOff(spins);
                continue;
            }
            long t;
            try {
                t = reader.read(b.data(), rec, first, end);
            } catch (RuntimeException e) {
                if (b.validate(v)) {
                    throw e;
                }
                continue;
            }
            if (b.validate(v)) {
                return t;
            }
        }
    }

    private long requireValid(long ino) {
        if (!geometry.isValidInode(ino)) {
            throw new NamespaceException(Errno.ENOENT, "inode number " + ino + " lies outside the volume");
        }
        return ino;
    }

    /** While a block's holder is changing it: it commits soon; on few cores, let it run now and then. */
    static void backOff(int spins) {
        if ((spins & 63) == 63) {
            Thread.yield();
        } else {
            Thread.onSpinWait();
        }
    }

    /**
     * Reads at {@code offset} of the block {@code fetch} gives for {@code key}, without locking, validated
     * against concurrent changes (fetched again each try: an evicted buffer is replaced).
     */
    private static <T> T readStable(LongFunction<Buffer> fetch, long key, int offset, KeyedRecordReader<T> reader) {
        for (int spins = 0; ; spins++) {
            Buffer b = fetch.apply(key);
            long v = b.readVersion();
            if (v < 0) {
                backOff(spins);
                continue;
            }
            T t;
            try {
                t = reader.read(key, b.data(), offset);
            } catch (RuntimeException e) {
                if (b.validate(v)) {
                    throw e;
                }
                continue;
            }
            if (b.validate(v)) {
                return t;
            }
        }
    }

    /** The attributes of {@code ino}, its size as buffered writes made it (ENOENT if it is free). */
    InodeStat statIno(long ino) {
        InodeStat s = readStable(inodeBuffers, requireValid(ino), rec(ino), STAT);
        if (s.mode() == 0) {
            throw new NamespaceException(Errno.ENOENT, "inode " + ino + " is not allocated");
        }
        Inode c = pendingSizes.get() == 0 && modifiedTimes.get() == 0 ? null : inodes.peek(ino);
        if (c == null) {
            return s;
        }
        long pending = c.pendingSize, modified = c.modified();
        if (pending <= s.size() && modified <= s.mtimeNanos()) {
            return s;
        }
        return new InodeStat(s.ino(), s.mode(), s.uid(), s.gid(), s.nlink(), Math.max(pending, s.size()), s.atimeNanos(),
                Math.max(modified, s.mtimeNanos()), Math.max(modified, s.ctimeNanos()), s.btimeNanos(), s.generation(), s.flags(),
                s.blocks());
    }

    /** {@link #statIno} into {@code out}: the same attributes, nothing allocated. */
    void statInto(long ino, StatBuffer out) {
        readRecord(ino, out.reader);
        out.setIno(ino);
        if (out.mode() == 0) {
            throw new NamespaceException(Errno.ENOENT, "inode " + ino + " is not allocated");
        }
        Inode c = pendingSizes.get() == 0 && modifiedTimes.get() == 0 ? null : inodes.peek(ino);
        if (c != null) {
            out.applyPending(c.pendingSize, c.modified());
        }
    }

    /**
     * A data write to {@code i} that logs nothing (an overwrite in place, a buffered write) moves its
     * modification time, at the granularity of the millisecond clock (as Linux's coarse timestamps).
     */
    void markModified(Inode i) {
        if (i.markModified(System.currentTimeMillis() * 1_000_000L)) {
            modifiedTimes.incrementAndGet();
        }
    }

    /** A transaction logged {@code i}'s times as {@code logged} or later: a recorded time no later than that is logged. */
    void clearModified(Inode i, long logged) {
        if (i.clearModified(logged)) {
            modifiedTimes.decrementAndGet();
        }
    }

    long parentOf(long dir) {
        return readLong(dir, InodeFormat::parent);
    }

    /** ENOTDIR unless {@code ino} is a directory; ENOENT if it was removed. */
    void requireDir(long ino) {
        long modeAndLinks = readLong(ino, (b, rec) -> (long) InodeFormat.mode(b, rec) << 32 | InodeFormat.nlink(b, rec));
        int mode = (int) (modeAndLinks >>> 32);
        if (mode == 0) {
            throw new NamespaceException(Errno.ENOENT, "inode " + ino + " is not allocated");
        }
        if ((mode & S_IFMT) != S_IFDIR) {
            throw new NamespaceException(Errno.ENOTDIR, "inode " + ino + " is not a directory");
        }
        if ((int) modeAndLinks == 0) {
            throw new NamespaceException(Errno.ENOENT, "directory " + ino + " was removed");
        }
    }

    /** The mode of inode {@code ino}'s record (0 if free). */
    int modeOf(long ino) {
        return (int) readLong(ino, InodeFormat::mode);
    }

    String readlinkIno(long ino) {
        Object found = readRecord(ino, (b, rec) -> {
            if (InodeFormat.type(b, rec) != S_IFLNK) {
                return null;
            }
            if (InodeFormat.fork(b, rec) == InodeFormat.FORK_REMOTE) {
                return new long[] {InodeFormat.remoteBlock(b, rec), InodeFormat.size(b, rec), InodeFormat.generation(b, rec)};
            }
            if (InodeFormat.fork(b, rec) == InodeFormat.FORK_EMPTY) {
                return Boolean.FALSE; // an unlinked long link whose block was just freed: it is going
            }
            byte[] t = new byte[InodeFormat.inlineUsed(b, rec)];
            MemorySegment.copy(b, java.lang.foreign.ValueLayout.JAVA_BYTE, rec + InodeFormat.INLINE, t, 0, t.length);
            return t;
        });
        if (found == null) {
            statIno(ino);
            throw new NamespaceException(Errno.EINVAL, "inode " + ino + " is not a symlink");
        }
        if (found == Boolean.FALSE) {
            throw new NamespaceException(Errno.ENOENT, "symlink inode " + ino + " was removed");
        }
        byte[] target = found instanceof long[] at ? remoteTarget(ino, at[0], at[1], (int) at[2]) : (byte[]) found;
        return new String(target, StandardCharsets.UTF_8);
    }

    /**
     * A long symlink's target from its block. The link may be removed and its block reused while this
     * reads it: a block that is not the link's any more is ENOENT if the link is gone, corruption if not.
     * The link is the one of {@code generation}: a new link in the same inode slot, even in the same block
     * with a target of the same size, is another link (the one read was removed).
     */
    byte[] remoteTarget(long ino, long block, long size, int generation) {
        requireDataBlock(ino, block, "symlink target block");
        if (size < 0 || size > SymlinkFormat.capacity(cache.blockSize())) {
            throw new CorruptionException(block(ino), InodeFormat.STRUCTURE, "symlink " + ino + " has a target of "
                    + Long.toUnsignedString(size) + " bytes; its block holds at most " + SymlinkFormat.capacity(cache.blockSize()));
        }
        byte[] t;
        try {
            t = readStable(b -> cache.get(b, SymlinkFormat.MAGIC, ino, SYMLINK_BLOCK), block, 0, (RecordReader<byte[]>) (m, at) -> {
                int length = SymlinkFormat.length(m);
                return length == size && length <= SymlinkFormat.capacity(cache.blockSize()) ? SymlinkFormat.target(m, length) : null;
            });
        } catch (CorruptionException e) {
            requireStillLinked(ino, block, size, generation);
            throw e;
        }
        if (t == null) {
            // the link removed and its inode and block reused by another long link of another length
            requireStillLinked(ino, block, size, generation);
            throw new CorruptionException(block, SYMLINK_BLOCK, "its target's length is not inode " + ino + "'s size, " + size);
        }
        return t;
    }

    /** ENOENT unless inode {@code ino} is still the long symlink of {@code generation}, {@code size} bytes in {@code block}. */
    private void requireStillLinked(long ino, long block, long size, int generation) {
        boolean same = readRecord(ino, (b, rec) -> InodeFormat.type(b, rec) == S_IFLNK
                && InodeFormat.fork(b, rec) == InodeFormat.FORK_REMOTE && InodeFormat.remoteBlock(b, rec) == block
                && InodeFormat.size(b, rec) == size && InodeFormat.generation(b, rec) == generation);
        if (!same) {
            throw new NamespaceException(Errno.ENOENT, "symlink inode " + ino + " was removed");
        }
    }

    void setattrIno(long ino, int permissions, int uid, int gid, long atime, long mtime) {
        statIno(ino);
        Inode i = inodes.acquire(ino);
        try {
            // the volume reserves log space before it takes the inode's lock. The time set wins over a write's
            // not yet logged: forgotten with the inode and its record locked, so that no write-back or
            // logModified, which read it holding the record, logs it over the time set
            volume.setattr(ino, permissions, uid, gid, atime, mtime,
                    mtime >= 0 ? () -> clearModified(i, Long.MAX_VALUE) : null);
        } catch (InvalidArgumentException e) {
            throw new NamespaceException(Errno.ENOENT, e.getMessage()); // freed since statIno
        } finally {
            inodes.release(i);
        }
    }

    static long nowNanos() {
        return WallClock.nowNanos();
    }

    /** References to the inodes of the distinct nonzero {@code inos}, in ascending order; not locked. */
    Inode[] acquireAll(long... inos) {
        long[] sorted = inos.clone();
        Inode[] out = new Inode[distinctSorted(sorted)];
        for (int i = 0; i < out.length; i++) {
            out[i] = inodes.acquire(sorted[i]);
        }
        return out;
    }

    void releaseAll(Inode[] acquired) {
        for (Inode i : acquired) {
            inodes.release(i);
        }
    }

    /**
     * Locks {@code acquired} (ascending, as {@link #acquireAll} orders them) exclusively: a rename or link
     * changes its directories' entries with no create beside it ({@link Inode#lockExclusive}).
     */
    static void lockAll(Inode[] acquired) {
        for (Inode i : acquired) {
            i.lockExclusive();
        }
    }

    static void unlockAll(Inode[] locked) {
        for (int i = locked.length - 1; i >= 0; i--) {
            locked[i].unlockExclusive();
        }
    }

    static Inode pick(Inode[] locked, long ino) {
        for (Inode i : locked) {
            if (i.ino == ino) {
                return i;
            }
        }
        throw new IllegalStateException("inode " + ino + " is not locked");
    }

    /**
     * After an attempt found {@code ag}'s inode free list short under its AGI: counts the failure, to be
     * fixed before the next attempt, or gives up with NoSpaceException after {@link #RETRIES}.
     */
    static int requireFixable(AllocationGroup ag, int fails) {
        if (fails == RETRIES) {
            throw new NoSpaceException("allocation group " + ag.agno + " cannot refill the free list of its inode trees");
        }
        return fails + 1;
    }

    /** A change of records (and trees) in a transaction whose locks its runner took. */
    interface Change {
        void apply(Txn txn);
    }

    /**
     * In {@code txn}, reserved for {@link DirContents#changeItems} before the locks of {@code touched} were taken:
     * locks the AGI of {@code ag} (if not null), then the records of {@code touched} in block order, runs
     * {@code change} and commits; the change's inodes get the commit sequence. False, with nothing
     * changed, if the group's inode free list is short: fix it with no lock held, and try again.
     */
    boolean applyChange(Txn txn, AllocationGroup ag, Inode[] touched, Change change) {
        if (!lockGroup(txn, ag)) {
            return false;
        }
        long[] inos = new long[touched.length];
        for (int i = 0; i < touched.length; i++) {
            inos[i] = touched[i] == null ? 0 : touched[i].ino;
        }
        lockRecords(txn, inos);
        change.apply(txn);
        long seq = txn.commit();
        for (Inode i : touched) {
            if (i != null) {
                i.lastSeq = seq;
            }
        }
        return true;
    }

    /**
     * {@link #applyChange} of a change of two inodes' records written out by the caller, without the
     * arrays and the change's closure: locks {@code ag}'s AGI (if not null), then the records of {@code a}
     * and {@code b} in block order; false, with nothing changed, if the group's inode free list is short.
     * The caller then changes the records and calls {@link #commitChange}.
     */
    boolean lockChange(Txn txn, AllocationGroup ag, long a, long b) {
        if (!lockGroup(txn, ag)) {
            return false;
        }
        lockRecords(txn, a, b);
        return true;
    }

    /** Commits the change {@link #lockChange} began; {@code a} and {@code b} get the commit sequence. */
    static void commitChange(Txn txn, Inode a, Inode b) {
        long seq = txn.commit();
        a.lastSeq = seq;
        b.lastSeq = seq;
    }

    /** Locks {@code ag}'s AGI if not null; false if its inode free list is short (fix it with no lock held). */
    private static boolean lockGroup(Txn txn, AllocationGroup ag) {
        if (ag != null) {
            txn.lock(ag.agi);
            return !ag.inodeListLow();
        }
        return true;
    }

    /**
     * Logs a record's fixed fields and, if its inline area holds entries, a link target or a remote
     * block's number, the used part of that area (the rest is zero). A tree directory's area changes
     * only through its own logging.
     */
    static void logUsed(Txn txn, Buffer b, int rec) {
        MemorySegment m = b.data();
        boolean tree = InodeFormat.fork(m, rec) == InodeFormat.FORK_TREE;
        txn.log(b, rec, InodeFormat.INLINE + (tree ? 0 : InodeFormat.inlineUsed(m, rec)));
    }

    /** {@code blk}, which inode {@code ino}'s record names as its {@code what}, if it lies in the allocation groups; else corruption. */
    long requireDataBlock(long ino, long blk, String what) {
        if (!geometry.isDataBlock(blk)) {
            throw new CorruptionException(block(ino), InodeFormat.STRUCTURE, "inode " + ino + "'s " + what + " names block "
                    + blk + " outside the allocation groups");
        }
        return blk;
    }

    /** In {@code txn}: {@code dir} gains {@code links} links (subdirectories), its times move, and its entry count by {@code entries}. */
    void adjust(Txn txn, long dir, int links, boolean modified) {
        Buffer b = lockRecord(txn, dir);
        int rec = rec(dir);
        MemorySegment m = b.data();
        InodeFormat.setNlink(m, rec, InodeFormat.nlink(m, rec) + links);
        InodeFormat.touch(m, rec, nowNanos(), modified);
        if (links != 0) {
            txn.log(b, rec + InodeFormat.NLINK, 4);
        }
        logTimes(txn, b, rec, modified);
    }

    /**
     * Logs the times {@link InodeFormat#touch} set: the change time, and the modification time before it
     * if {@code modified}. Each field is logged alone: the log takes 32-byte chunks, and a whole record's
     * fixed fields span three to five of them.
     */
    static void logTimes(Txn txn, Buffer b, int rec, boolean modified) {
        int from = modified ? InodeFormat.MTIME : InodeFormat.CTIME;
        txn.log(b, rec + from, InodeFormat.CTIME + 8 - from);
    }

    /** Adds {@code delta} to a directory's entry count (its size) and logs that field alone, as {@link #logTimes} does the times. */
    static void addEntries(Txn txn, Buffer b, int rec, int delta) {
        InodeFormat.setSize(b.data(), rec, InodeFormat.size(b.data(), rec) + delta);
        txn.log(b, rec + InodeFormat.SIZE, 8);
    }
}
