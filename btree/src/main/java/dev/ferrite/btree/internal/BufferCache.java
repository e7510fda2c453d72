package dev.ferrite.btree.internal;

import dev.ferrite.btree.CacheStats;
import dev.ferrite.btree.LatchStats;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

import jdk.jfr.FlightRecorder;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.internal.OffHeap;
import dev.ferrite.io.internal.StripedCounter;
import dev.ferrite.journal.internal.Journal;

/**
 * Block number to cached {@link Buffer}, in off-heap frames carved from one slab sized by a memory
 * budget.
 *
 * <h2>Lookup</h2>
 * A hash table of buckets, each a singly linked chain of buffers. Lookups walk a chain without any lock
 * or allocation; buffers are never re-linked once removed, so a walker that meets a removed buffer still
 * reaches the live ones. Inserting and removing take the lock of the bucket's stripe, which also makes
 * concurrent misses on one block issue one read: the first inserts a buffer that is locked while it
 * loads, the others find it and wait on its lock.
 *
 * <h2>Frames</h2>
 * The slab is mapped, not allocated, and advised to take huge pages ({@link OffHeap#reserveHuge}): a
 * frame's first touch (a new block's zeroing, a miss's read) faults in the 2 MiB around it at once, and
 * every node visit afterwards misses the TLB far less. A 4 KiB page cost a fault of 11-30 us on this
 * project's virtual machines, and still about 6 us at its first touch when populated ahead. Nothing is
 * populated ahead: huge pages populated ahead of the hand stalled the claiming thread up to 135 ms,
 * where faulted on first touch they raised no latency above the benchmarks' noise and lowered CPU per
 * operation a little (docs/benchmarks.md, 2026-12-05 and 2026-12-06). Huge pages off or none free,
 * frames fault in 4 KiB at a time.
 *
 * <h2>Reclaim</h2>
 * CLOCK over the frames. A buffer's usage count is set to its priority on access (interior nodes and
 * headers higher than leaves) and decremented by the sweeping hand; at zero the buffer is evicted if it
 * can be locked without waiting and is clean (not pinned by the CIL, not waiting in the AIL). When a
 * sweep finds nothing to evict because the budget is full of dirty or locked buffers, the cache asks the
 * journal to write everything back and waits, on a signal from whatever may free a frame (a write-back,
 * an unlock, a frame let go), for up to a minute before it reports the budget too small.
 *
 * <p>Lock order: a buffer's lock, then a stripe lock, then the frame signal's monitor. No I/O under a
 * stripe lock; reads happen under the new buffer's own lock, which is what concurrent getters of the
 * same block wait on. Nothing that holds tree locks waits here: frames are claimed before locks are
 * taken, and allocating a block a stale reader is still loading takes the block over without waiting.
 */
public final class BufferCache implements AutoCloseable {
    /** The journal item type of every cached block (recovery replays them all the same way). */
    public static final int ITEM_TYPE = 1;
    /** The journal item type of block initialisation records ({@link #createInitialised}). */
    public static final int INIT_TYPE = 2;
    /** Smallest cache: enough frames for the deepest split of a few concurrent writers. */
    public static final int MIN_FRAMES = 64;

    /** Priority of buffers never evicted (allocation bitmaps, which are locked under tree locks). */
    static final int RESIDENT = Integer.MAX_VALUE;

    private static final Object CLAIMED = new Object();
    private static final ThreadLocal<MemorySegment> CLUSTER_SCRATCH = new ThreadLocal<>();
    private static final int STRIPES = 256;
    /**
     * Longest a claim waiting for a frame sleeps before it sweeps again and restarts write-back: long
     * enough that a waiter is asleep, not polling, short against the claim's timeout.
     */
    private static final long RECHECK_MS = 1000;
    private static final int MIN_FREEING_SWEEP = 256;

