package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;

/**
 * Extent values' blocks ({@link TableExtents}) kept in frames of the data page cache ({@link PageCache}),
 * within its budget and by its CLOCK, beside files' pages: a get of a value read or written recently is a
 * memory copy, not a device read.
 *
 * <h2>Identity</h2>
 * A cached block is named by its value's stub, not by its device block alone: block {@code i} of the value
 * whose extent starts at device block {@code b} is page {@code b * maxBlocks + i} of one of
 * {@link #STRIPES} {@link FilePages} maps (chosen by {@code b}, so a value's blocks share a map and a
 * lock), and its frame is tagged with the stub's CRC32C and length ({@link #tags}). A read uses a frame
 * only if the tag matches its stub, so bytes cached for a value whose blocks were freed and taken by
 * another never match the other's stub (unless that value has the same first block, length and CRC). The
 * free of a value's blocks also drops its frames ({@link #drop}), so they do not linger; a reader that
 * read the blocks before the free and caches them after it only leaves frames no later stub matches.
 * Only bytes known to be the value's are cached: a whole value read from the device whose CRC matched,
 * or a value as it is written ({@link #fill}, or {@link #fillPinned} when the log writes it later: its
 * frames are not evicted or overwritten until {@link #written}); so a read that finds every frame tagged as its stub's
 * copies ({@link #copy}) or lends ({@link #lend}) them without checking the CRC again.
 *
 * <h2>Runs</h2>
 * A value is cached in frames side by side in the slab when the page cache has such a run free
 * ({@link PageCache#allocateRun}: the top of its free frames, where a dropped value's frames go back in
 * order, or frames never used), else block by block. A value in a run is copied in, copied out and lent
 * in one piece, not one a block (a cursor's receiver then folds 16 KiB in one loop, not four), and its
 * deferred write copies it without looking its frames up again.
 *
 * <h2>Locks</h2>
 * A stripe's {@link FilePages#lock} guards its map and the contents and tags of its frames; it is held
 * for a lookup and copy of one value, or while a cursor's receiver reads a lent one (no I/O under it) and taken before the page cache's monitor (to
 * allocate or free a frame), as a file's is. The page cache's eviction only try-locks it.
 */
final class TableExtentCache {
    /** Maps and locks: concurrent gets of different values rarely share one. */
    static final int STRIPES = 64;

    private final PageCache pages;
    private final int blockSize;
    /** The most blocks a medium value takes: pages of one value are numbered {@code [b * maxBlocks, (b + 1) * maxBlocks)}. */
    private final int maxBlocks;
    private final FilePages[] stripes = new FilePages[STRIPES];
    /** Per frame: the CRC32C (high half) and length (low half) of the value whose bytes it holds; guarded by its stripe's lock. */
    private final long[] tags;
    /** Per stripe: {@link #drop}'s scratch for the frames it frees, guarded by the stripe's lock. */
    private final int[][] dropped;

    TableExtentCache(PageCache pages, int blockSize) {
        this.pages = pages;
        this.blockSize = blockSize;
        this.maxBlocks = (TableValueFormat.MAX_MEDIUM + blockSize - 1) / blockSize;
        this.tags = new long[pages.capacity()];
        this.dropped = new int[STRIPES][maxBlocks];
        for (int s = 0; s < STRIPES; s++) {
            stripes[s] = new FilePages(null, 32 - Integer.numberOfLeadingZeros(maxBlocks - 1)); // a value's pages in adjacent slots
        }
    }

    private FilePages stripe(TableValueFormat.Extent x) {
        return stripes[stripeOf(x)];
    }

    /** {@link #fillPinned}: cached in frames that do not lie in order in the slab. */
    static final int SCATTERED = -1;
    /** {@link #fillPinned}: not cached, a frame was not to be had. */
    static final int NO_FRAMES = -2;

    private static int stripeOf(TableValueFormat.Extent x) {
        return (int) ((x.block() * 0x9E37_79B9_7F4A_7C15L) >>> 58);
    }

