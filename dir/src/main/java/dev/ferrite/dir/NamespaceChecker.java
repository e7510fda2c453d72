package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.BiConsumer;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.TreeCheck;
import dev.ferrite.btree.internal.TreeWalk;
import dev.ferrite.dir.CheckProblem.Kind;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.dir.DirContents.isTree;
import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFMT;

/**
 * The namespace's part of a volume check: walks from the root every directory, its entries, tree and
 * reserve, then every allocated inode and orphan, and reports each problem with the inode, the path from
 * the root and the block where it knows them; the groups' part runs with the blocks the walk found owned.
 * Reads only, lock-free.
 */
final class NamespaceChecker {
    /** How problems name the table catalog ({@link Tables}) and, after it, a table. */
    static final String CATALOG = "tables:";
    /** How problems name the tables' blob directory ({@link TableBlobs}) and, after it, a blob. */
    static final String BLOBS = "blobs:";
    /** How problems name the tables' overflow tree ({@link TableOverflow}). */
    static final String OVERFLOW = "overflow:";
    private final Volume volume;
    private final Geometry geometry;
    private final InodeCache inodes;
    private final InodeRecords records;
    private final DirContents dirs;
    private final ExtentMap extents;
    private final PathResolver paths;

    NamespaceChecker(Volume volume, Geometry geometry, InodeCache inodes, InodeRecords records, DirContents dirs,
                     ExtentMap extents, PathResolver paths) {
        this.extents = extents;
        this.volume = volume;
        this.geometry = geometry;
        this.inodes = inodes;
        this.records = records;
        this.dirs = dirs;
        this.paths = paths;
    }

    /**
     * Every problem a full walk finds, in a report that is clean for a sound volume: the allocation groups
     * and their trees ({@link Volume#checkGroups}, with the namespace's blocks accounted for), and from the root
     * down every directory's tree and reserve, its entry count, link count (2 + subdirectories) and parent
     * link, each entry's type against its inode, each inode's link count against the entries naming it,
     * and that every allocated inode is reachable or an orphan with no links.
     */
    CheckReport check() {
        return new Run().check();
    }

    /** One check's state: what it found, the blocks the namespace owns, and the names each inode has. */
    private final class Run {
        private final List<CheckProblem> problems = new ArrayList<>();
        private final TreeMap<Long, Integer> owned = new TreeMap<>();
        /** File extents, as +1 at each one's first device block and -1 past its last: how many map each block. */
        private final TreeMap<Long, Integer> uses = new TreeMap<>();
        /** Every file extent as {device block, length, inode}: whom {@link #checkSharing}'s problems name. */
        private final List<long[]> fileExtents = new ArrayList<>();
        private final Map<Long, Integer> names = new HashMap<>();
        /** The path of each directory reached, in walk order. */
        private final Map<Long, String> dirPaths = new LinkedHashMap<>();
        /** A path for every named inode, made only when a problem needs one that is not a directory's. */
        private Map<Long, String> namePaths;
        private long inodeCount, trees, tables;