    private final BlockDevice device;
    private final Journal journal;
    private final int blockSize;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment slab;
    private final int frames;
    private final AtomicReferenceArray<Object> frameOwner;
    private final AtomicReferenceArray<Buffer> buckets;
    private final int bucketShift;
    private final Object[] stripes = new Object[STRIPES];
    /** Records {@link CacheStatsEvent} while a recording wants it. */
    private final Runnable statsEvent = () -> CacheStatsEvent.emit(stats());
    private final AtomicLong hand = new AtomicLong();
    /**
     * Stale buffers of freed blocks whose free is not yet in a checkpoint in the AIL (still held by the
     * freeing transaction, or pinned). Such a block must not be allocated again yet: its new buffer is
     * another log item, which could land in the same checkpoint as the free, and a checkpoint keeps no
     * order between two items (the CIL has a list per thread stripe), so recovery could apply the free
     * after the new contents. Entries leave when the block is asked about, its stale buffer is evicted,
     * or a sweep finds them no longer busy.
     */
    private final FreeingBuffers freeing = new FreeingBuffers();
    /** Entries of {@link #freeing}, or more while one is being added or removed. */
    private final AtomicInteger freeingCount = new AtomicInteger();
    /**
     * Entries of {@link #freeing} at which a free sweeps out the ones no longer busy: blocks nobody asks
     * about (a freed inode chunk's, until its space is allocated again) would otherwise stay, and keep
     * {@link #busyBound} high and the chains long. Twice what the last sweep left: amortized O(1) a free.
     */
    private volatile int sweepFreeingAt = MIN_FREEING_SWEEP;
    private final AtomicBoolean sweepingFreeing = new AtomicBoolean();
    /**
     * What {@link #claimFrame} waits on when no frame can be taken: signalled whenever one may have become
     * takable (a frame let go, a buffer unlocked or written home), but only while {@link #frameWaiters}
     * says someone waits. A waiter counts itself before it sweeps, and every signaller makes its change
     * visible with a volatile write before it reads the count, so one of the two always sees the other.
     */
    private final Object frameSignal = new Object();
    /** Threads in {@link #claimFrame} that found no frame and may be waiting. */
    private final AtomicInteger frameWaiters = new AtomicInteger();
    /** Signals of {@link #frameSignal} so far: written under it, read by waiters before each sweep. */
    private volatile long frameSignals;
    /** How long {@link #claimFrame} waits for a frame before it reports the cache too small. */
    volatile long claimWaitNanos = TimeUnit.SECONDS.toNanos(60);

    final StripedCounter hits = new StripedCounter();
    final LongAdder misses = new LongAdder();
    final LongAdder readAhead = new LongAdder();
    final LongAdder leafEvictions = new LongAdder();
    final LongAdder interiorEvictions = new LongAdder();
    final LongAdder writeBacks = new LongAdder();
    final LongAdder dirtyWaits = new LongAdder();
    final Latches latches = new Latches();

    /**
     * @param budgetBytes memory for cached blocks; at least {@link #MIN_FRAMES} blocks
     */
    /**
     * Whether B-tree leaves in this cache's blocks may float their slot arrays above a front gap
     * ({@link BTreeNodeFormat}): true unless the layer above says its format predates them. A property of
     * the on-disk format the cache serves, read by the trees when they make a gap.
     */
    private volatile boolean floatingLeaves = true;
    /**
     * Whether the B-tree leaves in this cache's blocks bound a cell's key and value together
     * ({@link BTreeNodeFormat#MAX_ENTRY}) or the value alone ({@link BTreeNodeFormat#MAX_VALUE}, a volume
     * formatted before the pair bound): what a put accepts and what a leaf read from the device may hold.
     */
    private volatile boolean wideCells = true;

    public BufferCache(BlockDevice device, Journal journal, long budgetBytes) {
        this.device = device;
        this.journal = journal;
        this.blockSize = device.blockSize();
        long n = budgetBytes / blockSize;
        if (n < MIN_FRAMES || n > Integer.MAX_VALUE / 2) {
            throw new InvalidArgumentException("a cache budget of " + budgetBytes + " bytes holds " + n
                    + " blocks of " + blockSize + "; it must hold " + MIN_FRAMES + " to " + Integer.MAX_VALUE / 2);
        }
        this.frames = (int) n;
        this.slab = OffHeap.reserveHuge((long) frames * blockSize, arena); // HUGE_PAGEs arrive on first touch
        this.frameOwner = new AtomicReferenceArray<>(frames);
        int bucketCount = Integer.highestOneBit(frames * 2 - 1);
        this.buckets = new AtomicReferenceArray<>(bucketCount);
        this.bucketShift = 64 - Integer.numberOfTrailingZeros(bucketCount);
        for (int i = 0; i < STRIPES; i++) {
            stripes[i] = new Object();
        }
        FlightRecorder.addPeriodicEvent(CacheStatsEvent.class, statsEvent);
    }