    private static long tag(TableValueFormat.Extent x) {
        return (long) x.crc() << 32 | x.length();
    }

    private long page(TableValueFormat.Extent x, int i) {
        return x.block() * maxBlocks + i;
    }

    /**
     * Copies bytes {@code [offset, offset + want)} of value {@code x}, which lie in its blocks
     * {@code [first, end)}, into {@code out} from their frames; false, having copied some or none, if one of
     * those blocks is not cached as {@code x}'s.
     */
    boolean copy(TableValueFormat.Extent x, int first, int end, long offset, long want, MemorySegment out) {
        FilePages p = stripe(x);
        long tag = tag(x);
        p.lock.lock();
        try {
            int run = run(p, x, tag, first, end);
            if (run >= 0) {
                for (int i = 0; i < end - first; i++) {
                    pages.touch(run + i);
                }
                MemorySegment.copy(pages.slab(run), pages.offset(run) + offset - (long) first * blockSize, out, 0, want);
                return true;
            }
            for (int i = first; i < end; i++) {
                int f = frame(p, x, tag, i);
                if (f < 0) {
                    return false;
                }
                pages.touch(f);
                long from = Math.max(offset, (long) i * blockSize), to = Math.min(offset + want, (long) (i + 1) * blockSize);
                MemorySegment.copy(pages.slab(f), pages.offset(f) + from - (long) i * blockSize, out, from - offset, to - from);
            }
            return true;
        } finally {
            p.lock.unlock();
        }
    }

    /**
     * Lends value {@code x}'s bytes to {@code pieces} straight from its frames, a block at a time in order
     * (read-only views), holding the stripe's lock, so that no free or eviction takes a frame meanwhile;
     * false, having lent nothing, if one of its blocks is not cached as {@code x}'s.
     */
    boolean lend(TableValueFormat.Extent x, TableCursor.Pieces pieces) {
        FilePages p = stripe(x);
        long tag = tag(x);
        int n = x.blocks(blockSize);
        p.lock.lock();
        try {
            int run = run(p, x, tag, 0, n);
            if (run >= 0) { // one piece: the receiver's loop runs once over the value, not once a block
                for (int i = 0; i < n; i++) {
                    pages.touch(run + i);
                }
                pieces.accept(pages.readOnlySlab(run), pages.offset(run), x.length());
                return true;
            }
            for (int i = n - 1; i >= 0; i--) {
                if (frame(p, x, tag, i) < 0) {
                    return false;
                }
            }
            for (int i = 0, f; (long) i * blockSize < x.length(); i++) {
                pages.touch(f = frame(p, x, tag, i));
                pieces.accept(pages.readOnlySlab(f), pages.offset(f), Math.min(blockSize, x.length() - (long) i * blockSize));
            }
            return true;
        } finally {
            p.lock.unlock();
        }
    }

    /**
     * The frame of block {@code first} of value {@code x} (tagged {@code tag}) in stripe {@code p}, whose
     * lock the caller holds, if blocks {@code [first, end)} are all cached as {@code x}'s in frames side by
     * side in the slab ({@link #mapRun}); -1 otherwise.
     */
    private int run(FilePages p, TableValueFormat.Extent x, long tag, int first, int end) {
        int f = frame(p, x, tag, first);
        for (int i = first + 1; i < end && f >= 0; i++) {
            if (!follows(f, i - first, frame(p, x, tag, i))) {
                return -1;
            }
        }
        return f;
    }

    /** The frame holding block {@code i} of value {@code x} (tagged {@code tag}) in stripe {@code p}, whose lock the caller holds; -1 if none does. */
    private int frame(FilePages p, TableValueFormat.Extent x, long tag, int i) {
        int f = p.get(page(x, i));
        return f >= 0 && tags[f] == tag ? f : -1;
    }

    /** A full cache caches one in this many of a thread's reads from the device (see {@link #admits}): a power of two. */
    static final int ADMIT_ONE_IN = 8;
    /** Each thread's reads from the device while the cache was full, modulo {@link #ADMIT_ONE_IN}. */
    private static final ThreadLocal<int[]> FULL_MISSES = ThreadLocal.withInitial(() -> new int[1]);

