package dev.ferrite.fuse;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.cryptomator.jfuse.api.DirFiller;
import org.cryptomator.jfuse.api.Errno;
import org.cryptomator.jfuse.api.FileInfo;
import org.cryptomator.jfuse.api.FuseConfig;
import org.cryptomator.jfuse.api.FuseConnInfo;
import org.cryptomator.jfuse.api.FuseOperations;
import org.cryptomator.jfuse.api.Stat;
import org.cryptomator.jfuse.api.Statvfs;
import org.cryptomator.jfuse.api.TimeSpec;

import dev.ferrite.dir.DirCookie;
import dev.ferrite.dir.DirEntry;
import dev.ferrite.dir.DirPage;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.NamespaceException;
import dev.ferrite.dir.RenameMode;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeStats;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;

import dev.ferrite.fuse.RequestCounts.Op;

import static dev.ferrite.io.Errno.EIO;
import static dev.ferrite.io.Errno.EINVAL;
import static dev.ferrite.io.Errno.ENOSPC;
import static dev.ferrite.io.Errno.EPERM;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * libfuse's high-level operations answered from a volume's {@link Namespace}: each returns 0 (or a count) or
 * minus the errno the namespace gave ({@link NamespaceException#errno()}; ENOSPC for a full volume, EIO for a
 * damaged or shut down one). Operations by name resolve libfuse's path from the root (libfuse builds it from
 * the kernel's lookups); open files and directories are served by the {@link Handle} opened for them, kept in
 * {@link OpenFiles} until release. Inode numbers, link counts, sizes and times are the namespace's
 * (libfuse's {@code use_ino}). Called by libfuse's threads concurrently; nothing may escape an operation.
 */
final class FerriteFileSystem implements FuseOperations {
    private static final System.Logger LOG = System.getLogger(FerriteFileSystem.class.getName());
    // open(2) flags, Linux's values
    private static final int O_ACCMODE = 03, O_CREAT = 0100, O_EXCL = 0200, O_TRUNC = 01000;
    private static final int KEPT_FLAGS = Namespace.O_ACCMODE | Namespace.O_APPEND;
    private static final int S_PERMS = 07777;
    /** lseek(2)'s whences the kernel leaves to the file system. */
    private static final int SEEK_DATA = 3, SEEK_HOLE = 4;
    /** renameat2(2)'s flags. */
    private static final int RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2;
    private static final int READDIR_PAGE = 1024;

    private final Namespace ns;
    private final Volume volume;
    private final Errno errno;
    private final OpenFiles open = new OpenFiles();
    private final RequestCounts calls = new RequestCounts();
    private final int blockSize;

    private final JfuseNative libfuse;

    FerriteFileSystem(Volume volume, Errno errno, JfuseNative libfuse) {
        this.volume = volume;
        this.libfuse = libfuse;
        this.ns = volume.namespace();
        this.errno = errno;
        this.blockSize = volume.statfs().blockSize();
    }

    @Override
    public Errno errno() {
        return errno;
    }

    @Override
    public Set<Operation> supportedOperations() {
        // Not FLUSH: ENOSYS once and the kernel stops sending it, a round trip saved per close (write-back errors
        // are reported by fsync, as on Linux). Not ACCESS: the mount checks permissions in the kernel
        // (default_permissions). No xattrs: the namespace has none.
        return EnumSet.of(Operation.INIT, Operation.GET_ATTR, Operation.READLINK, Operation.MKDIR, Operation.UNLINK,
                Operation.RMDIR, Operation.SYMLINK, Operation.RENAME, Operation.CHMOD, Operation.CHOWN, Operation.TRUNCATE,
                Operation.OPEN, Operation.READ, Operation.WRITE, Operation.STATFS, Operation.RELEASE, Operation.FSYNC,
                Operation.OPEN_DIR, Operation.READ_DIR, Operation.RELEASE_DIR, Operation.FSYNCDIR, Operation.CREATE,
                Operation.UTIMENS);
    }

    @Override
    public void init(FuseConnInfo conn, FuseConfig cfg) {
        // libfuse's defaults want async reads, parallel directory operations and readdirplus. No writeback cache:
        // fsync would stay honest (the kernel writes back before it asks), but the kernel would own sizes and
        // modification times and send data late, racing changes made through the Java API meanwhile.
        conn.setWant(conn.want() & ~FuseConnInfo.FUSE_CAP_WRITEBACK_CACHE);
        JfuseNative.useInodeNumbers(cfg);
    }

    // ------------------------------------------------------------------ attributes

    @Override
    public int getattr(String path, Stat stat, FileInfo fi) {
        calls.count(Op.GETATTR);
        try {
            fill(JfuseNative.segment(stat), fi != null ? ns.stat(open.get(fi.getFh())) : ns.lstat(path));
            return 0;
        } catch (Throwable e) {
            return fail(e, "getattr");
        }
    }

    /** Writes {@code s} into a {@code struct stat}: the namespace's inode number, links, size, blocks (of 512 bytes) and times. */
    private void fill(MemorySegment st, InodeStat s) {
        st.set(JAVA_LONG, JfuseNative.ST_INO, s.ino());
        st.set(JAVA_LONG, JfuseNative.ST_NLINK, s.nlink());
        st.set(JAVA_INT, JfuseNative.ST_MODE, s.mode());
        st.set(JAVA_INT, JfuseNative.ST_UID, s.uid());
        st.set(JAVA_INT, JfuseNative.ST_GID, s.gid());
        st.set(JAVA_LONG, JfuseNative.ST_SIZE, s.size());
        st.set(JAVA_LONG, JfuseNative.ST_BLKSIZE, blockSize);
        st.set(JAVA_LONG, JfuseNative.ST_BLOCKS, s.blocks() * (blockSize / 512));
        time(st, JfuseNative.ST_ATIM, s.atimeNanos());
        time(st, JfuseNative.ST_MTIM, s.mtimeNanos());
        time(st, JfuseNative.ST_CTIM, s.ctimeNanos());
    }

    private static void time(MemorySegment st, long at, long nanos) {
        st.set(JAVA_LONG, at, Math.floorDiv(nanos, 1_000_000_000L));
        st.set(JAVA_LONG, at + 8, Math.floorMod(nanos, 1_000_000_000L));
    }

    @Override
    public int chmod(String path, int mode, FileInfo fi) {
        calls.count(Op.CHMOD);
        return setattr(path, fi, mode & S_PERMS, -1, -1, -1, -1, "chmod");
    }

    @Override
    public int chown(String path, int uid, int gid, FileInfo fi) {
        calls.count(Op.CHOWN);
        return setattr(path, fi, -1, uid, gid, -1, -1, "chown");
    }

    @Override
    public int utimens(String path, TimeSpec atime, TimeSpec mtime, FileInfo fi) {
        calls.count(Op.UTIMENS);
        return setattr(path, fi, -1, -1, -1, nanos(atime), nanos(mtime), "utimens");
    }

    /** A time to set: -1 to leave it (UTIME_OMIT). */
    private static long nanos(TimeSpec t) {
        if (t.isUtimeOmit()) {
            return -1;
        }
        Instant i = t.isUtimeNow() ? Instant.now() : t.get();
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    private int setattr(String path, FileInfo fi, int mode, int uid, int gid, long atime, long mtime, String op) {
        try {
            if (fi != null) {
                ns.setattr(open.get(fi.getFh()), mode, uid, gid, atime, mtime);
            } else {
                try (Handle h = openEntry(path)) { // the entry itself: lutimes and lchown reach symlinks, not their targets
                    ns.setattr(h, mode, uid, gid, atime, mtime);
                }
            }
            return 0;
        } catch (Throwable e) {
            return fail(e, op);
        }
    }

    @Override
    public int truncate(String path, long size, FileInfo fi) {
        calls.count(Op.TRUNCATE);
        try {
            Handle h = fi != null ? open.get(fi.getFh()) : null;
            if (h != null && (h.flags() & Namespace.O_ACCMODE) != Namespace.O_RDONLY) {
                ns.truncate(h, size);
            } else { // truncate(2), or O_RDONLY | O_TRUNC (which Linux allows)
                try (Handle w = ns.open(path, Namespace.O_WRONLY)) {
                    ns.truncate(w, size);
                }
            }
            return 0;
        } catch (Throwable e) {
            return fail(e, "truncate");
        }
    }

    @Override
    public int statfs(String path, Statvfs statvfs) {
        calls.count(Op.STATFS);
        try {
            VolumeStats s = volume.statfs();
            statvfs.setBsize(s.blockSize());
            statvfs.setFrsize(s.blockSize());
            statvfs.setBlocks(s.totalBlocks());
            statvfs.setBfree(s.freeBlocks());
            statvfs.setBavail(s.freeBlocks());
            statvfs.setNameMax(255);
            // Inodes come in chunks taken from free space: free slots plus a block's worth per free block bounds what can be made.
            long free = s.freeInodes() + s.freeBlocks();
            MemorySegment st = JfuseNative.segment(statvfs);
            st.set(JAVA_LONG, JfuseNative.F_FILES, s.inodes() - s.freeInodes() + free);
            st.set(JAVA_LONG, JfuseNative.F_FFREE, free);
            st.set(JAVA_LONG, JfuseNative.F_FAVAIL, free);
            return 0;
        } catch (Throwable e) {
            return fail(e, "statfs");
        }
    }

    // ------------------------------------------------------------------ names

    @Override
    public int mkdir(String path, int mode) {
        calls.count(Op.MKDIR);
        try {
            ns.mkdir(path, mode & S_PERMS);
            own(path);
            return 0;
        } catch (Throwable e) {
            return fail(e, "mkdir");
        }
    }

    /** mknod(2) of a regular file (the namespace holds no devices, fifos or sockets: EPERM, as file systems without them answer). */
    int mknod(String path, int mode) {
        calls.count(Op.MKNOD);
        if ((mode & InodeStat.S_IFMT) != InodeStat.S_IFREG && (mode & InodeStat.S_IFMT) != 0) {
            return -EPERM;
        }
        ns.create(path, mode & S_PERMS, true);
        own(path);
        return 0;
    }

    @Override
    public int unlink(String path) {
        calls.count(Op.UNLINK);
        try {
            ns.unlink(path);
            return 0;
        } catch (Throwable e) {
            return fail(e, "unlink");
        }
    }

    @Override
    public int rmdir(String path) {
        calls.count(Op.RMDIR);
        try {
            ns.rmdir(path);
            return 0;
        } catch (Throwable e) {
            return fail(e, "rmdir");
        }
    }

    @Override
    public int symlink(String target, String linkPath) {
        calls.count(Op.SYMLINK);
        try {
            ns.symlink(target, linkPath);
            own(linkPath);
            return 0;
        } catch (Throwable e) {
            return fail(e, "symlink");
        }
    }

    @Override
    public int readlink(String path, ByteBuffer buf, long size) {
        calls.count(Op.READLINK);
        try {
            byte[] target = ns.readlink(path).getBytes(StandardCharsets.UTF_8);
            int n = (int) Math.min(target.length, size - 1); // truncated as readlink(2), with libfuse's NUL
            buf.put(0, target, 0, n);
            buf.put(n, (byte) 0);
            return 0;
        } catch (Throwable e) {
            return fail(e, "readlink");
        }
    }

    @Override
    public int rename(String from, String to, int flags) {
        calls.count(Op.RENAME);
        try {
            RenameMode mode = switch (flags) {
                case 0 -> RenameMode.REPLACE;
                case RENAME_NOREPLACE -> RenameMode.NO_REPLACE;
                case RENAME_EXCHANGE -> RenameMode.EXCHANGE;
                default -> null; // RENAME_WHITEOUT (overlayfs's), which the namespace cannot represent
            };
            if (mode == null) {
                return -EINVAL;
            }
            ns.rename(from, to, mode);
            return 0;
        } catch (Throwable e) {
            return fail(e, "rename");
        }
    }

    /** Bound by {@link JfuseNative} (jfuse binds no link). */
    @Override
    public int link(String existing, String newPath) {
        calls.count(Op.LINK);
        try {
            ns.link(existing, newPath);
            libfuse.invalidatePath(existing); // its link count, which the kernel caches apart from the new name's
            return 0;
        } catch (Throwable e) {
            return fail(e, "link");
        }
    }

    // ------------------------------------------------------------------ open files

    @Override
    public int create(String path, int mode, FileInfo fi) {
        calls.count(Op.CREATE);
        try {
            int flags = fi.getFlags();
            int slash = path.lastIndexOf('/');
            Handle h;
            try (Handle dir = ns.open(parent(path, slash))) {
                h = ns.create(dir, path.substring(slash + 1), mode & S_PERMS, (flags & O_EXCL) != 0, flags & KEPT_FLAGS);
            }
            try {
                own(h);
            } catch (RuntimeException e) {
                h.close();
                throw e;
            }
            return opened(h, flags, fi);
        } catch (Throwable e) {
            return fail(e, "create");
        }
    }

    /**
     * Gives a new inode to the calling process's user and group, as Linux does: the namespace creates everything
     * owned by 0:0, so a caller other than root costs one more transaction (a root caller none).
     */
    private void own(Handle h) {
        long ids = libfuse.caller();
        if (ids != 0) {
            ns.setattr(h, -1, (int) (ids >>> 32), (int) ids, -1, -1);
        }
    }

    private void own(String path) {
        if (libfuse.caller() != 0) {
            try (Handle h = openEntry(path)) {
                own(h);
            }
        }
    }

    /** A handle on the entry {@code path} names, a symlink itself (the namespace's path forms follow a final symlink). */
    private Handle openEntry(String path) {
        if (path.equals("/")) {
            return ns.openRoot();
        }
        int slash = path.lastIndexOf('/');
        try (Handle dir = ns.open(parent(path, slash))) {
            return ns.open(dir, path.substring(slash + 1));
        }
    }

    private static String parent(String path, int slash) {
        return slash == 0 ? "/" : path.substring(0, slash);
    }

    @Override
    public int open(String path, FileInfo fi) {
        calls.count(Op.OPEN);
        try {
            int flags = fi.getFlags();
            return opened(ns.open(path, flags & KEPT_FLAGS), flags, fi);
        } catch (Throwable e) {
            return fail(e, "open");
        }
    }

    /** Keeps {@code h} for the kernel's later calls, truncated first for O_TRUNC (when the kernel leaves that to the open). */
    private int opened(Handle h, int flags, FileInfo fi) {
        try {
            if ((flags & O_TRUNC) != 0 && (flags & O_ACCMODE) != Namespace.O_RDONLY && ns.stat(h).size() != 0) {
                ns.truncate(h, 0);
            }
            fi.setFh(open.add(h));
            return 0;
        } catch (Throwable e) {
            h.close();
            throw e;
        }
    }

    @Override
    public int read(String path, ByteBuffer buf, long size, long offset, FileInfo fi) {
        calls.count(Op.READ);
        try {
            return ns.read(open.get(fi.getFh()), offset, buf);
        } catch (Throwable e) {
            return fail(e, "read");
        }
    }

    @Override
    public int write(String path, ByteBuffer buf, long size, long offset, FileInfo fi) {
        calls.count(Op.WRITE);
        try {
            ns.write(open.get(fi.getFh()), offset, buf);
            return (int) size;
        } catch (Throwable e) {
            return fail(e, "write");
        }
    }

    int fallocate(long fh, int mode, long offset, long length) {
        calls.count(Op.FALLOCATE);
        ns.fallocate(open.get(fh), mode, offset, length);
        return 0;
    }

    /** Bound by {@link JfuseNative} (jfuse binds no lseek): SEEK_DATA and SEEK_HOLE answered by the namespace. */
    long lseek(long fh, long offset, int whence) {
        calls.count(Op.LSEEK);
        return switch (whence) {
            case SEEK_DATA -> ns.seekData(open.get(fh), offset);
            case SEEK_HOLE -> ns.seekHole(open.get(fh), offset);
            default -> -EINVAL;
        };
    }

    @Override
    public int fsync(String path, int datasync, FileInfo fi) {
        calls.count(Op.FSYNC);
        return sync(datasync, fi);
    }

    private int sync(int datasync, FileInfo fi) {
        try {
            Handle h = open.get(fi.getFh());
            if (datasync != 0) {
                ns.fdatasync(h);
            } else {
                ns.fsync(h);
            }
            return 0;
        } catch (Throwable e) {
            return fail(e, "fsync");
        }
    }

    @Override
    public int release(String path, FileInfo fi) {
        calls.count(Op.RELEASE);
        return close(fi);
    }

    private int close(FileInfo fi) {
        try {
            open.remove(fi.getFh()).close();
            return 0;
        } catch (Throwable e) {
            return fail(e, "release");
        }
    }

    // ------------------------------------------------------------------ directories

    @Override
    public int opendir(String path, FileInfo fi) {
        calls.count(Op.OPENDIR);
        try {
            fi.setFh(open.add(ns.open(path)));
            return 0;
        } catch (Throwable e) {
            return fail(e, "opendir");
        }
    }

    /**
     * The whole directory in one call, every entry at offset 0: libfuse keeps the listing for the kernel's
     * following calls (resuming from a cookie would need one kept per offset). With readdirplus each entry
     * carries its attributes, one {@code fstatat}-like lookup in the open directory each, so the kernel
     * looks none of them up again.
     */
    @Override
    public int readdir(String path, DirFiller filler, long offset, FileInfo fi, int flags) {
        calls.count(Op.READDIR);
        try {
            Handle dir = open.get(fi.getFh());
            boolean plus = (flags & FuseOperations.FUSE_READDIR_PLUS) != 0;
            entry(filler, dir, ".", false);
            entry(filler, "..", ns.lstat(dir, dir.ino() == ns.root() ? "." : ".."), false); // the root's parent is itself, as on Linux
            for (DirCookie c = DirCookie.START; ; ) {
                DirPage page = ns.readdir(dir, c, READDIR_PAGE);
                for (DirEntry e : page.entries()) {
                    if (plus) {
                        entry(filler, dir, e.name(), true);
                    } else {
                        filler.fill(e.name(), st -> {
                            MemorySegment s = JfuseNative.segment(st);
                            s.set(JAVA_LONG, JfuseNative.ST_INO, e.ino());
                            s.set(JAVA_INT, JfuseNative.ST_MODE, e.type());
                        }, 0, 0);
                    }
                }
                if (page.end()) {
                    return 0;
                }
                c = page.next();
            }
        } catch (Throwable e) {
            return fail(e, "readdir");
        }
    }

    private void entry(DirFiller filler, Handle dir, String name, boolean plus) {
        entry(filler, name, ns.lstat(dir, name), plus);
    }

    private void entry(DirFiller filler, String name, InodeStat s, boolean plus) {
        filler.fill(name, st -> fill(JfuseNative.segment(st), s), 0, plus ? DirFiller.FUSE_FILL_DIR_PLUS : 0);
    }

    @Override
    public int releasedir(String path, FileInfo fi) {
        calls.count(Op.RELEASEDIR);
        return close(fi);
    }

    @Override
    public int fsyncdir(String path, int datasync, FileInfo fi) {
        calls.count(Op.FSYNCDIR);
        return sync(datasync, fi);
    }

    /** The upcalls served so far, per operation ({@link RequestCounts#snapshot()}). */
    Map<String, Long> requestCounts() {
        return calls.snapshot();
    }

    /** Closes the handles the kernel did not release (an unmount with files open). */
    void closeAll() {
        for (Handle h : open.removeAll()) {
            try {
                h.close();
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "closing " + h + " at unmount: " + e.getMessage(), e);
            }
        }
    }

    /** Minus the errno for {@code e}: the namespace's own, ENOSPC, a device's, EINVAL; EIO for anything else (logged). */
    int fail(Throwable e, String op) {
        return switch (e) {
            case NamespaceException n -> -n.errno();
            case NoSpaceException n -> -ENOSPC;
            case InvalidArgumentException i -> -EINVAL;
            case DeviceException d -> {
                LOG.log(System.Logger.Level.ERROR, op + ": " + d.getMessage(), d);
                yield -(d.errno() > 0 ? d.errno() : EIO);
            }
            default -> {
                LOG.log(System.Logger.Level.ERROR, op + ": " + e, e);
                yield -EIO;
            }
        };
    }
}
