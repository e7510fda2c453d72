package dev.ferrite.dir;

/**
 * An inode's attributes, as {@code stat} reports them. Times are nanoseconds since the epoch.
 *
 * @param ino        inode number
 * @param mode       type (the S_IFMT bits) and permissions
 * @param generation bumped each time the inode number is reused
 * @param blocks     blocks allocated to the inode
 */
public record InodeStat(long ino, int mode, int uid, int gid, int nlink, long size, long atimeNanos,
                        long mtimeNanos, long ctimeNanos, long btimeNanos, int generation, int flags, long blocks) {
    public static final int S_IFMT = InodeFormat.S_IFMT;
    public static final int S_IFDIR = InodeFormat.S_IFDIR;
    public static final int S_IFREG = InodeFormat.S_IFREG;
    public static final int S_IFLNK = InodeFormat.S_IFLNK;
    /** A table's inode (not a POSIX type): see {@link Table}. */
    public static final int S_IFTABLE = InodeFormat.S_IFTABLE;

    public boolean isDirectory() {
        return (mode & S_IFMT) == S_IFDIR;
    }

    public boolean isRegularFile() {
        return (mode & S_IFMT) == S_IFREG;
    }

    public boolean isTable() {
        return (mode & S_IFMT) == S_IFTABLE;
    }

    public boolean isSymlink() {
        return (mode & S_IFMT) == S_IFLNK;
    }
}