        CheckReport check() {
            Deque<Long> todo = new ArrayDeque<>();
            long root = paths.root();
            todo.add(root);
            dirPaths.put(root, "/");
            long catalog = volume.group(0).catalog(); // the table catalog: a second tree of names, reached by no path
            if (catalog != 0) {
                todo.add(catalog);
                dirPaths.put(catalog, CATALOG);
            }
            long blobs = volume.group(0).blobDirectory(); // and the tables' blob files
            if (blobs != 0) {
                todo.add(blobs);
                dirPaths.put(blobs, BLOBS);
            }
            while (!todo.isEmpty()) {
                long dir = todo.poll();
                String dirPath = dirPaths.get(dir);
                InodeStat ds = records.statIno(dir);
                int subdirs = 0;
                List<DirEntry> entries = dirs.allEntries(dir);
                for (DirEntry e : entries) {
                    String path = child(dirPath, e.name());
                    String where = "directory " + dir + " entry '" + e.name() + "'";
                    InodeStat cs;
                    try {
                        cs = records.statIno(e.ino());
                    } catch (NamespaceException x) {
                        add(Kind.DIRECTORY, e.ino(), path, where + " names free inode " + e.ino());
                        continue;
                    }
                    if ((cs.mode() & S_IFMT) != e.type()) {
                        add(Kind.DIRECTORY, e.ino(), path, where + " has type 0" + Integer.toOctalString(e.type())
                                + " but inode " + e.ino() + " has mode 0" + Integer.toOctalString(cs.mode()));
                    }
                    names.merge(e.ino(), 1, Integer::sum);
                    if (dir == catalog && cs.isTable()) {
                        tables++;
                    }
                    if (cs.isDirectory()) {
                        subdirs++;
                        if (dirPaths.putIfAbsent(e.ino(), path) != null) {
                            add(Kind.DIRECTORY, e.ino(), path, where + " names directory " + e.ino() + " which has another name");
                            continue;
                        }
                        if (records.parentOf(e.ino()) != dir) {
                            add(Kind.DIRECTORY, e.ino(), path, "directory " + e.ino() + " says its parent is "
                                    + records.parentOf(e.ino()) + ", not " + dir);
                        }
                        todo.add(e.ino());
                    }
                }
                if (ds.size() != entries.size()) {
                    add(Kind.DIRECTORY, dir, dirPath, "directory " + dir + " counts " + ds.size() + " entries but holds "
                            + entries.size());
                }
                if (ds.nlink() != 2 + subdirs) {
                    add(Kind.INODE, dir, dirPath, "directory " + dir + " has " + ds.nlink() + " links, expected 2 + "
                            + subdirs + " subdirectories");
                }
                checkBlocks(dir, ds);
            }
            long overflow = volume.group(0).overflowTree(); // and the medium values' chunks
            Map<Long, Boolean> tableInodes = new HashMap<>(); // each table's, and whether it is an orphan
            Set<Long> orphans = new HashSet<>();
            for (int g = 0; g < geometry.agCount(); g++) {
                orphans.addAll(volume.group(g).orphanInodes());
            }
            for (int g = 0; g < geometry.agCount(); g++) {
                for (long ino : volume.group(g).allocatedInodes()) {
                    inodeCount++;
                    InodeStat s = records.readRecord(ino, (b, rec) -> InodeFormat.stat(ino, b, rec));
                    int n = names.getOrDefault(ino, 0);
                    if (s.isTable() && ino != overflow) {
                        tableInodes.put(ino, orphans.contains(ino));
                    }
                    if (ino == overflow) {
                        checkBlocks(ino, s);
                    } else if (orphans.contains(ino)) {
                        if (n != 0 || s.nlink() != 0) {
                            add(Kind.ORPHAN, ino, pathOf(ino), "orphan " + ino + " has " + s.nlink() + " links and " + n + " names");
                        }
                        checkBlocks(ino, s);
                    } else if (ino != root && ino != catalog && ino != blobs && n == 0) {
                        add(Kind.ORPHAN, ino, null, "inode " + ino + " (mode 0" + Integer.toOctalString(s.mode())
                                + ") is allocated but has no name");
                    } else if (!s.isDirectory()) {
                        if (s.nlink() != n) {
                            add(Kind.INODE, ino, pathOf(ino), "inode " + ino + " has " + s.nlink() + " links but " + n + " names");
                        }
                        checkBlocks(ino, s);
                    }
                }
            }
            for (long ino : orphans) {
                if (records.readRecord(ino, InodeFormat::mode) == 0) {
                    add(Kind.ORPHAN, ino, null, "orphan " + ino + " is a free inode");
                }
            }
            if (overflow != 0) {
                checkOverflow(overflow, tableInodes);
            }
            if (volume.hasIncompatFeature(SuperblockFormat.INCOMPAT_TABLE_EXTENTS)) {
                checkTableExtents(tableInodes.keySet());
            }
            checkSharing();
            problems.addAll(volume.checkGroups(owned));
            return new CheckReport(problems, dirPaths.size(), inodeCount, trees, tables);
        }

        private void add(Kind kind, long ino, String path, String detail) {
            problems.add(CheckProblem.atInode(kind, ino, path, detail));
        }

        private static String child(String dirPath, String name) {
            return dirPath.equals("/") || dirPath.equals(CATALOG) || dirPath.equals(BLOBS) ? dirPath + name : dirPath + "/" + name;
        }

