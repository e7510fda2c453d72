package dev.ferrite.dir;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import dev.ferrite.dir.DirContents.Found;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;

import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFLNK;

/**
 * Path resolution, as Linux's walk: names validated and measured in Linux's order, paths walked a
 * component at a time through {@link DirContents}, symlinks followed, and each operation's answer for
 * {@code "."}, {@code ".."} and the root. Takes no lock: it reads records and directories lock-free.
 */
final class PathResolver {
    private final Volume volume;
    private final InodeRecords records;
    private final DirContents dirs;
    /** The names walks found lately, looked in before the directories ({@link #lookup}). */
    private final NameCache names;
    private final int maxTarget;
    /** The root's inode number once read (it never changes after format). */
    private volatile long root;
    /**
     * Each thread's walk for the resolutions that end with their call ({@link #resolve}, {@link #probe}),
     * reused so that a lookup by path allocates nothing; a parent's walk outlives its call and is its own.
     * Static, holding the walk of the resolver the thread used last: a resolver's own ThreadLocal would
     * keep every volume a long-lived thread ever used, as its walk reaches back to the ThreadLocal.
     */
    private static final ThreadLocal<Walk[]> WALKS = ThreadLocal.withInitial(() -> new Walk[1]);

    PathResolver(Volume volume, Geometry geometry, InodeRecords records, DirContents dirs, NameCache names) {
        this.volume = volume;
        this.records = records;
        this.dirs = dirs;
        this.names = names;
        this.maxTarget = Math.min(Namespace.MAX_SYMLINK_TARGET, SymlinkFormat.capacity(geometry.blockSize()));
    }

    /** The root directory's inode number. */
    long root() {
        long r = root;
        if (r == 0) {
            root = r = volume.rootInode();
        }
        return r;
    }

    /**
     * The directory a path's last component is in, and that component: a name, {@code "."}, {@code ".."},
     * or null for the root itself; {@code slashed} if a slash followed it.
     */
    record Parent(long dir, String name, boolean slashed) {
    }

    /**
     * What an operation answers when its last component is {@code "."}, {@code ".."} or the root itself
     * (Linux's LAST_DOT, LAST_DOTDOT and LAST_ROOT): nothing is looked up or changed then.
     */
    record Dots(int dot, int dotdot, int root) {
    }

    /** mkdir, symlink, link's new name and exclusive create: the name exists. */
    static final Dots NEW_NAME = new Dots(Errno.EEXIST, Errno.EEXIST, Errno.EEXIST);
    /** Create of a file that may exist: what is there is a directory. */
    static final Dots CREATE = new Dots(Errno.EISDIR, Errno.EISDIR, Errno.EISDIR);
    static final Dots UNLINK = new Dots(Errno.EISDIR, Errno.EISDIR, Errno.EISDIR);
    static final Dots RMDIR = new Dots(Errno.EINVAL, Errno.ENOTEMPTY, Errno.EBUSY);
    static final Dots RENAME = new Dots(Errno.EBUSY, Errno.EBUSY, Errno.EBUSY);

    /** Longest path, in bytes (PATH_MAX less its NUL). */
    private static final int MAX_PATH = 4095;
    /** {@link #entryIfExists}'s answer for a name not in its directory: no inode has this number. */
    static final long MISSING = -1;

    static String quote(CharSequence name) {
        return "'" + name + "'";
    }

    /** A handle form's name: null is EINVAL there (in a path's Parent it stands for the root). */
    static String nonNull(String name) {
        if (name == null) {
            throw new NamespaceException(Errno.EINVAL, "null name");
        }
        return name;
    }

    static boolean isDots(CharSequence name) {
        return name == null || isDot(name) || isDotDot(name);
    }

    static boolean isDot(CharSequence name) {
        return name.length() == 1 && name.charAt(0) == '.';
    }

    static boolean isDotDot(CharSequence name) {
        return name.length() == 2 && name.charAt(0) == '.' && name.charAt(1) == '.';
    }

    /** The errno {@code dots} gives if {@code name} is {@code "."}, {@code ".."} or null (the root). */
    static void refuseDots(CharSequence name, Dots dots) {
        if (isDots(name)) {
            int errno = name == null ? dots.root : isDot(name) ? dots.dot : dots.dotdot;
            throw new NamespaceException(errno, (name == null ? "the root" : quote(name)) + " is not a name this operation takes");
        }
    }