    /** Lets the trees of this cache make floating leaves, or not (a volume formatted before them): set before any tree changes. */
    public void floatingLeaves(boolean allowed) {
        floatingLeaves = allowed;
    }

    /**
     * Lets leaf cells of this cache's trees take any value their key leaves room for, or bounds values
     * alone to {@link BTreeNodeFormat#MAX_VALUE} (a volume formatted before the pair bound): set before any
     * tree is read or changed.
     */
    public void wideCells(boolean allowed) {
        wideCells = allowed;
    }

    /** Whether leaf cells bound their key and value together ({@link BTreeNodeFormat#maxValue}). */
    public boolean wideCells() {
        return wideCells;
    }

    /** Whether the trees of this cache may make floating leaves. */
    boolean floatingLeaves() {
        return floatingLeaves;
    }

    public int blockSize() {
        return blockSize;
    }

    public BlockDevice device() {
        return device;
    }

    public Journal journal() {
        return journal;
    }

    /** Frames in the cache. */
    public int capacity() {
        return frames;
    }

    /** Fibonacci hashing: the product's top bits (its middle bits cluster for consecutive blocks). */
    private int bucket(long block) {
        return (int) ((block * 0x9E37_79B9_7F4A_7C15L) >>> bucketShift);
    }

    private Object stripe(int bucket) {
        return stripes[bucket & (STRIPES - 1)];
    }

    /** The cached buffer of {@code block}, or null. Lock-free, allocation-free. */
    Buffer lookup(long block) {
        for (Buffer b = buckets.get(bucket(block)); b != null; b = b.chainNext) {
            if (b.home() == block) {
                return b;
            }
        }
        return null;
    }

    /**
     * The buffer of {@code block}, read and verified if it is not cached. The buffer is returned unlocked:
     * read it optimistically or lock it. It may be evicted at any time it is not locked; holders then see
     * it obsolete and call this again.
     *
     * @param magic     the block type expected
     * @param owner     the owner expected, or -1 for any
     * @param structure what the block is, for messages
     * @throws dev.ferrite.io.CorruptionException if the block read is not what was expected
     */
    public Buffer get(long block, int magic, long owner, String structure) {
        return get(block, magic, owner, structure, block, 1);
    }

    /**
     * The buffer of {@code block} if it is cached (a hit, as {@link #get(long, int, long, String)} counts
     * one), else null: for callers that work out how to read a block only when they must. Lock-free.
     */
    public Buffer cached(long block) {
        Buffer b = lookup(block);
        if (b == null || b.isObsolete()) {
            return null;
        }
        hit(b);
        return b;
    }

    /** Counts a hit on {@code b}, found without a lookup (a cursor's sibling hint), and touches it for the clock as a lookup would. */
    void hit(Buffer b) {
        hits.increment();
        b.touch();
    }

    /**
     * As {@link #get(long, int, long, String)}, but a miss reads the uncached blocks of the cluster
     * {@code [first, first + count)} (which holds {@code block}) in one transfer, and caches those that
     * verify as {@code magic} and {@code owner} beside the one asked for: inode blocks are read a chunk
     * at a time, as XFS reads inode clusters, so that a walk statting inodes in name order reads each
     * chunk once instead of block by block. Blocks of the cluster that are cached already are left as they
     * are (a cached copy may be newer than the device); those that do not verify are dropped without a
     * word (they are asked for by nobody yet). Read-ahead buffers start unused, so CLOCK takes them first
     * if nobody reads them.
     */
    public Buffer get(long block, int magic, long owner, String structure, long first, int count) {
        Buffer b = cached(block);
        if (b != null) {
            return b;
        }
        if (count < 1 || block < first || block >= first + count) {
            throw new InvalidArgumentException("block " + block + " lies outside its cluster [" + first + ", +" + count + ")");
        }
        return load(block, magic, owner, structure, first, count);
    }