        /** A path naming {@code ino}, or null if none does (walks the directories again the first time). */
        private String pathOf(long ino) {
            String p = dirPaths.get(ino);
            if (p != null) {
                return p;
            }
            if (namePaths == null) {
                namePaths = new HashMap<>();
                for (Map.Entry<Long, String> d : dirPaths.entrySet()) {
                    for (DirEntry e : dirs.allEntries(d.getKey())) {
                        namePaths.putIfAbsent(e.ino(), child(d.getValue(), e.name()));
                    }
                }
            }
            return namePaths.get(ino);
        }

        /** A table's medium value as the check found it: who names it, and how many of its chunks it met. */
        private static final class MediumRef {
            final long table;
            final byte[] key;
            final TableValueFormat.Medium m;
            final boolean orphan;
            int seen;

            MediumRef(long table, byte[] key, TableValueFormat.Medium m, boolean orphan) {
                this.table = table;
                this.key = key;
                this.m = m;
                this.orphan = orphan;
            }

            String what() {
                return "table " + table + " key " + Tables.hex(MemorySegment.ofArray(key)) + " names medium value " + m.id() + " of "
                        + m.length() + " bytes in " + m.chunks() + " chunks";
            }
        }

        /**
         * The overflow tree against the tables ({@code tables}: inode to whether it is an orphan): every
         * medium value a table names has each of its chunks, of its length, and every chunk belongs to
         * exactly one table's value. An orphaned table's values may have lost chunks already: its release,
         * cut short by a crash, goes on at the next mount.
         */
        private void checkOverflow(long overflow, Map<Long, Boolean> tables) {
            Map<Long, MediumRef> refs = new HashMap<>();
            for (Map.Entry<Long, Boolean> t : tables.entrySet()) {
                long ino = t.getKey();
                entries(ino, (key, v) -> {
                    byte kind;
                    try {
                        kind = TableValueFormat.kind(v, v.byteSize(), ino);
                    } catch (CorruptionException e) {
                        add(Kind.BTREE, ino, pathOf(ino), "key " + Tables.hex(MemorySegment.ofArray(key)) + ": " + e.getMessage());
                        return;
                    }
                    if (kind == TableValueFormat.MEDIUM) {
                        MediumRef r = new MediumRef(ino, key, TableValueFormat.readMedium(v), t.getValue());
                        MediumRef other = refs.putIfAbsent(r.m.id(), r);
                        if (other != null) {
                            add(Kind.BTREE, ino, pathOf(ino), r.what() + ", which " + other.what().replace(" names ", " also names "));
                        }
                    }
                });
            }
            entries(overflow, (key, v) -> {
                if (key.length != TableValueFormat.CHUNK_KEY) {
                    add(Kind.BTREE, overflow, OVERFLOW, "overflow tree key " + Tables.hex(MemorySegment.ofArray(key)) + " is no chunk's");
                    return;
                }
                MemorySegment k = MemorySegment.ofArray(key);
                long id = TableValueFormat.chunkId(k);
                int chunk = TableValueFormat.chunkNumber(k);
                MediumRef r = refs.get(id);
                String what = "overflow tree chunk " + chunk + " of medium value " + id + " (" + v.byteSize() + " bytes)";
                if (r == null) {
                    add(Kind.BTREE, overflow, OVERFLOW, what + " belongs to no table's value: leaked");
                } else if (chunk < 0 || chunk >= r.m.chunks() || v.byteSize() != r.m.chunkLength(chunk)) {
                    add(Kind.BTREE, r.table, pathOf(r.table), what + " does not fit: " + r.what());
                } else {
                    r.seen++;
                }
            });
            for (MediumRef r : refs.values()) {
                if (r.seen != r.m.chunks() && !r.orphan) {
                    add(Kind.BTREE, r.table, pathOf(r.table), r.what() + " but the overflow tree (inode " + overflow + ") holds "
                            + r.seen + " of them");
                }
            }
        }

