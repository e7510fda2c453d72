package dev.ferrite.fuse;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.reflect.Method;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import dev.ferrite.dir.DirCookie;
import dev.ferrite.dir.DirEntry;
import dev.ferrite.dir.DirPage;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.NamespaceException;
import dev.ferrite.dir.RenameMode;
import dev.ferrite.dir.StatBuffer;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeStats;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;

import dev.ferrite.fuse.NodeTable.Node;
import dev.ferrite.fuse.RequestCounts.Op;

import static dev.ferrite.fuse.LowLevelFormat.CONN_INFO;
import static dev.ferrite.fuse.LowLevelFormat.CONN_WANT;
import static dev.ferrite.fuse.LowLevelFormat.E_ATTR;
import static dev.ferrite.fuse.LowLevelFormat.E_ATTR_TIMEOUT;
import static dev.ferrite.fuse.LowLevelFormat.E_ENTRY_TIMEOUT;
import static dev.ferrite.fuse.LowLevelFormat.E_GENERATION;
import static dev.ferrite.fuse.LowLevelFormat.E_INO;
import static dev.ferrite.fuse.LowLevelFormat.FILE_INFO;
import static dev.ferrite.fuse.LowLevelFormat.FI_FH;
import static dev.ferrite.fuse.LowLevelFormat.FI_FLAGS;
import static dev.ferrite.fuse.LowLevelFormat.FORGET_DATA;
import static dev.ferrite.fuse.LowLevelFormat.STAT;
import static dev.ferrite.fuse.LowLevelFormat.ST_ATIM;
import static dev.ferrite.fuse.LowLevelFormat.ST_BLKSIZE;
import static dev.ferrite.fuse.LowLevelFormat.ST_BLOCKS;
import static dev.ferrite.fuse.LowLevelFormat.ST_CTIM;
import static dev.ferrite.fuse.LowLevelFormat.ST_GID;
import static dev.ferrite.fuse.LowLevelFormat.ST_INO;
import static dev.ferrite.fuse.LowLevelFormat.ST_MODE;
import static dev.ferrite.fuse.LowLevelFormat.ST_MTIM;
import static dev.ferrite.fuse.LowLevelFormat.ST_NLINK;
import static dev.ferrite.fuse.LowLevelFormat.ST_SIZE;
import static dev.ferrite.fuse.LowLevelFormat.ST_UID;
import static dev.ferrite.io.Errno.EBADF;
import static dev.ferrite.io.Errno.EINVAL;
import static dev.ferrite.io.Errno.EIO;
import static dev.ferrite.io.Errno.ENOENT;
import static dev.ferrite.io.Errno.ENOSPC;
import static dev.ferrite.io.Errno.EPERM;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * libfuse's low-level (inode) operations answered from a volume's {@link Namespace}. The kernel names inodes by
 * the node ids of {@link NodeTable}, each holding a {@link Handle}, so every request is served by handle or by a
 * name in a directory handle, never by path; entries are replied with the inode's number, generation and
 * attributes, cached by the kernel for the configured timeout. Each request gets one reply: the answer, or the
 * errno the namespace gave ({@link #errno}). Called by libfuse's threads concurrently; nothing may escape an upcall
 * (it would end the JVM), so each catches everything.
 */
@SuppressWarnings("restricted")
final class LowLevelServer {
    private static final System.Logger LOG = System.getLogger(LowLevelServer.class.getName());
    /** The operations served: struct fuse_lowlevel_ops' names, each bound to the method of the same name in camel case. */
    private static final List<String> SERVED = List.of("init", "lookup", "forget", "getattr", "setattr", "readlink",
            "mknod", "mkdir", "unlink", "rmdir", "symlink", "rename", "link", "open", "read", "write", "release", "fsync",
            "opendir", "readdir", "releasedir", "fsyncdir", "statfs", "create", "forget_multi", "fallocate", "readdirplus",
            "lseek");
    // open(2) flags, Linux's values
    private static final int O_ACCMODE = 03, O_EXCL = 0200, O_TRUNC = 01000, O_APPEND = 02000;
    private static final int S_PERMS = 07777;
    /** lseek(2)'s whences the kernel leaves to the file system. */
    private static final int SEEK_DATA = 3, SEEK_HOLE = 4;
    /** renameat2(2)'s flags. */
    private static final int RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2;
    private static final int READDIR_PAGE = 1024;

    private final Namespace ns;
    private final Volume volume;
    private final Libfuse fuse;
    private final NodeTable nodes;
    private final SlotTable<Listing> dirs = new SlotTable<>();
    private final RequestCounts calls = new RequestCounts();
    private final int blockSize;
    /** The seconds the kernel caches entries and attributes. */
    private final double timeout;
    private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);

    LowLevelServer(Volume volume, Libfuse fuse, double timeout) {
        this.volume = volume;
        this.ns = volume.namespace();
        this.fuse = fuse;
        this.timeout = timeout;
        this.blockSize = volume.statfs().blockSize();
        this.nodes = new NodeTable(ns.openRoot());
    }

    /**
     * A worker thread's C buffers, allocated once per thread (libfuse's workers live as long as the loop):
     * an entry (its stat inside), a statvfs, a name, the stat it is decoded from, and a buffer for reads
     * and listings, grown to the largest asked.
     */
    private static final class Scratch {
        final Arena arena = Arena.ofAuto();
        final MemorySegment entry = arena.allocate(LowLevelFormat.ENTRY_PARAM);
        final MemorySegment stat = entry.asSlice(E_ATTR, STAT);
        final MemorySegment statvfs = arena.allocate(LowLevelFormat.STATVFS);
        final MemorySegment name = arena.allocate(1024);
        final StatBuffer sb = new StatBuffer();
        MemorySegment io = arena.allocate(128 * 1024, 4096);
        /** Nodes counted in a readdirplus reply being filled, to forget if the reply fails. */
        long[] counted = new long[64];

        MemorySegment io(long size) {
            if (io.byteSize() < size) {
                io = Arena.ofAuto().allocate(size, 4096);
            }
            return io;
        }

        MemorySegment name(String s) {
            name.setString(0, s);
            return name;
        }
    }

    /** The open-directory state: its listing, read at the first readdir from offset 0 (offset i is entry i: ".", "..", then the names). */
    static final class Listing {
        final Handle dir;
        List<DirEntry> entries = List.of();
        long parent;

        Listing(Handle dir) {
            this.dir = dir;
        }
    }

    /** {@code struct fuse_lowlevel_ops} with an upcall to this server for each operation served (the rest NULL: ENOSYS), living as long as {@code arena}. */
    MemorySegment operations(Arena arena) {
        MemorySegment ops = arena.allocate(LowLevelFormat.LOWLEVEL_OPS);
        for (String op : SERVED) {
            String javaName = camel(op);
            Method m = Arrays.stream(LowLevelServer.class.getDeclaredMethods())
                    .filter(x -> x.getName().equals(javaName) && x.getReturnType() == void.class && x.getParameterCount() > 1
                            && Arrays.stream(x.getParameterTypes()).allMatch(p -> p == long.class || p == int.class || p == MemorySegment.class))
                    .findFirst().orElseThrow(() -> new IllegalStateException("no upcall for " + op));
            List<MemoryLayout> args = new ArrayList<>();
            for (Class<?> p : m.getParameterTypes()) {
                args.add(p == long.class ? JAVA_LONG : p == int.class ? JAVA_INT : ADDRESS);
            }
            try {
                MemorySegment stub = Linker.nativeLinker().upcallStub(MethodHandles.lookup().unreflect(m).bindTo(this),
                        FunctionDescriptor.ofVoid(args.toArray(MemoryLayout[]::new)), arena);
                ops.set(ADDRESS, LowLevelFormat.operation(op), stub);
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(op, e);
            }
        }
        return ops;
    }

    private static String camel(String op) {
        int u = op.indexOf('_');
        return u < 0 ? op : op.substring(0, u) + Character.toUpperCase(op.charAt(u + 1)) + op.substring(u + 2);
    }

    // ------------------------------------------------------------------ the upcalls

    /** Not the writeback cache: see docs/mount.md (Caching). libfuse's other defaults stand. */
    private void init(MemorySegment userdata, MemorySegment conn) {
        MemorySegment c = conn.reinterpret(CONN_INFO.byteSize());
        c.set(JAVA_INT, CONN_WANT, c.get(JAVA_INT, CONN_WANT) & ~LowLevelFormat.CAP_WRITEBACK_CACHE);
    }

    private void lookup(MemorySegment req, long parent, MemorySegment name) {
        calls.count(Op.LOOKUP);
        try {
            Scratch s = scratch.get();
            Handle dir = nodes.get(parent);
            String n = string(name);
            if (!ns.lstatIfExists(dir, n, s.sb)) { // a negative lookup: every create through the mount starts with one
                fuse.replyErr(req, ENOENT);
                return;
            }
            replyEntry(req, s, found(s, dir, n));
        } catch (Throwable e) {
            fail(req, e, Op.LOOKUP);
        }
    }

    /** The node of entry {@code name} of {@code dir}, its lookup count up by one, its attributes in {@code s.sb}. */
    private Node lookup(Scratch s, Handle dir, String name) {
        ns.lstat(dir, name, s.sb);
        return found(s, dir, name);
    }

    /** {@link #lookup(Scratch, Handle, String)} once its attributes are in {@code s.sb}. */
    private Node found(Scratch s, Handle dir, String name) {
        Node n = nodes.lookupKnown(s.sb.ino());
        return n != null ? n : nodes.lookup(ns.open(dir, name));
    }

    /** Replies the entry of {@code n} (its attributes in {@code s.sb} if they are of its inode, else read again); forgets the lookup if the kernel took no reply. */
    private void replyEntry(MemorySegment req, Scratch s, Node n) {
        entry(s, n);
        if (fuse.replyEntry(req, s.entry) != 0) {
            nodes.forget(n.id, 1);
        }
    }

    private void entry(Scratch s, Node n) {
        if (s.sb.ino() != n.ino) {
            ns.stat(handle(n), s.sb);
        }
        s.entry.set(JAVA_LONG, E_INO, n.id);
        s.entry.set(JAVA_LONG, E_GENERATION, Integer.toUnsignedLong(s.sb.generation()));
        fill(s.stat, s.sb);
        s.entry.set(JAVA_DOUBLE, E_ATTR_TIMEOUT, timeout);
        s.entry.set(JAVA_DOUBLE, E_ENTRY_TIMEOUT, timeout);
    }

    /** Writes {@code b} into a {@code struct stat}: the namespace's inode number, links, size, blocks (of 512 bytes) and times. */
    private void fill(MemorySegment st, StatBuffer b) {
        st.fill((byte) 0);
        st.set(JAVA_LONG, ST_INO, b.ino());
        st.set(JAVA_LONG, ST_NLINK, b.nlink());
        st.set(JAVA_INT, ST_MODE, b.mode());
        st.set(JAVA_INT, ST_UID, b.uid());
        st.set(JAVA_INT, ST_GID, b.gid());
        st.set(JAVA_LONG, ST_SIZE, b.size());
        st.set(JAVA_LONG, ST_BLKSIZE, blockSize);
        st.set(JAVA_LONG, ST_BLOCKS, b.blocks() * (blockSize / 512));
        LowLevelFormat.setTime(st, ST_ATIM, b.atimeNanos());
        LowLevelFormat.setTime(st, ST_MTIM, b.mtimeNanos());
        LowLevelFormat.setTime(st, ST_CTIM, b.ctimeNanos());
    }

    /** FORGET has no reply: the kernel goes on at once, and the handle of a node forgotten is closed after. */
    private void forget(MemorySegment req, long id, long count) {
        calls.count(Op.FORGET);
        fuse.replyNone(req);
        forgetQuietly(id, count);
    }

    private void forgetMulti(MemorySegment req, long count, MemorySegment forgets) {
        calls.count(Op.FORGET_MULTI);
        fuse.replyNone(req);
        MemorySegment f = forgets.reinterpret(count * FORGET_DATA.byteSize());
        for (long i = 0; i < count; i++) {
            forgetQuietly(f.getAtIndex(JAVA_LONG, 2 * i), f.getAtIndex(JAVA_LONG, 2 * i + 1));
        }
    }

    private void forgetQuietly(long id, long count) {
        try {
            nodes.forget(id, count);
        } catch (Throwable e) { // closing an orphan's last handle frees it: a failure leaves it for the next mount
            LOG.log(System.Logger.Level.WARNING, "forget of node " + id + ": " + e, e);
        }
    }

    private void getattr(MemorySegment req, long id, MemorySegment fi) {
        calls.count(Op.GETATTR);
        try {
            replyAttr(req, nodes.get(id));
        } catch (Throwable e) {
            fail(req, e, Op.GETATTR);
        }
    }

    private void replyAttr(MemorySegment req, Handle h) {
        Scratch s = scratch.get();
        ns.stat(h, s.sb);
        fill(s.stat, s.sb);
        fuse.replyAttr(req, s.stat, timeout);
    }

    /** chmod, chown, truncate and utimens in one: the size first, then the rest in one transaction. */
    private void setattr(MemorySegment req, long id, MemorySegment attr, int toSet, MemorySegment fi) {
        calls.count(Op.SETATTR);
        try {
            Handle h = nodes.get(id);
            MemorySegment a = attr.reinterpret(STAT.byteSize());
            if ((toSet & LowLevelFormat.SET_SIZE) != 0) {
                ns.truncate(h, a.get(JAVA_LONG, ST_SIZE));
            }
            int mode = (toSet & LowLevelFormat.SET_MODE) != 0 ? a.get(JAVA_INT, ST_MODE) & S_PERMS : -1;
            int uid = (toSet & LowLevelFormat.SET_UID) != 0 ? a.get(JAVA_INT, ST_UID) : -1;
            int gid = (toSet & LowLevelFormat.SET_GID) != 0 ? a.get(JAVA_INT, ST_GID) : -1;
            long atime = time(a, toSet, LowLevelFormat.SET_ATIME, LowLevelFormat.SET_ATIME_NOW, ST_ATIM);
            long mtime = time(a, toSet, LowLevelFormat.SET_MTIME, LowLevelFormat.SET_MTIME_NOW, ST_MTIM);
            if (mode != -1 || uid != -1 || gid != -1 || atime != -1 || mtime != -1) {
                ns.setattr(h, mode, uid, gid, atime, mtime);
            }
            replyAttr(req, h);
        } catch (Throwable e) {
            fail(req, e, Op.SETATTR);
        }
    }

    /** A time to set: -1 to leave it (neither bit: UTIME_OMIT). */
    private static long time(MemorySegment a, int toSet, int given, int now, long at) {
        if ((toSet & now) != 0) {
            Instant i = Instant.now();
            return i.getEpochSecond() * 1_000_000_000L + i.getNano();
        }
        return (toSet & given) != 0 ? LowLevelFormat.time(a, at) : -1;
    }

    private void readlink(MemorySegment req, long id) {
        calls.count(Op.READLINK);
        try (Arena arena = Arena.ofConfined()) {
            fuse.replyReadlink(req, arena.allocateFrom(ns.readlink(nodes.get(id))));
        } catch (Throwable e) {
            fail(req, e, Op.READLINK);
        }
    }

    /** mknod(2) of a regular file (the namespace holds no devices, fifos or sockets: EPERM, as file systems without them answer). */
    private void mknod(MemorySegment req, long parent, MemorySegment name, int mode, long rdev) {
        calls.count(Op.MKNOD);
        try {
            if ((mode & InodeStat.S_IFMT) != InodeStat.S_IFREG && (mode & InodeStat.S_IFMT) != 0) {
                fuse.replyErr(req, EPERM);
                return;
            }
            made(req, ns.create(nodes.get(parent), string(name), mode & S_PERMS, true));
        } catch (Throwable e) {
            fail(req, e, Op.MKNOD);
        }
    }

    private void mkdir(MemorySegment req, long parent, MemorySegment name, int mode) {
        calls.count(Op.MKDIR);
        try {
            made(req, ns.mkdir(nodes.get(parent), string(name), mode & S_PERMS));
        } catch (Throwable e) {
            fail(req, e, Op.MKDIR);
        }
    }

    private void symlink(MemorySegment req, MemorySegment target, long parent, MemorySegment name) {
        calls.count(Op.SYMLINK);
        try {
            Handle dir = nodes.get(parent);
            String n = string(name);
            ns.symlink(dir, n, string(target));
            made(req, ns.open(dir, n));
        } catch (Throwable e) {
            fail(req, e, Op.SYMLINK);
        }
    }

    /** Replies the entry of a new inode, {@code h}, given to the caller first. */
    private void made(MemorySegment req, Handle h) {
        Node n = owned(req, h);
        Scratch s = scratch.get();
        ns.stat(handle(n), s.sb);
        replyEntry(req, s, n);
    }

    /** The node's handle: ENOENT if its inode lost its last name since (an unlink detached it). */
    private static Handle handle(Node n) {
        Handle h = n.handle();
        if (h == null) {
            throw new NamespaceException(dev.ferrite.io.Errno.ENOENT, "node " + n.id + " was unlinked");
        }
        return h;
    }

    /** The node of new inode {@code h}, given to the caller first ({@code h} closed if that fails). */
    private Node owned(MemorySegment req, Handle h) {
        try {
            own(req, h);
        } catch (RuntimeException e) {
            h.close();
            throw e;
        }
        return nodes.lookup(h);
    }

    /**
     * Gives a new inode to the calling process's user and group, as Linux does: the namespace creates everything
     * owned by 0:0, so a caller other than root costs one more transaction (a root caller none).
     */
    private void own(MemorySegment req, Handle h) {
        MemorySegment ctx = fuse.requestContext(req);
        int uid = ctx.get(JAVA_INT, LowLevelFormat.CTX_UID), gid = ctx.get(JAVA_INT, LowLevelFormat.CTX_GID);
        if (uid != 0 || gid != 0) {
            ns.setattr(h, -1, uid, gid, -1, -1);
        }
    }

    private void unlink(MemorySegment req, long parent, MemorySegment name) {
        calls.count(Op.UNLINK);
        remove(req, parent, name, false, Op.UNLINK);
    }

    private void rmdir(MemorySegment req, long parent, MemorySegment name) {
        calls.count(Op.RMDIR);
        remove(req, parent, name, true, Op.RMDIR);
    }

    /**
     * unlink or rmdir. If the entry is the inode's last name and the kernel has the inode open nowhere, its node is
     * detached first (NodeTable#detachIfIdle), so the volume frees it in the removing transaction instead of keeping
     * it an orphan until the kernel's FORGET; if the removal fails, the node gets a handle again.
     */
    private void remove(MemorySegment req, long parent, MemorySegment name, boolean dir, Op op) {
        try {
            Handle d = nodes.get(parent);
            String n = string(name);
            Node detached = null;
            Scratch s = scratch.get();
            try {
                ns.lstat(d, n, s.sb);
                if (dir ? s.sb.isDirectory() && s.sb.nlink() == 2 : !s.sb.isDirectory() && s.sb.nlink() == 1) {
                    detached = nodes.detachIfIdle(s.sb.ino());
                }
            } catch (NamespaceException e) {
                // the removal below answers with its own errno
            }
            try {
                if (dir) {
                    ns.rmdir(d, n);
                } else {
                    ns.unlink(d, n);
                }
            } catch (RuntimeException e) {
                if (detached != null) {
                    reattach(detached, d, n);
                }
                throw e;
            }
            fuse.replyErr(req, 0);
        } catch (Throwable e) {
            fail(req, e, op);
        }
    }

    private void reattach(Node detached, Handle dir, String name) {
        try {
            nodes.reattach(detached, ns.open(dir, name));
        } catch (NamespaceException e) {
            // the name went meanwhile: the kernel's node answers ENOENT until forgotten
        }
    }

    private void rename(MemorySegment req, long parent, MemorySegment name, long newParent, MemorySegment newName, int flags) {
        calls.count(Op.RENAME);
        try {
            RenameMode mode = switch (flags) {
                case 0 -> RenameMode.REPLACE;
                case RENAME_NOREPLACE -> RenameMode.NO_REPLACE;
                case RENAME_EXCHANGE -> RenameMode.EXCHANGE;
                default -> null; // RENAME_WHITEOUT (overlayfs's), which the namespace cannot represent
            };
            if (mode == null) {
                fuse.replyErr(req, EINVAL);
                return;
            }
            ns.rename(nodes.get(parent), string(name), nodes.get(newParent), string(newName), mode);
            fuse.replyErr(req, 0);
        } catch (Throwable e) {
            fail(req, e, Op.RENAME);
        }
    }

    /** The kernel's inode for {@code id} gains a name: the same node, so every name shows one link count. */
    private void link(MemorySegment req, long id, long newParent, MemorySegment newName) {
        calls.count(Op.LINK);
        try {
            ns.link(nodes.get(id), nodes.get(newParent), string(newName));
            Scratch s = scratch.get();
            Node n = nodes.lookupAgain(id);
            ns.stat(handle(n), s.sb);
            replyEntry(req, s, n);
        } catch (Throwable e) {
            fail(req, e, Op.LINK);
        }
    }

    // ------------------------------------------------------------------ files

    /**
     * Reads and writes go to the node's own handle: an open keeps nothing ({@code fh} 0), truncates for O_TRUNC (which
     * the kernel leaves to the open), and O_APPEND comes with each write's flags.
     */
    private void open(MemorySegment req, long id, MemorySegment fi) {
        calls.count(Op.OPEN);
        try {
            MemorySegment f = fi.reinterpret(FILE_INFO.byteSize());
            Handle h = nodes.open(id);
            try {
                truncateForOpen(h, f.get(JAVA_INT, FI_FLAGS));
            } catch (RuntimeException e) {
                nodes.released(id);
                throw e;
            }
            keepCache(f);
            if (fuse.replyOpen(req, f) != 0) {
                nodes.released(id);
            }
        } catch (Throwable e) {
            fail(req, e, Op.OPEN);
        }
    }

    /**
     * No file handle ({@code fh} 0), and {@code keep_cache}: the kernel keeps the file's cached pages across opens
     * instead of dropping them at each one, so data read or written through the mount is read again from its page
     * cache. Every change through the mount goes through that cache; a change made through the Java API is noticed,
     * and the pages dropped, when the kernel next fetches the attributes and finds another mtime or size
     * ({@code FUSE_CAP_AUTO_INVAL_DATA}, libfuse's default), within the attribute timeout as other attributes are.
     */
    private static void keepCache(MemorySegment fi) {
        fi.set(JAVA_LONG, FI_FH, 0);
        fi.set(JAVA_INT, LowLevelFormat.FI_BITS, fi.get(JAVA_INT, LowLevelFormat.FI_BITS) | LowLevelFormat.FI_KEEP_CACHE);
    }

    private void truncateForOpen(Handle h, int flags) {
        if ((flags & O_TRUNC) != 0 && (flags & O_ACCMODE) != Namespace.O_RDONLY) {
            Scratch s = scratch.get();
            ns.stat(h, s.sb);
            if (s.sb.size() != 0) {
                ns.truncate(h, 0);
            }
        }
    }

    private void create(MemorySegment req, long parent, MemorySegment name, int mode, MemorySegment fi) {
        calls.count(Op.CREATE);
        try {
            MemorySegment f = fi.reinterpret(FILE_INFO.byteSize());
            int flags = f.get(JAVA_INT, FI_FLAGS);
            Node n = owned(req, ns.create(nodes.get(parent), string(name), mode & S_PERMS, (flags & O_EXCL) != 0));
            Handle h = nodes.open(n.id);
            Scratch s = scratch.get();
            try {
                truncateForOpen(h, flags); // a create that found the file (not O_EXCL)
                ns.stat(h, s.sb);
                entry(s, n);
            } catch (RuntimeException e) {
                nodes.released(n.id);
                nodes.forget(n.id, 1);
                throw e;
            }
            keepCache(f);
            if (fuse.replyCreate(req, s.entry, f) != 0) {
                nodes.released(n.id);
                nodes.forget(n.id, 1);
            }
        } catch (Throwable e) {
            fail(req, e, Op.CREATE);
        }
    }

    /** Straight into the worker's buffer, replied from there. */
    private void read(MemorySegment req, long id, long size, long offset, MemorySegment fi) {
        calls.count(Op.READ);
        try {
            MemorySegment buf = scratch.get().io(size);
            int n = ns.read(nodes.get(id), offset, buf.asSlice(0, size));
            fuse.replyBuf(req, buf, n);
        } catch (Throwable e) {
            fail(req, e, Op.READ);
        }
    }

    /** Straight from libfuse's buffer. */
    private void write(MemorySegment req, long id, MemorySegment buf, long size, long offset, MemorySegment fi) {
        calls.count(Op.WRITE);
        try {
            Handle h = nodes.get(id);
            MemorySegment data = buf.reinterpret(size);
            if ((fi.reinterpret(FILE_INFO.byteSize()).get(JAVA_INT, FI_FLAGS) & O_APPEND) != 0) {
                ns.append(h, data);
            } else {
                ns.write(h, offset, data);
            }
            fuse.replyWrite(req, size);
        } catch (Throwable e) {
            fail(req, e, Op.WRITE);
        }
    }

    private void release(MemorySegment req, long id, MemorySegment fi) {
        calls.count(Op.RELEASE);
        try {
            nodes.released(id);
            fuse.replyErr(req, 0);
        } catch (Throwable e) {
            fail(req, e, Op.RELEASE);
        }
    }

    private void fsync(MemorySegment req, long id, int datasync, MemorySegment fi) {
        calls.count(Op.FSYNC);
        sync(req, id, datasync, Op.FSYNC);
    }

    private void fsyncdir(MemorySegment req, long id, int datasync, MemorySegment fi) {
        calls.count(Op.FSYNCDIR);
        sync(req, id, datasync, Op.FSYNCDIR);
    }

    private void sync(MemorySegment req, long id, int datasync, Op op) {
        try {
            Handle h = nodes.get(id);
            if (datasync != 0) {
                ns.fdatasync(h);
            } else {
                ns.fsync(h);
            }
            fuse.replyErr(req, 0);
        } catch (Throwable e) {
            fail(req, e, op);
        }
    }

    private void fallocate(MemorySegment req, long id, int mode, long offset, long length, MemorySegment fi) {
        calls.count(Op.FALLOCATE);
        try {
            ns.fallocate(nodes.get(id), mode, offset, length);
            fuse.replyErr(req, 0);
        } catch (Throwable e) {
            fail(req, e, Op.FALLOCATE);
        }
    }

    /** The kernel sends only SEEK_DATA and SEEK_HOLE (it answers the other whences itself). */
    private void lseek(MemorySegment req, long id, long offset, int whence, MemorySegment fi) {
        calls.count(Op.LSEEK);
        try {
            switch (whence) {
                case SEEK_DATA -> fuse.replyLseek(req, ns.seekData(nodes.get(id), offset));
                case SEEK_HOLE -> fuse.replyLseek(req, ns.seekHole(nodes.get(id), offset));
                default -> fuse.replyErr(req, EINVAL);
            }
        } catch (Throwable e) {
            fail(req, e, Op.LSEEK);
        }
    }

    private void statfs(MemorySegment req, long id) {
        calls.count(Op.STATFS);
        try {
            VolumeStats v = volume.statfs();
            MemorySegment st = scratch.get().statvfs;
            st.fill((byte) 0);
            st.set(JAVA_LONG, LowLevelFormat.F_BSIZE, v.blockSize());
            st.set(JAVA_LONG, LowLevelFormat.F_FRSIZE, v.blockSize());
            st.set(JAVA_LONG, LowLevelFormat.F_BLOCKS, v.totalBlocks());
            st.set(JAVA_LONG, LowLevelFormat.F_BFREE, v.freeBlocks());
            st.set(JAVA_LONG, LowLevelFormat.F_BAVAIL, v.freeBlocks());
            st.set(JAVA_LONG, LowLevelFormat.F_NAMEMAX, 255);
            // Inodes come in chunks taken from free space: free slots plus a block's worth per free block bounds what can be made.
            long free = v.freeInodes() + v.freeBlocks();
            st.set(JAVA_LONG, LowLevelFormat.F_FILES, v.inodes() - v.freeInodes() + free);
            st.set(JAVA_LONG, LowLevelFormat.F_FFREE, free);
            st.set(JAVA_LONG, LowLevelFormat.F_FAVAIL, free);
            fuse.replyStatfs(req, st);
        } catch (Throwable e) {
            fail(req, e, Op.STATFS);
        }
    }

    // ------------------------------------------------------------------ directories

    private void opendir(MemorySegment req, long id, MemorySegment fi) {
        calls.count(Op.OPENDIR);
        try {
            MemorySegment f = fi.reinterpret(FILE_INFO.byteSize());
            long fh = dirs.add(new Listing(nodes.open(id)));
            f.set(JAVA_LONG, FI_FH, fh);
            if (fuse.replyOpen(req, f) != 0) {
                dirs.remove(fh);
                nodes.released(id);
            }
        } catch (Throwable e) {
            fail(req, e, Op.OPENDIR);
        }
    }

    private void releasedir(MemorySegment req, long id, MemorySegment fi) {
        calls.count(Op.RELEASEDIR);
        try {
            dirs.remove(fi.reinterpret(FILE_INFO.byteSize()).get(JAVA_LONG, FI_FH));
            nodes.released(id);
            fuse.replyErr(req, 0);
        } catch (Throwable e) {
            fail(req, e, Op.RELEASEDIR);
        }
    }

    private void readdir(MemorySegment req, long id, long size, long offset, MemorySegment fi) {
        calls.count(Op.READDIR);
        list(req, size, offset, fi, false);
    }

    private void readdirplus(MemorySegment req, long id, long size, long offset, MemorySegment fi) {
        calls.count(Op.READDIRPLUS);
        list(req, size, offset, fi, true);
    }

    /**
     * Entries from {@code offset} on, as many as fit in {@code size} bytes, each with the offset of the next. The
     * listing is read whole at offset 0 (a new listing or a rewind) and kept with the open directory for the calls
     * that follow. With {@code plus} each entry but "." and ".." is also a lookup: its node's count goes up as it
     * goes into the reply, and back down if the kernel takes no reply.
     */
    private void list(MemorySegment req, long size, long offset, MemorySegment fi, boolean plus) {
        Op op = plus ? Op.READDIRPLUS : Op.READDIR;
        Scratch s = scratch.get();
        int counted = 0;
        try {
            Listing l = dirs.get(fi.reinterpret(FILE_INFO.byteSize()).get(JAVA_LONG, FI_FH));
            if (l == null) {
                fuse.replyErr(req, EBADF);
                return;
            }
            if (offset == 0) {
                load(l);
            }
            MemorySegment buf = s.io(size);
            long used = 0;
            for (long i = offset; i < 2 + l.entries.size(); i++) {
                String name;
                long ino;
                int type;
                if (i < 2) {
                    name = i == 0 ? "." : "..";
                    ino = i == 0 ? l.dir.ino() : l.parent;
                    type = InodeStat.S_IFDIR;
                } else {
                    DirEntry e = l.entries.get((int) (i - 2));
                    name = e.name();
                    ino = e.ino();
                    type = e.type();
                }
                MemorySegment cname = s.name(name);
                MemorySegment at = buf.asSlice(used);
                long room = size - used, took;
                if (!plus) {
                    s.stat.fill((byte) 0);
                    s.stat.set(JAVA_LONG, ST_INO, ino);
                    s.stat.set(JAVA_INT, ST_MODE, type);
                    took = fuse.addDirentry(req, at, room, cname, s.stat, i + 1);
                } else if (fuse.addDirentryPlus(req, MemorySegment.NULL, 0, cname, MemorySegment.NULL, 0) > room) {
                    break;
                } else if (i < 2) { // no lookup for these (the kernel ignores an entry of node 0)
                    s.entry.fill((byte) 0);
                    s.stat.set(JAVA_LONG, ST_INO, ino);
                    s.stat.set(JAVA_INT, ST_MODE, type);
                    took = fuse.addDirentryPlus(req, at, room, cname, s.entry, i + 1);
                } else {
                    Node n;
                    try {
                        n = lookup(s, l.dir, name);
                    } catch (NamespaceException e) {
                        if (e.errno() != ENOENT) {
                            throw e;
                        }
                        continue; // removed since the listing was read
                    }
                    if (counted == s.counted.length) {
                        s.counted = Arrays.copyOf(s.counted, counted * 2);
                    }
                    s.counted[counted++] = n.id;
                    entry(s, n);
                    took = fuse.addDirentryPlus(req, at, room, cname, s.entry, i + 1);
                }
                if (took > room) {
                    break;
                }
                used += took;
            }
            if (fuse.replyBuf(req, buf, used) != 0) {
                forgetCounted(s, counted);
            }
        } catch (Throwable e) {
            forgetCounted(s, counted);
            fail(req, e, op);
        }
    }

    private void forgetCounted(Scratch s, int counted) {
        for (int i = 0; i < counted; i++) {
            forgetQuietly(s.counted[i], 1);
        }
    }

    private void load(Listing l) {
        List<DirEntry> all = new ArrayList<>();
        for (DirCookie c = DirCookie.START; ; ) {
            DirPage page = ns.readdir(l.dir, c, READDIR_PAGE);
            all.addAll(page.entries());
            if (page.end()) {
                break;
            }
            c = page.next();
        }
        l.parent = l.dir.ino() == ns.root() ? l.dir.ino() : ns.lstat(l.dir, "..").ino(); // the root's parent is itself, as on Linux
        l.entries = all;
    }

    // ------------------------------------------------------------------ errors and the mount's end

    private void fail(MemorySegment req, Throwable e, Op op) {
        try {
            fuse.replyErr(req, errno(e, op.label));
        } catch (Throwable again) {
            LOG.log(System.Logger.Level.ERROR, op.label + ": no reply: " + again, again);
        }
    }

    /** The errno for {@code e}: the namespace's own, ENOSPC, a device's, EINVAL; EIO for anything else (logged). */
    static int errno(Throwable e, String op) {
        return switch (e) {
            case NamespaceException n -> n.errno();
            case NoSpaceException n -> ENOSPC;
            case InvalidArgumentException i -> EINVAL;
            case DeviceException d -> {
                LOG.log(System.Logger.Level.ERROR, op + ": " + d.getMessage(), d);
                yield d.errno() > 0 ? d.errno() : EIO;
            }
            default -> {
                LOG.log(System.Logger.Level.ERROR, op + ": " + e, e);
                yield EIO;
            }
        };
    }

    private static String string(MemorySegment cString) {
        return cString.reinterpret(Long.MAX_VALUE).getString(0);
    }

    /** The requests served so far, per operation ({@link RequestCounts#snapshot()}). */
    Map<String, Long> requestCounts() {
        return calls.snapshot();
    }

    /** The inodes the kernel holds (the root included). */
    int nodeCount() {
        return nodes.size();
    }

    /** Closes the handles of every node and forgets the listings: the mount is gone, and with it the kernel's lookups. */
    void closeAll() {
        dirs.removeAll();
        for (Handle h : nodes.removeAll()) {
            try {
                h.close();
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "closing " + h + " at unmount: " + e.getMessage(), e);
            }
        }
    }
}
