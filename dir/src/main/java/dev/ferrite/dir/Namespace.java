package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.dir.Creator.Created;
import dev.ferrite.dir.Creator.Outcome;
import dev.ferrite.dir.Creator.Refused;
import dev.ferrite.dir.DirContents.Found;
import dev.ferrite.dir.PathResolver.Parent;
import dev.ferrite.dir.PathResolver.Walk;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.journal.VolumeShutdownException;

import static dev.ferrite.dir.DirContents.READY;
import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFLNK;
import static dev.ferrite.dir.InodeFormat.S_IFMT;
import static dev.ferrite.dir.InodeFormat.S_IFREG;
import static dev.ferrite.dir.InodeRecords.lockAll;
import static dev.ferrite.dir.InodeRecords.nowNanos;
import static dev.ferrite.dir.InodeRecords.pick;
import static dev.ferrite.dir.InodeRecords.requireFixable;
import static dev.ferrite.dir.InodeRecords.unlockAll;
import static dev.ferrite.dir.PathResolver.CREATE;
import static dev.ferrite.dir.PathResolver.NEW_NAME;
import static dev.ferrite.dir.PathResolver.RMDIR;
import static dev.ferrite.dir.PathResolver.UNLINK;
import static dev.ferrite.dir.PathResolver.nonNull;
import static dev.ferrite.dir.PathResolver.quote;
import static dev.ferrite.dir.PathResolver.refuseDots;
import static dev.ferrite.dir.PathResolver.requireName;

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
 * <h2>Errors</h2>
 * Each method documents what it throws. <em>The path errnos</em>: EINVAL for a path that is not absolute,
 * holds NUL, or leads above the root with {@code ..}; ENAMETOOLONG for a path over 4095 bytes or a
 * component over 255; ENOENT for a missing component; ENOTDIR for a component that is not a directory;
 * ELOOP past {@link #MAX_SYMLINKS} symlinks. <em>The name errnos</em> of the handle forms: EINVAL for a
 * null or empty name or one holding {@code /} or NUL, ENAMETOOLONG past 255 bytes, and ENOTDIR or ENOENT
 * for a directory handle that is not a directory or was removed. Besides these, every method may throw
 * {@link dev.ferrite.io.CorruptionException} naming the block when what it reads is not what the volume
 * can hold, and {@link dev.ferrite.io.DeviceException} when the device fails a read; nothing here throws
 * {@link dev.ferrite.io.InvalidArgumentException} (a bad name or path is a {@link NamespaceException}).
 *
 * <h2>Transactions and locks</h2>
 * Every transaction reserves its log space before it takes any lock (XFS's order): a writer waiting in
 * the journal's FIFO for log space holds nothing that a reader ({@link #open} takes the inode's lock) or
 * another writer needs, and a writer holding locks never waits for log space, so reservations and locks
 * cannot wait for each other. An operation sizes its reservation from a lock-free look; under the locks,
 * if it needs more, or its directory needs a step of its own first (an inline directory to convert, a
 * block reserve to refill or spill: {@link DirContents#prepare}, each step again reserve-then-lock), or a group's
 * free list needs fixing, it drops everything, unchanged, and starts again. An orphan is freed after
 * the unlinking operation let go of its locks, a step at a time. Locks are taken in one order, which
 * makes deadlock impossible (a file's I/O lock comes before all of them and before the log reservation, as
 * XFS's {@code i_rwsem} does: reads and writes share it, truncate and an orphan's freeing hold it alone;
 * nothing that frees log space needs it):
 * <ol>
 *   <li>the rename lock, only by renames moving a directory to another parent (it keeps the "not into
 *       its own subtree" check true until they commit, as Linux's {@code s_vfs_rename_mutex} does);
 *   <li>per-inode locks ({@link Inode#lock}), in ascending inode number, held across the transaction; a
 *       directory's by {@link Inode#lockExclusive}, which also waits for the creates inside it;
 *   <li>the AGI of the one group whose inodes the operation allocates or frees (then its AGF if it adds
 *       an inode chunk): the new inode is chosen under the AGI before any inode block is locked;
 *   <li>inode blocks, in ascending block number (eight records share a block);
 *   <li>directory tree nodes: a directory's tree changes under its inode's lock, so no such transaction
 *       ever waits for another's tree nodes, and its allocator pops the reserve in the record already held.
 * </ol>
 * The exception: a file or inline symlink created in a tree directory holds neither the directory's lock
 * nor its record across its insert. It enters the directory beside the other such creates (a claim on
 * the tree's reserve), takes its name's stripe, then in its transaction one group's AGI, the tree's nodes
 * (latched by CAS: a writer never waits for a node while holding one), the group's inode trees, and the
 * parent's record block (with the new inode's, by block number) last ({@code Creator}'s class comment
 * gives why this closes no cycle). Creates in one directory thus run side by side, meeting only on a
 * tree leaf or a group's AGI (the parent's group, or another when a create holds that) and briefly on
 * the parent's record. An unlink of a file's or symlink's name there does the same ({@code sharedUnlink}):
 * entered, its name's stripe held, it only tries the file's inode lock, then takes the file's group's AGI
 * (a last link), the file's record block if below the parent's, the tree's nodes, and the parent's record.
 * Lookups, stat and readdir take no lock: they read inode records and trees optimistically.
 *
 * <h2>Parts</h2>
 * This class is the façade and the operations that change names: create (its transaction is
 * {@code Creator}'s), remove, link and rename. The parts it delegates to, each with one job, and the
 * locks of the list above each takes are in the package documentation.
 *
 * <h2>Files</h2>
 * Regular files' data goes straight between the caller's buffer and the device when a call is aligned
 * (the direct path), else through the data page cache ({@code BufferedIo}); {@code FileData} and
 * docs/namespace.md ("Files") give the ordering that keeps a crash from exposing blocks a file did not
 * write.
 *
 * <h2>Orphans</h2>
 * An inode whose last link goes while a handle holds it open, or which still owns blocks (a directory
 * tree, a file's extents), is recorded in its group's orphan tree in the unlinking transaction and freed in steps at the
 * last close, or by {@link Volume#open} after a crash.
 */
public final class Namespace {
    /** Links an inode may have (EMLINK beyond). */
    public static final int MAX_LINKS = 65_000;
    /** Symlinks one path resolution follows before ELOOP. */
    public static final int MAX_SYMLINKS = 40;
    /** Longest symlink target: PATH_MAX less its NUL (a volume with blocks under 4 KiB holds less). */
    public static final int MAX_SYMLINK_TARGET = 4095;
    /** The largest file: 2^63 - 1 bytes rounded down to a multiple of 4 KiB (EFBIG past it). */
    public static final long MAX_FILE_SIZE = FileData.MAX_FILE_SIZE;
    /** {@link #fallocate} mode bits, Linux's: keep the size, free the range, make the range read zeros. */
    public static final int FALLOC_FL_KEEP_SIZE = 0x01, FALLOC_FL_PUNCH_HOLE = 0x02, FALLOC_FL_ZERO_RANGE = 0x10;
    /** {@link #open(String, int)} access modes, Linux's values: one of them, or'd with the flags below. */
    public static final int O_RDONLY = 0, O_WRONLY = 01, O_RDWR = 02, O_ACCMODE = 03;
    /** Every write through the handle appends, atomically, as {@link #append} (a write's offset is ignored, as Linux's pwrite). */
    public static final int O_APPEND = 02000;
    /** Every read and write through the handle takes the direct path: EINVAL for one not aligned for it. */
    public static final int O_DIRECT = 040000;
    private final Volume volume;
    private final BufferCache cache;
    private final Geometry geometry;
    private final InodeCache inodes;
    final InodeRecords records;
    final DirContents dirs;
    final PathResolver paths;
    /** The walks' name cache: every change that takes a name away brackets itself with its removal calls. */
    final NameCache names;
    private final Orphans orphans;
    final FileData files;
    private final FileClone clones;
    final ExtentMap extents;
    final Creator creator;
    private final NamespaceChecker checker;
    private final ReentrantLock renameLock = new ReentrantLock();
    /**
     * The most log items any group's inode and orphan trees have needed in a remove: an unlink reserves
     * before it knows its child's group, and sizing for this instead of the directory's group spares it a
     * second attempt when the child's group turns out to need more (a fifth of unlinks in bench meta).
     */
    private final AtomicInteger groupItemsBound = new AtomicInteger();

    Namespace(Volume volume, BufferCache cache, Geometry geometry, InodeCache inodes, PageCache pages, int nameCacheEntries) {
        this.volume = volume;
        this.cache = cache;
        this.geometry = geometry;
        this.inodes = inodes;
        this.records = new InodeRecords(volume, cache, geometry, inodes);
        this.dirs = new DirContents(volume, cache, geometry, inodes, records);
        this.names = new NameCache(nameCacheEntries);
        this.paths = new PathResolver(volume, geometry, records, dirs, names);
        this.extents = new ExtentMap(volume, cache, geometry, inodes, records, dirs);
        this.files = new FileData(volume, cache, geometry, records, inodes, pages, extents);
        this.orphans = new Orphans(volume, cache, geometry, inodes, records, dirs, files);
        this.clones = new FileClone(volume, cache, geometry, records, extents, files);
        this.creator = new Creator(volume, cache, geometry, inodes, records, dirs);
        this.checker = new NamespaceChecker(volume, geometry, inodes, records, dirs, extents, paths);
        if (dirs.inlineCapacity < DirEntryFormat.treeAreaSize()) {
            throw new IllegalStateException("inode records of " + geometry.inodeSize() + " bytes cannot hold a directory tree's reserve");
        }
    }

    /** The root directory's inode number. */
    public long root() {
        return paths.root();
    }

    /**
     * Creates directory {@code path}; returns its inode number.
     *
     * @throws NamespaceException the path errnos; EEXIST if the name exists (or is {@code .}, {@code ..} or the
     *         root); EMLINK if the parent has {@link #MAX_LINKS} links
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public long mkdir(String path, int permissions) {
        Parent p = paths.resolveParent(path);
        refuseDots(p.name(), NEW_NAME);
        try (EntryKey key = EntryKey.take(p.name(), true)) {
            createEntry(p.dir(), key, p.name(), S_IFDIR | permissions & ~S_IFMT, true, null, false);
            return key.made;
        }
    }

    /**
     * Creates regular file {@code path}, or with {@code exclusive} false returns the file already there
     * (EISDIR if it is a directory); returns the inode number. As {@code open(2)} with {@code O_CREAT}:
     * without {@code exclusive} a final symlink is followed, and a dangling one creates the file it names.
     *
     * @throws NamespaceException the path errnos; EEXIST if {@code exclusive} and the name exists (or is {@code .},
     *         {@code ..} or the root); EISDIR if it is a directory, or for a trailing slash
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public long create(String path, int permissions, boolean exclusive) {
        Walk w = paths.walkToParent(path);
        try (EntryKey key = EntryKey.take()) {
            return createFile(w, w.dir(), w.name(), w.slashed(), S_IFREG | permissions & ~S_IFMT, exclusive, key, false);
        }
    }

    /**
     * Creates symlink {@code linkPath} pointing at {@code target}; returns its inode number.
     *
     * @throws NamespaceException ENOENT for an empty target, EINVAL for one holding NUL, ENAMETOOLONG for one longer
     *         than {@link #MAX_SYMLINK_TARGET} (or its block); then the path errnos; EEXIST if the name exists
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public long symlink(String target, String linkPath) {
        byte[] t = paths.symlinkTarget(target); // checked first, as Linux does: a bad target wins over a bad path
        Parent p = paths.resolveParent(linkPath);
        paths.refuseNewName(p);
        try (EntryKey key = EntryKey.take(p.name(), true)) {
            createEntry(p.dir(), key, p.name(), S_IFLNK | 0777, true, t, false);
            return key.made;
        }
    }

    /**
     * Opens {@code path} (symlinks followed).
     *
     * @throws NamespaceException the path errnos
     */
    public Handle open(String path) {
        for (long missed = 0; ; ) {
            long ino = paths.resolve(path, true);
            Handle h = orphans.openIno(ino);
            if (h != null) {
                return h;
            }
            missed = orphans.requireNotMissedTwice(missed, ino, quote(path));
        }
    }

    /**
     * Opens {@code path} (symlinks followed) with {@code open(2)} flags: an access mode ({@link #O_RDONLY},
     * {@link #O_WRONLY}, {@link #O_RDWR}) and {@link #O_APPEND}, {@link #O_DIRECT}. A read through a handle
     * open for writing only, or a write, append or fallocate through one open for reading only, fails with
     * EBADF (truncate with EINVAL, as ftruncate) and changes nothing. {@link #open(String)} is O_RDWR.
     *
     * @throws NamespaceException EINVAL for an access mode of 3 or a flag not listed; the path errnos; EISDIR
     *         for a directory opened for writing
     */
    public Handle open(String path, int flags) {
        return open(path, flags, false);
    }

    /**
     * {@link #open(String, int)} for a caller that expects the path may be missing (a server opening a name
     * its client asked for): null where open throws ENOENT, with no exception made.
     *
     * @return the handle, or null if {@code path} names nothing (ENOENT)
     * @throws NamespaceException as {@link #open(String, int)} but ENOENT
     */
    public Handle openIfExists(String path, int flags) {
        try {
            return open(path, flags, true);
        } catch (NamespaceException e) {
            if (e.errno() == Errno.ENOENT) { // rarer ways to miss: a directory on the way removed meanwhile
                return null;
            }
            throw e;
        }
    }

    /** {@link #open(String, int)}; with {@code probe}, null for a name missing on the way instead of ENOENT. */
    private Handle open(String path, int flags, boolean probe) {
        requireFlags(flags, path);
        for (long missed = 0; ; ) {
            long ino;
            if (probe) {
                Walk w = paths.probe(path);
                if (w.missing()) {
                    return null;
                }
                ino = w.ino();
            } else {
                ino = paths.resolve(path, true);
            }
            Handle h = orphans.openIno(ino, flags);
            if (h != null) {
                return requireNotWritableDir(h, path, false, 0);
            }
            missed = orphans.requireNotMissedTwice(missed, ino, quote(path));
        }
    }

    private static void requireFlags(int flags, String name) {
        if ((flags & O_ACCMODE) == O_ACCMODE || (flags & ~(O_ACCMODE | O_APPEND | O_DIRECT)) != 0) {
            throw new NamespaceException(Errno.EINVAL, "open of " + quote(name) + " with flags 0" + Integer.toOctalString(flags)
                    + ": an access mode of O_RDONLY, O_WRONLY or O_RDWR, and only O_APPEND and O_DIRECT besides");
        }
    }

    /**
     * {@code h}, or EISDIR (closing it) if it is a directory opened for writing. The message names it as
     * path or name {@code name}, in directory {@code dir} if {@code inDir}: made only then, not per open.
     */
    private Handle requireNotWritableDir(Handle h, String name, boolean inDir, long dir) {
        if (h.isWritable() && (records.modeOf(h.ino()) & S_IFMT) == S_IFDIR) {
            h.close();
            throw new NamespaceException(Errno.EISDIR, "cannot open directory " + quote(name) + (inDir ? " in directory " + dir : "")
                    + " for writing");
        }
        return h;
    }

    /**
     * The inode {@code path} names, symlinks followed.
     *
     * @throws NamespaceException the path errnos
     */
    public long lookup(String path) {
        return paths.resolve(path, true);
    }

    /**
     * The attributes of what {@code path} names, symlinks followed.
     *
     * @throws NamespaceException the path errnos
     */
    public InodeStat stat(String path) {
        return records.statIno(paths.resolve(path, true));
    }

    /**
     * {@link #stat(String)} into {@code out} for a caller that expects the path may be missing (a server
     * looking a name up before it creates it): false instead of ENOENT. Once the directories on the way are
     * cached, a path that is there, or missing, costs no allocation.
     *
     * @return true with {@code out} filled, false if {@code path} names nothing (ENOENT)
     * @throws NamespaceException the path errnos but ENOENT
     */
    public boolean statIfExists(String path, StatBuffer out) {
        try {
            Walk w = paths.probe(path);
            if (w.missing()) {
                return false;
            }
            records.statInto(w.ino(), out);
            return true;
        } catch (NamespaceException e) {
            if (e.errno() == Errno.ENOENT) { // rarer ways to miss: a directory on the way or the inode removed meanwhile
                return false;
            }
            throw e;
        }
    }

    /**
     * The attributes of {@code path} itself (a final symlink not followed).
     *
     * @throws NamespaceException the path errnos
     */
    public InodeStat lstat(String path) {
        return records.statIno(paths.resolve(path, false));
    }

    /**
     * Up to {@code max} entries of directory {@code path} after {@code after}.
     *
     * @throws NamespaceException the path errnos; ENOTDIR if it is not a directory; EINVAL if {@code max < 1}
     */
    public DirPage readdir(String path, DirCookie after, int max) {
        return dirs.readdirIno(paths.resolve(path, true), after, max);
    }

    /**
     * The next entries of directory {@code path} into {@code into}, after those its last fill held (from the
     * first after {@link DirBuffer#rewind()} or when new): {@link #readdir(String, DirCookie, int)} without
     * allocating per entry, as a server listing a directory to match names needs.
     *
     * @return how many entries it holds now ({@link DirBuffer#end()}: whether the directory holds more)
     * @throws NamespaceException as {@link #readdir(String, DirCookie, int)}
     */
    public int readdir(String path, DirBuffer into) {
        java.util.Objects.requireNonNull(into, "into");
        dirs.fill(paths.resolve(path, true), into);
        return into.size();
    }

    /**
     * Every entry of directory {@code path}, read a page at a time as {@link #readdir} reads them.
     *
     * @throws NamespaceException the path errnos; ENOTDIR if it is not a directory
     */
    public List<DirEntry> list(String path) {
        return dirs.allEntries(paths.resolve(path, true));
    }

    /**
     * Removes the name {@code path} of a non-directory.
     *
     * @throws NamespaceException the path errnos; EISDIR if it names a directory (or is {@code .}, {@code ..} or the
     *         root); ENOTDIR for a trailing slash on a non-directory
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void unlink(String path) {
        Walk w = paths.walkToParent(path);
        refuseDots(w.name(), UNLINK);
        if (w.slashed()) {
            // "name/" asks for a directory: unlink(2) says EISDIR if the entry is one, ENOTDIR if not (not followed)
            Found f = dirs.find(w.dir(), EntryKey.of(requireName(w.name().toString(), false)));
            if (f == null) {
                throw new NamespaceException(Errno.ENOENT, quote(w.name()) + " in directory " + w.dir());
            }
            throw new NamespaceException(f.type() == S_IFDIR ? Errno.EISDIR : Errno.ENOTDIR, "cannot unlink " + quote(path));
        }
        removeEntry(w.dir(), w.name(), false);
    }

    /**
     * Removes empty directory {@code path}.
     *
     * @throws NamespaceException the path errnos; ENOTDIR if it is not a directory; ENOTEMPTY if it has entries (or
     *         is {@code ..}); EINVAL for {@code .}; EBUSY for the root
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void rmdir(String path) {
        Parent p = paths.resolveParent(path);
        refuseDots(p.name(), RMDIR);
        removeEntry(p.dir(), p.name(), true);
    }

    /**
     * Renames {@code from} to {@code to} atomically, replacing a compatible {@code to}.
     *
     * @throws NamespaceException the path errnos for either; EBUSY for {@code .}, {@code ..} or the root; EINVAL for
     *         a directory moved into itself; ENOTDIR or EISDIR for a directory against a non-directory; ENOTEMPTY for
     *         a directory replacing a non-empty one; EMLINK if the new parent has {@link #MAX_LINKS} links
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void rename(String from, String to) {
        rename(from, to, RenameMode.REPLACE);
    }

    /**
     * Renames {@code from} to {@code to} atomically as {@code renameat2(2)} with {@code mode}'s flag: {@link
     * #rename(String, String)} for {@link RenameMode#REPLACE}; {@link RenameMode#NO_REPLACE} refuses an existing
     * {@code to}; {@link RenameMode#EXCHANGE} swaps the two entries, whatever their types.
     *
     * @throws NamespaceException as {@link #rename(String, String)}; with NO_REPLACE, EEXIST if {@code to} exists (or is
     *         {@code .}, {@code ..} or the root); with EXCHANGE, ENOENT if {@code to} does not exist, ENOTDIR for a
     *         trailing slash on a {@code to} that is not a directory, EINVAL for a directory exchanged with one of its
     *         ancestors, EMLINK if a directory would take a parent past {@link #MAX_LINKS} links, and no ENOTDIR,
     *         EISDIR or ENOTEMPTY for the entries' types or contents
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void rename(String from, String to, RenameMode mode) {
        Parent f = paths.resolveParent(from);
        Parent t = paths.resolveParent(to);
        paths.requireRenamable(f.dir(), f.name(), f.slashed(), t.dir(), t.name(), t.slashed(), mode);
        renameEntry(f.dir(), f.name(), t.dir(), t.name(), mode);
    }

    /**
     * Adds the name {@code newPath} for the non-directory {@code existing} (a final symlink not followed).
     *
     * @throws NamespaceException the path errnos for either; EEXIST if {@code newPath} exists; EPERM if {@code
     *         existing} is a directory; EMLINK if it has {@link #MAX_LINKS} links
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void link(String existing, String newPath) {
        long target = paths.resolve(existing, false);
        Parent p = paths.resolveParent(newPath);
        paths.refuseNewName(p);
        linkEntry(target, p.dir(), p.name());
    }

    /**
     * The target of symlink {@code path}.
     *
     * @throws NamespaceException the path errnos; EINVAL if it is not a symlink
     */
    public String readlink(String path) {
        return records.readlinkIno(paths.resolve(path, false));
    }

    /**
     * Sets permissions, owner and times of what {@code path} names (symlinks followed); -1 leaves a field.
     *
     * @throws NamespaceException the path errnos
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void setattr(String path, int permissions, int uid, int gid, long atimeNanos, long mtimeNanos) {
        records.setattrIno(paths.resolve(path, true), permissions, uid, gid, atimeNanos, mtimeNanos);
    }

    /** A handle on the root directory. */
    public Handle openRoot() {
        return orphans.openIno(root());
    }

    /**
     * Opens the entry {@code name} of {@code dir} (a symlink is opened itself, not followed); {@code "."}
     * is {@code dir} and {@code ".."} its parent.
     *
     * @throws NamespaceException EBADF if a handle is closed; ENOTDIR if {@code dir} is not a directory, ENOENT if it
     *         was removed or holds no {@code name}; EINVAL for {@code ..} at the root; the name errnos
     */
    public Handle open(Handle dir, String name) {
        long d = dir.requireOpen().ino;
        for (long missed = 0; ; ) {
            long ino = paths.entry(d, name);
            Handle h = orphans.openIno(ino);
            if (h != null) {
                return h;
            }
            missed = orphans.requireNotMissedTwice(missed, ino, quote(name) + " in directory " + d);
        }
    }

    /**
     * {@link #open(Handle, String)} with {@code open(2)} flags, as {@link #open(String, int)}.
     *
     * @throws NamespaceException EINVAL for bad flags; as {@link #open(Handle, String)}; EISDIR for a directory
     *         opened for writing
     */
    public Handle open(Handle dir, String name, int flags) {
        requireFlags(flags, name);
        long d = dir.requireOpen().ino;
        for (long missed = 0; ; ) {
            long ino = paths.entry(d, name);
            Handle h = orphans.openIno(ino, flags);
            if (h != null) {
                return requireNotWritableDir(h, name, true, d);
            }
            missed = orphans.requireNotMissedTwice(missed, ino, quote(name) + " in directory " + d);
        }
    }

    /**
     * The attributes of entry {@code name} of {@code dir} itself, a symlink not followed: what
     * {@code fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)} gives, without resolving a path ({@code "."} is
     * {@code dir}, {@code ".."} its parent). A listing that stats each entry it reads does one lookup per
     * entry this way.
     *
     * @throws NamespaceException as {@link #open(Handle, String)}
     */
    public InodeStat lstat(Handle dir, String name) {
        return records.statIno(paths.entry(dir.requireOpen().ino, name));
    }

    /**
     * {@link #lstat(Handle, String)} into {@code out}, which a caller reuses (a listing's loop, a server's
     * request handler): once the directory's blocks are cached, a plain name's lookup and the stat allocate nothing.
     *
     * @throws NamespaceException as {@link #lstat(Handle, String)}
     */
    public void lstat(Handle dir, String name, StatBuffer out) {
        records.statInto(paths.entry(dir.requireOpen().ino, name), out);
    }

    /**
     * {@link #lstat(Handle, String, StatBuffer)} for a caller that expects the name may be missing (a server
     * answering a lookup before a create): false instead of ENOENT for a name not in {@code dir}, with no
     * exception made.
     *
     * @return true with {@code out} filled, false if {@code dir} has no entry {@code name}
     * @throws NamespaceException as {@link #lstat(Handle, String)} but ENOENT for the name itself
     */
    public boolean lstatIfExists(Handle dir, String name, StatBuffer out) {
        long ino = paths.entryIfExists(dir.requireOpen().ino, name);
        if (ino == PathResolver.MISSING) {
            return false;
        }
        records.statInto(ino, out);
        return true;
    }

    /**
     * {@link #mkdir(String, int)} of {@code name} in {@code dir}; returns a handle on the new directory.
     *
     * @throws NamespaceException EBADF if a handle is closed; the name errnos; EEXIST if it exists; EMLINK as for a
     *         path
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public Handle mkdir(Handle dir, String name, int permissions) {
        long d = dir.requireOpen().ino;
        paths.requireEntryName(d, name, NEW_NAME);
        try (EntryKey key = EntryKey.take(name, true)) {
            createEntry(d, key, name, S_IFDIR | permissions & ~S_IFMT, true, null, true);
            return key.opened != null ? new Handle(orphans, key.opened, O_RDWR) : orphans.openCreated(key.made);
        }
    }

    /**
     * {@link #create(String, int, boolean)} in {@code dir}: a final symlink is followed unless {@code exclusive}.
     *
     * @throws NamespaceException EBADF if a handle is closed; the name errnos; EEXIST or EISDIR as for a path; a
     *         followed symlink's path errnos
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public Handle create(Handle dir, String name, int permissions, boolean exclusive) {
        return create(dir, name, permissions, exclusive, O_RDWR);
    }

    /**
     * {@link #create(Handle, String, int, boolean)} returning a handle with {@code open(2)} flags, as
     * {@link #open(String, int)} takes them ({@code O_CREAT} with them).
     *
     * @throws NamespaceException EINVAL for bad flags, before anything is created; else as
     *         {@link #create(Handle, String, int, boolean)}
     */
    public Handle create(Handle dir, String name, int permissions, boolean exclusive, int flags) {
        requireFlags(flags, name);
        long d = dir.requireOpen().ino;
        paths.requireEntryName(d, name, exclusive ? NEW_NAME : CREATE);
        try (EntryKey key = EntryKey.take()) {
            long ino = createFile(null, d, name, false, S_IFREG | permissions & ~S_IFMT, exclusive, key, true);
            return key.opened != null ? new Handle(orphans, key.opened, flags) : orphans.openCreated(ino, flags);
        }
    }

    /**
     * An exclusive {@link #create(Handle, String, int, boolean)} of a regular file whose inode record starts
     * with {@link InodeFormat} flags {@code inodeFlags}, set in the create's own transaction (a table blob
     * is made doomed until the commit that links it clears the flag: {@link TableBlobs#write}).
     */
    Handle createFlagged(Handle dir, String name, int permissions, int inodeFlags) {
        long d = dir.requireOpen().ino;
        paths.requireEntryName(d, name, NEW_NAME);
        try (EntryKey key = EntryKey.take()) {
            key.inodeFlags = inodeFlags;
            long ino = createFile(null, d, name, false, S_IFREG | permissions & ~S_IFMT, true, key, true);
            return key.opened != null ? new Handle(orphans, key.opened, O_RDWR) : orphans.openCreated(ino, O_RDWR);
        }
    }

    /**
     * {@link #symlink(String, String)} as {@code name} in {@code dir}.
     *
     * @throws NamespaceException the target's errnos as for a path; EBADF if a handle is closed; the name errnos;
     *         EEXIST if it exists
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void symlink(Handle dir, String name, String target) {
        byte[] t = paths.symlinkTarget(target);
        long d = dir.requireOpen().ino;
        paths.requireEntryName(d, name, NEW_NAME);
        try (EntryKey key = EntryKey.take(name, true)) {
            createEntry(d, key, name, S_IFLNK | 0777, true, t, false);
        }
    }

    /**
     * {@link #unlink(String)} of {@code name} in {@code dir}.
     *
     * @throws NamespaceException EBADF if a handle is closed; the name errnos; EISDIR for a directory (or {@code .}
     *         or {@code ..})
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void unlink(Handle dir, String name) {
        long d = dir.requireOpen().ino;
        paths.requireEntryName(d, name, UNLINK);
        removeEntry(d, name, false);
    }

    /**
     * {@link #rmdir(String)} of {@code name} in {@code dir}.
     *
     * @throws NamespaceException EBADF if a handle is closed; the name errnos; ENOTDIR, ENOTEMPTY (or {@code ..}) or
     *         EINVAL (for {@code .}) as for a path
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void rmdir(Handle dir, String name) {
        long d = dir.requireOpen().ino;
        paths.requireEntryName(d, name, RMDIR);
        removeEntry(d, name, true);
    }

    /**
     * {@link #rename(String, String)} of {@code from} in {@code fromDir} to {@code to} in {@code toDir}.
     *
     * @throws NamespaceException EBADF if a handle is closed; the name errnos; the other errnos as for paths
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void rename(Handle fromDir, String from, Handle toDir, String to) {
        rename(fromDir, from, toDir, to, RenameMode.REPLACE);
    }

    /**
     * {@link #rename(String, String, RenameMode)} of {@code from} in {@code fromDir} to {@code to} in {@code toDir}.
     *
     * @throws NamespaceException EBADF if a handle is closed; the name errnos; the other errnos as for paths
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void rename(Handle fromDir, String from, Handle toDir, String to, RenameMode mode) {
        long f = fromDir.requireOpen().ino;
        String fromName = nonNull(from);
        long t = toDir.requireOpen().ino;
        paths.requireRenamable(f, fromName, false, t, nonNull(to), false, mode);
        renameEntry(f, from, t, to, mode);
    }

    /**
     * {@link #link(String, String)} of {@code target} as {@code name} in {@code dir}.
     *
     * @throws NamespaceException EBADF if a handle is closed; the name errnos; ENOENT if {@code target} has no links
     *         left; EEXIST, EPERM or EMLINK as for paths
     * @throws NoSpaceException if no allocation group has the inode, blocks or free-list room the change needs
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void link(Handle target, Handle dir, String name) {
        long t = target.requireOpen().ino, d = dir.requireOpen().ino;
        paths.requireEntryName(d, name, NEW_NAME);
        linkEntry(t, d, name);
    }

    /**
     * The target of symlink {@code link}.
     *
     * @throws NamespaceException EBADF if a handle is closed; ENOENT if it was removed; EINVAL if it is not a symlink
     */
    public String readlink(Handle link) {
        return records.readlinkIno(link.requireOpen().ino);
    }

    /**
     * The attributes of {@code h}'s inode.
     *
     * @throws NamespaceException EBADF if a handle is closed
     */
    public InodeStat stat(Handle h) {
        return records.statIno(h.requireOpen().ino);
    }

    /**
     * {@link #stat(Handle)} into {@code out}, which a caller reuses: nothing is allocated per call.
     *
     * @throws NamespaceException as {@link #stat(Handle)}
     */
    public void stat(Handle h, StatBuffer out) {
        records.statInto(h.requireOpen().ino, out);
    }

    /**
     * {@link #readdir(String, DirCookie, int)} of directory {@code dir}.
     *
     * @throws NamespaceException EBADF if a handle is closed; ENOTDIR if it is not a directory, ENOENT if it was
     *         removed; EINVAL if {@code max < 1}
     */
    public DirPage readdir(Handle dir, DirCookie after, int max) {
        return dirs.readdirIno(dir.requireOpen().ino, after, max);
    }

    /**
     * {@link #readdir(String, DirBuffer)} of directory {@code dir}.
     *
     * @throws NamespaceException as {@link #readdir(Handle, DirCookie, int)}
     */
    public int readdir(Handle dir, DirBuffer into) {
        java.util.Objects.requireNonNull(into, "into");
        dirs.fill(dir.requireOpen().ino, into);
        return into.size();
    }

    /**
     * {@link #setattr(String, int, int, int, long, long)} of {@code h}'s inode.
     *
     * @throws NamespaceException EBADF if a handle is closed; ENOENT if its inode was freed
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void setattr(Handle h, int permissions, int uid, int gid, long atimeNanos, long mtimeNanos) {
        records.setattrIno(h.requireOpen().ino, permissions, uid, gid, atimeNanos, mtimeNanos);
    }

    /**
     * Reads regular file {@code file} from {@code offset} into {@code dst}; holes and unwritten extents read
     * as zeros. An offset and length in whole blocks with a native buffer aligned to
     * {@link dev.ferrite.io.BlockDevice#BUFFER_ALIGNMENT} go straight to the device (direct path; dirty cached
     * pages of the range are written back first); anything else is copied from the data page cache
     * (buffered). Either sees every write that returned before it began, and the size buffered writes made.
     *
     * @return the bytes read: all of {@code dst}, fewer at the end of the file, 0 at or past it
     * @throws NamespaceException EBADF if the handle is closed or open for writing only; EISDIR for a directory,
     *         EINVAL for a symlink; EINVAL for a negative offset, a length over 2^31 - 4096, or, through an
     *         {@link #O_DIRECT} handle, a call not aligned for the direct path
     * @throws CorruptionException naming the inode block, or the block of the file's extent tree, if its extents
     *         are not ones the volume can hold
     */
    public int read(Handle file, long offset, MemorySegment dst) {
        return files.read(file, offset, dst);
    }

    /**
     * {@link #read(Handle, long, MemorySegment)} into {@code dst} from its position to its limit (heap or
     * direct); its position moves past the bytes read.
     *
     * @throws NamespaceException as {@link #read(Handle, long, MemorySegment)}; EINVAL for a read-only buffer
     */
    public int read(Handle file, long offset, ByteBuffer dst) {
        if (dst.isReadOnly()) {
            throw new NamespaceException(Errno.EINVAL, "read of inode " + file.ino() + " into a read-only buffer");
        }
        int n = files.read(file, offset, MemorySegment.ofBuffer(dst));
        dst.position(dst.position() + n);
        return n;
    }

    /**
     * Writes all of {@code src} to regular file {@code file} at {@code offset}, extending the size if it
     * ends past it. Aligned as for the direct path (see {@link #read}), straight to the device: written
     * blocks in place, holes through unwritten extents, cached pages of the range dropped. Anything else
     * is buffered: copied into the data page cache (a partial block missing from it is read first), the
     * new size seen at once, the data written back later (fsync, fdatasync, shortly after the last close, {@link #sync},
     * unmount, memory pressure, or after {@link VolumeOptions#dirtyExpireMillis}). Through an
     * {@link #O_APPEND} handle it appends instead, whatever {@code offset}. Bad input changes nothing.
     *
     * @throws NamespaceException EBADF if the handle is closed or open for reading only; EISDIR for a directory,
     *         EINVAL for a symlink; EINVAL for a negative offset, a length over 2^31 - 4096, or a call through an
     *         {@link #O_DIRECT} handle not aligned for the direct path; EFBIG past {@link #MAX_FILE_SIZE}: then nothing
     *         changed
     * @throws NoSpaceException if the groups run out of free blocks (direct: the holes filled so far stay
     *         unwritten; buffered: no block is left to reserve for a page the write dirties, after the pages
     *         before it were written, a short write the size shows; or a write-back under pressure failed)
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void write(Handle file, long offset, MemorySegment src) {
        files.write(file, offset, src);
    }

    /**
     * {@link #write(Handle, long, MemorySegment)} of {@code src} from its position to its limit (heap or
     * direct); its position moves to its limit.
     */
    public void write(Handle file, long offset, ByteBuffer src) {
        files.write(file, offset, MemorySegment.ofBuffer(src));
        src.position(src.limit());
    }

    /**
     * Sets the size of regular file {@code file}: down frees every block past it (a last partial block
     * keeps its bytes before the size and reads zeros after), up leaves a hole.
     *
     * @throws NamespaceException EBADF if the handle is closed, EINVAL if it is open for reading only (as
     *         ftruncate); EISDIR or EINVAL as {@link #write}; EINVAL for a negative size; EFBIG past
     *         {@link #MAX_FILE_SIZE}
     */
    public void truncate(Handle file, long size) {
        files.truncate(file, size);
    }

    /**
     * {@link #write} at the end of the file, atomically against other appends, writes and truncates
     * ({@code O_APPEND}); returns the offset written. Direct if the size, the length and the buffer are
     * aligned, else buffered (EINVAL for an {@link #O_DIRECT} handle then).
     */
    public long append(Handle file, MemorySegment src) {
        return files.append(file, src);
    }

    /** {@link #append(Handle, MemorySegment)} of {@code src} from its position to its limit; its position moves to its limit. */
    public long append(Handle file, ByteBuffer src) {
        long at = files.append(file, MemorySegment.ofBuffer(src));
        src.position(src.limit());
        return at;
    }

    /**
     * {@code fallocate(2)} of {@code [offset, offset + length)}: mode 0 or KEEP_SIZE maps holes unwritten, ZERO_RANGE
     * also unwrites written blocks (both extend the size unless KEEP_SIZE), PUNCH_HOLE | KEEP_SIZE frees the blocks.
     * The part of a partial block at either end of a punched or zeroed range is zeroed through the page cache.
     *
     * @throws NamespaceException EOPNOTSUPP for other bits; EINVAL for PUNCH_HOLE without KEEP_SIZE or with ZERO_RANGE,
     *         or an empty range; EBADF for a handle closed or open for reading only; else as {@link #write}
     *         (EFBIG changes nothing)
     * @throws NoSpaceException if the groups run out of free blocks (the range may be partly allocated)
     */
    public void fallocate(Handle file, int mode, long offset, long length) {
        files.fallocate(file, mode, offset, length);
    }

    /**
     * Linux's {@code FICLONERANGE} (reflink): makes {@code [dstOffset, dstOffset + length)} of regular file
     * {@code dst} share the blocks of {@code [srcOffset, srcOffset + length)} of {@code src} (holes stay
     * holes, unwritten extents stay unwritten), no data copied; a write to either file afterwards copies
     * the blocks it changes (copy on write), so each sees only its own writes. The destination's old blocks
     * in the range are let go; its size grows to the range's end if shorter. {@code length} 0 clones to the
     * end of {@code src}. Offsets must be multiples of the block size, and so must {@code length} unless the
     * range ends at the end of {@code src} and not before the end of {@code dst}. Both files' cached
     * pages are written back first. The first clone on a volume marks it with an incompatible feature:
     * code from before clones refuses it from then on.
     *
     * @throws NamespaceException EBADF for a closed handle, {@code src} not open for reading, or {@code dst}
     *         not open for writing or open O_APPEND; EXDEV if the handles are of different volumes; EISDIR for a
     *         directory, EINVAL for anything else not a regular file; EINVAL for a negative or misaligned offset
     *         or length, a range past the end of {@code src}, or overlapping ranges of one file; EFBIG past
     *         {@link #MAX_FILE_SIZE}. Nothing changes on these errors.
     * @throws NoSpaceException if the destination's extent map cannot grow (the range may be partly cloned)
     */
    public void cloneRange(Handle src, long srcOffset, Handle dst, long dstOffset, long length) {
        requireOwn(src, dst);
        clones.cloneRange(src, srcOffset, dst, dstOffset, length);
    }

    /**
     * Linux's {@code FICLONE}: makes {@code dst} a clone of all of {@code src}: truncated to 0, then
     * {@link #cloneRange} of the whole of {@code src} (two steps: a crash between leaves it empty).
     *
     * @throws NamespaceException as {@link #cloneRange}, and EINVAL if both are one file
     */
    public void cloneFile(Handle src, Handle dst) {
        requireOwn(src, dst);
        if (src.ino() == dst.ino()) {
            throw new NamespaceException(Errno.EINVAL, "clone of inode " + src.ino() + " onto itself");
        }
        clones.cloneFile(src, dst);
    }

    /** EXDEV unless both handles are this namespace's. */
    private void requireOwn(Handle a, Handle b) {
        if (!a.of(orphans) || !b.of(orphans)) {
            throw new NamespaceException(Errno.EXDEV, "clone between inodes " + a.ino() + " and " + b.ino()
                    + " of different volumes");
        }
    }

    /**
     * The extents of regular file {@code file} that overlap {@code [offset, offset + length)}, in file order
     * (Linux's FIEMAP): holes are the gaps between them; an extent may reach past the end of the file
     * (preallocation). A snapshot: writes after it returns may change the mapping. Buffered data not yet
     * written back has no blocks yet (as FIEMAP without FIEMAP_FLAG_SYNC): {@link #fsync} first to see them.
     *
     * @throws NamespaceException EBADF if the handle is closed; EISDIR for a directory, EINVAL for a symlink or
     *         a negative offset or length
     */
    public List<FileExtent> extents(Handle file, long offset, long length) {
        return files.extents(file, offset, length);
    }

    /**
     * {@code lseek(2)} with SEEK_DATA: the first offset at or past {@code offset} that holds data, as ext4 and XFS
     * answer: a written extent is data, a hole or an unwritten (fallocated) extent is not. Buffered data not
     * yet written back is data: the file's dirty cached pages from {@code offset} on are written back first
     * (which may allocate blocks and flush the device, as an {@link #fsync} would).
     *
     * @throws NamespaceException ENXIO if {@code offset} is negative or not below the size, or no data follows it;
     *         EBADF if the handle is closed; EISDIR for a directory, EINVAL for a symlink
     * @throws NoSpaceException if writing back buffered data found no free block for it
     */
    public long seekData(Handle file, long offset) {
        return files.seek(file, offset, true);
    }

    /**
     * {@code lseek(2)} with SEEK_HOLE: the first offset at or past {@code offset} in a hole or an unwritten
     * extent, or the size if none comes before the end (the end of a file counts as a hole); buffered data is
     * written back first as for {@link #seekData}.
     *
     * @throws NamespaceException ENXIO if {@code offset} is negative or not below the size; EBADF if the handle is
     *         closed; EISDIR for a directory, EINVAL for a symlink
     * @throws NoSpaceException if writing back buffered data found no free block for it
     */
    public long seekHole(Handle file, long offset) {
        return files.seek(file, offset, false);
    }

    /**
     * Makes every change to {@code h}'s inode durable: its dirty cached pages written back, data flushed,
     * then the journal forced.
     *
     * @throws NamespaceException EBADF if the handle is closed
     * @throws NoSpaceException if writing back buffered data found no free block for it (that data is dropped;
     *         reported once, by this or the file's last close)
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     */
    public void fsync(Handle h) {
        files.sync(h, false);
    }

    /** {@link #fsync} forcing the journal only to the file's last change of size or extents, as fsync throws. */
    public void fdatasync(Handle h) {
        files.sync(h, true);
    }

    /**
     * Makes every change so far durable: every file's dirty cached pages are written back, file data
     * written since the last sync is flushed on the device, then the journal forced.
     *
     * @throws VolumeShutdownException if the volume is closed or its journal has shut down
     * @throws dev.ferrite.io.DeviceException if the device fails the flush
     */
    public void sync() {
        volume.sync();
    }

    /**
     * Checks the whole volume: the allocation groups (headers, free space, inode chunks and their trees)
     * and, from the root down, every directory, inode and orphan. It first finishes the write-back that
     * last closes deferred (so that closed files hold still), and it holds back the background deletion of
     * doomed table blobs, waiting for one under way ({@link TableBlobs#holdingDeletions}); then it reads
     * only: run it while nothing else changes the volume.
     *
     * @return every problem found, each with its kind and where; {@link CheckReport#clean()} for a sound volume
     * @throws dev.ferrite.io.CorruptionException if a block it reads fails verification
     */
    public CheckReport check() {
        files.buffered.finishClosed();
        return volume.tables().blobs.holdingDeletions(checker::check);
    }

    // ------------------------------------------------------------------ the table catalog's names (Tables)

    /** Creates table {@code name} in catalog directory {@code catalog}: its inode, named there (EEXIST if taken). */
    long createTableEntry(long catalog, String name) {
        try (EntryKey key = EntryKey.take(name, true)) {
            createEntry(catalog, key, name, InodeFormat.S_IFTABLE | 0600, true, null, false);
            return key.made;
        }
    }

    /** Removes table {@code name} from the catalog: its inode is freed now, or at the last close of a handle on it. */
    void removeTableEntry(long catalog, String name) {
        removeEntry(catalog, name, false);
    }

    /**
     * Renames a table within the catalog. A table of the new name is never replaced: TABLE_EXISTS if there
     * is one when the catalog is locked (the caller's own look beforehand may be out of date by then).
     */
    void renameTableEntry(long catalog, String from, String to) {
        try {
            renameEntry(catalog, from, catalog, to, RenameMode.NO_REPLACE);
        } catch (NamespaceException e) {
            if (e.errno() == Errno.EEXIST) {
                throw new TableException(TableException.Kind.TABLE_EXISTS, "table '" + to + "' exists");
            }
            throw e;
        }
    }

    /** A handle on inode {@code ino}, or null if it has lost its last link meanwhile. */
    Handle openInode(long ino) {
        return orphans.openIno(ino);
    }

    /** Sets what runs before an orphaned table is freed ({@link Orphans#tableRelease}). */
    void onTableFreed(Consumer<Inode> release) {
        orphans.tableRelease = release;
    }

    /** Frees every orphan left by a crash (or by an unmount with handles open); at mount. */
    int recoverOrphans() {
        return orphans.recoverOrphans();
    }

    /**
     * {@code open(2)} with {@code O_CREAT} of {@code name} in {@code dir}: for {@code "."}, {@code ".."} or
     * the root EEXIST if {@code exclusive}, else EISDIR; EISDIR for a trailing slash; else the file made or
     * (not {@code exclusive}) found, following a symlink found there to the name it points at. {@code walk}
     * is the one that found {@code dir} (symlinks count over the whole call, as on Linux), or null. Each
     * name met is encoded into {@code key} (the caller's); with {@code open}, as {@link #createEntry}.
     */
    private long createFile(Walk walk, long dir, CharSequence name, boolean slashed, int mode, boolean exclusive, EntryKey key, boolean open) {
        for (;;) {
            refuseDots(name, exclusive ? NEW_NAME : CREATE);
            if (slashed) {
                throw new NamespaceException(Errno.EISDIR, "cannot create a file as " + quote(name) + "/ (trailing slash)");
            }
            key.name(name, true);
            if (createEntry(dir, key, name, mode, exclusive, null, open)) {
                return key.made;
            }
            // a symlink was there: create or open what it names
            Found f = dirs.find(dir, key);
            if (f == null || f.type() != S_IFLNK) {
                continue; // it changed meanwhile: look again
            }
            if (walk == null) {
                walk = paths.new Walk("");
            }
            dir = walk.toParent(walk.follow(dir, f.ino()));
            name = walk.name();
            slashed = walk.slashed();
        }
    }

    /**
     * Creates {@code name}, whose key {@code key} holds, in {@code dir}: true with the new inode in
     * {@link EntryKey#made} (with {@code open}, also opened for a handle into {@link EntryKey#opened}
     * when its lock is free, else null: {@link Creator#allocAndInsert}); or, for a non-exclusive create of a
     * regular file whose name exists, true with the existing file in {@code made}, or false if the name is a
     * symlink (the caller follows it). An exclusive create always makes an inode.
     */
    private boolean createEntry(long dir, EntryKey key, CharSequence name, int mode, boolean exclusive, byte[] linkTarget, boolean open) {
        int type = mode & S_IFMT;
        Inode d = inodes.acquire(dir);
        try {
            for (boolean unready = false; ; unready = true) {
                records.requireDir(dir);
                // An inline directory is searched under its lock; a tree directory is not searched first:
                // the insert's putIfAbsent finds a name that exists before anything is logged (one descent
                // instead of two). The checks that would hide EEXIST look for the name when they fail.
                boolean searched = !records.readRecord(dir, DirContents::isTree) || creator.isRemote(linkTarget);
                try {
                    if (type == S_IFDIR && records.statIno(dir).nlink() >= MAX_LINKS) {
                        throw new NamespaceException(Errno.EMLINK, "directory " + dir + " has " + MAX_LINKS + " links");
                    }
                    creator.requireInodeRoom();
                } catch (NamespaceException | NoSpaceException e) {
                    Found f = dirs.find(d, key);
                    if (f != null) {
                        return onExisting(f, key, dir, name, exclusive, type);
                    }
                    throw e;
                }
                if (unready) {
                    dirs.prepare(d, key.length()); // the last attempt found the directory needing it
                }
                Outcome o = creator.allocAndInsert(d, key, mode, linkTarget, open, searched);
                if (o == Created.DONE) {
                    return true;
                }
                if (o == Refused.EXISTS) {
                    Found f = dirs.find(d, key);
                    if (f == null) {
                        continue; // removed since: create it after all
                    }
                    return onExisting(f, key, dir, name, exclusive, type);
                }
            }
        } finally {
            inodes.release(d);
        }
    }

    /**
     * An unlink of a file's or symlink's name in tree directory {@code d} beside the creates and other such
     * unlinks there, without {@code d}'s lock: the shared create's way ({@link Creator}'s class comment),
     * whose name stripes it shares, so that a create and an unlink of one name are ordered. It enters
     * {@code d} with a removal claim (a delete only gives blocks back to the reserve), holds the name's
     * stripe, and in its transaction takes the child's group's AGI if the last link goes, the child's
     * record block if it lies below the parent's, the tree's nodes, then the parent's record block (and
     * the child's) last. It first claims no block, as a delete whose leaf loses the entry in place frees
     * none ({@link BTree#deleteUnlessMerging}); only a delete that would merge leaves and comes again
     * claiming what a merge at every level may free. A claim of the tree's height and two for every unlink
     * let only 2–4 unlinks in at once beside a reserve of 20–28 of its 40 blocks, and the others waited;
     * a claim of one block, 12–20 (issue 21). False, with nothing changed, if the exclusive path must do it: {@code d} is inline,
     * the entry names a directory (EISDIR is the exclusive path's), the child's lock is held, or the log has
     * no space now. Nothing here waits for an inode lock or log space while {@code d} is entered: writers
     * that reserved theirs wait in {@link Inode#lockExclusive} for it to leave. An orphan is freed, and a
     * short free list refilled, once it has left.
     */
    private boolean sharedUnlink(Inode d, EntryKey key, CharSequence name) {
        boolean merging = false; // the last attempt found that its delete merges
        for (int attempt = 0; attempt < InodeRecords.RETRIES; attempt++) {
            BTree tree = dirs.treeOrNull(d);
            if (tree == null) {
                return false;
            }
            int claim = dirs.enter(d, merging ? tree.height() + 2 : 0, true);
            if (claim < 0) {
                return false;
            }
            AllocationGroup ag = null;
            Inode c = null;
            int outcome = EXCLUSIVE;
            try {
                int stripe = creator.lockStripe(d.ino, key); // after entering, as a shared create's
                try {
                    records.requireDir(d.ino);
                    NameLookup f = dirs.findEntry(d, key, true);
                    if (f == null) {
                        throw new NamespaceException(Errno.ENOENT, quote(name) + " in directory " + d.ino);
                    }
                    if (f.type == S_IFDIR) {
                        return false;
                    }
                    long ino = f.ino;
                    ag = volume.group(geometry.agOfInode(ino));
                    if (ag.needsRefill()) {
                        outcome = REFILL;
                    } else {
                        c = inodes.acquire(ino);
                        outcome = sharedUnlinkTxn(tree, ag, d, c, key, merging);
                    }
                } finally {
                    creator.unlockStripe(stripe);
                }
            } finally {
                d.leave(claim);
                if (c != null && outcome != GONE && outcome != GONE_FREE) {
                    inodes.release(c);
                }
            }
            switch (outcome) {
                case GONE, GONE_FREE -> {
                    try {
                        orphans.afterUnlink(ag, c, true, outcome == GONE_FREE);
                    } finally {
                        inodes.release(c);
                    }
                    return true;
                }
                case LINKED -> {
                    return true;
                }
                case REFILL -> ag.refillFreeList();
                case MERGES -> merging = true;
                default -> {
                    return false;
                }
            }
        }
        return false;
    }

    /**
     * {@link #sharedUnlinkTxn}'s outcomes: done (some links left; the last gone; the last gone and the inode
     * to free now), or not (and why).
     */
    private static final int LINKED = 0, GONE = 1, GONE_FREE = 2, REFILL = 3, EXCLUSIVE = 4, MERGES = 5;

    /**
     * {@link #sharedUnlink}'s transaction, entered in {@code d} with the name's stripe held: removes
     * {@code key} naming {@code c} (of group {@code ag}); or, with nothing changed, REFILL (the group's
     * free list is short), EXCLUSIVE (no log space now, the child's lock is held, or it is a directory), or
     * MERGES (unless {@code merging}, which says the claim covers a merge's frees: the delete would merge).
     */
    private int sharedUnlinkTxn(BTree tree, AllocationGroup ag, Inode d, Inode c, EntryKey key, boolean merging) {
        int items = 9 + ag.freeInodeItems() + ag.orphanItems() + tree.reservation(); // the exclusive path's changeItems
        try (Txn txn = Txn.tryBegin(cache, items)) {
            if (txn == null || !c.tryLockExclusive()) {
                return EXCLUSIVE;
            }
            try {
                StatBuffer cs = key.stat();
                records.statInto(c.ino, cs);
                if (cs.isDirectory()) {
                    return EXCLUSIVE;
                }
                boolean last = cs.nlink() <= 1;
                boolean orphan = last && (c.opens > 0 || cs.blocks() > 0 || BufferedIo.holdsCache(c));
                if (last) {
                    txn.lock(ag.agi);
                    if (ag.inodeListLow()) {
                        return REFILL;
                    }
                }
                if (records.block(c.ino) < records.block(d.ino)) {
                    records.lockRecord(txn, c.ino);
                }
                int deleted = merging ? tree.delete(txn, key.segment(), null) : tree.deleteUnlessMerging(txn, key.segment());
                if (deleted == BTree.WOULD_MERGE) {
                    return MERGES;
                }
                if (deleted < 0) {
                    throw new IllegalStateException("directory " + d.ino + " lost the entry being removed");
                }
                records.lockRecords(txn, d.ino, c.ino);
                Buffer pb = records.lockRecord(txn, d.ino);
                InodeRecords.addEntries(txn, pb, records.rec(d.ino), -1); // as DirContents.deleteEntry counts it
                records.adjust(txn, d.ino, 0, true);
                orphans.dropLink(txn, c, false, last, orphan);
                long seq = txn.commit();
                c.unlinked |= last; // before the child's lock goes: see Inode#unlinked
                d.noteSeq(seq);
                c.lastSeq = seq;
                return !last ? LINKED : orphan && c.opens == 0 ? GONE_FREE : GONE;
            } finally {
                c.unlockExclusive();
            }
        }
    }

    /** A create met an existing entry: EEXIST, EISDIR, the file itself (into {@code key}'s made), or false for a symlink to follow. */
    private static boolean onExisting(Found f, EntryKey key, long dir, CharSequence name, boolean exclusive, int type) {
        if (exclusive || type != S_IFREG) {
            throw new NamespaceException(Errno.EEXIST, quote(name) + " exists in directory " + dir);
        }
        if (f.type() == S_IFDIR) {
            throw new NamespaceException(Errno.EISDIR, quote(name) + " in directory " + dir + " is a directory");
        }
        key.made = f.ino();
        return f.type() != S_IFLNK;
    }

    private void removeEntry(long dir, CharSequence name, boolean wantDir) {
        try (EntryKey key = EntryKey.take(name, true)) {
            names.beginRemove(dir, key);
            try {
                removeEntry(dir, key, name, wantDir);
            } finally {
                names.endRemove(dir, key);
            }
        }
    }

    /** Removes {@code key} ({@code name}) from directory {@code dir}, its name cache entry held off. */
    private void removeEntry(long dir, EntryKey key, CharSequence name, boolean wantDir) {
        Inode d = inodes.acquire(dir);
        try {
            if (!wantDir && sharedUnlink(d, key, name)) {
                return;
            }
            long hint = 0; // the child met the last time round: its group and (a directory's) items size the reservation
            boolean unready = false; // the last attempt found the directory needing prepare
            for (int fails = 0; ; ) {
                records.requireDir(dir);
                if (wantDir && hint == 0) {
                    Found f = dirs.find(d, key);
                    if (f == null) {
                        throw new NamespaceException(Errno.ENOENT, quote(name) + " in directory " + dir);
                    }
                    hint = f.ino();
                }
                if (unready) {
                    dirs.prepare(d, 0);
                }
                AllocationGroup ag = volume.group(geometry.agOfInode(hint != 0 ? hint : dir));
                if (ag.needsRefill()) {
                    ag.refillFreeList();
                }
                int groupItems = ag.freeInodeItems() + ag.orphanItems();
                int items = 8 + (hint == 0 ? Math.max(groupItems, groupItemsBound.get()) : groupItems) + dirs.dirItems(d);
                if (wantDir) {
                    Inode h = inodes.acquire(hint);
                    try {
                        items += (records.modeOf(hint) & S_IFMT) == S_IFDIR ? dirs.dirItems(h) : 0;
                    } finally {
                        inodes.release(h);
                    }
                }
                Inode c = null;
                boolean last = false, free = false; // what the change did: the child's last link went; it is an orphan to free now
                try {
                    try (Txn txn = Txn.begin(cache, items)) {
                        d.lockExclusive(); // and the child's, which an rmdir's creates inside would change
                        boolean childLocked = false;
                        try {
                            records.requireDir(dir);
                            NameLookup f = dirs.findEntry(d, key, true);
                            if (f == null) {
                                throw new NamespaceException(Errno.ENOENT, quote(name) + " in directory " + dir);
                            }
                            c = inodes.acquire(f.ino);
                            if (c.ino > dir) { // the usual case: the child's lock comes after its directory's
                                c.lockExclusive();
                                childLocked = true;
                            } else if (c.tryLockExclusive()) {
                                childLocked = true;
                            } else { // take the locks again in ascending order, and look again
                                d.unlockExclusive();
                                c.lockExclusive();
                                childLocked = true;
                                d.lockExclusive();
                                records.requireDir(dir);
                                NameLookup again = dirs.findEntry(d, key, true);
                                if (again == null || again.ino != c.ino) {
                                    hint = 0;
                                    continue;
                                }
                            }
                            StatBuffer cs = key.stat();
                            records.statInto(c.ino, cs);
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
                            unready = dirs.step(d, 0) != READY;
                            hint = c.ino;
                            // The last link frees the inode in its own group, which was sized for only if the
                            // hint named it; another group's trees usually fit the same reservation.
                            AllocationGroup cag = lastLink ? volume.group(geometry.agOfInode(c.ino)) : ag;
                            if (unready || dirs.changeItems(lastLink ? cag : null, d, c) > items) {
                                groupItemsBound.accumulateAndGet(cag.freeInodeItems() + cag.orphanItems(), Math::max);
                                continue;
                            }
                            ag = cag;
                            boolean orphan = lastLink && (c.opens > 0 || cs.blocks() > 0 || BufferedIo.holdsCache(c)); // freed in steps, its pages dropped
                            if (!records.lockChange(txn, lastLink ? ag : null, dir, c.ino)) {
                                fails = requireFixable(ag, fails);
                                continue;
                            }
                            dirs.deleteEntry(txn, d, key);
                            records.adjust(txn, dir, wantDir ? -1 : 0, true);
                            orphans.dropLink(txn, c, wantDir, lastLink, orphan);
                            InodeRecords.commitChange(txn, d, c);
                            c.unlinked |= lastLink; // before the child's lock goes: see Inode#unlinked
                            last = lastLink;
                            free = orphan && c.opens == 0;
                        } finally {
                            if (childLocked) {
                                c.unlockExclusive();
                            }
                            d.unlockExclusive();
                        }
                    }
                    orphans.afterUnlink(ag, c, last, free);
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

    private void linkEntry(long target, long dir, String name) {
        EntryKey key = EntryKey.of(requireName(name, true));
        Inode[] acquired = records.acquireAll(target, dir);
        try {
            Inode d = pick(acquired, dir), t = pick(acquired, target);
            for (boolean unready = false; ; unready = true) {
                if (unready) {
                    dirs.prepare(d, key.length()); // the last attempt found the directory needing it
                }
                int items = dirs.changeItems(null, d, t);
                try (Txn txn = Txn.begin(cache, items)) {
                    lockAll(acquired);
                    try {
                        InodeStat ts = requireLinkable(d, key, name, target);
                        if (dirs.step(d, key.length()) != READY || dirs.changeItems(null, d, t) > items) {
                            continue;
                        }
                        records.applyChange(txn, null, new Inode[] {d, t}, x -> {
                            dirs.insertAbsent(x, d, key, target, ts.mode() & S_IFMT);
                            records.adjust(x, dir, 0, true);
                            records.adjust(x, target, 1, false);
                        });
                        return;
                    } finally {
                        unlockAll(acquired);
                    }
                }
            }
        } finally {
            records.releaseAll(acquired);
        }
    }

    /** The errors a link of {@code target} as {@code key} in {@code d} meets (both locks held); the target's attributes. */
    private InodeStat requireLinkable(Inode d, EntryKey key, String name, long target) {
        records.requireDir(d.ino);
        if (dirs.find(d, key, true) != null) {
            throw new NamespaceException(Errno.EEXIST, quote(name) + " exists in directory " + d.ino);
        }
        InodeStat ts = records.statIno(target);
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

    /**
     * Renames an entry, as {@code mode} says: one of the new name is replaced, refused (EEXIST) or exchanged with it
     * (checked under the locks).
     */
    private void renameEntry(long fromDir, String fromName, long toDir, String toName, RenameMode mode) {
        java.util.Objects.requireNonNull(mode, "mode");
        EntryKey fk = EntryKey.of(requireName(fromName, true));
        EntryKey tk = EntryKey.of(requireName(toName, true));
        names.beginRemove(fromDir, fk); // both names: the source goes, the target is replaced or exchanged
        names.beginRemove(toDir, tk);
        try {
            renameEntry(fromDir, fk, fromName, toDir, tk, toName, mode);
        } finally {
            names.endRemove(toDir, tk);
            names.endRemove(fromDir, fk);
        }
    }

    /** Renames {@code fk} ({@code fromName}) to {@code tk}, the name cache entries of both held off. */
    private void renameEntry(long fromDir, EntryKey fk, String fromName, long toDir, EntryKey tk, String toName, RenameMode mode) {
        boolean exchange = mode == RenameMode.EXCHANGE;
        boolean unready = false; // the last attempt found a directory needing prepare
        for (int fails = 0; ; ) {
            records.requireDir(fromDir);
            records.requireDir(toDir);
            Found src = dirs.find(fromDir, fk);
            if (src == null) {
                throw new NamespaceException(Errno.ENOENT, quote(fromName) + " in directory " + fromDir);
            }
            Found dst = dirs.find(toDir, tk);
            // a directory changing parents: the rename lock keeps the ancestry checks true until the commit
            boolean moveDir = fromDir != toDir && (src.type() == S_IFDIR || exchange && dst != null && dst.type() == S_IFDIR);
            Inode[] acquired = records.acquireAll(fromDir, toDir, src.ino(), dst == null ? 0 : dst.ino());
            Inode from = pick(acquired, fromDir), to = pick(acquired, toDir), s = pick(acquired, src.ino());
            Inode v = dst == null ? null : pick(acquired, dst.ino());
            boolean last = false, free = false;
            AllocationGroup ag = v == null || exchange ? null : volume.group(geometry.agOfInode(v.ino));
            try {
                if (unready) {
                    dirs.prepare(from, 0);
                    dirs.prepare(to, dst == null ? tk.length() : 0);
                }
                if (ag != null && ag.needsRefill()) {
                    ag.refillFreeList();
                }
                int items = dirs.changeItems(ag, from, to, s, v);
                try (Txn txn = Txn.begin(cache, items)) {
                    if (moveDir) {
                        renameLock.lock();
                    }
                    lockAll(acquired);
                    try {
                        records.requireDir(fromDir);
                        records.requireDir(toDir);
                        if (!src.equals(dirs.find(from, fk, true)) || !java.util.Objects.equals(dst, dirs.find(to, tk, true))) {
                            continue; // changed before we held the locks
                        }
                        if (dst != null && mode == RenameMode.NO_REPLACE) {
                            throw new NamespaceException(Errno.EEXIST, quote(toName) + " exists in directory " + toDir);
                        }
                        if (dst == null && exchange) {
                            throw new NamespaceException(Errno.ENOENT, quote(toName) + " in directory " + toDir + ", to exchange with");
                        }
                        if (dst != null && dst.ino() == src.ino()) {
                            return; // two names of one inode: POSIX does nothing
                        }
                        if (moveDir && src.type() == S_IFDIR && paths.isAncestorOrSelf(src.ino(), toDir)) {
                            throw new NamespaceException(Errno.EINVAL, "directory " + quote(fromName) + " cannot move into itself");
                        }
                        if (dst != null && dst.type() == S_IFDIR && paths.isAncestorOrSelf(dst.ino(), fromDir)) {
                            throw new NamespaceException(exchange ? Errno.EINVAL : Errno.ENOTEMPTY, "directory " + quote(toName)
                                    + " holds " + quote(fromName));
                        }
                        InodeStat vs = dst == null || exchange ? null : records.statIno(dst.ino());
                        if (exchange) {
                            requireExchangeable(fromDir, src, toDir, dst);
                        } else {
                            requireReplaceable(fromDir, toDir, toName, src, dst, vs);
                        }
                        unready = dirs.step(from, 0) != READY || dirs.step(to, dst == null ? tk.length() : 0) != READY;
                        if (unready || dirs.changeItems(ag, from, to, s, v) > items) {
                            continue; // prepared, and reserved afresh
                        }
                        boolean lastLink = !exchange && v != null && (dst.type() == S_IFDIR || vs.nlink() <= 1);
                        boolean orphan = lastLink && (v.opens > 0 || vs.blocks() > 0 || BufferedIo.holdsCache(v));
                        if (!records.applyChange(txn, lastLink ? ag : null, new Inode[] {from, to, s, v}, txn2 -> {
                            // links each parent gains: a directory's ".." moving in, a replaced directory's going
                            int toLinks = (fromDir != toDir && src.type() == S_IFDIR ? 1 : 0)
                                    - (dst != null && dst.type() == S_IFDIR && (!exchange || fromDir != toDir) ? 1 : 0);
                            int fromLinks = exchange ? -toLinks : fromDir != toDir && src.type() == S_IFDIR ? -1 : 0;
                            if (exchange) {
                                dirs.replaceEntry(txn2, from, fk, dst.ino(), dst.type());
                                moved(txn2, dst, fromDir);
                            } else {
                                dirs.deleteEntry(txn2, from, fk);
                            }
                            if (dst == null) {
                                dirs.insertAbsent(txn2, to, tk, src.ino(), src.type());
                            } else {
                                dirs.replaceEntry(txn2, to, tk, src.ino(), src.type());
                            }
                            if (fromDir != toDir) {
                                records.adjust(txn2, fromDir, fromLinks, true);
                            }
                            records.adjust(txn2, toDir, toLinks, true);
                            moved(txn2, src, toDir);
                            if (v != null && !exchange) {
                                orphans.dropLink(txn2, v, dst.type() == S_IFDIR, lastLink, orphan);
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
                orphans.afterUnlink(ag, v, last, free);
                return;
            } finally {
                records.releaseAll(acquired);
            }
        }
    }

    /** What a rename replacing {@code dst} (null if none; {@code vs} its attributes) meets for the types and the parent's links. */
    private void requireReplaceable(long fromDir, long toDir, String toName, Found src, Found dst, InodeStat vs) {
        if (src.type() == S_IFDIR) {
            if (dst != null && dst.type() != S_IFDIR) {
                throw new NamespaceException(Errno.ENOTDIR, quote(toName) + " is not a directory");
            }
            if (vs != null && vs.size() != 0) {
                throw new NamespaceException(Errno.ENOTEMPTY, "directory " + quote(toName) + " holds " + vs.size() + " entries");
            }
            if (fromDir != toDir && dst == null && records.statIno(toDir).nlink() >= MAX_LINKS) {
                throw new NamespaceException(Errno.EMLINK, "directory " + toDir + " has " + MAX_LINKS + " links");
            }
        } else if (dst != null && dst.type() == S_IFDIR) {
            throw new NamespaceException(Errno.EISDIR, quote(toName) + " is a directory");
        }
    }

    /** EMLINK if an exchange would give a parent a directory more (its ".." a link) past {@link #MAX_LINKS}. */
    private void requireExchangeable(long fromDir, Found src, long toDir, Found dst) {
        if (fromDir == toDir || (src.type() == S_IFDIR) == (dst.type() == S_IFDIR)) {
            return;
        }
        long gains = src.type() == S_IFDIR ? toDir : fromDir;
        if (records.statIno(gains).nlink() >= MAX_LINKS) {
            throw new NamespaceException(Errno.EMLINK, "directory " + gains + " has " + MAX_LINKS + " links");
        }
    }

    /** In {@code txn}: the inode of {@code entry}, now under {@code parent}: its parent link if a directory, and its ctime. */
    private void moved(Txn txn, Found entry, long parent) {
        Buffer b = records.lockRecord(txn, entry.ino());
        int rec = records.rec(entry.ino());
        if (entry.type() == S_IFDIR) {
            InodeFormat.setParent(b.data(), rec, parent);
        }
        InodeFormat.touch(b.data(), rec, nowNanos(), false);
        txn.log(b, rec, InodeFormat.INLINE);
    }

}