        /**
         * The blocks of the tables' extent values ({@link TableExtents}), accounted for in {@code owned}: each
         * stub's blocks lie on the device and overlap no other stub's, no inode's and no tree's (the
         * groups' check then finds them allocated, and every allocated block owned).
         */
        private void checkTableExtents(Set<Long> tables) {
            int bs = geometry.blockSize();
            for (long ino : tables) {
                entries(ino, (key, v) -> {
                    if (!TableValueFormat.isExtent(v, v.byteSize())) {
                        return;
                    }
                    TableValueFormat.Extent x = TableValueFormat.readExtent(v);
                    long dev = x.block();
                    int len = x.blocks(bs);
                    String what = "table " + ino + " key " + Tables.hex(MemorySegment.ofArray(key)) + " names a value of " + x.length()
                            + " bytes in blocks [" + dev + ", +" + len + ")";
                    if (!TableValueFormat.isMedium(x.length()) || dev <= 0 || dev + len > geometry.deviceBlocks()) {
                        add(Kind.BTREE, ino, pathOf(ino), what + ", which are not a medium value's blocks on the device");
                        return;
                    }
                    Map.Entry<Long, Integer> before = owned.floorEntry(dev + len - 1);
                    if (before != null && before.getKey() + before.getValue() > dev) {
                        problems.add(CheckProblem.at(Kind.BTREE, dev, ino, pathOf(ino), what + ", which overlap blocks ["
                                + before.getKey() + ", +" + before.getValue() + ") owned by another inode, extent or value"));
                        return;
                    }
                    owned.put(dev, len);
                });
            }
        }

        /** Each key and value of table-type inode {@code ino}'s tree; a tree its own check found unreadable ends early. */
        private void entries(long ino, BiConsumer<byte[], MemorySegment> each) {
            int area = records.rec(ino) + InodeFormat.INLINE;
            long header = records.readRecord(ino, (b, rec) -> isTree(b, rec) ? DirEntryFormat.treeHeader(b, area) : 0L);
            if (header == 0) {
                return;
            }
            Inode d = inodes.acquire(ino);
            try {
                Cursor c = dirs.tree(d, header).cursor(null, false);
                while (c.next()) {
                    each.accept(c.key(), c.valueSegment());
                }
            } catch (CorruptionException e) { // reported by the tree's check
            } finally {
                inodes.release(d);
            }
        }

        /** A long symlink's block: in range, holding the link's target of its size; the inode counts one block. */
        private void checkRemoteBlock(long ino, long blk, InodeStat s) {
            if (!s.isSymlink()) {
                add(Kind.INODE, ino, pathOf(ino), "inode " + ino + " (mode 0" + Integer.toOctalString(s.mode())
                        + ") has a remote fork; only long symlinks do");
            }
            if (s.blocks() != 1) {
                add(Kind.INODE, ino, pathOf(ino), "symlink " + ino + " counts " + s.blocks() + " blocks but owns 1");
            }
            if (!geometry.isDataBlock(blk)) {
                problems.add(CheckProblem.at(Kind.INODE, blk, ino, pathOf(ino), "symlink " + ino + " names block " + blk + " outside the allocation groups"));
                return;
            }
            owned.put(blk, 1);
            try {
                if (s.isSymlink()) {
                    records.remoteTarget(ino, blk, s.size(), s.generation());
                }
            } catch (CorruptionException | NamespaceException e) {
                problems.add(CheckProblem.at(Kind.INODE, blk, ino, pathOf(ino), "symlink " + ino + ": " + e.getMessage()));
            }
        }