    /** True if {@code name} is longer than a name may be (counted without allocating unless it may be). */
    static boolean tooLong(String name) {
        return name.length() > DirEntryFormat.MAX_NAME / 3 && name.getBytes(StandardCharsets.UTF_8).length > DirEntryFormat.MAX_NAME;
    }

    /**
     * Refuses a handle form's {@code name} in directory {@code dir} in Linux's order: ENOTDIR or ENOENT
     * for {@code dir}, then the operation's answer to {@code "."} or {@code ".."}, then ENAMETOOLONG (a name
     * is measured only when the walk reaches it). Ordinary names cost a few comparisons here.
     */
    void requireEntryName(long dir, String name, Dots dots) {
        if (nonNull(name).equals(".") || name.equals("..") || tooLong(name)) {
            records.requireDir(dir);
            refuseDots(name, dots);
            requireName(name, false);
        }
    }

    /** The inode {@code name} names in {@code dir} (a symlink itself): {@code "."} is dir, {@code ".."} its parent. */
    long entry(long dir, String name) {
        long ino = entryIfExists(dir, name);
        if (ino == MISSING) {
            throw new NamespaceException(Errno.ENOENT, quote(name) + " in directory " + dir);
        }
        return ino;
    }

    /**
     * {@link #entry} for a caller expecting the name may well be missing (a server's lookup before a
     * create): {@link #MISSING} where entry throws ENOENT for the name itself, nothing thrown or allocated.
     */
    long entryIfExists(long dir, String name) {
        volume.requireOpen();
        if (".".equals(name) || "..".equals(name)) {
            records.requireDir(dir);
            return name.equals(".") ? dir : dotdot(dir);
        }
        NameLookup l = NameLookup.current();
        String n = name == null ? "" : name; // measured as empty: EINVAL
        takeName(l, dir, n, 0, n.length());
        return lookup(dir, l) ? l.ino : MISSING;
    }

    /**
     * A walk's step, as {@link DirContents#lookup}: the name cache's entry, else the directory's, which the
     * cache then keeps. A hit skips the check that {@code dir} is a directory still linked, which cannot
     * fail then: a directory is removed only empty, and every name taken from it left the cache first.
     */
    private boolean lookup(long dir, NameLookup l) {
        if (names.get(dir, l)) {
            return true;
        }
        if (!dirs.lookup(dir, l)) {
            return false;
        }
        names.put(dir, l);
        return true;
    }

    /**
     * Puts the name {@code path[from, to)} into {@code l} for a lookup in {@code dir}. A name that is not
     * plain is measured as {@link #requireName} does, once {@code dir} is checked (ENOTDIR or ENOENT first).
     */
    private void takeName(NameLookup l, long dir, String path, int from, int to) {
        if (!l.plainName(path, from, to)) {
            records.requireDir(dir);
            l.name(requireName(path.substring(from, to), false));
        }
    }

    /** The parent of directory {@code dir}; EINVAL at the root (Linux stays there). */
    private long dotdot(long dir) {
        if (dir == root()) {
            throw new NamespaceException(Errno.EINVAL, "'..' leads above the root");
        }
        return records.parentOf(dir);
    }

    /** A new link's name (mkdir excepted): EEXIST for dots, and a trailing slash EEXIST if the name is taken, else ENOENT. */
    void refuseNewName(Parent p) {
        refuseDots(p.name, NEW_NAME);
        if (p.slashed) {
            boolean taken = dirs.find(p.dir, EntryKey.of(requireName(p.name, false))) != null;
            throw new NamespaceException(taken ? Errno.EEXIST : Errno.ENOENT, "a new link cannot be named " + quote(p.name)
                    + "/ (trailing slash)");
        }
    }