    /**
     * Whether a value just read from the device is to be cached: always while the page cache is not full,
     * then every {@value #ADMIT_ONE_IN}th of the thread's reads. A value read again and again (the working
     * set) gets in within a few of its misses, while a scan, or values read in a cycle longer than the cache
     * holds, no longer replace what it holds as they go: under CLOCK each read of such a cycle evicted a
     * value before its next read, so nearly every read missed, where a cache that keeps most of what it holds
     * serves its share of the cycle. Writes are cached as before.
     */
    boolean admits() {
        if (!pages.full()) {
            return true;
        }
        int[] misses = FULL_MISSES.get();
        return (misses[0] = (misses[0] + 1) & (ADMIT_ONE_IN - 1)) == 0;
    }

    /**
     * Whether the thread's next {@link #admits} will be true, counting nothing: for a reader that, refused,
     * reads the value by a path that asks {@link #admits} itself, so that one miss counts once.
     */
    boolean willAdmit() {
        return !pages.full() || ((FULL_MISSES.get()[0] + 1) & (ADMIT_ONE_IN - 1)) == 0;
    }

    /**
     * A run of frames for value {@code x}'s blocks, held for the caller but not mapped (no lookup finds
     * them, no eviction takes them): the first, or -1 if the page cache has no such run. The caller reads
     * the value into them ({@link #runBytes}) and then {@link #adopt}s them, or gives them back with
     * {@link #releaseRun} if it does not: a miss read whole goes into its frames at once, where it went to a
     * buffer and was copied into them.
     */
    int reserveRun(TableValueFormat.Extent x) {
        return pages.allocateRun(stripe(x), page(x, 0), x.blocks(blockSize), false);
    }

    /** Run {@code run}'s {@code n} blocks of memory. */
    MemorySegment runBytes(int run, int n) {
        return pages.slab(run).asSlice(pages.offset(run), (long) n * blockSize);
    }

    /**
     * Maps run {@code run} from {@link #reserveRun}, now holding value {@code x}'s bytes (read whole, its CRC
     * matched, zeros or whatever the device holds after them), as {@code x}'s cached blocks; false, mapping
     * nothing, if one of its pages is mapped already (another reader's fill, or a pending value's pinned
     * frames): the caller then gives the run back.
     */
    boolean adopt(TableValueFormat.Extent x, int run) {
        FilePages p = stripe(x);
        int n = x.blocks(blockSize);
        p.lock.lock();
        try {
            if (anyMapped(p, x, n)) {
                return false;
            }
            map(p, x, tag(x), run, n);
            return true;
        } finally {
            p.lock.unlock();
        }
    }

    /** Gives back a run from {@link #reserveRun} that {@link #adopt} did not map. */
    void releaseRun(TableValueFormat.Extent x, int run) {
        pages.releaseRun(run, x.blocks(blockSize));
    }

    /**
     * Caches value {@code x} from {@code blocks}, its whole blocks (as written, or as read with the CRC
     * matching): frames cached for another value under the same pages are overwritten, unless pinned. Stops at the first
     * block for which no frame is to be had (every page dirty or its file busy): a value cached in part is
     * read from the device again.
     */
    void fill(TableValueFormat.Extent x, MemorySegment blocks) {
        FilePages p = stripe(x);
        long tag = tag(x);
        int n = x.blocks(blockSize);
        p.lock.lock();
        try {
            int run = mapRun(p, x, tag, n);
            if (run >= 0) {
                MemorySegment.copy(blocks, 0, pages.slab(run), pages.offset(run), (long) n * blockSize);
                return;
            }
            for (int i = 0; i < n; i++) {
                long page = page(x, i);
                int f = p.get(page);
                if (f >= 0 && tags[f] == tag) {
                    continue;
                }
                if (f >= 0 && pages.isPinned(f)) {
                    return; // a later value's whose write is pending (this one's blocks were freed under a reader)
                }
                if ((f = mapped(p, page, f)) < 0) {
                    return;
                }
                MemorySegment.copy(blocks, (long) i * blockSize, pages.slab(f), pages.offset(f), blockSize);
                tags[f] = tag;
            }
        } finally {
            p.lock.unlock();
        }
    }

