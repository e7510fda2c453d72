package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.internal.OffHeap;

/**
 * The data page cache: block-sized frames off-heap, within a budget of their own (the metadata
 * buffer cache has its own), holding regular files' blocks for buffered I/O, and tables' extent values'
 * blocks ({@link TableExtentCache}: clean, or {@link #pin}ned until the log writes them). Each file finds its
 * pages through its own {@link FilePages}
 * map, as does each of the extent cache's stripes; this class hands out frames, evicts clean pages by CLOCK when
 * none is free, counts dirty pages, and keeps the files with dirty pages in the order they became
 * dirty, for write-back by pressure ({@link #throttle}) and by age (the {@code ferrite-page-writeback}
 * thread, started at the first dirty page, writes back a file whose oldest dirty page is older than the
 * expiry). A file's last close does no I/O: it queues the file ({@link #defer}) and the same thread
 * finishes it ({@link Writer#closed}) a short delay later, or at once while more than a quarter of the
 * frames are dirty, so that a file deleted soon after its last close dies with its data unwritten.
 *
 * <h2>Space reservations</h2>
 * A page dirtied where its write-back will need a block (a hole, a block shared with a clone, a
 * speculative block past the committed size) is {@link #reserve reserved} a block of the volume's free
 * space first, as XFS's delayed allocation reserves: the first reserved page of a file also reserves
 * {@link #FILE_META_BLOCKS} for its extent tree, and every {@link #PAGES_PER_META_BLOCK}th one a block
 * more. The reservation is a promise of the volume's one counter ({@link Counters#claim}), which every
 * allocation outside write-back claims its blocks from too, and goes back exactly once, when its page is
 * cleaned (written back: the allocation took the block) or dropped, or {@link #unreserve}d when fallocate
 * backs it.
 *
 * <h2>Locks</h2>
 * The monitor of this object guards the frame table ({@link #owner}, {@link #block}, the free list, the
 * hand) and is only taken to allocate, evict or free a frame: a hit takes none of it. While holding it,
 * eviction only try-locks a page's {@link FilePages#lock} (a file's lock is held for whole operations),
 * so the monitor never waits for a file. A frame's contents and {@link #dirty} mark are guarded by its
 * owner's {@link FilePages#lock}; a write-back copies a file's dirty pages under that lock and lets go of it for
 * the device write, leaving them dirty (so not evictable), and then cleans those not written again
 * meanwhile ({@link #redirtied}). The monitor of {@link #dirtyFiles} guards that set and the files'
 * {@link FilePages#dirtySince}; it is innermost. The frames' pages are supplied as first needed, so a
 * volume that never buffers costs no memory for them.
 */
