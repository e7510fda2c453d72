package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongFunction;

import dev.ferrite.btree.BTree;
import dev.ferrite.btree.Buffer;
import dev.ferrite.btree.BufferCache;
import dev.ferrite.btree.Cursor;
import dev.ferrite.btree.Txn;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;

import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFLNK;
import static dev.ferrite.dir.InodeFormat.S_IFMT;
import static dev.ferrite.dir.InodeFormat.S_IFREG;

/**
 * The namespace of a mounted volume: directories, files and symlinks by path or by {@link Handle}.
 * Thread-safe.
 *
 * <h2>Paths and names</h2>
 * Paths are absolute ({@code /a/b}, at most 4095 bytes) and resolve as on Linux: {@code .} and {@code ..}
 * are followed; symlinks are followed in every component but the last one of the operations that act on
 * a name (and in the last one of {@link #open}, {@link #lookup}, {@link #stat} and a non-exclusive
 * {@link #create}, which creates the file a dangling symlink names); a trailing slash or a {@code .}
 * after a component asks for a directory, following a symlink there. Each operation gives the errno
 * Linux (ext4, tmpfs) gives, in Linux's order: a component's directory answers (ENOTDIR, ENOENT) before
 * the component's name is measured (ENAMETOOLONG), and a last component of {@code .}, {@code ..} or the
 * root gets each operation's own answer (EEXIST for mkdir, EISDIR for unlink, EINVAL, ENOTEMPTY or EBUSY
 * for rmdir, EBUSY for rename...). The handle forms take a name in a directory, as the {@code *at} calls
 * do, {@code .} and {@code ..} included. Where Ferrite deliberately differs:
 * <ul>
 *   <li>a {@code ..} above the root, in a path, a symlink target or a handle form's name, is EINVAL
 *       (Linux stays at the root);
 *   <li>a relative path is EINVAL: there is no working directory;
 *   <li>a handle form's name is one name, not a path: an empty one, or one containing {@code /} or NUL, is
 *       EINVAL (Linux's {@code *at} calls say ENOENT to an empty name and walk one with slashes);
 *   <li>a directory removed while a handle holds it answers ENOENT to every name, {@code .} and {@code ..}
 *       included (Linux still answers for those two).
 * </ul>
 *
 * <h2>Transactions and locks</h2>
 * Every transaction reserves its log space before it takes any lock (XFS's order): a writer waiting in
 * the journal's FIFO for log space holds nothing that a reader ({@link #open} takes the inode's lock) or
 * another writer needs, and a writer holding locks never waits for log space, so reservations and locks
 * cannot wait for each other. An operation sizes its reservation from a lock-free look; under the locks,
 * if it needs more, or its directory needs a step of its own first (an inline directory to convert, a
 * block reserve to refill or spill: {@link #prepare}, each step again reserve-then-lock), or a group's
 * free list needs fixing, it drops everything, unchanged, and starts again. An orphan is freed after
 * the unlinking operation let go of its locks, a step at a time. Locks are taken in one order, which
 * makes deadlock impossible:
 * <ol>
 *   <li>the rename lock, only by renames moving a directory to another parent (it keeps the "not into
 *       its own subtree" check true until they commit, as Linux's {@code s_vfs_rename_mutex} does);
 *   <li>per-inode locks ({@link Inode#lock}), in ascending inode number, held across the transaction;
 *   <li>the AGI of the one group whose inodes the operation allocates or frees (then its AGF if it adds
 *       an inode chunk): the new inode is chosen under the AGI before any inode block is locked;
 *   <li>inode blocks, in ascending block number (eight records share a block);
 *   <li>directory tree nodes: a directory's tree changes only under its inode's lock, so no transaction
 *       ever waits for another's tree nodes, and its allocator pops the reserve in the record already held.
 * </ol>
 * Lookups, stat and readdir take no lock: they read inode records and trees optimistically.
 *
 * <h2>Orphans</h2>
 * An inode whose last link goes while a handle holds it open, or which still owns blocks (a directory
 * tree), is recorded in its group's orphan tree in the unlinking transaction and freed in steps at the
 * last close, or by {@link Volume#open} after a crash.
 */
public final class Namespace {
    /** Links an inode may have (EMLINK beyond). */
    public static final int MAX_LINKS = 65_000;
    /** Symlinks one path resolution follows before ELOOP. */
    public static final int MAX_SYMLINKS = 40;
    /** Longest symlink target: PATH_MAX less its NUL (a volume with blocks under 4 KiB holds less). */
    public static final int MAX_SYMLINK_TARGET = 4095;
    private static final int RESERVE_LOW = 12, RESERVE_FILL = 20, RESERVE_HIGH = 28;
    private static final int RETRIES = 8;
    private static final String SYMLINK_BLOCK = "symlink target block";

    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeCache inodes;
    private final int recordSize;
    private final int inlineCapacity;
    private final int maxTarget;
    private final ReentrantLock renameLock = new ReentrantLock();
    /** {@link #inodeBuffer} for {@link #readStable}, made once: record reads are the hottest path. */
    private final LongFunction<Buffer> inodeBuffers = this::inodeBuffer;
    private final AtomicInteger rotor = new AtomicInteger();
    /**
     * The most log items any group's inode and orphan trees have needed in a remove: an unlink reserves
     * before it knows its child's group, and sizing for this instead of the directory's group spares it a
     * second attempt when the child's group turns out to need more (a fifth of unlinks in bench meta).
     */
    private final AtomicInteger groupItemsBound = new AtomicInteger();
    /** The root's inode number once read (it never changes after format). */
    private volatile long root;