    private Buffer load(long block, int magic, long owner, String structure, long first, int count) {
        int want = 0;
        for (long blk = first; blk < first + count; blk++) {
            Buffer present = lookup(blk);
            if (blk == block || present == null || present.isObsolete()) {
                want++;
            }
        }
        int[] claimed = new int[want];
        for (int f = 0; f < want; f++) {
            claimed[f] = claimFrame(); // may wait for write-back: before any lock
        }
        // Absent blocks get buffers locked by this loader, which their getters wait on. The asked block goes
        // first, so that it has a frame whatever others loaded meanwhile.
        Buffer[] loading = new Buffer[count];
        Buffer asked = null;
        int used = 0;
        for (int k = 0; k < count; k++) {
            int i = (int) ((block - first + k) % count);
            long blk = first + i;
            int bucket = bucket(blk);
            synchronized (stripe(bucket)) {
                Buffer present = lookup(blk);
                if ((present == null || present.isObsolete()) && used < want) {
                    int f = claimed[used++];
                    loading[i] = new Buffer(this, blk, f, frame(f), magic, owner, Buffer.LOCKED);
                    link(bucket, loading[i]);
                    frameOwner.set(f, loading[i]);
                } else if (blk == block) {
                    asked = present; // loaded by another getter meanwhile
                    hits.increment();
                    present.touch();
                }
            }
        }
        for (int f = used; f < want; f++) {
            letGo(claimed[f]);
        }
        if (used == 0) {
            return asked;
        }
        CacheMissEvent event = new CacheMissEvent();
        event.begin();
        RuntimeException failure = null;
        try {
            // one block reads into its frame; a cluster through a scratch run, as its frames are anywhere
            MemorySegment blocks = count == 1 ? loading[0].data() : clusterScratch(count);
            device.read(first, blocks);
            for (int i = 0; i < count; i++) {
                Buffer l = loading[i];
                if (l == null) {
                    continue;
                }
                loading[i] = null;
                if (count > 1) {
                    MemorySegment.copy(blocks, (long) i * blockSize, l.data(), 0, blockSize);
                }
                if (l.block() != block && !BlockHeaderFormat.claims(l.data(), l.block(), magic, owner)) {
                    unlinkAndRelease(l); // a neighbour of another kind, or never written: not read ahead
                    continue;
                }
                try {
                    BlockHeaderFormat.verify(l.data(), l.block(), magic, owner, structure);
                    requireSound(l.data(), l.block(), magic, structure);
                } catch (RuntimeException e) {
                    unlinkAndRelease(l);
                    if (l.block() == block) {
                        failure = e;
                    }
                    continue;
                }
                if (l.block() == block) {
                    misses.increment();
                    l.touch();
                    asked = l;
                } else {
                    readAhead.increment();
                }
                unlockLoaded(l);
            }
        } catch (RuntimeException e) {
            for (Buffer l : loading) {
                if (l != null) {
                    unlinkAndRelease(l);
                }
            }
            throw e;
        }
        if (failure != null) {
            throw failure;
        }
        if (event.shouldCommit()) {
            event.block = block;
            event.structure = structure;
            event.commit();
        }
        return asked;
    }

    /**
     * Checks the body of a block just read, for the structures whose layout this module knows: a crafted
     * or buggy image whose header and checksum hold must still not send a reader out of bounds.
     */
    private void requireSound(MemorySegment data, long block, int magic, String structure) {
        String why = switch (magic) {
            case BTreeNodeFormat.MAGIC -> BTreeNodeFormat.unsound(data, blockSize, device.blockCount(), wideCells);
            case BTreeHeaderFormat.MAGIC -> BTreeHeaderFormat.unsound(data, device.blockCount());
            default -> null;
        };
        if (why != null) {
            throw new CorruptionException(block, structure, why);
        }
    }