    /**
     * The name's bytes; EINVAL for an empty name, one containing '/' or NUL, or (with {@code forChange})
     * "." or ".." (which the operations answer first, each as Linux does: this keeps them out of every
     * directory); ENAMETOOLONG past 255 bytes.
     */
    static byte[] requireName(String name, boolean forChange) {
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

    byte[] symlinkTarget(String target) {
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

    private static void requireAbsolute(String path) {
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
    long resolve(String path, boolean followLast) {
        volume.requireOpen();
        requireAbsolute(path);
        return walk().restart(path, false).to(root(), followLast);
    }

    /** This thread's walk of this resolver (a new one if the thread last walked another volume's). */
    private Walk walk() {
        Walk[] mine = WALKS.get();
        Walk w = mine[0];
        if (w == null || w.resolver() != this) {
            mine[0] = w = new Walk("");
        }
        return w;
    }

    /**
     * {@link #resolve} of {@code path}, symlinks followed, for a caller expecting it may well be missing (a
     * server's lookup before a create): a name on the way that is not in its directory, where resolve throws
     * ENOENT, ends the walk with {@link Walk#missing()} true instead, nothing thrown or allocated; else
     * {@link Walk#ino()} is what the path names. The walk is the thread's: read it before the next resolution.
     */
    Walk probe(String path) {
        volume.requireOpen();
        requireAbsolute(path);
        Walk w = walk().restart(path, true);
        w.ino = w.to(root(), true);
        return w;
    }

    /** The {@link Parent} of {@code path}, found with the thread's walk (a new walk per call was most of a path create's garbage). */
    Parent resolveParent(String path) {
        volume.requireOpen();
        requireAbsolute(path);
        return walk().restart(path, false).parent(root());
    }

    /**
     * {@link #resolveParent} without a record or a copy of the last name, for create and unlink: the
     * thread's walk, its {@link Walk#dir()}, {@link Walk#name()} and {@link Walk#slashed()} answering as a
     * Parent's would. The name is a view of {@code path}: read them before the thread's next resolution.
     */
    Walk walkToParent(String path) {
        volume.requireOpen();
        requireAbsolute(path);
        Walk w = walk().restart(path, false);
        w.toParent(root());
        return w;
    }

    /**
     * One path resolution, as Linux's walk: each component is looked up in a directory (ENOTDIR or ENOENT
     * for it first, then ENAMETOOLONG or ENOENT for the name); symlinks are followed in every component
     * but the last, and in the last when asked or when a slash or {@code "."} follows it. The symlinks
     * followed count together, across the parent walk and a last component followed after it.
     *
     * <p>The walk reads its strings in place, a component at a time: names, {@code "."} and {@code ".."}
     * in order, then an empty component if a string ends in a slash after one of them. A trailing slash and
     * a {@code "."} both ask for a directory (the component before them is followed if it is a symlink);
     * only the operations that act on a name tell them apart. A symlink's target is walked before the rest
     * of the string that met it.
     */
    final class Walk {
        private int links;
        /** The string being walked, where the walk is in it, and where the part to walk ends. */
        private String path;
        private int at, end;
        /** The strings a followed symlink interrupted, innermost last, to go on with after its target. */
        private String[] savedPath;
        private int[] savedAt, savedEnd;
        private int saved;
        /** The component read last: {@code [compStart, compEnd)} of {@link #path}, empty for a trailing slash. */
        private int compStart, compEnd;
        /** A {@link #probe}: a name missing ends the walk with {@link #missing} set instead of ENOENT. */
        private boolean probing, missing;
        /** What a probe found. */
        private long ino;
        /** What {@link #toParent} found: the directory, its last component (named: a name or dots; else the root) and a slash after it. */
        private long dir;
        private final NameView name = new NameView();
        private boolean named, slashed;

        Walk(String path) {
            this.path = path;
            this.end = path.length();
        }

        private PathResolver resolver() {
            return PathResolver.this;
        }

        /** This walk, reused for {@code path} from its start (a walk that threw may have been left anywhere). */
        private Walk restart(String path, boolean probe) {
            for (int i = 0; i < saved; i++) {
                savedPath[i] = null;
            }
            saved = 0;
            links = 0;
            this.path = path;
            at = 0;
            end = path.length();
            probing = probe;
            missing = false;
            return this;
        }

        /** After a {@link #probe}: true if a name on the path was not in its directory. */
        boolean missing() {
            return missing;
        }

        /** After a {@link #probe} that found the path: the inode it names. */
        long ino() {
            return ino;
        }

        /** Walks what is left from directory {@code start}; returns the inode it names. */
        long to(long start, boolean followLast) {
            NameLookup l = NameLookup.current();
            long cur = start;
            while (next()) {
                if (compEnd == compStart || compEnd - compStart == 1 && path.charAt(compStart) == '.') {
                    records.requireDir(cur);
                    continue;
                }
                if (compEnd - compStart == 2 && path.charAt(compStart) == '.' && path.charAt(compStart + 1) == '.') {
                    records.requireDir(cur);
                    cur = dotdot(cur);
                    continue;
                }
                takeName(l, cur, path, compStart, compEnd);
                if (!lookup(cur, l)) {
                    if (probing) {
                        missing = true;
                        return cur;
                    }
                    throw new NamespaceException(Errno.ENOENT, quote(path.substring(compStart, compEnd)) + " in directory " + cur);
                }
                if (l.type == S_IFLNK && (followLast || hasMore())) {
                    cur = follow(cur, l.ino);
                    continue;
                }
                cur = l.ino;
            }
            return cur;
        }

        /**
         * Walks what is left from {@code start} but its last component, which must be in a directory. What
         * is left is one string: a path, or the target of a symlink that ended one.
         */
        Parent parent(long start) {
            toParent(start);
            return new Parent(dir, named ? name.toString() : null, slashed);
        }

        /**
         * {@link #parent} into this walk ({@link #dir()}, {@link #name()}, {@link #slashed()}), the name a
         * view of the string walked instead of a copy; returns the directory.
         */
        long toParent(long start) {
            int nameEnd = end;
            while (nameEnd > at && path.charAt(nameEnd - 1) == '/') {
                nameEnd--;
            }
            int nameStart = nameEnd;
            while (nameStart > at && path.charAt(nameStart - 1) != '/') {
                nameStart--;
            }
            named = nameStart != nameEnd;
            name.view(path, nameStart, nameEnd);
            slashed = named && nameEnd < end;
            end = nameStart;
            dir = to(start, true);
            records.requireDir(dir);
            return dir;
        }

        /** After {@link #toParent}: the directory the last component is in. */
        long dir() {
            return dir;
        }

        /** After {@link #toParent}: the last component, {@code "."}, {@code ".."} or a name, or null for the root itself. */
        CharSequence name() {
            return named ? name : null;
        }

        /** After {@link #toParent}: a slash followed the last component. */
        boolean slashed() {
            return slashed;
        }

        /** Walks the target of symlink {@code link}, met in directory {@code dir}, before what is left; returns where it starts. */
        long follow(long dir, long link) {
            if (++links > Namespace.MAX_SYMLINKS) {
                throw new NamespaceException(Errno.ELOOP, "more than " + Namespace.MAX_SYMLINKS + " symlinks followed");
            }
            String target = records.readlinkIno(link);
            if (hasComponent(path, at, end)) {
                save();
            }
            path = target;
            at = 0;
            end = target.length();
            return target.startsWith("/") ? root() : dir;
        }

        private void save() {
            if (savedPath == null) {
                savedPath = new String[4];
                savedAt = new int[4];
                savedEnd = new int[4];
            } else if (saved == savedPath.length) {
                savedPath = Arrays.copyOf(savedPath, saved * 2);
                savedAt = Arrays.copyOf(savedAt, saved * 2);
                savedEnd = Arrays.copyOf(savedEnd, saved * 2);
            }
            savedPath[saved] = path;
            savedAt[saved] = at;
            savedEnd[saved] = end;
            saved++;
        }

        /** Reads the next component into {@link #compStart} and {@link #compEnd}; false if none is left. */
        private boolean next() {
            for (;;) {
                int p = at;
                int q = skipSlashes(path, p, end);
                if (q < end) {
                    compStart = q;
                    while (q < end && path.charAt(q) != '/') {
                        q++;
                    }
                    compEnd = at = q;
                    return true;
                }
                at = end;
                if (trailingSlash(path, p, q, end)) {
                    compStart = compEnd = q;
                    return true;
                }
                if (saved == 0) {
                    return false;
                }
                saved--;
                path = savedPath[saved];
                at = savedAt[saved];
                end = savedEnd[saved];
                savedPath[saved] = null;
            }
        }

        /** True if a component is left after the one read last, in its string or in one it interrupted. */
        private boolean hasMore() {
            if (hasComponent(path, at, end)) {
                return true;
            }
            for (int i = saved - 1; i >= 0; i--) {
                if (hasComponent(savedPath[i], savedAt[i], savedEnd[i])) {
                    return true;
                }
            }
            return false;
        }
    }

    /** Characters {@code [from, to)} of a string, read in place: a walk's last name, copied only when a message or a record needs it. */
    private static final class NameView implements CharSequence {
        private String s = "";
        private int from, to;

        void view(String s, int from, int to) {
            this.s = s;
            this.from = from;
            this.to = to;
        }

        @Override
        public int length() {
            return to - from;
        }

        @Override
        public char charAt(int index) {
            return s.charAt(from + index);
        }

        @Override
        public CharSequence subSequence(int start, int end) {
            return s.substring(from + start, from + end);
        }

        @Override
        public String toString() {
            return s.substring(from, to);
        }
    }

    private static int skipSlashes(String s, int at, int end) {
        while (at < end && s.charAt(at) == '/') {
            at++;
        }
        return at;
    }

    /**
     * True if the slashes {@code s[at, slashesEnd)}, which reach {@code end}, are a trailing slash after a
     * name: the walk stops only after names, and the part walked before a parent's last name has none.
     */
    private static boolean trailingSlash(String s, int at, int slashesEnd, int end) {
        return slashesEnd > at && at > 0 && end == s.length();
    }

    /** True if {@code s[at, end)} holds a component for the walk. */
    private static boolean hasComponent(String s, int at, int end) {
        int q = skipSlashes(s, at, end);
        return q < end || trailingSlash(s, at, q, end);
    }

    /** True if {@code ancestor} is {@code dir} or one of its ancestors (parent links; rename lock held). */
    boolean isAncestorOrSelf(long ancestor, long dir) {
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
            cur = records.parentOf(cur);
        }
        throw new CorruptionException(records.block(cur), InodeFormat.STRUCTURE, "the parent links from directory " + dir
                + " go round without reaching the root");
    }

    /**
     * A rename's answers in Linux's order before anything is locked: ENOTDIR or ENOENT for either
     * directory, EBUSY for {@code "."}, {@code ".."} or the root (EEXIST for the target of a {@link
     * RenameMode#NO_REPLACE}), ENAMETOOLONG for the source, ENOENT for it, ENAMETOOLONG for the target, EEXIST
     * for an existing target of a NO_REPLACE, ENOENT for a missing one of an {@link RenameMode#EXCHANGE} and
     * ENOTDIR for its trailing slash if it is not a directory, ENOTDIR for a trailing slash on a source that is
     * not a directory (or, but in an exchange, on the target). The usual rename, with none of these, costs a few
     * comparisons here.
     */
    void requireRenamable(long fromDir, String from, boolean fromSlash, long toDir, String to, boolean toSlash, RenameMode mode) {
        if (fromSlash || toSlash || isDots(from) || isDots(to) || tooLong(from) || tooLong(to)) {
            records.requireDir(fromDir);
            records.requireDir(toDir);
            refuseDots(from, RENAME);
            refuseDots(to, mode == RenameMode.NO_REPLACE ? NEW_NAME : RENAME);
            Found src = dirs.find(fromDir, EntryKey.of(requireName(from, false)));
            if (src == null) {
                throw new NamespaceException(Errno.ENOENT, quote(from) + " in directory " + fromDir);
            }
            EntryKey toKey = EntryKey.of(requireName(to, false));
            boolean exchange = mode == RenameMode.EXCHANGE;
            if (mode != RenameMode.REPLACE) {
                Found dst = dirs.find(toDir, toKey);
                if (dst != null && !exchange) {
                    throw new NamespaceException(Errno.EEXIST, quote(to) + " exists in directory " + toDir);
                }
                if (dst == null && exchange) {
                    throw new NamespaceException(Errno.ENOENT, quote(to) + " in directory " + toDir + ", to exchange with");
                }
                if (exchange && dst.type() != S_IFDIR && toSlash) {
                    throw new NamespaceException(Errno.ENOTDIR, "a trailing slash names a directory, and " + quote(to) + " is not one");
                }
            }
            if (src.type() != S_IFDIR && (fromSlash || toSlash && !exchange)) {
                throw new NamespaceException(Errno.ENOTDIR, "a trailing slash names a directory, and " + quote(from)
                        + " is not one");
            }
        }
    }
}