        /**
         * A regular file's extents, inline or in its tree: decodable (sorted, in range, within the record or
         * a sound tree whose extent count is right), no block owned twice, no written extent past the block
         * holding the last byte, unwritten ones past it only in a file flagged for them (speculative
         * preallocation or a crash between a write's two transactions: {@link InodeFormat#FLAG_SPECULATIVE};
         * fallocate keeping the size: {@link InodeFormat#FLAG_PREALLOC}), and the inode's block count its
         * extents' sum plus its tree's blocks and reserve.
         */
        private void checkExtents(long ino, InodeStat s) {
            ExtentList x;
            long meta;
            try {
                meta = treeBlocks(ino, "file");
                x = extents.all(ino);
            } catch (CorruptionException e) {
                problems.add(CheckProblem.at(Kind.INODE, e.block(), ino, pathOf(ino), "file " + ino + ": " + e.getMessage()));
                return;
            }
            if (x.inTree()) {
                int area = records.rec(ino) + InodeFormat.INLINE;
                int counted = records.readRecord(ino, (b, rec) -> ExtentTreeFormat.count(b, area));
                if (counted != x.count()) {
                    add(Kind.INODE, ino, pathOf(ino), "file " + ino + " counts " + counted + " extents in its tree but it holds " + x.count());
                }
            }
            long bs = geometry.blockSize();
            long eofBlock = (s.size() + bs - 1) / bs;
            for (int i = 0; i < x.count(); i++) {
                long dev = x.deviceBlock(i);
                int len = x.length(i);
                String what = "file " + ino + " extent [" + x.fileBlock(i) + ", +" + len + ") at device block " + dev;
                if (!x.unwritten(i) && x.end(i) > eofBlock) {
                    add(Kind.INODE, ino, pathOf(ino), what + " is written past the end of the file (" + s.size() + " bytes)");
                } else if (x.end(i) > eofBlock && (s.flags() & (InodeFormat.FLAG_SPECULATIVE | InodeFormat.FLAG_PREALLOC)) == 0) {
                    add(Kind.INODE, ino, pathOf(ino), what + " lies past the end of the file (" + s.size()
                            + " bytes) but the inode is flagged neither for speculative preallocation nor for fallocate's");
                }
                uses.merge(dev, 1, Integer::sum); // counted against the refcount trees once every file is read
                uses.merge(dev + len, -1, Integer::sum);
                fileExtents.add(new long[] {dev, len, ino});
            }
            if (x.blocks() + meta != s.blocks()) {
                add(Kind.INODE, ino, pathOf(ino), "file " + ino + " counts " + s.blocks() + " blocks but its extents map " + x.blocks()
                        + (meta == 0 ? "" : " and its tree and reserve take " + meta));
            }
        }

        /**
         * Each device block file extents map is mapped by exactly as many of them as its group's refcount
         * tree counts (1 where no record covers it), and a staging record's blocks by none; then every such
         * block, and every staging one, goes into {@code owned} once, checked against the other owners.
         */
        private void checkSharing() {
            TreeMap<Long, Integer> counted = new TreeMap<>(); // +count at each record's start, back past its end
            TreeMap<Long, Boolean> staging = new TreeMap<>();
            for (int g = 0; g < geometry.agCount(); g++) {
                AllocationGroup ag = volume.group(g);
                List<Refcounts.Entry> records;
                try {
                    records = ag.refcounts.all();
                } catch (CorruptionException e) {
                    problems.add(CheckProblem.atBlock(Kind.BTREE, e.block(), "group " + g + " " + e.getMessage()));
                    continue;
                }
                long end = 0;
                for (Refcounts.Entry r : records) {
                    long dev = ag.start + r.start();
                    if (dev < end) {
                        problems.add(CheckProblem.atBlock(Kind.BTREE, dev, "group " + g + "'s refcount records overlap at device block " + dev));
                    }
                    end = dev + r.length();
                    if (r.count() == RefcountFormat.STAGING) {
                        staging.put(dev, Boolean.TRUE);
                    } else if (r.count() < 2) {
                        problems.add(CheckProblem.atBlock(Kind.BTREE, dev, "group " + g + "'s refcount record at device block " + dev
                                + " counts " + Integer.toUnsignedString(r.count()) + ": only shared blocks (2 or more) have records"));
                    }
                    counted.merge(dev, r.count() == RefcountFormat.STAGING ? -1 : r.count() - 1, Integer::sum);
                    counted.merge(end, r.count() == RefcountFormat.STAGING ? 1 : 1 - r.count(), Integer::sum);
                }
            }
            TreeSet<Long> edges = new TreeSet<>(uses.keySet());
            edges.addAll(counted.keySet());
            int used = 0, count = 1; // over [prev, at): the extents mapping it, its count (0 staging, 1 without a record)
            long runStart = -1, prev = -1;
            for (long at : edges) {
                if (prev >= 0 && (count == 1 ? used > 1 : used != count)) {
                    String detail = "device blocks [" + prev + ", " + at + ") mapped by " + used + " file extents but counted "
                            + count + " in the refcount tree";
                    boolean named = false;
                    for (long[] x : fileExtents) { // a rare problem: the extents that map the blocks, by a scan
                        if (x[0] <= prev && x[0] + x[1] > prev) {
                            add(Kind.INODE, x[2], pathOf(x[2]), "file " + x[2] + " extent at device block " + x[0] + " overlaps " + detail);
                            named = true;
                        }
                    }
                    if (!named) {
                        problems.add(CheckProblem.atBlock(Kind.FREE_SPACE, prev, detail));
                    }
                }
                boolean inUse = prev >= 0 && (used > 0 || count == RefcountFormat.STAGING);
                if (inUse && runStart < 0) {
                    runStart = prev;
                } else if (!inUse && runStart >= 0) {
                    own(runStart, prev);
                    runStart = -1;
                }
                used += uses.getOrDefault(at, 0);
                count += counted.getOrDefault(at, 0);
                prev = at;
            }
            if (runStart >= 0) {
                own(runStart, prev);
            }
        }