    /**
     * Unlocks a buffer just loaded, unless {@link #claim} took it out of the cache while it loaded (its
     * block was allocated anew; what was read is stale): then it is dropped, and its getter sees it
     * obsolete and looks again.
     */
    private void unlockLoaded(Buffer l) {
        synchronized (stripe(bucket(l.block()))) {
            if (lookup(l.block()) == l) {
                l.unlockChanged();
                VarHandle.fullFence(); // the unlock before the read of whether frame waiters wait
                frameMayBeFree();
                return;
            }
        }
        unlinkAndRelease(l);
    }

    /** This thread's aligned buffer for cluster reads, at least {@code count} blocks long. */
    private MemorySegment clusterScratch(int count) {
        long size = (long) count * blockSize;
        MemorySegment s = CLUSTER_SCRATCH.get();
        if (s == null || s.byteSize() < size) {
            s = Arena.ofAuto().allocate(size, BlockDevice.BUFFER_ALIGNMENT);
            CLUSTER_SCRATCH.set(s);
        }
        return s.asSlice(0, size);
    }

    /**
     * A frame claimed for a later {@link #create(Txn, long, int, long, int)}: callers about to lock tree
     * nodes claim the frames their new nodes will need first, since claiming may wait for write-back.
     */
    public int reserveFrame() {
        return claimFrame();
    }

    /** Gives back a frame from {@link #reserveFrame()} that was not used. */
    public void unreserveFrame(int frame) {
        letGo(frame);
    }

    /** Frees a frame this thread claimed and did not use. */
    private void letGo(int frame) {
        frameOwner.set(frame, null);
        frameMayBeFree();
    }

    /** As {@link #create(Txn, long, int, long, int)}, claiming the frame now (may wait: hold no locks). */
    public Buffer create(Txn txn, long block, int magic, long owner) {
        return create(txn, block, magic, owner, claimFrame());
    }

    /**
     * A buffer for a block just allocated in {@code txn}, in a frame from {@link #reserveFrame()}:
     * zero-filled with a fresh header, held by {@code txn}, and logged whole (so that recovery's replay
     * overwrites whatever the block held before it was allocated).
     */
    public Buffer create(Txn txn, long block, int magic, long owner, int frame) {
        Buffer b = claim(txn, block, magic, owner, frame);
        txn.log(b, 0, blockSize);
        return b;
    }

    /**
     * Like {@link #create(Txn, long, int, long, int)}, but only the header is logged, marked as a block
     * rebuilt from zeros ({@link dev.ferrite.journal.internal.Transaction#logZeroed}): for blocks that are mostly
     * zero when allocated and filled piece by piece, each piece logged by the transaction that writes it.
     */
    public Buffer createEmpty(Txn txn, long block, int magic, long owner, int frame) {
        Buffer b = claim(txn, block, magic, owner, frame);
        txn.logZeroed(b, 0, BlockHeaderFormat.SIZE);
        return b;
    }

    /**
     * Buffers for the {@code count} blocks from {@code first}, just allocated in {@code txn}, in frames
     * from {@link #reserveFrame()} ({@code frames[0..count)}, in order, each set to -1 once used): each zero-filled with a fresh
     * header and held by {@code txn}, as {@link #create} makes them, but logged as one block
     * initialisation record ({@link BlockInitFormat}, a few dozen bytes) instead of block by block. The
     * buffers join the transaction as ordered items (tracked until home, their bytes not logged:
     * {@link dev.ferrite.journal.internal.Transaction#logOrdered}); changes made to them later, in this
     * transaction or another, are logged as usual ranges, which recovery replays over the blocks it
     * rebuilt from the record.
     */
    public void createInitialised(Txn txn, long first, int count, int magic, long owner, int[] frames) {
        if (count < 1 || count > BlockInitFormat.MAX_BLOCKS) {
            throw new IllegalArgumentException("a block initialisation record covers 1 to " + BlockInitFormat.MAX_BLOCKS
                    + " blocks, not " + count);
        }
        for (int i = 0; i < count; i++) {
            txn.logOrdered(claim(txn, first + i, magic, owner, frames[i]));
            frames[i] = -1;
        }
        txn.transaction().log(new BlockInit(first, count, magic, owner, blockSize), 0, BlockInitFormat.SIZE);
    }