    Namespace(Volume volume, BufferCache cache, Geometry geometry, InodeCache inodes) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.inodes = inodes;
        this.recordSize = geometry.inodeSize();
        this.inlineCapacity = InodeFormat.inlineCapacity(geometry.blockSize());
        this.maxTarget = Math.min(MAX_SYMLINK_TARGET, SymlinkFormat.capacity(geometry.blockSize()));
        if (inlineCapacity < DirEntryFormat.treeAreaSize()) {
            throw new IllegalStateException("inode records of " + recordSize + " bytes cannot hold a directory tree's reserve");
        }
    }

    /** The root directory's inode number. */
    public long root() {
        long r = root;
        if (r == 0) {
            root = r = volume.rootInode();
        }
        return r;
    }

    // ================================================================== path API

    /** Creates directory {@code path}; returns its inode number. */
    public long mkdir(String path, int permissions) {
        Parent p = resolveParent(path);
        refuseDots(p.name, NEW_NAME);
        return createEntry(p.dir, p.name, S_IFDIR | permissions & ~S_IFMT, true, null, null);
    }

    /**
     * Creates regular file {@code path}, or with {@code exclusive} false returns the file already there
     * (EISDIR if it is a directory); returns the inode number. As {@code open(2)} with {@code O_CREAT}:
     * without {@code exclusive} a final symlink is followed, and a dangling one creates the file it names.
     */
    public long create(String path, int permissions, boolean exclusive) {
        Parent p = resolveParent(path);
        return createFile(p.walk, p.dir, p.name, p.slashed, S_IFREG | permissions & ~S_IFMT, exclusive, null);
    }

    /** Creates symlink {@code linkPath} pointing at {@code target}; returns its inode number. */
    public long symlink(String target, String linkPath) {
        byte[] t = symlinkTarget(target); // checked first, as Linux does: a bad target wins over a bad path
        Parent p = resolveParent(linkPath);
        refuseNewName(p);
        return createEntry(p.dir, p.name, S_IFLNK | 0777, true, t, null);
    }

    /** Opens {@code path} (symlinks followed). */
    public Handle open(String path) {
        for (long missed = 0; ; ) {
            long ino = resolve(path, true);
            Handle h = openIno(ino);
            if (h != null) {
                return h;
            }
            missed = requireNotMissedTwice(missed, ino, quote(path));
        }
    }

    /** The inode {@code path} names, symlinks followed. */
    public long lookup(String path) {
        return resolve(path, true);
    }

    /** The attributes of what {@code path} names, symlinks followed. */
    public InodeStat stat(String path) {
        return statIno(resolve(path, true));
    }

    /** The attributes of {@code path} itself (a final symlink not followed). */
    public InodeStat lstat(String path) {
        return statIno(resolve(path, false));
    }

    /** Up to {@code max} entries of directory {@code path} after {@code after}. */
    public DirPage readdir(String path, DirCookie after, int max) {
        return readdirIno(resolve(path, true), after, max);
    }

    /** Every entry of directory {@code path} (pages of 1024). */
    public List<DirEntry> list(String path) {
        long dir = resolve(path, true);
        List<DirEntry> all = new ArrayList<>();
        DirCookie c = DirCookie.START;
        for (;;) {
            DirPage p = readdirIno(dir, c, 1024);
            all.addAll(p.entries());
            if (p.end()) {
                return all;
            }
            c = p.next();
        }
    }

    /** Removes the name {@code path} of a non-directory. */
    public void unlink(String path) {
        Parent p = resolveParent(path);
        refuseDots(p.name, UNLINK);
        if (p.slashed) {
            // "name/" asks for a directory: unlink(2) says EISDIR if the entry is one, ENOTDIR if not (not followed)
            Found f = find(p.dir, DirEntryFormat.key(checkName(p.name, false)));
            if (f == null) {
                throw new NamespaceException(Errno.ENOENT, quote(p.name) + " in directory " + p.dir);
            }
            throw new NamespaceException(f.type == S_IFDIR ? Errno.EISDIR : Errno.ENOTDIR, "cannot unlink " + quote(path));
        }
        removeEntry(p.dir, p.name, false);
    }

    /** Removes empty directory {@code path}. */
    public void rmdir(String path) {
        Parent p = resolveParent(path);
        refuseDots(p.name, RMDIR);
        removeEntry(p.dir, p.name, true);
    }

    /** Renames {@code from} to {@code to} atomically, replacing a compatible {@code to}. */
    public void rename(String from, String to) {
        Parent f = resolveParent(from);
        Parent t = resolveParent(to);
        renameNames(f.dir, f.name, f.slashed, t.dir, t.name, t.slashed);
    }

    /** Adds the name {@code newPath} for the non-directory {@code existing} (a final symlink not followed). */
    public void link(String existing, String newPath) {
        long target = resolve(existing, false);
        Parent p = resolveParent(newPath);
        refuseNewName(p);
        linkEntry(target, p.dir, p.name);
    }

    /** The target of symlink {@code path}. */
    public String readlink(String path) {
        return readlinkIno(resolve(path, false));
    }

    /**
     * Sets permissions, owner and times of what {@code path} names (symlinks followed); -1 leaves a field.
     */
    public void setattr(String path, int permissions, int uid, int gid, long atimeNanos, long mtimeNanos) {
        setattrIno(resolve(path, true), permissions, uid, gid, atimeNanos, mtimeNanos);
    }

    // ================================================================== handle API

    /** A handle on the root directory. */
    public Handle openRoot() {
        return openIno(root());
    }

    /**
     * Opens the entry {@code name} of {@code dir} (a symlink is opened itself, not followed); {@code "."}
     * is {@code dir} and {@code ".."} its parent.
     */
    public Handle lookup(Handle dir, String name) {
        long d = dir.checkOpen().ino;
        for (long missed = 0; ; ) {
            long ino = entry(d, name);
            Handle h = openIno(ino);
            if (h != null) {
                return h;
            }
            missed = requireNotMissedTwice(missed, ino, quote(name) + " in directory " + d);
        }
    }

    /**
     * After {@link #openIno} missed {@code ino}, which {@code name} named: returns it, to pass in after the
     * next lookup. A name that names the same unopenable inode twice running is not a race with an unlink
     * (which takes the name away) but a name for an inode without links: corruption.
     */
    private long requireNotMissedTwice(long missed, long ino, String name) {
        if (ino == missed) {
            throw new CorruptionException(block(ino), InodeFormat.STRUCTURE, name + " names inode " + ino
                    + ", which has no links or is free");
        }
        return ino;
    }

    /**
     * The attributes of entry {@code name} of {@code dir} itself, a symlink not followed: what
     * {@code fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)} gives, without resolving a path ({@code "."} is
     * {@code dir}, {@code ".."} its parent). A listing that stats each entry it reads does one lookup per
     * entry this way.
     */
    public InodeStat lstat(Handle dir, String name) {
        return statIno(entry(dir.checkOpen().ino, name));
    }

    public Handle mkdir(Handle dir, String name, int permissions) {
        long d = dir.checkOpen().ino;
        checkEntryName(d, name, NEW_NAME);
        Inode[] opened = new Inode[1];
        long ino = createEntry(d, name, S_IFDIR | permissions & ~S_IFMT, true, null, opened);
        return opened[0] != null ? new Handle(this, opened[0]) : openCreated(ino);
    }

    /** {@link #create(String, int, boolean)} in {@code dir}: a final symlink is followed unless {@code exclusive}. */
    public Handle create(Handle dir, String name, int permissions, boolean exclusive) {
        long d = dir.checkOpen().ino;
        checkEntryName(d, name, exclusive ? NEW_NAME : CREATE);
        Inode[] opened = new Inode[1];
        long ino = createFile(null, d, name, false, S_IFREG | permissions & ~S_IFMT, exclusive, opened);
        return opened[0] != null ? new Handle(this, opened[0]) : openCreated(ino);
    }

    public void symlink(Handle dir, String name, String target) {
        byte[] t = symlinkTarget(target);
        long d = dir.checkOpen().ino;
        checkEntryName(d, name, NEW_NAME);
        createEntry(d, name, S_IFLNK | 0777, true, t, null);
    }

    public void unlink(Handle dir, String name) {
        long d = dir.checkOpen().ino;
        checkEntryName(d, name, UNLINK);
        removeEntry(d, name, false);
    }

    public void rmdir(Handle dir, String name) {
        long d = dir.checkOpen().ino;
        checkEntryName(d, name, RMDIR);
        removeEntry(d, name, true);
    }

    public void rename(Handle fromDir, String from, Handle toDir, String to) {
        renameNames(fromDir.checkOpen().ino, nonNull(from), false, toDir.checkOpen().ino, nonNull(to), false);
    }

    public void link(Handle target, Handle dir, String name) {
        long t = target.checkOpen().ino, d = dir.checkOpen().ino;
        checkEntryName(d, name, NEW_NAME);
        linkEntry(t, d, name);
    }

    public String readlink(Handle link) {
        return readlinkIno(link.checkOpen().ino);
    }

    public InodeStat stat(Handle h) {
        return statIno(h.checkOpen().ino);
    }

    public DirPage readdir(Handle dir, DirCookie after, int max) {
        return readdirIno(dir.checkOpen().ino, after, max);
    }

    public void setattr(Handle h, int permissions, int uid, int gid, long atimeNanos, long mtimeNanos) {
        setattrIno(h.checkOpen().ino, permissions, uid, gid, atimeNanos, mtimeNanos);
    }

    /** Makes every change to {@code h}'s inode so far durable (the whole log if that is not known). */
    public void fsync(Handle h) {
        long seq = h.checkOpen().lastSeq;
        if (seq < 0) {
            cache.journal().forceAll();
        } else {
            cache.journal().force(seq);
        }
    }

    /** Makes every change so far durable. */
    public void sync() {
        volume.sync();
    }

    // ================================================================== resolution

    /**
     * The directory a path's last component is in, and that component: a name, {@code "."}, {@code ".."},
     * or null for the root itself; {@code slashed} if a slash followed it; the walk that found it (a
     * create that follows a final symlink counts on from its symlinks).
     */
    private record Parent(long dir, String name, boolean slashed, Walk walk) {
    }

    private record Found(long ino, int type) {
    }

    /**
     * What an operation answers when its last component is {@code "."}, {@code ".."} or the root itself
     * (Linux's LAST_DOT, LAST_DOTDOT and LAST_ROOT): nothing is looked up or changed then.
     */
    private record Dots(int dot, int dotdot, int root) {
    }

    /** mkdir, symlink, link's new name and exclusive create: the name exists. */
    private static final Dots NEW_NAME = new Dots(Errno.EEXIST, Errno.EEXIST, Errno.EEXIST);
    /** Create of a file that may exist: what is there is a directory. */
    private static final Dots CREATE = new Dots(Errno.EISDIR, Errno.EISDIR, Errno.EISDIR);
    private static final Dots UNLINK = new Dots(Errno.EISDIR, Errno.EISDIR, Errno.EISDIR);
    private static final Dots RMDIR = new Dots(Errno.EINVAL, Errno.ENOTEMPTY, Errno.EBUSY);
    private static final Dots RENAME = new Dots(Errno.EBUSY, Errno.EBUSY, Errno.EBUSY);

    /** Longest path, in bytes (PATH_MAX less its NUL). */
    private static final int MAX_PATH = 4095;

    private static String quote(String name) {
        return "'" + name + "'";
    }

    /** A handle form's name: null is EINVAL there (in a path's Parent it stands for the root). */
    private static String nonNull(String name) {
        if (name == null) {
            throw new NamespaceException(Errno.EINVAL, "null name");
        }
        return name;
    }

    private static boolean isDots(String name) {
        return name == null || name.equals(".") || name.equals("..");
    }

    /** The errno {@code dots} gives if {@code name} is {@code "."}, {@code ".."} or null (the root). */
    private static void refuseDots(String name, Dots dots) {
        if (isDots(name)) {
            int errno = name == null ? dots.root : name.equals(".") ? dots.dot : dots.dotdot;
            throw new NamespaceException(errno, (name == null ? "the root" : quote(name)) + " is not a name this operation takes");
        }
    }

    /** True if {@code name} is longer than a name may be (counted without allocating unless it may be). */
    private static boolean tooLong(String name) {
        return name.length() > DirEntryFormat.MAX_NAME / 3 && name.getBytes(StandardCharsets.UTF_8).length > DirEntryFormat.MAX_NAME;
    }

    /**
     * Refuses a handle form's {@code name} in directory {@code dir} in Linux's order: ENOTDIR or ENOENT
     * for {@code dir}, then the operation's answer to {@code "."} or {@code ".."}, then ENAMETOOLONG (a name
     * is measured only when the walk reaches it). Ordinary names cost a few comparisons here.
     */
    private void checkEntryName(long dir, String name, Dots dots) {
        if (nonNull(name).equals(".") || name.equals("..") || tooLong(name)) {
            requireDir(dir);
            refuseDots(name, dots);
            checkName(name, false);
        }
    }

    /** The inode {@code name} names in {@code dir} (a symlink itself): {@code "."} is dir, {@code ".."} its parent. */
    private long entry(long dir, String name) {
        requireDir(dir);
        if (".".equals(name)) {
            return dir;
        }
        if ("..".equals(name)) {
            return dotdot(dir);
        }
        Found f = find(dir, DirEntryFormat.key(checkName(name, false)));
        if (f == null) {
            throw new NamespaceException(Errno.ENOENT, quote(name) + " in directory " + dir);
        }
        return f.ino;
    }

    /** The parent of directory {@code dir}; EINVAL at the root (Linux stays there). */
    private long dotdot(long dir) {
        if (dir == root()) {
            throw new NamespaceException(Errno.EINVAL, "'..' leads above the root");
        }
        return parentOf(dir);
    }

    /** A new link's name (mkdir excepted): EEXIST for dots, and a trailing slash EEXIST if the name is taken, else ENOENT. */
    private void refuseNewName(Parent p) {
        refuseDots(p.name, NEW_NAME);
        if (p.slashed) {
            boolean taken = find(p.dir, DirEntryFormat.key(checkName(p.name, false))) != null;
            throw new NamespaceException(taken ? Errno.EEXIST : Errno.ENOENT, "a new link cannot be named " + quote(p.name)
                    + "/ (trailing slash)");
        }
    }

    /**
     * The name's bytes; EINVAL for an empty name, one containing '/' or NUL, or (with {@code forChange})
     * "." or ".." (which the operations answer first, each as Linux does: this keeps them out of every
     * directory); ENAMETOOLONG past 255 bytes.
     */
    static byte[] checkName(String name, boolean forChange) {
        if (name == null || name.isEmpty()) {
            throw new NamespaceException(Errno.EINVAL, "empty name");
        }
        if (name.indexOf('/') >= 0 || name.indexOf('\0') >= 0) {
            throw new NamespaceException(Errno.EINVAL, "name " + quote(name.replace("\0", "\\0")) + " contains '/' or NUL");
        }
        if (forChange && (name.equals(".") || name.equals(".."))) {
            throw new NamespaceException(Errno.EINVAL, "name " + quote(name) + " cannot be created, removed or renamed");
        }
        byte[] b = name.getBytes(StandardCharsets.UTF_8);
        if (b.length > DirEntryFormat.MAX_NAME) {
            throw new NamespaceException(Errno.ENAMETOOLONG, "name of " + b.length + " bytes; names are at most "
                    + DirEntryFormat.MAX_NAME);
        }
        return b;
    }

    private byte[] symlinkTarget(String target) {
        if (target == null || target.isEmpty()) {
            throw new NamespaceException(Errno.ENOENT, "empty symlink target");
        }
        if (target.indexOf('\0') >= 0) {
            throw new NamespaceException(Errno.EINVAL, "symlink target contains NUL");
        }
        byte[] b = target.getBytes(StandardCharsets.UTF_8);
        if (b.length > maxTarget) {
            throw new NamespaceException(Errno.ENAMETOOLONG, "symlink target of " + b.length + " bytes; at most "
                    + maxTarget);
        }
        return b;
    }

    /**
     * The components of a path or symlink target: names, {@code "."} and {@code ".."} in order, then an
     * empty string if it ends in a slash after one of them. A trailing slash and a {@code "."} both ask
     * for a directory (the component before them is followed if it is a symlink); only the operations
     * that act on a name tell them apart.
     */
    private static Deque<String> components(String path) {
        Deque<String> out = new ArrayDeque<>();
        for (String c : path.split("/")) {
            if (!c.isEmpty()) {
                out.add(c);
            }
        }
        if (!out.isEmpty() && path.endsWith("/")) {
            out.add("");
        }
        return out;
    }

    private static void checkAbsolute(String path) {
        if (path == null || !path.startsWith("/")) {
            throw new NamespaceException(Errno.EINVAL, "path " + (path == null ? "null" : quote(path)) + " is not absolute");
        }
        if (path.indexOf('\0') >= 0) {
            throw new NamespaceException(Errno.EINVAL, "path contains NUL");
        }
        if (path.length() > MAX_PATH / 3 && path.getBytes(StandardCharsets.UTF_8).length > MAX_PATH) {
            throw new NamespaceException(Errno.ENAMETOOLONG, "path of " + path.getBytes(StandardCharsets.UTF_8).length
                    + " bytes; paths are at most " + MAX_PATH);
        }
    }

    /** The inode {@code path} names. */
    private long resolve(String path, boolean followLast) {
        checkAbsolute(path);
        return new Walk().to(root(), components(path), followLast);
    }

    private Parent resolveParent(String path) {
        checkAbsolute(path);
        return new Walk().parent(root(), components(path));
    }

    /**
     * One path resolution, as Linux's walk: each component is looked up in a directory (ENOTDIR or ENOENT
     * for it first, then ENAMETOOLONG or ENOENT for the name); symlinks are followed in every component
     * but the last, and in the last when asked or when a slash or {@code "."} follows it. The symlinks
     * followed count together, across the parent walk and a last component followed after it.
     */
    private final class Walk {
        private int links;

        /** Walks {@code todo} from directory {@code start}; returns the inode it names. */
        long to(long start, Deque<String> todo, boolean followLast) {
            long cur = start;
            while (!todo.isEmpty()) {
                String c = todo.pollFirst();
                requireDir(cur);
                if (c.isEmpty() || c.equals(".")) {
                    continue;
                }
                if (c.equals("..")) {
                    cur = dotdot(cur);
                    continue;
                }
                Found f = find(cur, DirEntryFormat.key(checkName(c, false)));
                if (f == null) {
                    throw new NamespaceException(Errno.ENOENT, quote(c) + " in directory " + cur);
                }
                if (f.type == S_IFLNK && (followLast || !todo.isEmpty())) {
                    cur = follow(cur, f.ino, todo);
                    continue;
                }
                cur = f.ino;
            }
            return cur;
        }

        /** Walks all of {@code todo} from {@code start} but its last component, which must be in a directory. */
        Parent parent(long start, Deque<String> todo) {
            boolean slashed = !todo.isEmpty() && todo.peekLast().isEmpty();
            if (slashed) {
                todo.pollLast();
            }
            String last = todo.pollLast();
            long dir = to(start, todo, true);
            requireDir(dir);
            return new Parent(dir, last, slashed, this);
        }

        /** Puts the target of symlink {@code link}, met in directory {@code dir}, before {@code todo}; returns where it starts. */
        long follow(long dir, long link, Deque<String> todo) {
            if (++links > MAX_SYMLINKS) {
                throw new NamespaceException(Errno.ELOOP, "more than " + MAX_SYMLINKS + " symlinks followed");
            }
            String target = readlinkIno(link);
            Deque<String> tc = components(target);
            while (!tc.isEmpty()) {
                todo.addFirst(tc.pollLast());
            }
            return target.startsWith("/") ? root() : dir;
        }
    }

    /**
     * {@code open(2)} with {@code O_CREAT} of {@code name} in {@code dir}: for {@code "."}, {@code ".."} or
     * the root EEXIST if {@code exclusive}, else EISDIR; EISDIR for a trailing slash; else the file made or
     * (not {@code exclusive}) found, following a symlink found there to the name it points at. {@code walk}
     * is the one that found {@code dir} (symlinks count over the whole call, as on Linux), or null.
     */
    private long createFile(Walk walk, long dir, String name, boolean slashed, int mode, boolean exclusive, Inode[] opened) {
        for (;;) {
            refuseDots(name, exclusive ? NEW_NAME : CREATE);
            if (slashed) {
                throw new NamespaceException(Errno.EISDIR, "cannot create a file as " + quote(name) + "/ (trailing slash)");
            }
            long ino = createEntry(dir, name, mode, exclusive, null, opened);
            if (ino > 0) {
                return ino;
            }
            // a symlink was there: create or open what it names
            Found f = find(dir, DirEntryFormat.key(checkName(name, false)));
            if (f == null || f.type != S_IFLNK) {
                continue; // it changed meanwhile: look again
            }
            if (walk == null) {
                walk = new Walk();
            }
            Deque<String> todo = new ArrayDeque<>();
            Parent p = walk.parent(walk.follow(dir, f.ino, todo), todo);
            dir = p.dir;
            name = p.name;
            slashed = p.slashed;
        }
    }

    /**
     * A rename's answers in Linux's order before anything is locked: ENOTDIR or ENOENT for either
     * directory, EBUSY for {@code "."}, {@code ".."} or the root, ENAMETOOLONG for the source, ENOENT for it,
     * ENAMETOOLONG for the target, ENOTDIR for a trailing slash on a source that is not a directory. The
     * usual rename, with none of these, goes straight to {@link #renameEntry}.
     */
    private void renameNames(long fromDir, String from, boolean fromSlash, long toDir, String to, boolean toSlash) {
        if (fromSlash || toSlash || isDots(from) || isDots(to) || tooLong(from) || tooLong(to)) {
            requireDir(fromDir);
            requireDir(toDir);
            refuseDots(from, RENAME);
            refuseDots(to, RENAME);
            Found src = find(fromDir, DirEntryFormat.key(checkName(from, false)));
            if (src == null) {
                throw new NamespaceException(Errno.ENOENT, quote(from) + " in directory " + fromDir);
            }
            checkName(to, false);
            if (src.type != S_IFDIR && (fromSlash || toSlash)) {
                throw new NamespaceException(Errno.ENOTDIR, "a trailing slash names a directory, and " + quote(from)
                        + " is not one");
            }
        }
        renameEntry(fromDir, from, toDir, to);
    }

    // ================================================================== records

    private long block(long ino) {
        return geometry.inodeBlock(ino);
    }

    private int rec(long ino) {
        return InodeFormat.recordOffset(geometry.blockSize(), Geometry.inodeSlot(ino));
    }

    private Buffer inodeBuffer(long ino) {
        try {
            return volume.inodeBuffer(ino);
        } catch (InvalidArgumentException e) {
            throw new NamespaceException(Errno.ENOENT, e.getMessage());
        }
    }

    private Buffer lockRecord(Txn txn, long ino) {
        for (;;) {
            Buffer b = inodeBuffer(ino);
            if (txn.lock(b)) {
                return b;
            }
        }
    }

    /** Locks the blocks of {@code inos} (0s ignored) in ascending block order. */
    private void lockRecords(Txn txn, long... inos) {
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

    private interface RecordReader<T> {
        T read(MemorySegment b, int rec);
    }

    /** Reads inode {@code ino}'s record without locking, validated against concurrent changes. */
    private <T> T readRecord(long ino, RecordReader<T> reader) {
        if (!geometry.isValidInode(ino)) {
            throw new NamespaceException(Errno.ENOENT, "inode number " + ino + " lies outside the volume");
        }
        return readStable(inodeBuffers, ino, rec(ino), reader);
    }

    /**
     * Reads at {@code offset} of the block {@code fetch} gives for {@code key}, without locking, validated
     * against concurrent changes (fetched again each try: an evicted buffer is replaced).
     */
    private static <T> T readStable(LongFunction<Buffer> fetch, long key, int offset, RecordReader<T> reader) {
        for (int spins = 0; ; spins++) {
            Buffer b = fetch.apply(key);
            long v = b.readVersion();
            if (v < 0) {
                if ((spins & 63) == 63) {
                    Thread.yield(); // the holder commits soon; on few cores, let it run
                } else {
                    Thread.onSpinWait();
                }
                continue;
            }
            T t;
            try {
                t = reader.read(b.data(), offset);
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

    private InodeStat statIno(long ino) {
        InodeStat s = readRecord(ino, (b, rec) -> InodeFormat.stat(ino, b, rec));
        if (s.mode() == 0) {
            throw new NamespaceException(Errno.ENOENT, "inode " + ino + " is not allocated");
        }
        return s;
    }

    private int generation(long ino) {
        return statIno(ino).generation();
    }

    private long parentOf(long dir) {
        return readRecord(dir, InodeFormat::parent);
    }

    /** ENOTDIR unless {@code ino} is a directory; ENOENT if it was removed. */
    private void requireDir(long ino) {
        long modeAndLinks = readRecord(ino, (b, rec) -> (long) InodeFormat.mode(b, rec) << 32 | InodeFormat.nlink(b, rec));
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
    private int modeOf(long ino) {
        return readRecord(ino, InodeFormat::mode);
    }

    String readlinkIno(long ino) {
        Object found = readRecord(ino, (b, rec) -> {
            if (InodeFormat.type(b, rec) != S_IFLNK) {
                return null;
            }
            if (InodeFormat.fork(b, rec) == InodeFormat.FORK_REMOTE) {
                return new long[] {InodeFormat.remoteBlock(b, rec), InodeFormat.size(b, rec)};
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
        byte[] target = found instanceof long[] at ? remoteTarget(ino, at[0], at[1]) : (byte[]) found;
        return new String(target, StandardCharsets.UTF_8);
    }

    /**
     * A long symlink's target from its block. The link may be removed and its block reused while this
     * reads it: a block that is not the link's any more is ENOENT if the link is gone, corruption if not.
     */
    private byte[] remoteTarget(long ino, long block, long size) {
        requireDataBlock(ino, block, "symlink target block");
        if (size < 0 || size > SymlinkFormat.capacity(cache.blockSize())) {
            throw new CorruptionException(block(ino), InodeFormat.STRUCTURE, "symlink " + ino + " has a target of "
                    + Long.toUnsignedString(size) + " bytes; its block holds at most " + SymlinkFormat.capacity(cache.blockSize()));
        }
        byte[] t;
        try {
            t = readStable(b -> cache.get(b, SymlinkFormat.MAGIC, ino, SYMLINK_BLOCK), block, 0, (m, at) -> {
                int length = SymlinkFormat.length(m);
                return length == size && length <= SymlinkFormat.capacity(cache.blockSize()) ? SymlinkFormat.target(m, length) : null;
            });
        } catch (CorruptionException e) {
            requireStillLinked(ino, block, size);
            throw e;
        }
        if (t == null) {
            // the link removed and its inode and block reused by another long link of another length
            requireStillLinked(ino, block, size);
            throw new CorruptionException(block, SYMLINK_BLOCK, "its target's length is not inode " + ino + "'s size, " + size);
        }
        return t;
    }

    /** ENOENT unless inode {@code ino} is still a long symlink of {@code size} bytes in {@code block}. */
    private void requireStillLinked(long ino, long block, long size) {
        boolean same = readRecord(ino, (b, rec) -> InodeFormat.type(b, rec) == S_IFLNK
                && InodeFormat.fork(b, rec) == InodeFormat.FORK_REMOTE && InodeFormat.remoteBlock(b, rec) == block
                && InodeFormat.size(b, rec) == size);
        if (!same) {
            throw new NamespaceException(Errno.ENOENT, "symlink inode " + ino + " was removed");
        }
    }

    private void setattrIno(long ino, int permissions, int uid, int gid, long atime, long mtime) {
        statIno(ino);
        Inode i = inodes.acquire(ino);
        try {
            // the volume reserves log space before it takes the inode's lock
            i.lastSeq = volume.setattr(ino, permissions, uid, gid, atime, mtime);
        } catch (InvalidArgumentException e) {
            throw new NamespaceException(Errno.ENOENT, e.getMessage()); // freed since statIno
        } finally {
            inodes.release(i);
        }
    }

    private static long nowNanos() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    // ================================================================== directory contents

    /** Offset of the entry {@code key} in an inline directory, or -(insertion offset) - 1. */
    private static int inlineFind(MemorySegment b, int rec, byte[] key) {
        int at = rec + InodeFormat.INLINE;
        int end = at + InodeFormat.inlineUsed(b, rec);
        while (at < end) {
            int size = DirEntryFormat.entrySize(b, at, end); // checked before the key is read
            int c = Arrays.compareUnsigned(DirEntryFormat.entryKey(b, at), key);
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

    private static boolean isTree(MemorySegment b, int rec) {
        return InodeFormat.fork(b, rec) == InodeFormat.FORK_TREE;
    }

    /** The directory's tree (header {@code header}), opened once per cached inode. */
    private BTree tree(Inode dir, long header) {
        BTree t = dir.dirTree;
        if (t == null || t.headerBlock() != header) {
            requireDataBlock(dir.ino, header, "directory tree header");
            t = BTree.open(cache, new DirAllocator(cache, block(dir.ino), geometry.agOfInode(dir.ino), rec(dir.ino)),
                    header, dir.ino);
            dir.dirTree = t;
        }
        return t;
    }

    private Found find(long dir, byte[] key) {
        Inode d = inodes.acquire(dir);
        try {
            return find(d, key);
        } finally {
            inodes.release(d);
        }
    }

    /** The entry {@code key} of directory {@code dir}, or null. Lock-free. */
    private Found find(Inode dir, byte[] key) {
        return find(dir, key, false);
    }

    /**
     * As {@link #find(Inode, byte[])}, with {@code locked} if the caller holds {@code dir}'s lock: its
     * tree then cannot be dissolved during the lookup, which saves reading the record again.
     */
    private Found find(Inode dir, byte[] key, boolean locked) {
        MemorySegment k = MemorySegment.ofArray(key);
        MemorySegment v = MemorySegment.ofArray(new byte[DirEntryFormat.VALUE]);
        for (;;) {
            long[] state = readRecord(dir.ino, (b, rec) -> {
                if (isTree(b, rec)) {
                    return new long[] {1, DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE), InodeFormat.generation(b, rec)};
                }
                int at = inlineFind(b, rec, key);
                return at < 0 ? new long[] {0, 0, 0}
                        : new long[] {2, DirEntryFormat.entryInode(b, at), DirEntryFormat.entryType(b, at)};
            });
            if (state[0] == 0) {
                return null;
            }
            if (state[0] == 2) {
                return new Found(requireEntryInode(dir.ino, state[1]), (int) state[2]);
            }
            if (state[1] == 0) {
                return null; // a removed directory whose tree is being freed
            }
            int n = tree(dir, state[1]).get(k, v);
            if (locked) {
                return n < 0 ? null : new Found(requireEntryInode(dir.ino, DirEntryFormat.valueInode(v)), DirEntryFormat.valueType(v));
            }
            long header = state[1];
            long[] again = readRecord(dir.ino, (b, rec) -> new long[] {isTree(b, rec) ? DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE) : -1});
            if (again[0] != header) {
                continue; // dissolved meanwhile
            }
            return n < 0 ? null : new Found(requireEntryInode(dir.ino, DirEntryFormat.valueInode(v)), DirEntryFormat.valueType(v));
        }
    }

    /** {@code ino}, named by an entry of directory {@code dir}, if it is an inode number of this volume; else corruption. */
    private long requireEntryInode(long dir, long ino) {
        if (!geometry.isValidInode(ino)) {
            throw new CorruptionException(block(dir), "directory", "directory " + dir + " has an entry naming inode "
                    + Long.toUnsignedString(ino) + ", which lies outside the volume");
        }
        return ino;
    }

    DirPage readdirIno(long dir, DirCookie after, int max) {
        if (max < 1) {
            throw new NamespaceException(Errno.EINVAL, "readdir of " + max + " entries");
        }
        requireDir(dir);
        byte[] from = after.key();
        Inode d = inodes.acquire(dir);
        try {
            for (;;) {
                List<DirEntry> out = new ArrayList<>();
                byte[][] last = new byte[1][];
                long header = readRecord(dir, (b, rec) -> {
                    out.clear();
                    last[0] = null;
                    if (isTree(b, rec)) {
                        long h = DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE);
                        return h == 0 ? -1L : h; // -1: a removed directory whose tree is being freed
                    }
                    int end = rec + InodeFormat.INLINE + InodeFormat.inlineUsed(b, rec);
                    int at = from == null ? rec + InodeFormat.INLINE : inlineFind(b, rec, from);
                    if (at < 0) {
                        at = -at - 1;
                    } else if (from != null) {
                        at += DirEntryFormat.entrySize(b, at, end);
                    }
                    for (int size; at < end && out.size() <= max; at += size) {
                        size = DirEntryFormat.entrySize(b, at, end); // checked before the key is read
                        byte[] key = DirEntryFormat.entryKey(b, at);
                        if (out.size() < max) {
                            last[0] = key;
                        }
                        out.add(entry(key, requireEntryInode(dir, DirEntryFormat.entryInode(b, at)), DirEntryFormat.entryType(b, at)));
                    }
                    return 0L;
                });
                if (header > 0) {
                    Cursor c = tree(d, header).cursor(from, false);
                    while (out.size() <= max && c.next()) {
                        byte[] key = c.key();
                        if (from != null && Arrays.equals(key, from)) {
                            continue;
                        }
                        MemorySegment v = MemorySegment.ofArray(c.value());
                        if (out.size() < max) {
                            last[0] = key;
                        }
                        out.add(entry(key, requireEntryInode(dir, DirEntryFormat.valueInode(v)), DirEntryFormat.valueType(v)));
                    }
                    long again = readRecord(dir, (b, rec) -> isTree(b, rec) ? DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE) : -1);
                    if (again != header) {
                        continue;
                    }
                }
                boolean end = out.size() <= max;
                if (!end) {
                    out.removeLast();
                }
                DirCookie next = last[0] == null ? after : DirCookie.after(last[0]);
                return new DirPage(List.copyOf(out), next, end);
            }
        } finally {
            inodes.release(d);
        }
    }

    private static DirEntry entry(byte[] key, long ino, int type) {
        return new DirEntry(new String(DirEntryFormat.nameOf(key), StandardCharsets.UTF_8), ino, type);
    }

    private List<DirEntry> allEntries(long dir) {
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
    private boolean insertEntry(Txn txn, Inode dir, byte[] key, long ino, int type) {
        Buffer b = lockRecord(txn, dir.ino);
        MemorySegment m = b.data();
        int rec = rec(dir.ino);
        if (isTree(m, rec)) {
            BTree t = tree(dir, DirEntryFormat.treeHeader(m, rec + InodeFormat.INLINE));
            if (!t.putIfAbsent(txn, MemorySegment.ofArray(key), MemorySegment.ofArray(DirEntryFormat.value(ino, type)))) {
                return false;
            }
        } else {
            int at = inlineFind(m, rec, key);
            int used = InodeFormat.inlineUsed(m, rec);
            int size = DirEntryFormat.inlineSize(key.length);
            if (at >= 0 || used + size > inlineCapacity) {
                throw new IllegalStateException("inline directory " + dir.ino + " cannot take the entry being added");
            }
            int pos = -at - 1;
            int end = rec + InodeFormat.INLINE + used;
            MemorySegment.copy(m, pos, m, pos + size, end - pos);
            DirEntryFormat.writeEntry(m, pos, key, ino, type);
            InodeFormat.setInlineUsed(m, rec, used + size);
            InodeFormat.setFork(m, rec, InodeFormat.FORK_INLINE);
        }
        InodeFormat.setSize(m, rec, InodeFormat.size(m, rec) + 1);
        logUsed(txn, b, rec);
        return true;
    }

    /** In {@code txn}: adds {@code key}, known to be absent (under {@code dir}'s lock). */
    private void insertAbsent(Txn txn, Inode dir, byte[] key, long ino, int type) {
        if (!insertEntry(txn, dir, key, ino, type)) {
            throw new IllegalStateException("directory " + dir.ino + " already holds the entry being added");
        }
    }

    /** In {@code txn}: removes the present entry {@code key} of {@code dir}. */
    private void deleteEntry(Txn txn, Inode dir, byte[] key) {
        Buffer b = lockRecord(txn, dir.ino);
        MemorySegment m = b.data();
        int rec = rec(dir.ino);
        if (isTree(m, rec)) {
            if (!tree(dir, DirEntryFormat.treeHeader(m, rec + InodeFormat.INLINE)).delete(txn, MemorySegment.ofArray(key))) {
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
            txn.log(b, rec + InodeFormat.INLINE, used); // the entries moved, and the freed tail zeroed
        }
        InodeFormat.setSize(m, rec, InodeFormat.size(m, rec) - 1);
        txn.log(b, rec, InodeFormat.INLINE);
    }

    /** In {@code txn}: points the present entry {@code key} of {@code dir} at another inode. */
    private void replaceEntry(Txn txn, Inode dir, byte[] key, long ino, int type) {
        Buffer b = lockRecord(txn, dir.ino);
        MemorySegment m = b.data();
        int rec = rec(dir.ino);
        if (isTree(m, rec)) {
            BTree t = tree(dir, DirEntryFormat.treeHeader(m, rec + InodeFormat.INLINE));
            if (t.put(txn, MemorySegment.ofArray(key), MemorySegment.ofArray(DirEntryFormat.value(ino, type)))) {
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
    private int dirItems(Inode dir) {
        long header = readRecord(dir.ino, (b, rec) -> isTree(b, rec) ? DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE) : 0L);
        return header == 0 ? 1 : 1 + tree(dir, header).reservation();
    }

    // ================================================================== directory blocks

    /** What {@link #step} says a directory needs before a change of its entries. */
    private static final int READY = 0, CONVERT = 1, SPILL = 2, REFILL = 3;

    /**
     * The step {@code dir} needs before an entry of {@code keyLength} more bytes (0: none) goes in or one
     * comes out: an inline directory without room becomes a tree; a tree's block reserve is brought
     * between its marks, spilling first (busy entries first) so that a refill always fits
     * ({@code RESERVE_CAPACITY - RESERVE_HIGH >= RESERVE_LOW}). Lock-free; under the directory's lock
     * the answer stays true.
     */
    private int step(Inode dir, int keyLength) {
        int area = rec(dir.ino) + InodeFormat.INLINE;
        return readRecord(dir.ino, (b, rec) -> {
            if (!isTree(b, rec)) {
                return keyLength > 0 && InodeFormat.inlineUsed(b, rec) + DirEntryFormat.inlineSize(keyLength) > inlineCapacity
                        ? CONVERT : READY;
            }
            requireReserve(dir.ino, b, area);
            if (DirEntryFormat.reserveCount(b, area) > RESERVE_HIGH) {
                return SPILL;
            }
            return DirAllocator.usable(cache, b, area, RESERVE_LOW) < RESERVE_LOW ? REFILL : READY;
        });
    }

    /**
     * Brings {@code dir} to {@link #READY}, each step in a transaction of its own reserved before the
     * directory's lock is taken (the entries stay the same). The operation that follows finds it ready
     * under the lock, or comes back here if a concurrent change came between.
     */
    private void prepare(Inode dir, int keyLength) {
        for (int s; (s = step(dir, keyLength)) != READY; ) {
            if (s == SPILL) {
                spillBlock(dir, RESERVE_HIGH);
            } else {
                addBlocks(dir, keyLength, s == CONVERT);
            }
        }
    }

    /**
     * Allocates blocks into {@code dir}'s reserve, from its own group if it can, if {@link #step} still
     * says so under its lock; with {@code convert}, turns the inline directory into a tree in the same
     * transaction. ENOENT if the directory went meanwhile.
     */
    private void addBlocks(Inode dir, int keyLength, boolean convert) {
        int groups = geometry.agCount();
        int first = geometry.agOfInode(dir.ino);
        int n = convert ? RESERVE_FILL : readRecord(dir.ino, (b, rec) -> {
            int area = rec + InodeFormat.INLINE;
            return isTree(b, rec) ? Math.min(RESERVE_FILL - DirAllocator.usable(cache, b, area, RESERVE_LOW),
                    DirEntryFormat.RESERVE_CAPACITY - DirEntryFormat.reserveCount(b, area)) : 0;
        });
        for (int k = 0; k < groups; k++) {
            AllocationGroup ag = volume.group((first + k) % groups);
            for (int attempt = 0, busy = 0; attempt < RETRIES; attempt++) {
                if (ag.needsFix()) {
                    ag.fix();
                }
                int items = ag.blockItems() + 2 + (convert ? BTree.CREATE_ITEMS + 4 : 0);
                long r;
                try (Txn txn = Txn.begin(cache, items)) {
                    dir.lock.lock();
                    try {
                        requireDir(dir.ino);
                        if (step(dir, keyLength) != (convert ? CONVERT : REFILL) || n < 1 || !convert
                                && readRecord(dir.ino, (b, rec) -> DirEntryFormat.reserveCount(b, rec + InodeFormat.INLINE)) + n
                                > DirEntryFormat.RESERVE_CAPACITY) {
                            return; // changed meanwhile: the caller looks again
                        }
                        r = ag.allocBlocks(txn, n);
                        if (r > 0) {
                            fillReserve(txn, dir, r, n, convert);
                            dir.lastSeq = txn.commit();
                            return;
                        }
                    } finally {
                        dir.lock.unlock();
                    }
                }
                if (r == AllocationGroup.NO_SPACE) {
                    break;
                }
                if (r == AllocationGroup.RETRY_BUSY && busy < AllocationGroup.BUSY_RETRIES) {
                    ag.awaitBusy(busy++);
                    attempt--;
                } else {
                    ag.fix();
                }
            }
        }
        throw new NoSpaceException("no allocation group has " + n + " free blocks for directory " + dir.ino);
    }

    /** In {@code txn}, {@code dir}'s lock held: blocks {@code [r, r + n)} join its reserve (converting it to a tree). */
    private void fillReserve(Txn txn, Inode dir, long r, int n, boolean convert) {
        Buffer b = lockRecord(txn, dir.ino);
        MemorySegment m = b.data();
        int rec = rec(dir.ino);
        int area = rec + InodeFormat.INLINE;
        List<byte[]> keys = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        int count = 0;
        if (convert) {
            int end = area + InodeFormat.inlineUsed(m, rec);
            for (int at = area, size; at < end; at += size) {
                size = DirEntryFormat.entrySize(m, at, end); // checked before the key is read
                keys.add(DirEntryFormat.entryKey(m, at));
                values.add(DirEntryFormat.value(DirEntryFormat.entryInode(m, at), DirEntryFormat.entryType(m, at)));
            }
            m.asSlice(area, inlineCapacity).fill((byte) 0);
            InodeFormat.setFork(m, rec, InodeFormat.FORK_TREE);
            InodeFormat.setInlineUsed(m, rec, DirEntryFormat.treeAreaSize());
        } else {
            count = DirEntryFormat.reserveCount(m, area);
        }
        for (int i = n - 1; i >= 0; i--) { // pops come in ascending order
            DirEntryFormat.setReserveEntry(m, area, count++, r + i);
        }
        DirEntryFormat.setReserveCount(m, area, count);
        InodeFormat.setBlocks(m, rec, InodeFormat.blocks(m, rec) + n);
        txn.log(b, rec, recordSize);
        if (convert) {
            BTree t = BTree.create(txn, new DirAllocator(cache, block(dir.ino), geometry.agOfInode(dir.ino), rec), dir.ino);
            DirEntryFormat.setTreeHeader(m, area, t.headerBlock());
            txn.log(b, area, 8);
            for (int i = 0; i < keys.size(); i++) {
                t.put(txn, MemorySegment.ofArray(keys.get(i)), MemorySegment.ofArray(values.get(i)));
            }
            dir.dirTree = t;
        }
    }

    /**
     * Frees a block of {@code dir}'s reserve (a busy one if any) if it holds more than {@code above};
     * false if it does not (nothing changed).
     */
    private boolean spillBlock(Inode dir, int above) {
        int rec = rec(dir.ino);
        int area = rec + InodeFormat.INLINE;
        long blk = readRecord(dir.ino, (b, r) -> isTree(b, r) && requireReserve(dir.ino, b, area) > above
                ? DirEntryFormat.reserveEntry(b, area, DirAllocator.spillIndex(cache, b, area)) : 0L);
        if (blk == 0) {
            return false;
        }
        int[] at = new int[1];
        freeBlock(dir, blk, 2, () -> {
            at[0] = readRecord(dir.ino, (b, r) -> isTree(b, r) && DirEntryFormat.reserveCount(b, area) > above
                    && DirEntryFormat.reserveEntry(b, area, DirAllocator.spillIndex(cache, b, area)) == blk
                    ? DirAllocator.spillIndex(cache, b, area) : -1);
            return at[0] >= 0;
        }, txn -> {
            Buffer b = lockRecord(txn, dir.ino);
            MemorySegment m = b.data();
            DirAllocator.remove(m, area, at[0]);
            InodeFormat.setBlocks(m, rec, InodeFormat.blocks(m, rec) - 1);
            txn.log(b, rec, recordSize);
        });
        return true;
    }

    /**
     * Frees device block {@code blk} of {@code owner} to its group and runs {@code then} in the same
     * transaction (which may change {@code items} more items), reserved before {@code owner}'s lock is
     * taken; under the lock, {@code still} says whether the block is still to be freed (if not, nothing
     * changes). Fixes the group's free list first when it is short.
     */
    private void freeBlock(Inode owner, long blk, int items, java.util.function.BooleanSupplier still, Change then) {
        AllocationGroup ag = volume.group(geometry.agOfBlock(blk));
        for (int attempt = 0; ; attempt++) {
            if (ag.needsFix()) {
                ag.fix();
            }
            try (Txn txn = Txn.begin(cache, ag.blockItems() + items)) {
                owner.lock.lock();
                try {
                    if (!still.getAsBoolean()) {
                        return;
                    }
                    if (ag.freeBlocks(txn, blk, 1)) {
                        then.apply(txn);
                        owner.lastSeq = txn.commit();
                        return;
                    }
                } finally {
                    owner.lock.unlock();
                }
            }
            if (attempt == RETRIES) {
                throw new NoSpaceException("allocation group " + ag.agno + " cannot refill the free list of its free-space trees");
            }
            ag.fix();
        }
    }

    // ================================================================== inode locks

    /** References to the inodes of the distinct nonzero {@code inos}, in ascending order; not locked. */
    private Inode[] acquireAll(long... inos) {
        long[] sorted = inos.clone();
        Inode[] out = new Inode[distinctSorted(sorted)];
        for (int i = 0; i < out.length; i++) {
            out[i] = inodes.acquire(sorted[i]);
        }
        return out;
    }

    private void releaseAll(Inode[] acquired) {
        for (Inode i : acquired) {
            inodes.release(i);
        }
    }

    /** Locks {@code acquired} (ascending, as {@link #acquireAll} orders them). */
    private static void lockAll(Inode[] acquired) {
        for (Inode i : acquired) {
            i.lock.lock();
        }
    }

    private static void unlockAll(Inode[] locked) {
        for (int i = locked.length - 1; i >= 0; i--) {
            locked[i].lock.unlock();
        }
    }

    private static Inode pick(Inode[] locked, long ino) {
        for (Inode i : locked) {
            if (i.ino == ino) {
                return i;
            }
        }
        throw new IllegalStateException("inode " + ino + " is not locked");
    }

    // ================================================================== create

    /**
     * Creates {@code name} in {@code dir}. Returns the new inode; or, for a non-exclusive create of a
     * regular file whose name exists, the existing file, or 0 if the name is a symlink (the caller
     * follows it).
     */
    private long createEntry(long dir, String name, int mode, boolean exclusive, byte[] linkTarget, Inode[] opened) {
        byte[] key = DirEntryFormat.key(checkName(name, true));
        int type = mode & S_IFMT;
        Inode d = inodes.acquire(dir);
        try {
            for (boolean unready = false; ; unready = true) {
                requireDir(dir);
                // An inline directory is searched under its lock; a tree directory is not searched first:
                // the insert's putIfAbsent finds a name that exists before anything is logged (one descent
                // instead of two). The checks that would hide EEXIST look for the name when they fail.
                boolean searched = !readRecord(dir, Namespace::isTree) || isRemote(linkTarget);
                try {
                    if (type == S_IFDIR && statIno(dir).nlink() >= MAX_LINKS) {
                        throw new NamespaceException(Errno.EMLINK, "directory " + dir + " has " + MAX_LINKS + " links");
                    }
                    requireInodeRoom();
                } catch (NamespaceException | NoSpaceException e) {
                    Found f = find(d, key);
                    if (f != null) {
                        return onExisting(f, dir, name, exclusive, type);
                    }
                    throw e;
                }
                if (unready) {
                    prepare(d, key.length); // the last attempt found the directory needing it
                }
                long ino = allocAndInsert(d, key, mode, linkTarget, opened, searched);
                if (ino == EXISTS) {
                    Found f = find(d, key);
                    if (f == null) {
                        continue; // removed since: create it after all
                    }
                    return onExisting(f, dir, name, exclusive, type);
                }
                if (ino != AGAIN) {
                    return ino;
                }
            }
        } finally {
            inodes.release(d);
        }
    }

    /**
     * Result of {@link #allocAndInsert} and {@link #tryCreate}: the name is there already, and nothing
     * changed. Apart from every {@link AllocationGroup} result code, which tryCreate also returns.
     */
    private static final long EXISTS = Long.MIN_VALUE;
    /**
     * Result of {@link #allocAndInsert}: under its lock the directory turned out to need {@link #prepare}
     * again, or more log space than was reserved; nothing changed.
     */
    private static final long AGAIN = Long.MIN_VALUE + 1;

    /** A create met an existing entry: EEXIST, EISDIR, the file itself, or 0 for a symlink to follow. */
    private static long onExisting(Found f, long dir, String name, boolean exclusive, int type) {
        if (exclusive || type != S_IFREG) {
            throw new NamespaceException(Errno.EEXIST, quote(name) + " exists in directory " + dir);
        }
        if (f.type == S_IFDIR) {
            throw new NamespaceException(Errno.EISDIR, quote(name) + " in directory " + dir + " is a directory");
        }
        return f.type == S_IFLNK ? 0 : f.ino;
    }

    /**
     * Refuses a create before {@link #prepare} when no group could then give it an inode: prepare's
     * conversion and refill commit in transactions of their own, so a create failing after them for want
     * of an inode would leave its directory's layout (not its entries) changed. A group qualifies with a
     * free inode, or with room for a chunk beyond the blocks prepare may take and those every group holds
     * back for its free lists. Creates racing for the last inodes can still pass this together.
     */
    private void requireInodeRoom() {
        long chunkRoom = Geometry.CHUNK_BLOCKS + AllocationGroup.HELD_BACK + RESERVE_FILL;
        for (int g = 0, n = geometry.agCount(); g < n; g++) {
            AllocationGroup ag = volume.group(g);
            if (ag.freeInodes() > 0 || ag.freeBlocks() >= chunkRoom) {
                return;
            }
        }
        throw new NoSpaceException("no allocation group has a free inode or room for an inode chunk");
    }

    /**
     * Allocates the inode and adds its entry, or returns {@link #EXISTS} or {@link #AGAIN} with nothing
     * changed. Each attempt reserves its log space before it takes {@code d}'s lock; a group's fixes and
     * waits run with no lock held. With {@code opened}, also opens the new inode for a handle into {@code opened[0]} if its
     * lock is free (while {@code d}'s lock is held nobody can unlink it; only trying keeps the lock order
     * when its number is below {@code d}'s); else leaves it null. {@code searched}: the caller has looked the
     * name up already (and found it absent).
     */
    private long allocAndInsert(Inode d, byte[] key, int mode, byte[] linkTarget, Inode[] opened, boolean searched) {
        int type = mode & S_IFMT;
        boolean remote = isRemote(linkTarget);
        int n = geometry.agCount();
        int first = type == S_IFDIR ? Math.floorMod(rotor.getAndIncrement(), n) : geometry.agOfInode(d.ino);
        boolean skipFull = false; // pass over groups that look full, unless all do (the hint may be stale)
        for (int k = 0; k < n && !skipFull; k++) {
            AllocationGroup ag = volume.group((first + k) % n);
            skipFull = ag.freeInodes() > 0 || ag.mayAddChunk();
        }
        for (int k = 0; k < n; k++) {
            AllocationGroup ag = volume.group((first + k) % n);
            boolean chunk = ag.freeInodes() == 0;
            if (chunk && skipFull && !ag.mayAddChunk()) {
                continue;
            }
            for (int attempt = 0, busy = 0; attempt < RETRIES; attempt++) {
                if (ag.needsFix()) {
                    ag.fix();
                }
                long r = remote && chunk ? ensureFreeInode(ag) : 1;
                if (r > 0) {
                    chunk &= !remote;
                    int[] frames = remote ? volume.reserveFrames(1) : chunk ? volume.reserveFrames(Geometry.CHUNK_BLOCKS) : null;
                    int dirItems = dirItems(d);
                    int items = 4 + ag.allocInodeItems(chunk) + dirItems + (remote ? ag.blockItems() + 1 : 0);
                    try (Txn txn = Txn.begin(cache, items)) {
                        d.lock.lock();
                        try {
                            requireDir(d.ino);
                            if (searched && find(d, key, true) != null) {
                                return EXISTS;
                            }
                            if (type == S_IFDIR && statIno(d.ino).nlink() >= MAX_LINKS) {
                                if (find(d, key, true) != null) {
                                    return EXISTS;
                                }
                                throw new NamespaceException(Errno.EMLINK, "directory " + d.ino + " has " + MAX_LINKS + " links");
                            }
                            if (step(d, key.length) != READY || dirItems(d) > dirItems) {
                                return AGAIN;
                            }
                            r = tryCreate(txn, ag, frames, d, key, mode, linkTarget, searched);
                            if (r == EXISTS) {
                                return EXISTS;
                            }
                            if (r > 0) {
                                long seq = txn.commit();
                                d.lastSeq = seq;
                                Inode c = inodes.acquire(r);
                                c.lastSeq = seq;
                                c.dirTree = null;
                                if (opened != null && c.lock.tryLock()) {
                                    c.opens++; // keeps the reference for the handle
                                    c.lock.unlock();
                                    opened[0] = c;
                                } else {
                                    inodes.release(c);
                                }
                                return r;
                            }
                        } finally {
                            d.lock.unlock();
                        }
                    } finally {
                        volume.unreserveFrames(frames);
                    }
                }
                if (r == AllocationGroup.NO_SPACE) {
                    break;
                }
                if (r == AllocationGroup.RETRY_CHUNK) {
                    chunk = true;
                } else if (r == AllocationGroup.RETRY_BUSY && busy < AllocationGroup.BUSY_RETRIES) {
                    ag.awaitBusy(busy++);
                    attempt--;
                } else {
                    ag.fix();
                }
            }
        }
        throw new NoSpaceException("no allocation group has a free inode or room for an inode chunk");
    }

    /** True for a symlink target too long for the inline area: it gets a block of its own. */
    private boolean isRemote(byte[] linkTarget) {
        return linkTarget != null && linkTarget.length > inlineCapacity;
    }

    /**
     * Before a create that takes a block besides its inode: a free inode in {@code ag}, made in a
     * transaction of its own if needed ({@link AllocationGroup#ensureFreeInode}).
     */
    private long ensureFreeInode(AllocationGroup ag) {
        int[] frames = volume.reserveFrames(Geometry.CHUNK_BLOCKS);
        try {
            return ag.ensureFreeInode(frames);
        } finally {
            volume.unreserveFrames(frames);
        }
    }

    /**
     * One attempt: the new inode; or a result of {@link AllocationGroup#allocInode}, or {@link #EXISTS},
     * with nothing changed. Unless the caller has {@code searched} the directory for the name already (an
     * inline one), the entry goes in first when the inode number is known (a free one is listed): the
     * tree's putIfAbsent is the existence check, and allocating a listed inode cannot fail after it. A new
     * chunk's first inode is not known until the chunk is made, so then the name is looked up first.
     */
    private long tryCreate(Txn txn, AllocationGroup ag, int[] frames, Inode d, byte[] key, int mode, byte[] linkTarget,
                           boolean searched) {
        int type = mode & S_IFMT;
        boolean remote = isRemote(linkTarget);
        txn.lock(ag.agi);
        if (ag.inodeListLow()) {
            return AllocationGroup.RETRY_FIX;
        }
        int next = ag.nextFreeInode(txn);
        if (next < 0 && (frames == null || remote)) {
            return AllocationGroup.RETRY_CHUNK;
        }
        long targetBlock = 0;
        if (remote) {
            // the first change: it may fail, and then nothing has changed; with a listed inode and the
            // name known absent (searched), nothing after it can fail
            targetBlock = ag.allocBlocks(txn, 1);
            if (targetBlock <= 0) {
                return targetBlock;
            }
        } else if (next < 0) {
            txn.lock(ag.agf);
        }
        if (!searched && next < 0 && find(d, key, true) != null) {
            return EXISTS; // looked up before the records are held: reading a record waits for its lock
        }
        long expected = next < 0 ? 0 : geometry.inodeNumber(ag.agno, next);
        lockRecords(txn, d.ino, expected);
        boolean first = !searched && next >= 0; // a directory not searched is a tree (under its lock it stays one)
        if (first && !insertEntry(txn, d, key, expected, type)) {
            return EXISTS;
        }
        long ino = ag.allocInode(txn, remote ? null : frames, mode, 0, 0, type == S_IFDIR ? 2 : 1, nowNanos());
        if (ino <= 0) {
            return ino;
        }
        if (next >= 0 && ino != expected) {
            throw new IllegalStateException("group " + ag.agno + " allocated inode " + ino + ", not " + expected);
        }
        Buffer nb = lockRecord(txn, ino);
        MemorySegment m = nb.data();
        int rec = rec(ino);
        if (type == S_IFDIR) {
            InodeFormat.setParent(m, rec, d.ino);
            InodeFormat.setFork(m, rec, InodeFormat.FORK_INLINE);
        } else if (remote) {
            Buffer tb = cache.createEmpty(txn, targetBlock, SymlinkFormat.MAGIC, ino, frames[0]);
            frames[0] = -1;
            txn.log(tb, SymlinkFormat.LENGTH, SymlinkFormat.write(tb.data(), linkTarget));
            InodeFormat.setFork(m, rec, InodeFormat.FORK_REMOTE);
            InodeFormat.setRemoteBlock(m, rec, targetBlock);
            InodeFormat.setInlineUsed(m, rec, 8);
            InodeFormat.setSize(m, rec, linkTarget.length);
            InodeFormat.setBlocks(m, rec, 1);
        } else if (type == S_IFLNK) {
            InodeFormat.setFork(m, rec, InodeFormat.FORK_INLINE);
            MemorySegment.copy(linkTarget, 0, m, java.lang.foreign.ValueLayout.JAVA_BYTE, rec + InodeFormat.INLINE, linkTarget.length);
            InodeFormat.setInlineUsed(m, rec, linkTarget.length);
            InodeFormat.setSize(m, rec, linkTarget.length);
        }
        logUsed(txn, nb, rec);
        if (!first) {
            insertAbsent(txn, d, key, ino, type);
        }
        Buffer pb = lockRecord(txn, d.ino);
        int prec = rec(d.ino);
        if (type == S_IFDIR) {
            InodeFormat.setNlink(pb.data(), prec, InodeFormat.nlink(pb.data(), prec) + 1);
        }
        InodeFormat.touch(pb.data(), prec, nowNanos(), true);
        txn.log(pb, prec, InodeFormat.INLINE);
        return ino;
    }

    // ================================================================== remove

    private void removeEntry(long dir, String name, boolean wantDir) {
        byte[] key = DirEntryFormat.key(checkName(name, true));
        Inode d = inodes.acquire(dir);
        try {
            long hint = 0; // the child met the last time round: its group and (a directory's) items size the reservation
            boolean unready = false; // the last attempt found the directory needing prepare
            for (int fails = 0; ; ) {
                requireDir(dir);
                if (wantDir && hint == 0) {
                    Found f = find(d, key);
                    if (f == null) {
                        throw new NamespaceException(Errno.ENOENT, quote(name) + " in directory " + dir);
                    }
                    hint = f.ino;
                }
                if (unready) {
                    prepare(d, 0);
                }
                AllocationGroup ag = volume.group(geometry.agOfInode(hint != 0 ? hint : dir));
                if (ag.needsFix()) {
                    ag.fix();
                }
                int groupItems = ag.freeInodeItems() + ag.orphanItems();
                int items = 8 + (hint == 0 ? Math.max(groupItems, groupItemsBound.get()) : groupItems) + dirItems(d);
                if (wantDir) {
                    Inode h = inodes.acquire(hint);
                    try {
                        items += (modeOf(hint) & S_IFMT) == S_IFDIR ? dirItems(h) : 0;
                    } finally {
                        inodes.release(h);
                    }
                }
                Inode c = null;
                boolean last = false, free = false; // what the change did: the child's last link went; it is an orphan to free now
                try {
                    try (Txn txn = Txn.begin(cache, items)) {
                        d.lock.lock();
                        boolean childLocked = false;
                        try {
                            requireDir(dir);
                            Found f = find(d, key, true);
                            if (f == null) {
                                throw new NamespaceException(Errno.ENOENT, quote(name) + " in directory " + dir);
                            }
                            c = inodes.acquire(f.ino);
                            if (f.ino > dir) { // the usual case: the child's lock comes after its directory's
                                c.lock.lock();
                                childLocked = true;
                            } else if (c.lock.tryLock()) {
                                childLocked = true;
                            } else { // take the locks again in ascending order, and look again
                                d.lock.unlock();
                                c.lock.lock();
                                childLocked = true;
                                d.lock.lock();
                                requireDir(dir);
                                Found again = find(d, key, true);
                                if (again == null || again.ino != f.ino) {
                                    hint = 0;
                                    continue;
                                }
                            }
                            InodeStat cs = statIno(c.ino);
                            if (wantDir) {
                                if (!cs.isDirectory()) {
                                    throw new NamespaceException(Errno.ENOTDIR, quote(name) + " in directory " + dir + " is not a directory");
                                }
                                if (cs.size() != 0) {
                                    throw new NamespaceException(Errno.ENOTEMPTY, "directory " + quote(name) + " holds " + cs.size() + " entries");
                                }
                            } else if (cs.isDirectory()) {
                                throw new NamespaceException(Errno.EISDIR, quote(name) + " in directory " + dir + " is a directory");
                            }
                            boolean lastLink = wantDir || cs.nlink() <= 1;
                            unready = step(d, 0) != READY;
                            hint = c.ino;
                            // The last link frees the inode in its own group, which was sized for only if the
                            // hint named it; another group's trees usually fit the same reservation.
                            AllocationGroup cag = lastLink ? volume.group(geometry.agOfInode(c.ino)) : ag;
                            if (unready || changeItems(lastLink ? cag : null, d, c) > items) {
                                groupItemsBound.accumulateAndGet(cag.freeInodeItems() + cag.orphanItems(), Math::max);
                                continue;
                            }
                            ag = cag;
                            boolean orphan = lastLink && (c.opens > 0 || cs.blocks() > 0);
                            Inode child = c;
                            if (!applyChange(txn, lastLink ? ag : null, new Inode[] {d, c}, t -> {
                                deleteEntry(t, d, key);
                                adjust(t, dir, wantDir ? -1 : 0, true);
                                dropLink(t, child, wantDir, lastLink, orphan);
                            })) {
                                fails = requireFixable(ag, fails);
                                continue;
                            }
                            last = lastLink;
                            free = orphan && c.opens == 0;
                        } finally {
                            if (childLocked) {
                                c.lock.unlock();
                            }
                            d.lock.unlock();
                        }
                    }
                    afterUnlink(ag, c, last, free);
                    return;
                } finally {
                    if (c != null) {
                        inodes.release(c);
                    }
                }
            }
        } finally {
            inodes.release(d);
        }
    }

    /**
     * After a change that took {@code c}'s {@code last} link (in group {@code ag}), its locks dropped:
     * gives back empty inode chunks, and frees {@code c} if it is an orphan no handle holds ({@code free}),
     * a step at a time, each step reserved before it takes the orphan's lock.
     */
    private void afterUnlink(AllocationGroup ag, Inode c, boolean last, boolean free) {
        if (last) {
            ag.reclaimEmptyChunks();
        }
        if (free) {
            inactivate(c);
        }
    }

    /**
     * After an attempt found {@code ag}'s inode free list short under its AGI: counts the failure, to be
     * fixed before the next attempt, or gives up with NoSpaceException after {@link #RETRIES}.
     */
    private static int requireFixable(AllocationGroup ag, int fails) {
        if (fails == RETRIES) {
            throw new NoSpaceException("allocation group " + ag.agno + " cannot refill the free list of its inode trees");
        }
        return fails + 1;
    }

    private interface Change {
        void apply(Txn txn);
    }

    /** Log items a change of {@code touched}'s records (a directory's entries) and {@code ag}'s inode trees may touch. */
    private int changeItems(AllocationGroup ag, Inode... touched) {
        int items = 8 + (ag == null ? 0 : ag.freeInodeItems() + ag.orphanItems());
        for (Inode i : touched) {
            if (i != null && (modeOf(i.ino) & S_IFMT) == S_IFDIR) {
                items += dirItems(i);
            }
        }
        return items;
    }

    /**
     * In {@code txn}, reserved for {@link #changeItems} before the locks of {@code touched} were taken:
     * locks the AGI of {@code ag} (if not null), then the records of {@code touched} in block order, runs
     * {@code change} and commits; the change's inodes get the commit sequence. False, with nothing
     * changed, if the group's inode free list is short: fix it with no lock held, and try again.
     */
    private boolean applyChange(Txn txn, AllocationGroup ag, Inode[] touched, Change change) {
        if (ag != null) {
            txn.lock(ag.agi);
            if (ag.inodeListLow()) {
                return false;
            }
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
     * Logs a record's fixed fields and, if its inline area holds entries, a link target or a remote
     * block's number, the used part of that area (the rest is zero). A tree directory's area changes
     * only through its own logging.
     */
    private static void logUsed(Txn txn, Buffer b, int rec) {
        MemorySegment m = b.data();
        boolean tree = InodeFormat.fork(m, rec) == InodeFormat.FORK_TREE;
        txn.log(b, rec, InodeFormat.INLINE + (tree ? 0 : InodeFormat.inlineUsed(m, rec)));
    }

    /** In {@code txn}: {@code dir} gains {@code links} links (subdirectories), its times move, and its entry count by {@code entries}. */
    private void adjust(Txn txn, long dir, int links, boolean modified) {
        Buffer b = lockRecord(txn, dir);
        int rec = rec(dir);
        MemorySegment m = b.data();
        InodeFormat.setNlink(m, rec, InodeFormat.nlink(m, rec) + links);
        InodeFormat.touch(m, rec, nowNanos(), modified);
        txn.log(b, rec, InodeFormat.INLINE);
    }

    /**
     * In {@code txn}: inode {@code c} loses a name; a directory loses all its links. With {@code last}, it
     * goes to its group's orphans ({@code orphan}) or is freed.
     */
    private void dropLink(Txn txn, Inode c, boolean isDir, boolean last, boolean orphan) {
        Buffer b = lockRecord(txn, c.ino);
        int rec = rec(c.ino);
        MemorySegment m = b.data();
        InodeFormat.setNlink(m, rec, isDir ? 0 : InodeFormat.nlink(m, rec) - 1);
        InodeFormat.touch(m, rec, nowNanos(), false);
        txn.log(b, rec, InodeFormat.INLINE);
        if (!last) {
            return;
        }
        AllocationGroup ag = volume.group(geometry.agOfInode(c.ino));
        if (orphan) {
            ag.addOrphan(txn, geometry.agInode(c.ino));
        } else {
            if (!ag.freeInode(txn, geometry.agInode(c.ino))) {
                throw new IllegalStateException("group " + ag.agno + " ran short of its inode free list under its AGI");
            }
            c.dirTree = null;
        }
    }

    // ================================================================== orphans

    /**
     * Frees orphan {@code c} (no handle open, no links; its lock not held: each step reserves its log
     * space before taking it): its directory tree and reserve a block per transaction, then the inode and
     * its orphan record in one. Each step leaves a consistent volume, so a crash part way through is
     * finished by the next mount. Nobody else changes an orphan meanwhile: with no links and no handles
     * it cannot be reached.
     */
    private void inactivate(Inode c) {
        long ino = c.ino;
        int rec = rec(ino);
        int area = rec + InodeFormat.INLINE;
        long header = readRecord(ino, (b, r) -> isTree(b, r) ? DirEntryFormat.treeHeader(b, area) : 0L);
        if (header != 0) {
            while (spillBlock(c, 0)) {
                // a block per transaction
            }
            BTree t = tree(c, header);
            try (Txn txn = Txn.begin(cache, 8 + 3 * DirEntryFormat.RESERVE_CAPACITY)) {
                c.lock.lock();
                try {
                    t.destroy(txn); // first: it reads the tree's nodes, and the record's block is shared
                    Buffer b = lockRecord(txn, ino);
                    DirEntryFormat.setTreeHeader(b.data(), area, 0);
                    txn.log(b, rec, recordSize);
                    c.lastSeq = txn.commit();
                } finally {
                    c.lock.unlock();
                }
            }
            c.dirTree = null;
        }
        while (spillBlock(c, 0)) {
            // the tree's nodes came back to the reserve
        }
        freeRemoteBlock(c);
        AllocationGroup ag = volume.group(geometry.agOfInode(ino));
        Inode[] touched = {c};
        for (int fails = 0; ; ) {
            if (ag.needsFix()) {
                ag.fix();
            }
            try (Txn txn = Txn.begin(cache, changeItems(ag, touched))) {
                c.lock.lock();
                try {
                    if (applyChange(txn, ag, touched, t -> {
                        if (!ag.freeInode(t, geometry.agInode(ino))) {
                            throw new IllegalStateException("group " + ag.agno + " ran short of its inode free list under its AGI");
                        }
                        ag.removeOrphan(t, geometry.agInode(ino));
                    })) {
                        break;
                    }
                } finally {
                    c.lock.unlock();
                }
            }
            fails = requireFixable(ag, fails);
        }
        ag.reclaimEmptyChunks();
    }

    /** Frees the block of orphan {@code c}'s remote fork (a long symlink's target), if it has one. */
    private void freeRemoteBlock(Inode c) {
        long ino = c.ino;
        int rec = rec(ino);
        long blk = readRecord(ino, (b, r) -> InodeFormat.fork(b, r) == InodeFormat.FORK_REMOTE ? InodeFormat.remoteBlock(b, r) : 0L);
        if (blk == 0) {
            return;
        }
        requireDataBlock(ino, blk, "symlink target block");
        freeBlock(c, blk, 3, () -> readRecord(ino, (b, r) -> InodeFormat.fork(b, r) == InodeFormat.FORK_REMOTE
                && InodeFormat.remoteBlock(b, r) == blk), txn -> {
            Buffer tb;
            do {
                tb = cache.get(blk, SymlinkFormat.MAGIC, ino, SYMLINK_BLOCK);
            } while (!txn.lock(tb));
            cache.free(txn, tb, SymlinkFormat.FREED_MAGIC);
            Buffer b = lockRecord(txn, ino);
            MemorySegment m = b.data();
            InodeFormat.setFork(m, rec, InodeFormat.FORK_EMPTY);
            InodeFormat.setRemoteBlock(m, rec, 0);
            InodeFormat.setInlineUsed(m, rec, 0);
            InodeFormat.setBlocks(m, rec, 0);
            txn.log(b, rec, InodeFormat.INLINE + 8);
        });
    }

    /** Frees every orphan left by a crash (or by an unmount with handles open); at mount. */
    int recoverOrphans() {
        int n = 0;
        for (int g = 0; g < geometry.agCount(); g++) {
            for (long ino : volume.group(g).orphanInodes()) {
                Inode c = inodes.acquire(ino);
                try {
                    inactivate(c);
                    n++;
                } finally {
                    inodes.release(c);
                }
            }
        }
        return n;
    }

    // ================================================================== handles

    /** A handle on {@code ino}; null if it lost its last link or was reused meanwhile (look it up again). */
    private Handle openIno(long ino) {
        int gen = generation(ino);
        Inode i = inodes.acquire(ino);
        i.lock.lock();
        try {
            InodeStat s = readRecord(ino, (b, rec) -> InodeFormat.stat(ino, b, rec));
            if (s.mode() == 0 || s.generation() != gen || s.nlink() == 0) {
                inodes.release(i);
                return null;
            }
            i.opens++;
            return new Handle(this, i);
        } finally {
            i.lock.unlock();
        }
    }

    private Handle openCreated(long ino) {
        Handle h = openIno(ino);
        if (h == null) {
            throw new NamespaceException(Errno.ENOENT, "inode " + ino + " was removed as it was created");
        }
        return h;
    }

    /** The last close of an unlinked inode frees it (after the lock is dropped: freeing reserves log space first). */
    void closeHandle(Inode i) {
        boolean unlinked = false;
        i.lock.lock();
        try {
            i.opens--;
            if (i.opens == 0) {
                unlinked = readRecord(i.ino, (b, rec) -> InodeFormat.mode(b, rec) != 0 && InodeFormat.nlink(b, rec) == 0);
            }
        } finally {
            i.lock.unlock();
        }
        try {
            if (unlinked) {
                inactivate(i);
            }
        } finally {
            inodes.release(i);
        }
    }

    // ================================================================== link and rename

    private void linkEntry(long target, long dir, String name) {
        byte[] key = DirEntryFormat.key(checkName(name, true));
        Inode[] acquired = acquireAll(target, dir);
        try {
            Inode d = pick(acquired, dir), t = pick(acquired, target);
            for (boolean unready = false; ; unready = true) {
                if (unready) {
                    prepare(d, key.length); // the last attempt found the directory needing it
                }
                int items = changeItems(null, d, t);
                try (Txn txn = Txn.begin(cache, items)) {
                    lockAll(acquired);
                    try {
                        InodeStat ts = checkLink(d, key, name, target);
                        if (step(d, key.length) != READY || changeItems(null, d, t) > items) {
                            continue;
                        }
                        applyChange(txn, null, new Inode[] {d, t}, x -> {
                            insertAbsent(x, d, key, target, ts.mode() & S_IFMT);
                            adjust(x, dir, 0, true);
                            adjust(x, target, 1, false);
                        });
                        return;
                    } finally {
                        unlockAll(acquired);
                    }
                }
            }
        } finally {
            releaseAll(acquired);
        }
    }

    /** The errors a link of {@code target} as {@code key} in {@code d} meets (both locks held); the target's attributes. */
    private InodeStat checkLink(Inode d, byte[] key, String name, long target) {
        requireDir(d.ino);
        if (find(d, key, true) != null) {
            throw new NamespaceException(Errno.EEXIST, quote(name) + " exists in directory " + d.ino);
        }
        InodeStat ts = statIno(target);
        if (ts.nlink() == 0) {
            throw new NamespaceException(Errno.ENOENT, "inode " + target + " has no links left");
        }
        if (ts.isDirectory()) {
            throw new NamespaceException(Errno.EPERM, "inode " + target + " is a directory: no hard links to directories");
        }
        if (ts.nlink() >= MAX_LINKS) {
            throw new NamespaceException(Errno.EMLINK, "inode " + target + " has " + MAX_LINKS + " links");
        }
        return ts;
    }

    /** True if {@code ancestor} is {@code dir} or one of its ancestors (parent links; rename lock held). */
    private boolean isAncestorOrSelf(long ancestor, long dir) {
        long root = root();
        long limit = volume.statfs().inodes(); // more steps than inodes: the parent links go round in a cycle
        long cur = dir;
        for (long steps = 0; steps <= limit; steps++) {
            if (cur == ancestor) {
                return true;
            }
            if (cur == root) {
                return false;
            }
            cur = parentOf(cur);
        }
        throw new CorruptionException(block(cur), InodeFormat.STRUCTURE, "the parent links from directory " + dir
                + " go round without reaching the root");
    }

    /** {@code blk}, which inode {@code ino}'s record names as its {@code what}, if it lies in the allocation groups; else corruption. */
    private long requireDataBlock(long ino, long blk, String what) {
        if (!geometry.isDataBlock(blk)) {
            throw new CorruptionException(block(ino), InodeFormat.STRUCTURE, "inode " + ino + "'s " + what + " names block "
                    + blk + " outside the allocation groups");
        }
        return blk;
    }

    /**
     * The count of tree directory {@code ino}'s reserve (record at {@code area} of {@code b}), each entry
     * checked to lie in the allocation groups: its blocks become tree nodes or go back to free space.
     */
    private int requireReserve(long ino, MemorySegment b, int area) {
        int n = DirEntryFormat.reserveCount(b, area);
        for (int i = 0; i < n; i++) {
            long blk = DirEntryFormat.reserveEntry(b, area, i);
            if (!geometry.isDataBlock(blk)) { // named only on failure: this runs per change
                requireDataBlock(ino, blk, "directory block reserve entry " + i);
            }
        }
        return n;
    }

    private void renameEntry(long fromDir, String fromName, long toDir, String toName) {
        byte[] fk = DirEntryFormat.key(checkName(fromName, true));
        byte[] tk = DirEntryFormat.key(checkName(toName, true));
        boolean unready = false; // the last attempt found a directory needing prepare
        for (int fails = 0; ; ) {
            requireDir(fromDir);
            requireDir(toDir);
            Found src = find(fromDir, fk);
            if (src == null) {
                throw new NamespaceException(Errno.ENOENT, quote(fromName) + " in directory " + fromDir);
            }
            boolean moveDir = src.type == S_IFDIR && fromDir != toDir;
            Found dst = find(toDir, tk);
            Inode[] acquired = acquireAll(fromDir, toDir, src.ino, dst == null ? 0 : dst.ino);
            Inode from = pick(acquired, fromDir), to = pick(acquired, toDir), s = pick(acquired, src.ino);
            Inode v = dst == null ? null : pick(acquired, dst.ino);
            boolean last = false, free = false;
            AllocationGroup ag = v == null ? null : volume.group(geometry.agOfInode(v.ino));
            try {
                if (unready) {
                    prepare(from, 0);
                    prepare(to, dst == null ? tk.length : 0);
                }
                if (ag != null && ag.needsFix()) {
                    ag.fix();
                }
                int items = changeItems(ag, from, to, s, v);
                try (Txn txn = Txn.begin(cache, items)) {
                    if (moveDir) {
                        renameLock.lock();
                    }
                    lockAll(acquired);
                    try {
                        requireDir(fromDir);
                        requireDir(toDir);
                        if (!src.equals(find(from, fk, true)) || !java.util.Objects.equals(dst, find(to, tk, true))) {
                            continue; // changed before we held the locks
                        }
                        if (dst != null && dst.ino == src.ino) {
                            return; // two names of one inode: POSIX does nothing
                        }
                        if (moveDir && isAncestorOrSelf(src.ino, toDir)) {
                            throw new NamespaceException(Errno.EINVAL, "directory " + quote(fromName) + " cannot move into itself");
                        }
                        if (dst != null && dst.type == S_IFDIR && isAncestorOrSelf(dst.ino, fromDir)) {
                            throw new NamespaceException(Errno.ENOTEMPTY, "directory " + quote(toName) + " holds " + quote(fromName));
                        }
                        InodeStat vs = dst == null ? null : statIno(dst.ino);
                        if (src.type == S_IFDIR) {
                            if (dst != null && dst.type != S_IFDIR) {
                                throw new NamespaceException(Errno.ENOTDIR, quote(toName) + " is not a directory");
                            }
                            if (vs != null && vs.size() != 0) {
                                throw new NamespaceException(Errno.ENOTEMPTY, "directory " + quote(toName) + " holds " + vs.size() + " entries");
                            }
                            if (moveDir && dst == null && statIno(toDir).nlink() >= MAX_LINKS) {
                                throw new NamespaceException(Errno.EMLINK, "directory " + toDir + " has " + MAX_LINKS + " links");
                            }
                        } else if (dst != null && dst.type == S_IFDIR) {
                            throw new NamespaceException(Errno.EISDIR, quote(toName) + " is a directory");
                        }
                        unready = step(from, 0) != READY || step(to, dst == null ? tk.length : 0) != READY;
                        if (unready || changeItems(ag, from, to, s, v) > items) {
                            continue; // prepared, and reserved afresh
                        }
                        boolean lastLink = v != null && (dst.type == S_IFDIR || vs.nlink() <= 1);
                        boolean orphan = lastLink && (v.opens > 0 || vs.blocks() > 0);
                        boolean isDir = src.type == S_IFDIR;
                        if (!applyChange(txn, lastLink ? ag : null, new Inode[] {from, to, s, v}, txn2 -> {
                            deleteEntry(txn2, from, fk);
                            if (dst == null) {
                                insertAbsent(txn2, to, tk, src.ino, src.type);
                            } else {
                                replaceEntry(txn2, to, tk, src.ino, src.type);
                            }
                            int toLinks = (moveDir ? 1 : 0) - (dst != null && dst.type == S_IFDIR ? 1 : 0);
                            if (fromDir != toDir) {
                                adjust(txn2, fromDir, moveDir ? -1 : 0, true);
                            }
                            adjust(txn2, toDir, toLinks, true);
                            Buffer sb = lockRecord(txn2, src.ino);
                            if (isDir) {
                                InodeFormat.setParent(sb.data(), rec(src.ino), toDir);
                            }
                            InodeFormat.touch(sb.data(), rec(src.ino), nowNanos(), false);
                            txn2.log(sb, rec(src.ino), InodeFormat.INLINE);
                            if (v != null) {
                                dropLink(txn2, v, dst.type == S_IFDIR, lastLink, orphan);
                            }
                        })) {
                            fails = requireFixable(ag, fails);
                            continue;
                        }
                        last = lastLink;
                        free = orphan && v.opens == 0;
                    } finally {
                        unlockAll(acquired);
                        if (moveDir) {
                            renameLock.unlock();
                        }
                    }
                }
                afterUnlink(ag, v, last, free);
                return;
            } finally {
                releaseAll(acquired);
            }
        }
    }

    // ================================================================== checking

    /**
     * Every problem a full walk finds, empty for a sound volume: the allocation groups and their trees
     * ({@link Volume}'s checks, with the directories' blocks accounted for), and from the root down every
     * directory's tree and reserve, its entry count, link count (2 + subdirectories) and parent link,
     * each entry's type against its inode, each inode's link count against the entries naming it, and
     * that every allocated inode is reachable or an orphan with no links. Reads only; run it while
     * nothing changes the volume.
     */
    public List<String> check() {
        List<String> problems = new ArrayList<>();
        java.util.TreeMap<Long, Integer> owned = new java.util.TreeMap<>();
        java.util.Map<Long, Integer> names = new java.util.HashMap<>();
        java.util.Set<Long> dirsSeen = new java.util.HashSet<>();
        Deque<Long> todo = new ArrayDeque<>();
        long root = root();
        todo.add(root);
        dirsSeen.add(root);
        while (!todo.isEmpty()) {
            long dir = todo.poll();
            InodeStat ds = statIno(dir);
            int subdirs = 0;
            List<DirEntry> entries = allEntries(dir);
            for (DirEntry e : entries) {
                String where = "directory " + dir + " entry '" + e.name() + "'";
                InodeStat cs;
                try {
                    cs = statIno(e.ino());
                } catch (NamespaceException x) {
                    problems.add(where + " names free inode " + e.ino());
                    continue;
                }
                if ((cs.mode() & S_IFMT) != e.type()) {
                    problems.add(where + " has type 0" + Integer.toOctalString(e.type()) + " but inode " + e.ino()
                            + " has mode 0" + Integer.toOctalString(cs.mode()));
                }
                names.merge(e.ino(), 1, Integer::sum);
                if (cs.isDirectory()) {
                    subdirs++;
                    if (!dirsSeen.add(e.ino())) {
                        problems.add(where + " names directory " + e.ino() + " which has another name");
                        continue;
                    }
                    if (parentOf(e.ino()) != dir) {
                        problems.add("directory " + e.ino() + " says its parent is " + parentOf(e.ino()) + ", not " + dir);
                    }
                    todo.add(e.ino());
                }
            }
            if (ds.size() != entries.size()) {
                problems.add("directory " + dir + " counts " + ds.size() + " entries but holds " + entries.size());
            }
            if (ds.nlink() != 2 + subdirs) {
                problems.add("directory " + dir + " has " + ds.nlink() + " links, expected 2 + " + subdirs + " subdirectories");
            }
            checkBlocks(dir, ds, owned, problems);
        }
        java.util.Set<Long> orphans = new java.util.HashSet<>();
        for (int g = 0; g < geometry.agCount(); g++) {
            orphans.addAll(volume.group(g).orphanInodes());
        }
        for (int g = 0; g < geometry.agCount(); g++) {
            for (long ino : volume.group(g).allocatedInodes()) {
                InodeStat s = readRecord(ino, (b, rec) -> InodeFormat.stat(ino, b, rec));
                int n = names.getOrDefault(ino, 0);
                if (orphans.contains(ino)) {
                    if (n != 0 || s.nlink() != 0) {
                        problems.add("orphan " + ino + " has " + s.nlink() + " links and " + n + " names");
                    }
                    checkBlocks(ino, s, owned, problems);
                } else if (ino != root && n == 0) {
                    problems.add("inode " + ino + " (mode 0" + Integer.toOctalString(s.mode()) + ") is allocated but has no name");
                } else if (!s.isDirectory()) {
                    if (s.nlink() != n) {
                        problems.add("inode " + ino + " has " + s.nlink() + " links but " + n + " names");
                    }
                    checkBlocks(ino, s, owned, problems);
                }
            }
        }
        for (long ino : orphans) {
            if (readRecord(ino, InodeFormat::mode) == 0) {
                problems.add("orphan " + ino + " is a free inode");
            }
        }
        problems.addAll(volume.check(owned));
        return problems;
    }

    /** A long symlink's block: in range, holding the link's target of its size; the inode counts one block. */
    private void checkRemoteBlock(long ino, long blk, InodeStat s, java.util.TreeMap<Long, Integer> owned, List<String> problems) {
        if (!s.isSymlink()) {
            problems.add("inode " + ino + " (mode 0" + Integer.toOctalString(s.mode()) + ") has a remote fork; only long symlinks do");
        }
        if (s.blocks() != 1) {
            problems.add("symlink " + ino + " counts " + s.blocks() + " blocks but owns 1");
        }
        if (!geometry.isDataBlock(blk)) {
            problems.add("symlink " + ino + " names block " + blk + " outside the allocation groups");
            return;
        }
        owned.put(blk, 1);
        try {
            if (s.isSymlink()) {
                remoteTarget(ino, blk, s.size());
            }
        } catch (CorruptionException | NamespaceException e) {
            problems.add("symlink " + ino + ": " + e.getMessage());
        }
    }

    /**
     * Accounts for the blocks an inode owns in {@code owned}, checking them: a directory's tree and
     * reserve, a long symlink's target block.
     */
    private void checkBlocks(long dir, InodeStat s, java.util.TreeMap<Long, Integer> owned, List<String> problems) {
        long remote = readRecord(dir, (b, rec) -> InodeFormat.fork(b, rec) == InodeFormat.FORK_REMOTE ? InodeFormat.remoteBlock(b, rec) : 0L);
        if (remote != 0) {
            checkRemoteBlock(dir, remote, s, owned, problems);
            return;
        }
        int area = rec(dir) + InodeFormat.INLINE;
        long[] st = readRecord(dir, (b, rec) -> isTree(b, rec) && InodeFormat.type(b, rec) == S_IFDIR
                ? new long[] {DirEntryFormat.treeHeader(b, area), requireReserve(dir, b, area)} : null);
        if (st == null) {
            if (s.blocks() != 0) {
                problems.add("inode " + dir + " counts " + s.blocks() + " blocks but owns none");
            }
            return;
        }
        long blocks = st[1];
        for (int i = 0; i < st[1]; i++) {
            int k = i;
            owned.put(readRecord(dir, (b, rec) -> DirEntryFormat.reserveEntry(b, area, k)), 1);
        }
        if (st[0] != 0) {
            Inode d = inodes.acquire(dir);
            try {
                BTree t = tree(d, st[0]);
                for (dev.ferrite.btree.TreeCheck.Problem p : t.check().problems()) {
                    problems.add("directory " + dir + " tree: " + p);
                }
                long[] n = new long[1];
                dev.ferrite.btree.TreeWalk.blocks(t, blk -> {
                    owned.put(blk, 1);
                    n[0]++;
                });
                blocks += n[0];
            } finally {
                inodes.release(d);
            }
        }
        if (blocks != s.blocks()) {
            problems.add("directory " + dir + " counts " + s.blocks() + " blocks but owns " + blocks);
        }
    }
}