        /** Accounts device blocks {@code [from, to)} in {@code owned}, a problem if another owner has any of them. */
        private void own(long from, long to) {
            Map.Entry<Long, Integer> before = owned.floorEntry(to - 1);
            if (before != null && before.getKey() + before.getValue() > from) {
                problems.add(CheckProblem.atBlock(Kind.INODE, from, "file data blocks [" + from + ", " + to + ") overlap blocks ["
                        + before.getKey() + ", +" + before.getValue() + ") owned by an inode's tree, a symlink or a table value"));
                return;
            }
            owned.put(from, (int) (to - from));
        }

        /**
         * Accounts for the blocks an inode owns in {@code owned}, checking them: a directory's tree and
         * reserve, a long symlink's target block.
         */
        private void checkBlocks(long dir, InodeStat s) {
            if (s.isRegularFile()) {
                checkExtents(dir, s);
                return;
            }
            long remote = records.readRecord(dir, (b, rec) -> InodeFormat.fork(b, rec) == InodeFormat.FORK_REMOTE ? InodeFormat.remoteBlock(b, rec) : 0L);
            if (remote != 0) {
                checkRemoteBlock(dir, remote, s);
                return;
            }
            String what = s.isDirectory() ? "directory" : "table";
            long blocks = s.isDirectory() || s.isTable() ? treeBlocks(dir, what) : 0;
            if (blocks != s.blocks()) {
                add(Kind.INODE, dir, pathOf(dir), s.isDirectory() || s.isTable() ? what + " " + dir + " counts " + s.blocks() + " blocks but owns " + blocks
                        : "inode " + dir + " counts " + s.blocks() + " blocks but owns none");
            }
        }

        /**
         * Accounts for the reserve and tree of {@code ino} ({@code what}: a directory or a file) in
         * {@code owned}, checking the tree; returns how many blocks they are (0 for an inline fork).
         */
        private long treeBlocks(long ino, String what) {
            int area = records.rec(ino) + InodeFormat.INLINE;
            long[] st = records.readRecord(ino, (b, rec) -> isTree(b, rec)
                    ? new long[] {DirEntryFormat.treeHeader(b, area), dirs.requireReserve(ino, b, area)} : null);
            if (st == null) {
                return 0;
            }
            long blocks = st[1];
            for (int i = 0; i < st[1]; i++) {
                int k = i;
                owned.put(records.readRecord(ino, (b, rec) -> DirEntryFormat.reserveEntry(b, area, k)), 1);
            }
            if (st[0] != 0) {
                Inode d = inodes.acquire(ino);
                try {
                    BTree t = dirs.tree(d, st[0]);
                    trees++;
                    String tree = what + " " + ino + " tree (header block " + st[0] + "): ";
                    Set<Long> reported = new HashSet<>();
                    for (TreeCheck.Problem p : t.check().problems()) {
                        problems.add(CheckProblem.at(Kind.BTREE, p.block(), ino, pathOf(ino), tree + p.detail()));
                        reported.add(p.block());
                    }
                    long[] n = new long[1];
                    try {
                        TreeWalk.blocks(t, blk -> {
                            owned.put(blk, 1);
                            n[0]++;
                        });
                    } catch (CorruptionException e) { // an unreadable node: the rest of the volume is still checked
                        if (!reported.contains(e.block())) {
                            problems.add(CheckProblem.at(Kind.BTREE, e.block(), ino, pathOf(ino), tree + e.getMessage()));
                        }
                    }
                    blocks += n[0];
                } finally {
                    inodes.release(d);
                }
            }
            return blocks;
        }
    }
}