    /**
     * A new, locked buffer for {@code block} in {@code frame}, held by {@code txn}, zero-filled with a
     * fresh header. Never waits: callers hold tree locks. A buffer of the block that is locked but clean
     * is a stale read being loaded (a reader that followed an old pointer to the block) or a buffer being
     * evicted; it is taken out of the cache here, and its loader or evictor drops it when done.
     */
    private Buffer claim(Txn txn, long block, int magic, long owner, int frame) {
        Buffer b;
        int bucket = bucket(block);
        synchronized (stripe(bucket)) {
            Buffer present = lookup(block);
            if (present != null && !present.isObsolete() && !dropStaleRead(bucket, present)) {
                if (present.holder != null || !present.isClean()) {
                    letGo(frame);
                    throw new IllegalStateException("block " + block + " is allocated anew but still cached as "
                            + present + ": it was not freed through the cache");
                }
                unlink(bucket, present);
            }
            if (isBusy(block)) {
                letGo(frame);
                throw new IllegalStateException("block " + block + " is allocated anew before its free reached"
                        + " a checkpoint: allocators must skip busy blocks");
            }
            b = new Buffer(this, block, frame, frame(frame), magic, owner, Buffer.LOCKED);
            link(bucket, b);
            frameOwner.set(frame, b);
        }
        txn.adopt(b);
        MemorySegment data = b.data();
        data.fill((byte) 0);
        BlockHeaderFormat.init(data, magic, block, owner);
        return b;
    }

    /**
     * {@code txn}, holding {@code b}, has freed its block: the buffer leaves the cache now, its header is
     * rewritten with {@code freedMagic} and logged (which also keeps the buffer pinned until the free is
     * durable), and the AIL then drops it instead of ever writing it home. It is unlocked, obsolete, when
     * {@code txn} commits; its frame is reclaimed once it is clean.
     */
    public void free(Txn txn, Buffer b, int freedMagic) {
        if (!txn.holds(b)) {
            throw new IllegalStateException(b + " is freed by a transaction that does not hold it");
        }
        BlockHeaderFormat.init(b.data(), freedMagic, b.block(), BlockHeaderFormat.owner(b.data()));
        txn.log(b, 0, BlockHeaderFormat.SIZE);
        b.markStale();
        freeingCount.incrementAndGet(); // before the entry: the count never falls short
        if (freeing.put(b) != null) {
            freeingCount.decrementAndGet();
        }
        int bucket = bucket(b.block());
        synchronized (stripe(bucket)) {
            unlink(bucket, b);
        }
        if (freeingCount.get() >= sweepFreeingAt && sweepingFreeing.compareAndSet(false, true)) {
            try {
                freeing.forEach(f -> {
                    if (f.holder == null && !f.isPinned() && freeing.remove(f)) { // as isBusy finds it
                        freeingCount.decrementAndGet();
                    }
                });
                sweepFreeingAt = Math.max(MIN_FREEING_SWEEP, 2 * freeingCount.get());
            } finally {
                sweepingFreeing.set(false);
            }
        }
    }

    /**
     * At least as many as the blocks {@link #isBusy} would call busy now: an allocator holding more free
     * blocks than this needs not ask about each.
     */
    public int busyBound() {
        return freeingCount.get();
    }

    /**
     * Under the stripe lock: drops the cached buffer of a block being allocated if it is clean and
     * unlocked. Such a buffer was read in by a reader that followed a stale pointer to the freed block
     * (its old contents still verify, since a free is never written home) and holds nothing anyone
     * needs; its holders will see it obsolete. False if it is locked (held, or for a moment by a loader,
     * the AIL or an evictor) or dirty (a block in use).
     */
    private boolean dropStaleRead(int bucket, Buffer b) {
        if (!lockClean(b)) {
            return false;
        }
        unlink(bucket, b);
        b.unlockObsolete();
        if (frameOwner.compareAndSet(b.frame, b, null)) {
            frameMayBeFree();
        }
        return true;
    }