    /**
     * The frame to fill page {@code page} of {@code p} with (the caller holds its lock): {@code f}, the one
     * mapped there, or else a new one, mapped; -1 if none is to be had.
     */
    private int mapped(FilePages p, long page, int f) {
        if (f < 0 && (f = pages.allocate(p, page)) >= 0) {
            p.put(page, f);
        }
        return f;
    }

    /**
     * Frames side by side in the slab for all {@code n} pages of value {@code x}, none of which is mapped,
     * mapped and tagged {@code tag} (the caller holds {@code p}'s lock and fills them next): the first, or
     * -1, having taken none, if a page is mapped or the page cache has no such run. A value in a run is
     * copied and lent in one piece, and written from its frames.
     */
    private int mapRun(FilePages p, TableValueFormat.Extent x, long tag, int n) {
        if (anyMapped(p, x, n)) {
            return -1;
        }
        int f = pages.allocateRun(p, page(x, 0), n, false);
        if (f >= 0) {
            map(p, x, tag, f, n);
        }
        return f;
    }

    /** Whether one of the {@code n} pages of value {@code x} is mapped in {@code p} (whose lock the caller holds). */
    private boolean anyMapped(FilePages p, TableValueFormat.Extent x, int n) {
        for (int i = 0; i < n; i++) {
            if (p.get(page(x, i)) >= 0) {
                return true;
            }
        }
        return false;
    }

    /** Maps the {@code n} pages of value {@code x} to run {@code f}'s frames, tagged {@code tag} (the caller holds {@code p}'s lock). */
    private void map(FilePages p, TableValueFormat.Extent x, long tag, int f, int n) {
        for (int i = 0; i < n; i++) {
            p.put(page(x, i), f + i);
            tags[f + i] = tag;
        }
    }

    /**
     * Caches value {@code x} from {@code value}, its bytes (zeros after them to its last block's end), its
     * frames {@linkplain PageCache#pin pinned} until {@link #written}: its device write comes later
     * ({@link TableExtentWriteBack}). Returns the first frame if they lie in order side by side in the slab
     * (as {@link #framesInOrder} would answer, which pinned frames keep answering until written),
     * {@link #SCATTERED} if they do not, or {@link #NO_FRAMES}, caching none of it, if a frame is not to be had.
     */
    int fillPinned(TableValueFormat.Extent x, MemorySegment value) {
        FilePages p = stripe(x);
        long tag = tag(x), length = value.byteSize();
        int n = x.blocks(blockSize);
        p.lock.lock();
        try {
            int run = mapRun(p, x, tag, n);
            if (run >= 0) {
                MemorySegment.copy(value, 0, pages.slab(run), pages.offset(run), length);
                pages.slab(run).asSlice(pages.offset(run) + length, (long) n * blockSize - length).fill((byte) 0);
                for (int i = 0; i < n; i++) {
                    pages.pin(run + i);
                }
                return run;
            }
            int first = SCATTERED;
            for (int i = 0; i < n; i++) {
                long page = page(x, i);
                int f = mapped(p, page, p.get(page));
                if (f < 0) {
                    for (int j = 0; j < i; j++) {
                        pages.drop(p, p.get(page(x, j)));
                    }
                    return NO_FRAMES;
                }
                long from = (long) i * blockSize, bytes = Math.min(blockSize, length - from);
                MemorySegment.copy(value, from, pages.slab(f), pages.offset(f), bytes);
                if (bytes < blockSize) {
                    pages.slab(f).asSlice(pages.offset(f) + bytes, blockSize - bytes).fill((byte) 0);
                }
                tags[f] = tag;
                pages.pin(f);
                first = i == 0 ? f : follows(first, i, f) ? first : SCATTERED;
            }
            return first;
        } finally {
            p.lock.unlock();
        }
    }