final class PageCache implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(PageCache.class.getName());
    /**
     * The frames' memory is one mapping of the whole budget, reserved (address space only) with the cache
     * and advised to take huge pages ({@link OffHeap#reserveHuge}); its pages are supplied a huge
     * page's worth of frames (a chunk) at a time, under this cache's monitor, as {@link #made} reaches
     * them ({@link OffHeap#populate}). Fresh memory is dear to first-touch on a virtual machine: in 4 KiB
     * pages, each frame's first write cost about 6 µs even after a populate, most of a 16 KiB table
     * insert's CPU (the write-through fills fresh frames; 256 KiB slabs of 4 KiB pages before); in a
     * populated huge page, about 0.2 µs.
     */
    private final int chunkFrames;
    /** The fewest frames: a few operations' worth of blocks in flight at once. */
    static final int MIN_FRAMES = 16;
    /** The longest run of frames {@link #allocateRun} gives, and the most frames {@link #dropAll} sorts. */
    static final int RUN_MAX = 1024;
    /**
     * The longest run {@link #allocateRun} evicts frames for once none are free or never used: a table
     * value's ({@value TableValueFormat#MAX_MEDIUM} bytes); longer runs, a blob's, would seldom find so
     * many clean frames side by side.
     */
    static final int EVICT_RUN_MAX = 16;
    /** Frames {@link #evictRun} looks at before it gives up and the caller goes frame by frame. */
    private static final int RUN_SCAN = 256;
    /** Blocks a write-back copies into one staging buffer and writes at once. */
    static final int RUN_BLOCKS = 256;
    /**
     * Blocks reserved beside its pages' for a file with reserved pages: its extent list turning into a
     * tree at write-back, a root and the tree's reserve up to its high mark ({@link DirContents#RESERVE_HIGH}),
     * which covers the splits of many write-backs. The free-space trees' splits come from the groups'
     * held-back blocks, which reservations never lend.
     */
    static final int FILE_META_BLOCKS = 1 + DirContents.RESERVE_HIGH;
    /**
     * A file's reserved pages per block reserved beside {@link #FILE_META_BLOCKS} for the trees their
     * write-back grows: at worst an extent a page (every other block dirty), and a leaf of the file's tree
     * holds about 250 extents and splits half full, while each extent taken may split a free extent in two,
     * a record more in each of its group's free-space trees, whose nodes come from free space too. Without
     * it, 3,000 such pages outgrew the 29 blocks and their write-back failed
     * ({@code BufferedSpaceTest.scatteredPagesReserveForTheExtentsTheirWriteBackMakes}); XFS reserves the worst
     * case per delayed extent ({@code xfs_bmap_worst_indlen}).
     */
    static final int PAGES_PER_META_BLOCK = 32;

    /** Implemented by the file layer. */
    interface Writer {
        /** Writes back every dirty page of a file. */
        void writeBack(FilePages p);

        /** Finishes a file {@link #defer} queued: writes it back, trims it if no handle is open, lets go of its inode. */
        void closed(FilePages p);
    }

    /** The most a closed file waits for its write-back (less if its dirty pages expire sooner). */
    static final long CLOSE_DELAY_MILLIS = 1000;

    private final int blockSize;
    private final int capacity;
    private final long dirtyLimit;
    /** Dirty pages past which the write-back thread finishes closed files without waiting for their delay. */
    private final long backgroundLimit;
    private final long expireNanos;
    private final long closeDelayNanos;
    private final Arena arena = Arena.ofShared();
    /** The frames' memory: frame {@code f} at {@code f * blockSize}, its pages supplied once {@link #made} passes it. */
    private final MemorySegment frames;
    /** {@link #frames} as a read-only view: lent to readers that must not write ({@link TableExtentCache#lend}). */
    private final MemorySegment readOnlyFrames;
    private final FilePages[] owner;
    private final long[] block;
    private final int[] free;
    private int freeCount;
    /** Frames handed out at least once (their chunk's pages supplied): frames past it were never used. */
    private int made;
    private int hand;
    private long evictions;
    /** Guarded by the owner's lock. */
    private final boolean[] dirty;
    /**
     * Written since a write-back copied it ({@link #copiedForWriteBack}): the copy on its way to the device
     * is older than the page, which stays dirty ({@link #cleanedIfUnchanged}). Guarded by the owner's lock.
     */
    private final boolean[] redirtied;
    /**
     * Held until written, though clean: a table extent value's frames whose device write the log makes
     * later ({@link TableExtentWriteBack}); never evicted. Guarded by the owner's lock.
     */
    private final boolean[] pinned;
    /** CLOCK's second chance: set by every access without a lock, cleared by the hand. */
    private final boolean[] referenced;
    private final AtomicLong dirtyPages = new AtomicLong();
    /** Where {@link #reserved} pages and their files' {@link #FILE_META_BLOCKS} are promised. */
    private final Counters counters;
    /** What the page holds reserved ({@link #reserve}): {@link #NONE}, {@link #MAP} or {@link #BLOCK}; only while dirty. Owner's lock. */
    private final byte[] reserved;
    private final AtomicLong writtenBack = new AtomicLong();
    private final AtomicLong fills = new AtomicLong(), filled = new AtomicLong();
    /** Files with dirty pages, oldest first. */
    private final LinkedHashSet<FilePages> dirtyFiles = new LinkedHashSet<>();
    /** Files whose last close {@link #defer}red their write-back, in close order (guarded by {@link #dirtyFiles}). */
    private final LinkedHashSet<FilePages> closedFiles = new LinkedHashSet<>();
    /** Closed files taken off {@link #closedFiles} and not yet finished (guarded by {@link #dirtyFiles}). */
    private int finishing;
    private final ConcurrentLinkedDeque<MemorySegment> staging = new ConcurrentLinkedDeque<>();
    private volatile Writer writer;
    private Thread flusher; // guarded by dirtyFiles
    private boolean closed; // guarded by dirtyFiles
    /**
     * The write-back thread is waiting on {@link #dirtyFiles}, if {@link #flusherTimed} for the file due at
     * {@link #flusherDueAt} (and up to {@link #slackNanos} more): an event due no sooner wakes it not (guarded by
     * {@link #dirtyFiles}). Waking it for every close, first dirty page and write-back cost a futex wake
     * and a context switch each, about twelve thousand a second under dbench.
     */
    private boolean flusherWaiting, flusherTimed;
    private long flusherDueAt;
    /** Times the write-back thread came back from a wait (guarded by {@link #dirtyFiles}). */
    private long flusherWakeups;
    /** Other threads waiting on {@link #dirtyFiles} for a file to be finished or cleaned (guarded by it). */
    private int waiters;
    /**
     * How late the write-back thread may act on a due file, so that files falling due close together
     * are finished in one wake-up: a tenth of the close delay, at most 10 ms.
     */
    private final long slackNanos;

    /**
     * @param budgetBytes frames' memory (at least {@link #MIN_FRAMES} frames are made)
     * @param expireMillis age of a dirty page at which the write-back thread writes its file back
     */
    PageCache(int blockSize, long budgetBytes, long expireMillis, Counters counters) {
        this.blockSize = blockSize;
        this.counters = counters;
        this.capacity = (int) Math.clamp(budgetBytes / blockSize, MIN_FRAMES, Integer.MAX_VALUE >> 1);
        this.dirtyLimit = capacity / 2;
        this.backgroundLimit = capacity / 4;
        this.expireNanos = TimeUnit.MILLISECONDS.toNanos(expireMillis);
        this.closeDelayNanos = TimeUnit.MILLISECONDS.toNanos(Math.min(expireMillis, CLOSE_DELAY_MILLIS));
        this.slackNanos = Math.min(TimeUnit.MILLISECONDS.toNanos(10), closeDelayNanos / 10);
        this.chunkFrames = (int) Math.max(1, OffHeap.HUGE_PAGE / blockSize);
        this.frames = OffHeap.reserveHuge((long) capacity * blockSize, arena);
        this.readOnlyFrames = frames.asReadOnly();
        this.owner = new FilePages[capacity];
        this.block = new long[capacity];
        this.free = new int[capacity];
        this.dirty = new boolean[capacity];
        this.redirtied = new boolean[capacity];
        this.reserved = new byte[capacity];
        this.referenced = new boolean[capacity];
        this.pinned = new boolean[capacity];
    }

    void setWriter(Writer writer) {
        this.writer = writer;
    }

    /**
     * A page's reservation: none (over a written block of its own); its file's map only, {@link #meta}'s
     * share (over an unwritten block: its write-back converts it, which may split its extent in three and
     * make or grow a tree); a block and the map's share (its write-back allocates).
     */
    static final byte NONE = 0, MAP = 1, BLOCK = 2;

    /**
     * Reserves {@code kind} ({@link #MAP} or {@link #BLOCK}) for {@code f} of {@code p} (the caller holds
     * {@code p}'s lock and dirties the page next): the file's {@link #FILE_META_BLOCKS} if it is its first,
     * a block more every {@link #PAGES_PER_META_BLOCK}th, and a block for a {@link #BLOCK}, out of
     * {@link FilePages#prepaid} first; false if the volume has not that many left to promise. Lock-free:
     * {@link Counters#claim}, skipped when it comes to none.
     */
    boolean reserve(FilePages p, int f, byte kind) {
        int n = p.reserved;
        long want = (kind == BLOCK ? 1 : 0) + meta(n + 1) - meta(n), paid = Math.min(want, p.prepaid);
        if (want != paid && !counters.claim(want - paid)) {
            return false;
        }
        p.prepaid -= paid;
        reserved[f] = kind;
        p.reserved = n + 1;
        return true;
    }

    /** Blocks reserved for the metadata of a file's {@code pages} reserved pages: none without any. */
    static long meta(int pages) {
        return pages == 0 ? 0 : FILE_META_BLOCKS + pages / PAGES_PER_META_BLOCK;
    }

    /** Whether {@code f} holds a block reserved (the caller holds its owner's lock). */
    boolean holdsBlock(int f) {
        return reserved[f] == BLOCK;
    }

    /** Gives back {@code f}'s reservation, if it holds one: it is written back or dropped (the caller holds {@code p}'s lock). */
    void unreserve(FilePages p, int f) {
        byte kind = reserved[f];
        if (kind != NONE) {
            reserved[f] = NONE;
            int n = p.reserved--;
            counters.release((kind == BLOCK ? 1 : 0) + meta(n) - meta(n - 1));
        }
    }

    /**
     * Gives back the block {@code f} holds reserved, if it does: fallocate mapped an unwritten block of the
     * file under it, which its write-back converts, so it keeps its share of the map (the caller holds its owner's lock).
     */
    void backed(int f) {
        if (reserved[f] == BLOCK) {
            reserved[f] = MAP;
            counters.release(1);
        }
    }

    /** Frames the budget allows. */
    int capacity() {
        return capacity;
    }

    /** The memory frame {@code f} lies in: copy to or from it at {@link #offset}. */
    MemorySegment slab(int f) {
        return frames;
    }

    /** {@link #slab} as a read-only view. */
    MemorySegment readOnlySlab(int f) {
        return readOnlyFrames;
    }

    long offset(int f) {
        return (long) f * blockSize;
    }

    /** Frame {@code f} as a segment of its own (allocates the view: for device I/O, not for copies). */
    MemorySegment frame(int f) {
        return slab(f).asSlice(offset(f), blockSize);
    }

    /** Notes an access to {@code f} for CLOCK: written only when it changes, so that hits leave the line shared. */
    void touch(int f) {
        if (!referenced[f]) {
            referenced[f] = true;
        }
    }

    /**
     * A frame for block {@code blk} of {@code p} (whose lock the caller holds): free, never used, or a
     * clean page evicted; -1 if every page is dirty or its file busy. The caller fills it and maps it.
     */
    synchronized int allocate(FilePages p, long blk) {
        int f;
        if (freeCount > 0) {
            f = free[--freeCount];
        } else if (made < capacity) {
            f = made++;
            if (f % chunkFrames == 0) {
                OffHeap.populate(frames.asSlice(offset(f), (long) Math.min(chunkFrames, capacity - f) * blockSize));
            }
        } else if ((f = evict()) < 0) {
            return -1;
        }
        owner[f] = p;
        block[f] = blk;
        referenced[f] = true;
        return f;
    }

    /**
     * {@code n} frames side by side in the slab for blocks {@code blk..blk+n} of {@code p}, unmapped: the
     * first, or -1 if the free frames' top holds no such run, too few were never used, and (a run of up
     * to {@value #EVICT_RUN_MAX}, fewer frames free than it needs) no clean frames side by side were found
     * to evict ({@link #evictRun}); the caller then goes block by block. Before runs were evicted for, a
     * full cache filled every table value block by block, each frame evicted on its own, and copied,
     * lent and wrote it a block at a time. Frames never used are taken while others are free only if
     * {@code fresh}: a blob's one copy is worth the memory they bring in, a table value's few blocks are not
     * (the cache would grow into fresh memory whenever the free frames' top is not a run). A run is one
     * device write straight from the frames; {@link #dropAll} and {@link #dropRun} give frames back so
     * that a run's come out again as a run.
     */
    synchronized int allocateRun(FilePages p, long blk, int n, boolean fresh) {
        if (n > RUN_MAX) {
            return -1;
        }
        int f;
        if (freeCount >= n && ascending(freeCount - n, n)) {
            f = free[freeCount - 1];
            freeCount -= n;
        } else if ((fresh || freeCount < n) && capacity - made >= n) {
            f = made;
            for (int c = (f + chunkFrames - 1) / chunkFrames * chunkFrames; c < f + n; c += chunkFrames) {
                OffHeap.populate(frames.asSlice(offset(c), (long) Math.min(chunkFrames, capacity - c) * blockSize));
            }
            made += n;
        } else if (capacity - made >= n || freeCount >= n || n > EVICT_RUN_MAX || (f = evictRun(n)) < 0) {
            return -1;
        }
        for (int k = 0; k < n; k++) {
            owner[f + k] = p;
            block[f + k] = blk + k;
            referenced[f + k] = true;
        }
        return f;
    }

    /** Whether {@code free[from..from+n)} holds frames each one below the one before (popped: ascending). */
    private boolean ascending(int from, int n) {
        int top = free[from + n - 1];
        for (int k = 1; k < n; k++) {
            if (free[from + n - 1 - k] != top + k) {
                return false;
            }
        }
        return true;
    }

    /**
     * Whether the cache is full: every frame used and fewer free than a table value's run. Read without
     * the monitor, a moment's answer (for {@link TableExtentCache#admits}, a heuristic).
     */
    boolean full() {
        return made == capacity && freeCount < EVICT_RUN_MAX;
    }

    /** Frees a run from {@link #allocateRun} that was never mapped. */
    synchronized void releaseRun(int f, int n) {
        for (int k = n - 1; k >= 0; k--) {
            owner[f + k] = null;
            free[freeCount++] = f + k;
        }
    }

    /** CLOCK: two sweeps at most, skipping referenced pages once, dirty pages and files busy now. */
    private int evict() {
        for (int n = 0; n < 2 * capacity; n++) {
            int f = hand;
            hand = f + 1 == capacity ? 0 : f + 1;
            if (evicted(f)) {
                return f;
            }
        }
        return -1;
    }

    /**
     * CLOCK over frames side by side: from the hand, evicts frames until {@code n} in a row are, and
     * returns the first; a frame that cannot go (referenced, which loses that for its second chance as in
     * {@link #evict}, dirty, pinned, free, or its file busy) or the slab's end ends the window, whose
     * frames evicted so far are freed. -1 after {@value #RUN_SCAN} frames looked at.
     */
    private int evictRun(int n) {
        int start = hand, got = 0;
        for (int looked = 0; looked < RUN_SCAN; looked++) {
            int f = hand;
            hand = f + 1 == capacity ? 0 : f + 1;
            if (f != start + got) { // wrapped round: a run does not
                releaseRun(start, got);
                start = f;
                got = 0;
            }
            if (evicted(f)) {
                if (++got == n) {
                    return start;
                }
            } else {
                releaseRun(start, got);
                start = hand;
                got = 0;
            }
        }
        releaseRun(start, got);
        return -1;
    }

    /** Unmaps frame {@code f} if it can go: mapped (not free, nor being filled), clean, unpinned, not referenced, its file not busy. */
    private boolean evicted(int f) {
        if (referenced[f]) {
            referenced[f] = false;
            return false;
        }
        FilePages o = owner[f];
        if (o == null || !o.lock.tryLock()) {
            return false;
        }
        try {
            if (!dirty[f] && !pinned[f] && o.get(block[f]) == f) { // mapped: a frame being filled is not yet, and is its filler's
                o.remove(block[f]);
                evictions++;
                return true;
            }
            return false;
        } finally {
            o.lock.unlock();
        }
    }

    /** Unmaps and frees frame {@code f} of {@code p}, dirty or not (the caller holds {@code p}'s lock). */
    void drop(FilePages p, int f) {
        p.remove(block[f]);
        pinned[f] = false;
        if (dirty[f]) {
            cleaned(p, f);
        }
        synchronized (this) {
            owner[f] = null;
            free[freeCount++] = f;
        }
    }

    /**
     * {@link #drop}s the frames mapped at pages {@code [page, page + n)} of {@code p}, those that are (the
     * caller holds {@code p}'s lock): one lookup a page, the unmapping's, where a lookup and then a drop took
     * two, and one entry of this cache's monitor for them all, where a drop took one a frame (a 16 KiB table
     * value's free dropped four: 9% of a single delete's samples with the lookups). {@code frames}, of at
     * least {@code n}, is the caller's scratch (guarded by {@code p}'s lock too).
     */
    void dropRun(FilePages p, long page, int n, int[] frames) {
        // Last page first: a run's pages take consecutive slots of p's table, and each removal scans on to
        // the end of its probe cluster, so removing from the first page scanned the rest of the run every
        // time, n * n / 2 steps (with 1 MiB values kept as extents, a trial, 75% of a delete's samples);
        // from the last, the pages after a removed one are gone already. The frames go back in page order.
        int at = n;
        for (int i = n - 1; i >= 0; i--) {
            int f = p.remove(page + i);
            if (f >= 0) {
                pinned[f] = false;
                if (dirty[f]) {
                    cleaned(p, f);
                }
                frames[--at] = f;
            }
        }
        if (at < n) {
            giveBack(frames, at, n);
        }
    }

    /** Unmaps and frees every frame of {@code p}, dirty or not (the caller holds {@code p}'s lock). */
    void dropAll(FilePages p) {
        int[] frames = p.clear();
        int wasDirty = 0;
        for (int f : frames) {
            if (dirty[f]) {
                dirty[f] = false;
                unreserve(p, f);
                wasDirty++;
            }
        }
        if (wasDirty > 0) {
            dirtyPages.addAndGet(-wasDirty);
            p.dirty -= wasDirty;
            if (p.dirty == 0) {
                synchronized (dirtyFiles) {
                    dirtyFiles.remove(p);
                    wakeWaiters();
                }
            }
        }
        if (frames.length <= RUN_MAX && !ascending(frames)) {
            Arrays.sort(frames); // a run's frames come out again as a run
        }
        giveBack(frames, 0, frames.length);
    }

    private static boolean ascending(int[] frames) {
        for (int k = 1; k < frames.length; k++) {
            if (frames[k - 1] > frames[k]) {
                return false;
            }
        }
        return true;
    }

    /**
     * Frees {@code frames[from..to)}, unmapped, last first: frames given in ascending order come out of the free
     * frames ascending again, a run for {@link #allocateRun}.
     */
    private synchronized void giveBack(int[] frames, int from, int to) {
        for (int k = to - 1; k >= from; k--) {
            owner[frames[k]] = null;
            free[freeCount++] = frames[k];
        }
    }

    /** Keeps {@code f} from eviction until {@link #unpin}ned or dropped (the caller holds its owner's lock). */
    void pin(int f) {
        pinned[f] = true;
    }

    /** Whether {@code f} is {@link #pin}ned (the caller holds its owner's lock). */
    boolean isPinned(int f) {
        return pinned[f];
    }

    /** Whether frame {@code f} holds page {@code page} of {@code p} (the caller holds {@code p}'s lock). */
    boolean holds(FilePages p, int f, long page) {
        return owner[f] == p && block[f] == page;
    }

    /** Lets {@code f} be evicted again (the caller holds its owner's lock). */
    void unpin(int f) {
        pinned[f] = false;
    }

    /** Frees a frame {@link #allocate} gave that was never mapped (its fill failed). */
    synchronized void unused(int f) {
        owner[f] = null;
        free[freeCount++] = f;
    }

    boolean isDirty(int f) {
        return dirty[f];
    }

    /** Marks {@code f} of {@code p} dirty (the caller holds {@code p}'s lock). */
    void dirtied(FilePages p, int f) {
        redirtied[f] = true;
        if (dirty[f]) {
            return;
        }
        dirty[f] = true;
        if (dirtyPages.incrementAndGet() == backgroundLimit + 1) {
            synchronized (dirtyFiles) {
                wakeFlusherBy(System.nanoTime()); // the write-back thread finishes closed files now
            }
        }
        if (p.dirty++ == 0) {
            synchronized (dirtyFiles) {
                if (dirtyFiles.add(p)) {
                    p.dirtySince = System.nanoTime();
                    startFlusher();
                    wakeFlusherBy(p.dirtySince + expireNanos);
                }
            }
        }
    }

    /**
     * Wakes the write-back thread if it waits for longer than until {@code due} ({@link System#nanoTime}),
     * when something falls due (the caller holds the {@link #dirtyFiles} monitor). The other waiters on
     * the monitor wake too and wait again.
     */
    private void wakeFlusherBy(long due) {
        if (flusherWaiting && (!flusherTimed || due - flusherDueAt < 0)) {
            dirtyFiles.notifyAll();
        }
    }

    /** Wakes the threads waiting for a file to be finished or cleaned, if any (the caller holds the {@link #dirtyFiles} monitor). */
    private void wakeWaiters() {
        if (waiters > 0) {
            dirtyFiles.notifyAll();
        }
    }

    /** Starts the write-back thread if it is not running (the caller holds the {@link #dirtyFiles} monitor). */
    private void startFlusher() {
        if (flusher == null && !closed) {
            flusher = Thread.ofPlatform().name("ferrite-page-writeback").daemon().start(this::flushOld);
        }
    }

    /** {@link #defer}: queued, taking over the closer's inode reference. */
    static final int QUEUED = 0;
    /** {@link #defer}: queued already (the queue holds a reference of its own). */
    static final int ALREADY_QUEUED = 1;
    /** {@link #defer}: the write-back thread is stopped (unmounting): the closer writes back itself. */
    static final int STOPPED = 2;

    /**
     * At the last close of {@code p}'s file, which has dirty pages or a pending size: queues it for the
     * write-back thread, which finishes it after the close delay (or at once under {@link #takeClosed}).
     */
    int defer(FilePages p) {
        synchronized (dirtyFiles) {
            if (closed) {
                return STOPPED;
            }
            if (p.queued) {
                return ALREADY_QUEUED;
            }
            p.queued = true;
            p.closedAt = System.nanoTime();
            closedFiles.addLast(p);
            startFlusher();
            wakeFlusherBy(dirtyPages.get() > backgroundLimit ? p.closedAt : p.closedAt + closeDelayNanos);
            return QUEUED;
        }
    }

    /**
     * Takes the next closed file off the queue, due or not, for the caller to finish ({@link Writer#closed})
     * and then report with {@link #finished}; null if none is queued. For volume sync and unmount.
     */
    FilePages takeClosed() {
        synchronized (dirtyFiles) {
            FilePages p = closedFiles.isEmpty() ? null : closedFiles.removeFirst();
            if (p != null) {
                p.queued = false;
                finishing++;
            }
            return p;
        }
    }

    /**
     * Takes {@code p} off the queue of closed files if it is on it (its file is being freed: nothing is
     * left to write back or trim); true if it was, and its inode reference is now the caller's.
     */
    boolean unqueue(FilePages p) {
        synchronized (dirtyFiles) {
            if (!p.queued) {
                return false;
            }
            closedFiles.remove(p);
            p.queued = false;
            return true;
        }
    }

    /** Finishes closed file {@code p} that {@link #takeClosed} gave: a failure is logged (it is no caller's). */
    private void finish(FilePages p) {
        try {
            writer.closed(p);
        } catch (RuntimeException e) { // its pages stay dirty: the expiry, sync or unmount write them back
            LOG.log(System.Logger.Level.WARNING, "finishing the last close of inode " + p.inode.ino + " failed", e);
        } finally {
            finished();
        }
    }

    /** Waits until no closed file the write-back thread (or another caller) took off the queue is being finished. */
    void awaitFinishing() {
        boolean interrupted = false;
        synchronized (dirtyFiles) {
            waiters++;
            try {
                while (finishing > 0) {
                    try {
                        dirtyFiles.wait();
                    } catch (InterruptedException e) {
                        interrupted = true;
                    }
                }
            } finally {
                waiters--;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** A closed file {@link #takeClosed} or the write-back thread took is finished. */
    void finished() {
        synchronized (dirtyFiles) {
            finishing--;
            wakeWaiters();
        }
    }

    /** A write-back copied dirty {@code f} to write it (the caller holds its owner's lock): a later write redirties it. */
    void copiedForWriteBack(int f) {
        redirtied[f] = false;
    }

    /** Whether {@code f} was written since a write-back copied it (the caller holds its owner's lock). */
    boolean redirtied(int f) {
        return redirtied[f];
    }

    /**
     * Marks dirty {@code f} of {@code p} clean after a write-back wrote the copy it took, unless the page
     * was written since (the caller holds {@code p}'s lock).
     */
    void cleanedIfUnchanged(FilePages p, int f) {
        if (!redirtied[f] && dirty[f]) {
            cleaned(p, f);
        }
    }

    /** Marks dirty {@code f} of {@code p} clean (the caller holds {@code p}'s lock). */
    void cleaned(FilePages p, int f) {
        dirty[f] = false;
        unreserve(p, f);
        dirtyPages.decrementAndGet();
        if (--p.dirty == 0) {
            synchronized (dirtyFiles) {
                dirtyFiles.remove(p);
                wakeWaiters();
            }
        }
    }

    /** Counts a miss's read of {@code pages} blocks into frames. */
    void filled(int pages) {
        fills.incrementAndGet();
        filled.addAndGet(pages);
    }

    /** Counts {@code pages} written back to the device. */
    void wroteBack(int pages) {
        writtenBack.addAndGet(pages);
    }

    /**
     * Pressure: while more than half the frames are dirty, the caller (a writer about to dirty more)
     * writes back files itself: closed files first (whole files: writing them back fragments nothing),
     * then the file dirty longest (as Linux's writers under pressure write back the oldest inodes, not
     * their own: a file written back part way through its writes ends in more extents). Call it holding
     * no file's locks.
     */
    void throttle() {
        while (dirtyPages.get() > dirtyLimit) {
            FilePages c = takeClosed();
            if (c != null) {
                finish(c);
                continue;
            }
            FilePages oldest;
            synchronized (dirtyFiles) {
                if (dirtyFiles.isEmpty()) {
                    return;
                }
                oldest = dirtyFiles.getFirst();
            }
            writer.writeBack(oldest);
        }
    }

    /**
     * Writes back {@code p} if it has dirty pages, else the file dirty longest; false if no file is
     * dirty. For a caller that found no frame to allocate (every page dirty); it holds no file's locks.
     */
    boolean writeBackOne(FilePages p) {
        FilePages victim = p;
        synchronized (dirtyFiles) {
            if (!dirtyFiles.contains(p)) {
                if (dirtyFiles.isEmpty()) {
                    return false;
                }
                victim = dirtyFiles.getFirst();
            }
        }
        writer.writeBack(victim);
        return true;
    }

    /** Every file with dirty pages now, oldest first. */
    FilePages[] dirtyFiles() {
        synchronized (dirtyFiles) {
            return dirtyFiles.toArray(new FilePages[0]);
        }
    }

    /**
     * The write-back thread: finishes each closed file once the close delay passed, and writes back each
     * file once its oldest dirty page is older than the expiry; idles on the set's monitor.
     */
    private void flushOld() {
        for (;;) {
            FilePages due;
            boolean close;
            synchronized (dirtyFiles) {
                for (;;) {
                    if (closed) {
                        return;
                    }
                    long now = System.nanoTime();
                    FilePages c = closedFiles.isEmpty() ? null : closedFiles.getFirst();
                    long closeWait = c == null ? Long.MAX_VALUE : closeDelayNanos - (now - c.closedAt);
                    if (closeWait <= 0 || c != null && dirtyPages.get() > backgroundLimit) {
                        due = takeClosed();
                        close = true;
                        break;
                    }
                    due = dirtyFiles.isEmpty() ? null : dirtyFiles.getFirst();
                    long ageWait = due == null ? Long.MAX_VALUE : expireNanos - (now - due.dirtySince);
                    if (ageWait <= 0) {
                        close = false;
                        break;
                    }
                    long wait = Math.min(closeWait, ageWait);
                    flusherWaiting = true;
                    flusherTimed = wait != Long.MAX_VALUE;
                    try {
                        if (flusherTimed) {
                            flusherDueAt = now + wait;
                            TimeUnit.NANOSECONDS.timedWait(dirtyFiles, wait + slackNanos);
                        } else {
                            dirtyFiles.wait();
                        }
                    } catch (InterruptedException e) {
                        return;
                    } finally {
                        flusherWaiting = false;
                        flusherWakeups++;
                    }
                }
            }
            if (close) {
                finish(due);
                continue;
            }
            try {
                writer.writeBack(due);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "write-back of inode " + due.inode.ino + " failed; retried later", e);
                synchronized (dirtyFiles) { // to the back of the queue, not retried at once
                    if (dirtyFiles.remove(due)) {
                        dirtyFiles.add(due);
                        due.dirtySince = System.nanoTime();
                    }
                }
            }
        }
    }

    /** A staging buffer of {@link #RUN_BLOCKS} blocks for a write-back run; give it back with {@link #release}. */
    MemorySegment staging() {
        MemorySegment m = staging.poll();
        return m != null ? m : arena.allocate((long) RUN_BLOCKS * blockSize, BlockDevice.BUFFER_ALIGNMENT);
    }

    void release(MemorySegment m) {
        staging.push(m);
    }

    /** Test seam: waits until no page is dirty; false if {@code millis} pass first. */
    boolean awaitClean(long millis) throws InterruptedException {
        return await(dirtyFiles::isEmpty, millis);
    }

    /** Test seam: waits until no closed file waits for or is in its deferred write-back; false if {@code millis} pass first. */
    boolean awaitClosedFinished(long millis) throws InterruptedException {
        return await(() -> closedFiles.isEmpty() && finishing == 0, millis);
    }

    /** Waits on {@link #dirtyFiles}, as one of the {@link #waiters}, until {@code done} holds under it; false if {@code millis} pass first. */
    private boolean await(BooleanSupplier done, long millis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        synchronized (dirtyFiles) {
            waiters++;
            try {
                while (!done.getAsBoolean()) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        return false;
                    }
                    TimeUnit.NANOSECONDS.timedWait(dirtyFiles, left);
                }
            } finally {
                waiters--;
            }
        }
        return true;
    }

    /**
     * Counters for tests and stats: dirty pages now; since mount, pages written back, evictions, the
     * reads that filled frames on a miss with the blocks they filled (more than one each: read-ahead), and
     * the write-back thread's wake-ups; blocks promised now ({@link Counters#promised}: dirty pages' reservations,
     * and what allocations in flight claimed).
     */
    record Stats(long dirtyPages, long writtenBack, long evictions, long fills, long filled, int capacity, long wakeups,
                 long reservedBlocks) {
    }

    Stats stats() {
        long e, w;
        synchronized (this) {
            e = evictions;
        }
        synchronized (dirtyFiles) {
            w = flusherWakeups;
        }
        return new Stats(dirtyPages.get(), writtenBack.get(), e, fills.get(), filled.get(), capacity, w, counters.promised());
    }

    /** Stops the write-back thread (the caller wrote back what it wanted to keep first). */
    void stop() {
        Thread t;
        synchronized (dirtyFiles) {
            closed = true;
            t = flusher;
            dirtyFiles.notifyAll();
        }
        if (t != null && t != Thread.currentThread()) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Stops the thread and frees the frames: nothing may use the cache after. */
    @Override
    public void close() {
        stop();
        arena.close();
    }
}