    /**
     * True if {@code block} was freed and the free is not yet in a checkpoint in the AIL: allocators must
     * not hand it out again until this turns false (see {@link BlockAllocator#allocate}).
     */
    public boolean isBusy(long block) {
        Buffer b = freeing.get(block);
        if (b == null) {
            return false;
        }
        // a commit pins its items before it lets go of them: never neither held nor pinned in between
        if (b.holder != null || b.isPinned()) {
            return true;
        }
        if (freeing.remove(b)) {
            freeingCount.decrementAndGet();
        }
        return false;
    }

    /** Unlocks a freed buffer for good once its transaction committed. */
    void releaseFreed(Buffer b) {
        b.unlockObsolete();
    }

    private void unlinkAndRelease(Buffer b) {
        int bucket = bucket(b.block());
        synchronized (stripe(bucket)) {
            unlink(bucket, b);
        }
        b.unlockObsolete();
        // Once unlocked, an evictor may have locked the obsolete buffer and claimed its frame: free the
        // frame only if it is still this buffer's, or it would end up with two owners.
        if (frameOwner.compareAndSet(b.frame, b, null)) {
            frameMayBeFree();
        }
    }

    private void link(int bucket, Buffer b) {
        b.chainNext = buckets.get(bucket);
        buckets.set(bucket, b);
    }

    /** Under the stripe lock. The removed buffer keeps its next link, so walkers standing on it go on. */
    private void unlink(int bucket, Buffer b) {
        Buffer prev = null;
        for (Buffer x = buckets.get(bucket); x != null; prev = x, x = x.chainNext) {
            if (x == b) {
                if (prev == null) {
                    buckets.set(bucket, x.chainNext);
                } else {
                    prev.chainNext = x.chainNext;
                }
                return;
            }
        }
    }

    private MemorySegment frame(int i) {
        return slab.asSlice((long) i * blockSize, blockSize);
    }

    // ------------------------------------------------------------------ reclaim

