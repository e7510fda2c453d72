package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.NavigableMap;
import java.util.OptionalLong;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.UUID;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.BufferReplayer;
import dev.ferrite.btree.CacheStats;
import dev.ferrite.btree.LatchStats;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.journal.internal.Journal;
import dev.ferrite.journal.JournalStats;
import dev.ferrite.journal.internal.LogGeometry;
import dev.ferrite.journal.VolumeShutdownException;

/**
 * A mounted Ferrite volume: superblock, journal, buffer cache, allocation groups and inode cache.
 *
 * <pre>{@code
 * Volume.format(device, VolumeOptions.defaults());
 * try (Volume v = Volume.open(device, VolumeOptions.defaults())) {
 *     VolumeStats s = v.statfs();
 * }
 * }</pre>
 *
 * <p>A device is open as at most one volume at a time: {@link #open} and {@link #format} take the
 * device's exclusive lock ({@link BlockDevice#tryLockExclusive()}, an flock for file-backed devices) and
 * register it in this process, and refuse with EBUSY if either is taken. Thread-safe.
 */
public final class Volume implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Volume.class.getName());
    /** Devices open as volumes in this process, by identity: RAM devices have no flock to refuse a second open. */
    private static final Set<BlockDevice> OPEN = Collections.newSetFromMap(new IdentityHashMap<>());
    private static final String SUPERBLOCK = "superblock";
    private static final int INODE_CACHE_CAPACITY = 1 << 16;

    /** The magics the namespace gives blocks it frees (the B-tree's own the replayer knows): recovery writes no such block. */
    /** Incompatible features every format sets: what its trees' blocks may hold from the start. */
    static final long FORMAT_FEATURES = SuperblockFormat.INCOMPAT_FLOATING_SLOTS | SuperblockFormat.INCOMPAT_WIDE_CELLS;
    private static final int[] FREED_MAGICS = {InodeFormat.FREED_MAGIC, SymlinkFormat.FREED_MAGIC, DirEntryFormat.FREED_MAGIC};
    private final BlockDevice device;
    private final Geometry geometry;
    private final Journal journal;
    private final BufferCache cache;
    private final AllocationGroup[] groups;
    private final Counters counters;
    private final InodeCache inodes = new InodeCache(INODE_CACHE_CAPACITY);
    private final MountReport report;
    private final Namespace namespace;
    private final Tables tables;
    /** File data cached for buffered I/O ({@link VolumeOptions#dataCacheBytes}). */
    private final PageCache pages;
    /** Blocks an inode block miss reads together ({@link VolumeOptions#inodeClusterBlocks}). */
    private final int inodeCluster;
    /** What the superblock says; rewritten at mount, checkpoint and unmount. Guarded by this. */
    private SuperblockFormat.Fields superblock;
    private volatile boolean closed;

    private Volume(BlockDevice device, SuperblockFormat.Fields superblock, Journal journal, BufferCache cache,
                   AllocationGroup[] groups, Counters counters, MountReport report, VolumeOptions options) {
        this.device = device;
        this.inodeCluster = options.effectiveInodeCluster();
        this.geometry = superblock.geometry();
        this.superblock = superblock;
        this.journal = journal;
        this.cache = cache;
        this.groups = groups;
        this.counters = counters;
        this.report = report;
        this.pages = new PageCache(geometry.blockSize(), options.effectiveDataCacheBytes(), options.effectiveDirtyExpireMillis(),
                counters);
        counters.setSpare(this::spareBlocks);
        counters.setAside((long) groups.length * AllocationGroup.RESERVE);
        this.namespace = new Namespace(this, cache, superblock.geometry(), inodes, pages, options.effectiveNameCacheEntries(device.size()));
        this.tables = new Tables(this, namespace, cache, options);
    }

    // ------------------------------------------------------------------ format

    /**
     * Writes a new, empty volume over {@code device}: superblock and mirror, an empty journal, the
     * allocation groups with their headers and trees, and the root directory's inode. The layout follows
     * {@code options} (see {@link VolumeOptions} for the defaults).
     *
     * @throws InvalidArgumentException if the device is too small or the options do not fit it
     * @throws DeviceException          EBUSY if the device is open as a volume; or a read, write or flush
     *                                  of it failed
     */
    public static void format(BlockDevice device, VolumeOptions options) {
        Geometry g = Geometry.plan(device, options);
        claim(device);
        Volume v = null;
        boolean done = false;
        try {
            // no valid superblock survives an interrupted format to describe half-written structures
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment zero = arena.allocate(g.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
                device.write(SuperblockFormat.PRIMARY, zero);
                device.write(SuperblockFormat.MIRROR, zero);
                device.flush();
            }
            LogGeometry log = new LogGeometry(g.logStart(), g.logBlocks());
            Journal.format(device, log);
            Journal journal;
            try (BufferReplayer replayer = new BufferReplayer(device, FREED_MAGICS)) {
                journal = Journal.open(device, log, options.journal(), replayer);
            }
            BufferCache cache = new BufferCache(device, journal, options.effectiveCacheBytes(device.size()));
            Counters counters = new Counters();
            AllocationGroup[] groups = new AllocationGroup[g.agCount()];
            SuperblockFormat.Fields fields = new SuperblockFormat.Fields(SuperblockFormat.VERSION, g, UUID.randomUUID(),
                    0, 0, false, 0, 0, 0, 0, 0).withIncompat(FORMAT_FEATURES);
            v = new Volume(device, fields, journal, cache, groups, counters,
                    new MountReport(false, true, 0, false, List.of()), options);
            for (int i = 0; i < groups.length; i++) {
                try (Txn txn = Txn.begin(cache, AllocationGroup.FORMAT_ITEMS)) {
                    groups[i] = AllocationGroup.format(txn, g, i, counters);
                    txn.commit();
                }
            }
            long root = v.allocInode(0, InodeFormat.S_IFDIR | 0755, 0, 0, 2);
            synchronized (v) {
                v.superblock = new SuperblockFormat.Fields(SuperblockFormat.VERSION, g, fields.uuid(), 0, 0, false, 0, 0, 0,
                        root, 0).withIncompat(FORMAT_FEATURES);
            }
            done = true;
        } finally {
            if (done) {
                v.close(); // writes the superblock, clean, and lets go of the device
            } else if (v != null) {
                v.abandon(); // no superblock: the device stays unformatted
            } else {
                unclaim(device);
            }
        }
    }

    // ------------------------------------------------------------------ mount

    /**
     * Mounts the volume on {@code device}: reads the superblock (falling back to the mirror if the
     * primary is damaged), recovers the journal, opens the allocation groups, and rebuilds the free and
     * inode counts from the group headers if the volume was not unmounted cleanly. {@link #mountReport()}
     * says what was found.
     *
     * @throws InvalidArgumentException     if the device holds no Ferrite volume, or is smaller than the
     *                                      volume formatted on it
     * @throws CorruptionException          if both superblock copies, or other metadata, are damaged
     * @throws IncompatibleVolumeException  if the volume has a newer format or unknown incompatible features
     * @throws DeviceException              EBUSY if the device is already open as a volume; or a read,
     *                                      write or flush of it failed
     */
    public static Volume open(BlockDevice device, VolumeOptions options) {
        claim(device);
        Journal journal = null;
        BufferCache cache = null;
        try {
            List<String> notes = new ArrayList<>();
            boolean[] usedMirror = new boolean[1];
            SuperblockFormat.Fields sb = readSuperblock(device, usedMirror, notes);
            Geometry g = sb.geometry();
            if (g.blockSize() != device.blockSize()) {
                throw new InvalidArgumentException(device.name() + " is opened with " + device.blockSize()
                        + "-byte blocks but the volume on it has " + g.blockSize() + "-byte blocks");
            }
            if (g.deviceBlocks() > device.blockCount()) {
                throw new InvalidArgumentException(device.name() + " holds " + device.blockCount() + " blocks but the"
                        + " volume on it was formatted for " + g.deviceBlocks() + ": the device is too small (truncated?)");
            }
            int replayed;
            try (BufferReplayer replayer = new BufferReplayer(device, FREED_MAGICS)) {
                journal = Journal.open(device, new LogGeometry(g.logStart(), g.logBlocks()), options.journal(), replayer);
                replayed = replayer.blocks();
            }
            cache = new BufferCache(device, journal, options.effectiveCacheBytes(device.size()));
            cache.floatingLeaves((sb.incompat() & SuperblockFormat.INCOMPAT_FLOATING_SLOTS) != 0);
            cache.wideCells((sb.incompat() & SuperblockFormat.INCOMPAT_WIDE_CELLS) != 0);
            Counters counters = new Counters();
            AllocationGroup[] groups = new AllocationGroup[g.agCount()];
            for (int i = 0; i < groups.length; i++) {
                groups[i] = AllocationGroup.open(cache, g, i, counters);
            }
            if (sb.clean()) {
                counters.set(sb.freeBlocks(), sb.freeInodes(), sb.inodes());
            } else {
                long freeBlocks = 0, freeInodes = 0, inodes = 0;
                for (AllocationGroup ag : groups) {
                    freeBlocks += ag.freeBlockCount() + ag.pendingAtOpen; // pending frees count free: drained below
                    freeInodes += ag.freeInodes();
                    inodes += ag.inodes();
                }
                counters.set(freeBlocks, freeInodes, inodes);
                notes.add("not unmounted cleanly: journal recovery rewrote " + replayed
                        + " blocks; free and inode counts rebuilt from the " + groups.length + " allocation groups");
            }
            for (String n : notes) {
                LOG.log(System.Logger.Level.WARNING, device.name() + ": " + n);
            }
            MountReport report = new MountReport(usedMirror[0], sb.clean(), replayed, !sb.clean(), List.copyOf(notes));
            Volume v = new Volume(device, sb, journal, cache, groups, counters, report, options);
            v.writeSuperblock(sb.withState(false, sb.freeBlocks(), sb.freeInodes(), sb.inodes(), sb.mounts() + 1)
                    .withIncompat(sb.incompat() | SuperblockFormat.LOG_INCOMPAT));
            v.drainPending(); // what a crash left on the pending-free lists, before anything allocates
            v.namespace.recoverOrphans();
            v.namespace.files.cow.freeStaging(); // copies on write a crash cut off: mapped by nobody
            v.tables.recover();
            return v;
        } catch (RuntimeException e) {
            try {
                if (journal != null) {
                    journal.close();
                }
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            } finally {
                if (cache != null) {
                    cache.close();
                }
                unclaim(device);
            }
            throw e;
        }
    }

    private static void claim(BlockDevice device) {
        synchronized (OPEN) {
            if (!OPEN.add(device)) {
                throw new DeviceException(device.name(), "open", -1, Errno.EBUSY, "the device is already open as a volume in this process");
            }
        }
        boolean locked = false;
        try {
            locked = device.tryLockExclusive();
        } finally {
            if (!locked) {
                synchronized (OPEN) {
                    OPEN.remove(device);
                }
            }
        }
        if (!locked) {
            throw new DeviceException(device.name(), "open", -1, Errno.EBUSY, "the device is locked: another process has it open as a volume");
        }
    }

    private static void unclaim(BlockDevice device) {
        try {
            device.unlockExclusive();
        } finally {
            synchronized (OPEN) {
                OPEN.remove(device);
            }
        }
    }

    /**
     * The superblock, from the primary if it is sound, else from the mirror (saying so in {@code notes}).
     */
    private static SuperblockFormat.Fields readSuperblock(BlockDevice device, boolean[] usedMirror, List<String> notes) {
        try (Arena arena = Arena.ofConfined()) {
            int bs = device.blockSize();
            MemorySegment primary = arena.allocate(bs, BlockDevice.BUFFER_ALIGNMENT);
            MemorySegment mirror = arena.allocate(bs, BlockDevice.BUFFER_ALIGNMENT);
            device.read(SuperblockFormat.PRIMARY, primary);
            device.read(SuperblockFormat.MIRROR, mirror);
            String primaryProblem = problem(primary, SuperblockFormat.PRIMARY);
            String mirrorProblem = problem(mirror, SuperblockFormat.MIRROR);
            MemorySegment chosen;
            long block;
            if (primaryProblem == null) {
                chosen = primary;
                block = SuperblockFormat.PRIMARY;
                if (mirrorProblem != null) {
                    notes.add("superblock mirror at block " + SuperblockFormat.MIRROR + " was damaged (" + mirrorProblem + "); rewritten");
                }
            } else if (mirrorProblem == null) {
                chosen = mirror;
                block = SuperblockFormat.MIRROR;
                usedMirror[0] = true;
                notes.add("primary superblock at block " + SuperblockFormat.PRIMARY + " is damaged (" + primaryProblem
                        + "); mounted from the mirror at block " + SuperblockFormat.MIRROR + " and rewrote the primary");
            } else if (SuperblockFormat.magic(primary) != SuperblockFormat.MAGIC && SuperblockFormat.magic(mirror) != SuperblockFormat.MAGIC) {
                throw new InvalidArgumentException(device.name() + " holds no Ferrite volume: blocks 0 and 1 start with 0x"
                        + Integer.toHexString(SuperblockFormat.magic(primary)) + " and 0x" + Integer.toHexString(SuperblockFormat.magic(mirror))
                        + ", not a superblock's 0x" + Integer.toHexString(SuperblockFormat.MAGIC));
            } else {
                throw new CorruptionException(SuperblockFormat.PRIMARY, SUPERBLOCK, primaryProblem + "; the mirror at block "
                        + SuperblockFormat.MIRROR + " is damaged too: " + mirrorProblem);
            }
            int version = SuperblockFormat.version(chosen);
            if (version != SuperblockFormat.VERSION) {
                throw new IncompatibleVolumeException(device.name() + " holds a Ferrite volume of format version " + version
                        + "; this version reads format version " + SuperblockFormat.VERSION + " only"
                        + (version < SuperblockFormat.VERSION ? " (older formats are not converted)" : ""));
            }
            SuperblockFormat.Fields f;
            try {
                f = SuperblockFormat.read(chosen);
            } catch (IllegalArgumentException e) {
                throw new CorruptionException(block, SUPERBLOCK, "inconsistent geometry: " + e.getMessage());
            }
            if (!f.geometry().isValidInode(f.rootInode())) {
                throw new CorruptionException(block, SUPERBLOCK, "the root directory is inode " + f.rootInode()
                        + ", which lies outside the volume");
            }
            if (f.clean() && (f.freeBlocks() < 0 || f.freeBlocks() > f.geometry().deviceBlocks() || f.inodes() < 0
                    || f.freeInodes() < 0 || f.freeInodes() > f.inodes())) { // a clean mount's counters: they size allocations
                throw new CorruptionException(block, SUPERBLOCK, "free block count " + f.freeBlocks() + " of " + f.geometry().deviceBlocks()
                        + " blocks, " + f.inodes() + " inodes of which " + f.freeInodes() + " free");
            }
            long unknown = f.incompat() & ~SuperblockFormat.KNOWN_INCOMPAT;
            if (unknown != 0) {
                throw new IncompatibleVolumeException(device.name() + " uses incompatible features 0x" + Long.toHexString(unknown)
                        + " this version does not know");
            }
            return f;
        }
    }

    /** Why a superblock copy cannot be used, or null if it can. */
    private static String problem(MemorySegment b, long blockNo) {
        try {
            BlockHeaderFormat.verify(b, blockNo, SuperblockFormat.MAGIC, 0, SUPERBLOCK);
            return null;
        } catch (CorruptionException e) {
            return e.getMessage();
        }
    }

    /** Whether the superblock has incompatible feature {@code bit} (none before a format has written it). */
    synchronized boolean hasIncompatFeature(long bit) {
        return superblock != null && (superblock.incompat() & bit) != 0;
    }

    /**
     * Sets incompatible feature {@code bit} in both superblock copies, durably, unless it is set already:
     * before the first structure that needs it is made.
     */
    synchronized void requireIncompatFeature(long bit) {
        if ((superblock.incompat() & bit) == 0) {
            writeSuperblock(superblock.withIncompat(superblock.incompat() | bit));
        }
    }

    /**
     * Writes both copies, the primary flushed before the mirror is written: a crash damages at most one.
     * Incompatible features set meanwhile stay set ({@code f} may have been read before), but for the log
     * features, which only the mount sets and the clean unmount clears.
     */
    private synchronized void writeSuperblock(SuperblockFormat.Fields f) {
        long sticky = superblock == null ? 0 : superblock.incompat() & ~SuperblockFormat.LOG_INCOMPAT;
        if ((sticky & ~f.incompat()) != 0) {
            f = f.withIncompat(f.incompat() | sticky);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(geometry.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            SuperblockFormat.write(b, SuperblockFormat.PRIMARY, f);
            device.write(SuperblockFormat.PRIMARY, b);
            device.flush();
            SuperblockFormat.write(b, SuperblockFormat.MIRROR, f);
            device.write(SuperblockFormat.MIRROR, b);
            device.flush();
        }
        superblock = f;
    }

    // ------------------------------------------------------------------ state

    /** What mounting found. */
    public MountReport mountReport() {
        return report;
    }

    /** The volume's UUID. */
    public synchronized UUID uuid() {
        return superblock.uuid();
    }

    /** The root directory's inode number. */
    public synchronized long rootInode() {
        return superblock.rootInode();
    }

    /**
     * The volume's directories, files and symlinks.
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public Namespace namespace() {
        requireOpen();
        return namespace;
    }

    /**
     * Serves this volume's namespace as a file system on directory {@code mountPoint} (through FUSE: the
     * {@link FileSystemProvider} of module {@code dev.ferrite.fuse}, found with {@link ServiceLoader}), so
     * that unmodified programs use it; returns once the mount is visible, the device's name as its source in the
     * mount table. Close the mount before the volume.
     *
     * @param readOnly the file system refuses every change (EROFS)
     * @throws UnsupportedOperationException if no provider is on the class or module path
     * @throws VolumeShutdownException if the volume is closed
     */
    public FileSystemMount mount(Path mountPoint, boolean readOnly) {
        requireOpen();
        FileSystemProvider provider = ServiceLoader.load(FileSystemProvider.class, Volume.class.getClassLoader()).findFirst()
                .orElseThrow(() -> new UnsupportedOperationException("mounting " + device.name() + " on " + mountPoint
                        + " needs a file system provider: put ferrite-fuse (module dev.ferrite.fuse) on the class or module path"));
        return provider.mount(this, device.name(), mountPoint, readOnly);
    }

    /** {@link #mount(Path, boolean)} read-write. */
    public FileSystemMount mount(Path mountPoint) {
        return mount(mountPoint, false);
    }

    /**
     * The volume's tables: named B-trees of keys and values with multi-key transactions ({@link Tables}).
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public Tables tables() {
        requireOpen();
        return tables;
    }

    /**
     * A write transaction over the volume's tables, durable when its commit returns
     * ({@code tables().begin(Durability.SYNC)}).
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public WriteTransaction begin() {
        return begin(Durability.SYNC);
    }

    /**
     * A write transaction over the volume's tables whose commit waits for {@code durability}
     * ({@code tables().begin(durability)}).
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public WriteTransaction begin(Durability durability) {
        return tables().begin(durability);
    }

    Journal journal() {
        return journal;
    }

    /** The volume-wide counts, and the promises of free blocks made against them ({@link Counters#claim}). */
    Counters counters() {
        return counters;
    }

    /** The data page cache (tests and stats). */
    PageCache pageCache() {
        return pages;
    }

    /**
     * Free blocks a file's data may take: the free count less what every group holds back for its free
     * lists and refcount tree ({@link FreeSpace#heldBack}, which allocations leave) and the set-aside pool's
     * blocks not drawn ({@link Counters#setAsideLeft}); at most the groups' free blocks past their held-back
     * ones, which single-block allocations can take in full. Every promise of blocks, dirty pages'
     * reservations and other allocations' claims, is made against it ({@link Counters#claim}).
     */
    long spareBlocks() {
        return counters.freeBlocks.sum() - counters.reservedBlocks.sum() - counters.listsLack.sum() - counters.setAsideLeft();
    }

    /** A snapshot of the striped counters: no lock taken. */
    public VolumeStats statfs() {
        long free = counters.freeBlocks.sum(), reserved = Math.min(free, counters.reservedBlocks.sum());
        return new VolumeStats(geometry.blockSize(), geometry.deviceBlocks(), free - reserved,
                counters.inodes.sum(), counters.freeInodes.sum(), groups.length, reserved);
    }

    /**
     * The journal's counters since mount (commits, checkpoints and their bytes, write-backs, waits).
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public JournalStats journalStats() {
        requireOpen();
        return journal.stats();
    }

    /**
     * The buffer cache's counters since mount (hits, misses, evictions, write-backs, waits).
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public CacheStats cacheStats() {
        requireOpen();
        return cache.stats();
    }

    /**
     * The inode cache's counters since mount (inodes made on a miss, inodes reclaimed).
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public InodeCacheStats inodeCacheStats() {
        requireOpen();
        return inodes.stats();
    }

    /**
     * Where B-tree operations met each other since mount, per level (optimistic restarts, lost locks,
     * waits on locked nodes), over every tree of the volume: namespace, tables, allocation.
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public LatchStats latchStats() {
        requireOpen();
        return cache.latchStats();
    }

    /** Waits of writers for each other's table keys and directory names since mount. */
    public StripeStats stripeStats() {
        requireOpen();
        long[] names = namespace.creator.stripeWaits();
        long[] keys = tables.stripeWaits();
        return new StripeStats(keys[0], keys[1], names[0], names[1]);
    }

    /**
     * The device writes of table values kept in extents since mount: how many, by whom, in how many
     * writes of how many bytes taking how long, and the blocks copied for them ({@link ValueWriteStats}).
     *
     * @throws VolumeShutdownException if the volume is closed
     */
    public ValueWriteStats valueWriteStats() {
        requireOpen();
        return tables.extents.writeBack.stats();
    }

    /** Journal and cache state in one line, for diagnosing a stall. */
    String diagnostics() {
        return journal.diagnostics() + "; " + cache.stats();
    }

    /** The volume's buffer cache (for tests that stage block-level states). */
    BufferCache cache() {
        return cache;
    }

    Geometry geometry() {
        return geometry;
    }

    AllocationGroup group(int ag) {
        return groups[ag];
    }

    InodeCache inodeCache() {
        return inodes;
    }

    /**
     * Refuses work on a closed volume, or one whose journal shut down after an I/O error (naming it), with
     * {@link VolumeShutdownException}: past a failed log or metadata write, the cached state may hold
     * changes that never reach the device, so nothing more is read or acknowledged from it. Every path
     * walk, handle I/O and table call checks this (volatile reads only).
     */
    void requireOpen() {
        if (closed) {
            throw new VolumeShutdownException("volume on " + device.name() + " is closed", null);
        }
        journal.requireAlive();
    }

    /** Refuses an inode number outside every group with {@link InvalidArgumentException}. */
    void requireValidInode(long ino) {
        if (!geometry.isValidInode(ino)) {
            throw new InvalidArgumentException("inode number " + ino + " lies outside the volume's allocation groups");
        }
    }

    // ------------------------------------------------------------------ inodes

    /**
     * Allocates an inode outside any directory (the namespace places and allocates its own): in group
     * {@code firstGroup}, else in the following groups.
     *
     * @return the new inode's number
     * @throws NoSpaceException        if no group has a free inode or room for a chunk (nothing changed)
     * @throws VolumeShutdownException if the volume is closed
     */
    long allocInode(int firstGroup, int mode, int uid, int gid, int nlink) {
        return allocInode(firstGroup, mode, uid, gid, nlink, 0, null);
    }

    /** What else a transaction allocating an inode changes ({@code items} log items more), knowing the inode. */
    interface AfterAlloc {
        void apply(Txn txn, long ino);
    }

    /** {@link #allocInode(int, int, int, int, int)} running {@code then}, changing up to {@code items} more items, in the allocating transaction. */
    long allocInode(int firstGroup, int mode, int uid, int gid, int nlink, int items, AfterAlloc then) {
        requireOpen();
        int n = groups.length;
        long now = WallClock.nowNanos();
        for (int k = 0; k < n; k++) {
            OptionalLong ino = allocIn(groups[(firstGroup + k) % n], mode, uid, gid, nlink, now, items, then);
            if (ino.isPresent()) {
                return ino.getAsLong();
            }
        }
        throw new NoSpaceException("no free inode and no room for an inode chunk in any of the " + n
                + " allocation groups of " + device.name());
    }

    /** An inode of group {@code ag}, or none if it has neither a free inode nor room for a chunk. */
    private OptionalLong allocIn(AllocationGroup ag, int mode, int uid, int gid, int nlink, long now, int items, AfterAlloc then) {
        boolean chunk = ag.freeInodes() == 0;
        for (int refills = 0, busy = 0; ; ) {
            if (ag.needsRefill() && refills++ < 4) {
                ag.refillFreeList();
            }
            int[] frames = chunk ? reserveFrames(Geometry.CHUNK_BLOCKS) : null;
            AllocOutcome r;
            try (Txn txn = Txn.begin(cache, ag.allocInodeItems(chunk) + items)) {
                r = ag.allocInode(txn, frames, mode, uid, gid, nlink, now);
                if (r == AllocOutcome.DONE) {
                    long ino = ag.allocatedInode(txn);
                    if (then != null) {
                        then.apply(txn, ino);
                    }
                    txn.commit();
                    return OptionalLong.of(ino);
                }
            } finally {
                unreserveFrames(frames);
            }
            if (r == AllocOutcome.NEEDS_CHUNK) {
                chunk = true;
            } else if (r == AllocOutcome.BUSY && busy < AllocationGroup.BUSY_RETRIES) {
                ag.awaitBusy(busy++);
            } else if (r != AllocOutcome.NEEDS_REFILL || refills >= 4) {
                return OptionalLong.empty();
            } else {
                ag.refillFreeList();
                refills++;
            }
        }
    }

    /** Frames for new blocks, claimed before any lock is taken (claiming may wait for write-back). */
    int[] reserveFrames(int n) {
        int[] frames = new int[n];
        for (int i = 0; i < n; i++) {
            frames[i] = cache.reserveFrame();
        }
        return frames;
    }

    void unreserveFrames(int[] frames) {
        if (frames != null) {
            for (int f : frames) {
                if (f >= 0) {
                    cache.unreserveFrame(f);
                }
            }
        }
    }

    /**
     * Changes inode {@code ino}'s permissions (its type stays), owner and access and modification times
     * under its per-inode lock, in one transaction; -1 leaves a field as it is, and the change time
     * becomes now. {@code beforeCommit}, if not null, runs with the inode and its record locked, just before
     * the commit.
     *
     * @return the commit sequence ({@code sync} or a force of it makes the change durable)
     * @throws InvalidArgumentException if it is not an allocated inode (nothing changed)
     */
    long setattr(long ino, int permissions, int uid, int gid, long atimeNanos, long mtimeNanos, Runnable beforeCommit) {
        return changeRecord(ino, (txn, b, rec) -> {
            InodeFormat.setAttributes(b.data(), rec, permissions, uid, gid, atimeNanos, mtimeNanos, WallClock.nowNanos());
            txn.log(b, rec + InodeFormat.MODE, InodeFormat.BTIME - InodeFormat.MODE);
            if (beforeCommit != null) {
                beforeCommit.run();
            }
        });
    }

    /**
     * Sets ({@code on}) or clears {@code flag} in inode {@code ino}'s record, in a transaction of its own (of
     * the caller's journal group, if it holds one); returns its commit's sequence, which the inode keeps.
     *
     * @throws InvalidArgumentException if it is not an allocated inode
     */
    long setInodeFlag(long ino, int flag, boolean on) {
        return changeRecord(ino, flagChange(flag, on));
    }

    /**
     * Clears {@code flag} in inode {@code from}'s record and sets it in inode {@code to}'s, both in one
     * transaction (of the caller's journal group, if it holds one): a table blob replacing another, live as
     * the other is doomed, where two {@link #setInodeFlag} took two. Returns its commit's sequence, which
     * both inodes keep.
     *
     * @throws InvalidArgumentException if one is not an allocated inode (nothing changed)
     */
    long moveInodeFlag(long from, long to, int flag) {
        if (from == to) {
            throw new IllegalArgumentException("inode " + from + " both loses and gains flag " + flag);
        }
        return changeRecords(from, to, flagChange(flag, false), flagChange(flag, true));
    }

    /** Sets ({@code on}) or clears {@code flag} in a record, logging the flags word. */
    private static RecordChange flagChange(int flag, boolean on) {
        return (txn, b, rec) -> {
            int flags = InodeFormat.flags(b.data(), rec);
            InodeFormat.setFlags(b.data(), rec, on ? flags | flag : flags & ~flag);
            txn.log(b, rec + InodeFormat.FLAGS, 4);
        };
    }

    /** A change of an inode's record, its block locked in {@code txn}, which logs what it changes. */
    private interface RecordChange {
        void apply(Txn txn, Buffer b, int rec);
    }

    /**
     * Makes {@code change} to allocated inode {@code ino}'s record in a transaction of its own: log space
     * first, then the inode's lock and its block's (see Namespace). Returns the commit's sequence, which the
     * inode keeps as its last.
     */
    private long changeRecord(long ino, RecordChange change) {
        return changeRecords(ino, 0, change, null);
    }

    /**
     * {@link #changeRecord} of inode {@code ino} and, unless {@code other} is 0, {@code otherChange} of
     * inode {@code other}, in one transaction: log space first, then the inodes' locks in ascending inode
     * number, then their blocks' in ascending block number (see Namespace). Both are checked allocated
     * before either changes.
     */
    private long changeRecords(long ino, long other, RecordChange change, RecordChange otherChange) {
        requireOpen();
        requireValidInode(ino);
        if (other != 0) {
            requireValidInode(other);
        }
        Inode inode = inodes.acquire(ino);
        Inode second = null;
        try (Txn txn = Txn.begin(cache, other == 0 ? 1 : 2)) {
            second = other == 0 ? null : inodes.acquire(other);
            Inode low = second != null && other < ino ? second : inode, high = low == inode ? second : inode;
            low.lock();
            try {
                if (high != null) {
                    high.lock();
                }
                try {
                    boolean otherFirst = other != 0 && geometry.inodeBlock(other) < geometry.inodeBlock(ino);
                    Buffer ob = otherFirst ? lockedInodeBlock(txn, other) : null;
                    Buffer b = lockedInodeBlock(txn, ino);
                    if (other != 0 && !otherFirst) {
                        ob = lockedInodeBlock(txn, other); // the same block is taken again: the lock is re-entrant
                    }
                    int rec = allocatedRecord(b, ino), orec = other == 0 ? 0 : allocatedRecord(ob, other);
                    change.apply(txn, b, rec);
                    if (other != 0) {
                        otherChange.apply(txn, ob, orec);
                    }
                    long seq = txn.commit();
                    inode.noteSeq(seq); // raised, never lowered: a writer beside may have committed later
                    if (second != null) {
                        second.noteSeq(seq);
                    }
                    return seq;
                } finally {
                    if (high != null) {
                        high.unlock();
                    }
                }
            } finally {
                low.unlock();
            }
        } finally {
            if (second != null) {
                inodes.release(second);
            }
            inodes.release(inode);
        }
    }

    /** Inode {@code ino}'s block, locked by {@code txn}. */
    private Buffer lockedInodeBlock(Txn txn, long ino) {
        Buffer b;
        do {
            b = inodeBuffer(ino);
        } while (!txn.lock(b));
        return b;
    }

    /** Where inode {@code ino}'s record lies in its block {@code b}; throws if it is not allocated. */
    private int allocatedRecord(Buffer b, long ino) {
        int rec = InodeFormat.recordOffset(geometry.blockSize(), Geometry.inodeSlot(ino));
        if (InodeFormat.mode(b.data(), rec) == 0) {
            throw new InvalidArgumentException("inode " + ino + " is not allocated");
        }
        return rec;
    }

    /**
     * The attributes of inode {@code ino}. Lock-free.
     *
     * @throws InvalidArgumentException if it is not an allocated inode
     */
    InodeStat stat(long ino) {
        requireOpen();
        requireValidInode(ino);
        int rec = InodeFormat.recordOffset(geometry.blockSize(), Geometry.inodeSlot(ino));
        for (;;) {
            Buffer b = inodeBuffer(ino);
            long v = b.readVersion();
            if (v < 0) {
                continue;
            }
            InodeStat s = InodeFormat.stat(ino, b.data(), rec);
            if (b.validate(v)) {
                if (s.mode() == 0) {
                    throw new InvalidArgumentException("inode " + ino + " is not allocated");
                }
                return s;
            }
        }
    }

    /**
     * The cached block holding inode {@code ino}'s record. A number outside every inode chunk is the
     * caller's mistake (or a number read before its inode was freed with its chunk and the block
     * reused), not damage: it is reported as such.
     */
    Buffer inodeBuffer(long ino) {
        int ag = geometry.agOfInode(ino);
        long block = geometry.inodeBlock(ino);
        try {
            Buffer b = cache.cached(block);
            if (b != null) {
                return b;
            }
            // A chunk starts at any block, so the cluster read is the aligned run of the group's blocks
            // holding this one: blocks of it that hold no inodes of this group fail to verify and are dropped.
            long start = geometry.agStart(ag);
            long first = block - (block - start) % inodeCluster;
            int count = (int) Math.min(inodeCluster, start + geometry.agLength(ag) - first);
            return cache.get(block, InodeFormat.MAGIC, ag, "inode block", first, count);
        } catch (CorruptionException e) {
            if (!groups[ag].inChunk(geometry.agInode(ino))) {
                throw new InvalidArgumentException("inode " + ino + " is not allocated: it lies in no inode chunk");
            }
            throw e;
        }
    }

    // ------------------------------------------------------------------ durability and checking

    /**
     * Makes every change made so far durable. First it waits until the table blobs (values over
     * {@link Table#MAX_MEDIUM}) that commits before it deleted or replaced are deleted, by the background
     * reaper or on this thread, unless a snapshot is open (then they go after it closes): after a sync their
     * space is free again, and a caller timing deletes up to a sync counts that work.
     *
     * @throws VolumeShutdownException if the volume is closed, or its journal has shut down after a failure
     */
    public void sync() {
        requireOpen();
        tables.blobs.deleteDoomed();
        namespace.files.flushAll();
        drainPending();
        journal.forceAll();
    }

    /**
     * Frees every group's pending frees ({@link FreeSpace#drainPending}), waiting for log space as needed:
     * after it the groups' free counts and trees hold every block deleted so far.
     */
    void drainPending() {
        for (AllocationGroup ag : groups) {
            if (ag.pendingCount() > 0) {
                ag.drainPending(true);
            }
        }
    }

    /**
     * Quiesces the volume: writes every change home ({@link dev.ferrite.journal.internal.Journal#quiesce}) and folds
     * the counters into the superblock (still marked mounted), so that recovery after a crash now would
     * replay nothing.
     *
     * @throws VolumeShutdownException if the volume is closed, or its journal has shut down after a failure
     * @throws IllegalStateException if the journal's write-back does not drain within its close timeout
     */
    public void quiesce() {
        requireOpen();
        drainPending();
        journal.quiesce();
        SuperblockFormat.Fields f;
        synchronized (this) {
            f = superblock;
        }
        writeSuperblock(f.withState(false, counters.freeBlocks.sum(), counters.freeInodes.sum(), counters.inodes.sum(), f.mounts()));
    }

    /**
     * The groups' part of the volume check ({@link GroupCheck}) with nothing allocated outside the groups'
     * own structures: every problem, empty for sound groups. Run it while nothing changes the volume.
     */
    List<CheckProblem> check() {
        return checkGroups(Collections.emptyNavigableMap());
    }

    /**
     * Every problem a full walk of the allocation groups finds, plus counters that disagree with them;
     * empty for sound groups. Run it while nothing changes the volume.
     *
     * @param allocated extents (device block to length) in use by what the groups do not describe
     *                  themselves (directory blocks, symlink blocks, file extents)
     */
    List<CheckProblem> checkGroups(NavigableMap<Long, Integer> allocated) {
        return GroupCheck.check(groups, statfs(), allocated);
    }

    /** Stops the journal and frees the cache without writing the superblock (a format that failed). */
    private void abandon() {
        closed = true;
        try {
            tables.stop();
            journal.close();
        } finally {
            namespace.names.clear();
            pages.close();
            cache.close();
            unclaim(device);
        }
    }

    /**
     * Unmounts: the journal writes everything home and marks the log clean, then the superblock gets the
     * folded counters and the clean mark. After a journal failure the superblock stays marked mounted,
     * so the next mount recovers. The device stays open (the caller owns it), its lock released. Call it
     * once no operation is running; a second close does nothing, and other calls then fail with
     * {@link VolumeShutdownException}. The doomed table blobs still queued are deleted first (unless a snapshot
     * is open or the journal shut down: then the next mount deletes them), then file data cached dirty is
     * written back.
     *
     * @throws DeviceException if writing the superblock fails (the device is let go of all the same)
     * @throws dev.ferrite.io.NoSpaceException if writing back cached file data finds no space (that data is lost; the
     *         volume is unmounted all the same)
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
        }
        tables.stop(); // while the volume still takes operations: the doomed table blobs left are deleted
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        RuntimeException lost = null;
        try {
            try {
                if (!journal.isShutdown()) {
                    namespace.files.logAllModified(); // write times not yet logged, and
                    namespace.files.buffered.writeBackAll(); // file data cached dirty, before the journal goes
                    drainPending(); // a clean volume's pending-free lists are empty
                }
            } catch (RuntimeException e) { // the data is lost; the volume still unmounts, consistent
                lost = e;
            } finally {
                pages.stop();
            }
            journal.close();
            if (!journal.isShutdown()) {
                SuperblockFormat.Fields f;
                synchronized (this) {
                    f = superblock;
                }
                writeSuperblock(f.withState(true, counters.freeBlocks.sum(), counters.freeInodes.sum(), counters.inodes.sum(),
                        f.mounts()).withIncompat(f.incompat() & ~SuperblockFormat.LOG_INCOMPAT));
            }
            if (lost != null) {
                throw lost;
            }
        } finally {
            namespace.names.clear();
            pages.close();
            cache.close();
            unclaim(device);
        }
    }
}