    /**
     * Copies value {@code x}'s whole blocks from its pinned frames into {@code to} at {@code at}, for their
     * device write; copies none past a block no longer cached as {@code x}'s (its write was cancelled).
     */
    void copyBlocks(TableValueFormat.Extent x, MemorySegment to, long at) {
        FilePages p = stripe(x);
        long tag = tag(x);
        p.lock.lock();
        try {
            for (int i = 0, n = x.blocks(blockSize), f; i < n && (f = frame(p, x, tag, i)) >= 0; i++) {
                MemorySegment.copy(pages.slab(f), pages.offset(f), to, at + (long) i * blockSize, blockSize);
            }
        } finally {
            p.lock.unlock();
        }
    }

    /**
     * The first of the frames holding value {@code x}'s blocks if they lie in order side by side in the
     * slab (as frames made one after another do) and every one is cached as {@code x}'s; -1 otherwise.
     */
    int framesInOrder(TableValueFormat.Extent x) {
        FilePages p = stripe(x);
        long tag = tag(x);
        p.lock.lock();
        try {
            int first = frame(p, x, tag, 0);
            for (int i = 1, n = x.blocks(blockSize); i < n && first >= 0; i++) {
                if (!follows(first, i, frame(p, x, tag, i))) {
                    return -1;
                }
            }
            return first;
        } finally {
            p.lock.unlock();
        }
    }

    /** Whether frame {@code g} lies {@code blocks} blocks after frame {@code f} in the same slab. */
    boolean follows(int f, int blocks, int g) {
        return f >= 0 && g >= 0 && pages.slab(g) == pages.slab(f) && pages.offset(g) == pages.offset(f) + (long) blocks * blockSize;
    }

    /** {@code blocks} blocks of the slab from frame {@code f} on, which hold pinned values: for their device write. */
    MemorySegment inSlab(int f, int blocks) {
        return pages.slab(f).asSlice(pages.offset(f), (long) blocks * blockSize);
    }

    /**
     * Value {@code x} is on the device: its frames unpinned, or dropped if {@code drop} (its blocks were
     * freed), as {@link #drop} drops them: no other value starts at its block before its free is durable,
     * which comes after this write, so every page there is its own. {@code first}: its first frame if its
     * frames lie in order ({@link #fillPinned}'s answer), which spares a lookup of each; else
     * {@link #SCATTERED}.
     */
    void written(TableValueFormat.Extent x, boolean drop, int first) {
        if (drop) {
            drop(x);
            return;
        }
        FilePages p = stripe(x);
        long tag = tag(x);
        p.lock.lock();
        try {
            for (int i = 0, n = x.blocks(blockSize), f; i < n; i++) {
                // a frame no longer x's page (its write cancelled, the frame taken since) is left as it is
                if (first >= 0 ? pages.holds(p, f = first + i, page(x, i)) && tags[f] == tag : (f = frame(p, x, tag, i)) >= 0) {
                    pages.unpin(f);
                }
            }
        } finally {
            p.lock.unlock();
        }
    }

    /** Drops value {@code x}'s frames: its blocks are being freed. */
    void drop(TableValueFormat.Extent x) {
        int s = stripeOf(x);
        FilePages p = stripes[s];
        p.lock.lock();
        try {
            // a stub's length is checked against its group, not against MAX_MEDIUM: no page past the value's own
            pages.dropRun(p, page(x, 0), Math.min(x.blocks(blockSize), maxBlocks), dropped[s]);
        } finally {
            p.lock.unlock();
        }
    }

    /** Blocks cached now, for tests. */
    int cachedBlocks() {
        int n = 0;
        for (FilePages p : stripes) {
            p.lock.lock();
            try {
                n += p.size();
            } finally {
                p.lock.unlock();
            }
        }
        return n;
    }
}