    /**
     * A frame this thread now owns (CLAIMED): free, or taken from an evicted buffer. May wait for
     * write-back, on {@link #frameSignal}, up to {@link #claimWaitNanos}.
     *
     * @throws NoSpaceException if no frame could be taken for that long
     */
    private int claimFrame() {
        CacheWaitEvent wait = null;
        long start = 0;
        long seen = 0;
        try {
            for (;;) {
                int dirty = 0;
                for (int step = 0, limit = frames * 3; step < limit; step++) {
                    int i = (int) Long.remainderUnsigned(hand.getAndIncrement(), frames);
                    Object o = frameOwner.get(i);
                    if (o == null) {
                        if (frameOwner.compareAndSet(i, null, CLAIMED)) {
                            return waited(wait, i);
                        }
                    } else if (o instanceof Buffer b) {
                        b.dropHints();
                        if (b.priority == RESIDENT || !b.sweep()) {
                            continue;
                        }
                        if (evict(i, b)) {
                            return waited(wait, i);
                        }
                        // Write back early: once the hand has passed a quarter of the cache in buffers it may
                        // not take until they are home, start the journal on them now. Waiting until no clean
                        // buffer is left is too late: the last clean ones are the caller's own path, read
                        // optimistically and unpinned, and each read it makes would evict the one before.
                        if (!b.isClean() && ++dirty == frames / 4) {
                            journal.writeBackAll();
                        }
                    }
                }
                dirtyWaits.increment();
                if (wait == null) {
                    wait = new CacheWaitEvent();
                    wait.begin();
                    start = System.nanoTime();
                    frameWaiters.incrementAndGet(); // from here on every change that frees a frame signals
                } else {
                    long left = claimWaitNanos - (System.nanoTime() - start);
                    if (left <= 0) {
                        throw exhausted(System.nanoTime() - start);
                    }
                    journal.writeBackAll();
                    synchronized (frameSignal) {
                        if (frameSignals == seen) {
                            // bounded: a claim never rests on one wakeup. Buffers written home while its sweep
                            // passed them over (their CLOCK priority not yet spent) signal no more once home:
                            // a whole-wait sleep then lasted the full claim timeout with frames free to take.
                            frameSignal.wait(Math.max(1, Math.min(RECHECK_MS, TimeUnit.NANOSECONDS.toMillis(left))));
                        }
                    }
                }
                seen = frameSignals; // before the sweep: a change it misses signals after this
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for a frame of the buffer cache", e);
        } finally {
            if (wait != null) {
                frameWaiters.decrementAndGet();
            }
        }
    }

    /** The failure of a claim that found no frame for {@code nanos}, with what held the frames. */
    private NoSpaceException exhausted(long nanos) {
        int locked = 0, dirty = 0, reserved = 0, resident = 0;
        for (int i = 0; i < frames; i++) {
            Object o = frameOwner.get(i);
            if (o == CLAIMED) {
                reserved++;
            } else if (o instanceof Buffer b) {
                if (b.priority == RESIDENT) {
                    resident++;
                } else if (b.isLocked()) {
                    locked++;
                } else if (!b.isClean()) {
                    dirty++;
                }
            }
        }
        return new NoSpaceException("buffer cache of " + frames + " blocks on " + device.name() + " found no frame to reuse for "
                + TimeUnit.NANOSECONDS.toMillis(nanos) + " ms: " + locked + " buffers locked, " + dirty + " dirty (not yet written home), "
                + reserved + " frames reserved or loading, " + resident + " resident; the budget is too small for the blocks"
                + " held locked or dirty at once");
    }

    /**
     * A frame may have become takable (let go, or its buffer unlocked or written home): wakes the claims
     * waiting for one. Call after the change, which must be a volatile write (see {@link #frameSignal}).
     */
    void frameMayBeFree() {
        if (frameWaiters.get() != 0) {
            synchronized (frameSignal) {
                frameSignals++;
                frameSignal.notifyAll();
            }
        }
    }

    private int waited(CacheWaitEvent wait, int frame) {
        if (wait != null && wait.shouldCommit()) {
            wait.frames = frames;
            wait.commit();
        }
        return frame;
    }

    /** Takes frame {@code i} from {@code b} if it can be locked at once and is clean. */
    private boolean evict(int i, Buffer b) {
        if (!lockClean(b)) {
            return false;
        }
        if (!frameOwner.compareAndSet(i, b, CLAIMED)) {
            b.unlockQuietly();
            return false;
        }
        int bucket = bucket(b.block());
        synchronized (stripe(bucket)) {
            unlink(bucket, b);
        }
        b.unlockObsolete();
        if (b.isStale()) {
            if (freeing.remove(b)) {
                freeingCount.decrementAndGet();
            }
        }
        (b.priority > 1 ? interiorEvictions : leafEvictions).increment();
        return true;
    }

    /** Locks {@code b} if that can be done at once and it is clean (its home block holds all of it). */
    private static boolean lockClean(Buffer b) {
        if (!b.tryLock()) {
            return false;
        }
        if (!b.isClean()) {
            b.unlockQuietly();
            return false;
        }
        return true;
    }

    /** A buffer came clean (the AIL wrote it home): wake waiters for frames. */
    void cleaned() {
        writeBacks.increment();
        frameMayBeFree();
    }

    /**
     * Keeps {@code b} cached for good: for blocks locked while tree locks are held, whose reads must
     * never happen then.
     */
    public void makeResident(Buffer b) {
        b.priority = RESIDENT;
    }

    /** Counters since the cache was made. */
    public CacheStats stats() {
        int cached = 0;
        for (int i = 0; i < frames; i++) {
            if (frameOwner.get(i) instanceof Buffer) {
                cached++;
            }
        }
        return new CacheStats(frames, cached, hits.sum(), misses.sum(), readAhead.sum(), leafEvictions.sum(), interiorEvictions.sum(),
                writeBacks.sum(), dirtyWaits.sum());
    }

    /** Where B-tree operations on this cache's blocks met each other, since it was made. */
    public LatchStats latchStats() {
        return latches.stats();
    }

    /** Frees the slab. Call once the journal has written everything home (or is being thrown away). */
    @Override
    public void close() {
        FlightRecorder.removePeriodicEvent(statsEvent);
        arena.close();
    }
}
