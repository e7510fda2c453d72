package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

/**
 * A caller's reusable holder of an inode's attributes, filled by {@link Namespace#lstat(Handle, String, StatBuffer)}
 * and {@link Namespace#stat(Handle, StatBuffer)}: the same fields as {@link InodeStat}, which a stat returns
 * as a new record, without allocating anything per call. Not thread-safe: one thread fills and reads it.
 * After a call that threw, its contents are unspecified.
 */
public final class StatBuffer {
    private long ino, size, atimeNanos, mtimeNanos, ctimeNanos, btimeNanos, blocks;
    private int mode, uid, gid, nlink, generation, flags;

    /** Reads a record into this buffer: made once per buffer, so that a validated record read allocates nothing. */
    final InodeRecords.RecordReader<StatBuffer> reader = this::fill;

    /** Decodes a record (read under the block's lock or validated after); the inode number is set apart. */
    private StatBuffer fill(MemorySegment b, int rec) {
        InodeFormat.statInto(b, rec, this);
        return this;
    }

    void set(long ino, int mode, int uid, int gid, int nlink, long size, long atimeNanos, long mtimeNanos, long ctimeNanos,
             long btimeNanos, int generation, int flags, long blocks) {
        this.ino = ino;
        this.mode = mode;
        this.uid = uid;
        this.gid = gid;
        this.nlink = nlink;
        this.size = size;
        this.atimeNanos = atimeNanos;
        this.mtimeNanos = mtimeNanos;
        this.ctimeNanos = ctimeNanos;
        this.btimeNanos = btimeNanos;
        this.generation = generation;
        this.flags = flags;
        this.blocks = blocks;
    }

    void setIno(long ino) {
        this.ino = ino;
    }

    /** A buffered write's size or a data write's time not yet logged: what stat reports beyond the record. */
    void applyPending(long pendingSize, long modifiedNanos) {
        if (pendingSize <= size && modifiedNanos <= mtimeNanos) {
            return;
        }
        size = Math.max(size, pendingSize);
        mtimeNanos = Math.max(mtimeNanos, modifiedNanos);
        ctimeNanos = Math.max(ctimeNanos, modifiedNanos);
    }

    /** The attributes held now, as the record a stat returns. */
    public InodeStat toStat() {
        return new InodeStat(ino, mode, uid, gid, nlink, size, atimeNanos, mtimeNanos, ctimeNanos, btimeNanos, generation, flags,
                blocks);
    }

    public long ino() {
        return ino;
    }

    public int mode() {
        return mode;
    }

    public int uid() {
        return uid;
    }

    public int gid() {
        return gid;
    }

    public int nlink() {
        return nlink;
    }

    public long size() {
        return size;
    }

    public long atimeNanos() {
        return atimeNanos;
    }

    public long mtimeNanos() {
        return mtimeNanos;
    }

    public long ctimeNanos() {
        return ctimeNanos;
    }

    public long btimeNanos() {
        return btimeNanos;
    }

    public int generation() {
        return generation;
    }

    public int flags() {
        return flags;
    }

    public long blocks() {
        return blocks;
    }

    public boolean isDirectory() {
        return (mode & InodeStat.S_IFMT) == InodeStat.S_IFDIR;
    }

    public boolean isRegularFile() {
        return (mode & InodeStat.S_IFMT) == InodeStat.S_IFREG;
    }

    public boolean isTable() {
        return (mode & InodeStat.S_IFMT) == InodeStat.S_IFTABLE;
    }

    public boolean isSymlink() {
        return (mode & InodeStat.S_IFMT) == InodeStat.S_IFLNK;
    }

    @Override
    public String toString() {
        return toStat().toString();
    }
}
