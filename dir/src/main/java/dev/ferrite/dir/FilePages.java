package dev.ferrite.dir;

import java.util.Arrays;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One file's pages in the {@link PageCache}: a map from file block to frame (open addressing, linear
 * probing, deletion by backward shift: no allocation on a lookup or an insert that fits) and the file's
 * count of dirty pages.
 *
 * <p>{@link #lock} guards the map, the contents and dirty marks of the file's frames and {@link #dirty};
 * it is taken after the file's I/O lock ({@code FileData}) and {@link #writeBack}, and before anything of
 * the journal. The page cache's own lock only ever try-locks it (to evict), so it never waits for it.
 */
final class FilePages {
    private static final long EMPTY = -1;

    /** The file; null for a stripe of the {@link TableExtentCache}, whose pages are never dirty. */
    final Inode inode;
    final ReentrantLock lock = new ReentrantLock();
    /**
     * Held by a write-back of this file from its first copy of a dirty page to its last page cleaned (the
     * kernel's PG_writeback, for the whole file), and by what must not overlap a write-back's device
     * writes: another write-back (two copies of a page in flight could land out of order), a direct write
     * over cached pages (a copy landing after it would undo it) and a drop of pages (a copy landing after
     * the drop would show through a later miss). Readers and buffered writers never take it: they use the
     * pages, under {@link #lock}, while the device writes are in flight. Only taken while holding the
     * file's I/O lock (shared or exclusive), so an exclusive holder never waits for it on another thread.
     */
    final ReentrantLock writeBack = new ReentrantLock();
    private long[] keys = new long[16];
    private int[] frames = new int[16];
    private int size;
    /** Dirty pages of this file: changed under {@link #lock}, read without it to skip a clean file. */
    volatile int dirty;
    /** Of those, pages holding a block's reservation ({@link PageCache#reserve}); guarded by {@link #lock}. */
    int reserved;
    /**
     * Blocks promised beforehand for the reservations of pages about to be dirtied ({@link PageCache#reserve}
     * draws on them first): fallocate's, for partial blocks it zeroes over shared blocks, so that the second
     * cannot fail after the first changed. Only while the file's I/O lock is held exclusively, by its holder.
     */
    long prepaid;
    /** The last {@code BufferedIo} copy into these pages stopped for want of a reservation (guarded by {@link #lock}). */
    boolean outOfSpace;
    /** The block after the last one a read filled (sequential readers read ahead); guarded by {@link #lock}. */
    long readNext = -1;
    /** The frames a fill is reading into (guarded by {@link #lock}). */
    final int[] filling = new int[BufferedIo.READ_AHEAD];
    /** The first write-back failure since the last fsync reported one (guarded by {@link #lock}): its pages were dropped. */
    RuntimeException error;
    /** When the oldest of the file's dirty pages was dirtied, {@link System#nanoTime}; guarded by the page cache's dirty set. */
    long dirtySince;
    /**
     * On the page cache's queue of closed files, holding a reference on {@link #inode} ({@link PageCache#defer});
     * guarded by the page cache's dirty set, as is {@link #closedAt}, when it was queued.
     */
    boolean queued;
    long closedAt;
    /** {@link #error} holds a reference on {@link #inode} so that it outlives its handles until reported (guarded by {@link #lock}). */
    boolean errorPinned;
    /**
     * Changes to the map and to the frames' contents (a page mapped, unmapped or written), guarded by
     * {@link #lock}: a lend's CRC check of the pages ({@code BufferedIo#lend}) holds while it has not moved.
     */
    long changes;
    /** {@link #changes} when a lend last found CRC32C {@link #checkedCrc} over the first {@link #checkedLength} bytes; -1: none did. Guarded by {@link #lock}. */
    long checkedAt = -1;
    long checkedLength;
    int checkedCrc;

    /**
     * Blocks {@code [k << runShift, (k + 1) << runShift)} take consecutive home slots (0: every block a home
     * of its own): a table-extent stripe's pages of one value, looked up together by every copy, fill and
     * drop, then share a cache line or two of {@link #keys} and {@link #frames} instead of one each.
     */
    private final int runShift;

    FilePages(Inode inode) {
        this(inode, 0);
    }

    FilePages(Inode inode, int runShift) {
        this.inode = inode;
        this.runShift = runShift;
        Arrays.fill(keys, EMPTY);
    }

    /**
     * The home slot of {@code block}: the Fibonacci product of its run's number ({@link #runShift}) folded
     * onto its low half, plus its place in the run. Bits 40 up of the
     * product alone clustered: the table-extent cache picks a file's {@code FilePages} by the top bits of the
     * same product of the value's first block and keys pages 16 to a value, so a stripe's keys shared
     * structure there (a simulation of 16,000 16 KiB values in consecutive blocks: 4.8 probes an insert,
     * 0.5 folded; in random blocks 0.76 and 0.75), and the probe loop held 20% of a 16 KiB table insert's
     * samples (12% folded).
     */
    private int slot(long block) {
        return home(block, keys.length);
    }

    /** The home slot of {@code block} in a table of {@code slots} (a power of two): {@link #slot}'s, and tests' at other sizes. */
    int home(long block, int slots) {
        long h = (block >>> runShift) * 0x9E37_79B9_7F4A_7C15L;
        return (int) ((h ^ h >>> 32) + (block & ((1L << runShift) - 1))) & (slots - 1);
    }

    /** The frame caching file block {@code block}, or -1. */
    int get(long block) {
        for (int s = slot(block); ; s = (s + 1) & (keys.length - 1)) {
            long k = keys[s];
            if (k == block) {
                return frames[s];
            }
            if (k == EMPTY) {
                return -1;
            }
        }
    }

    /** Maps {@code block}, which is not mapped, to {@code frame}. */
    void put(long block, int frame) {
        if (2 * (size + 1) > keys.length) {
            grow(keys.length * 2);
        }
        insert(block, frame);
        size++;
        changes++;
    }

    /**
     * Makes room for {@code more} pages beyond those mapped, in one resize: a run of pages mapped at once
     * (a 1 MiB table blob's 256) grew the table five times over, rehashing each time.
     */
    void reserve(int more) {
        int slots = keys.length;
        while (2 * (size + more) > slots) {
            slots *= 2;
        }
        if (slots > keys.length) {
            grow(slots);
        }
    }

    private void grow(int slots) {
        long[] oldKeys = keys;
        int[] oldFrames = frames;
        keys = new long[slots];
        frames = new int[slots];
        Arrays.fill(keys, EMPTY);
        for (int s = 0; s < oldKeys.length; s++) {
            if (oldKeys[s] != EMPTY) {
                insert(oldKeys[s], oldFrames[s]);
            }
        }
    }

    private void insert(long block, int frame) {
        int s = slot(block);
        while (keys[s] != EMPTY) {
            s = (s + 1) & (keys.length - 1);
        }
        keys[s] = block;
        frames[s] = frame;
    }

    /** Unmaps {@code block}; returns its frame, or -1 if it was not mapped. */
    int remove(long block) {
        int mask = keys.length - 1;
        int s = slot(block);
        while (keys[s] != block) {
            if (keys[s] == EMPTY) {
                return -1;
            }
            s = (s + 1) & mask;
        }
        int frame = frames[s];
        // backward shift: pull later entries of the probe run into the gap so that lookups need no tombstones
        int gap = s;
        for (int next = (s + 1) & mask; keys[next] != EMPTY; next = (next + 1) & mask) {
            if (((next - slot(keys[next])) & mask) >= ((next - gap) & mask)) {
                keys[gap] = keys[next];
                frames[gap] = frames[next];
                gap = next;
            }
        }
        keys[gap] = EMPTY;
        size--;
        changes++;
        return frame;
    }

    /**
     * Unmaps every block; returns the frames they were mapped to: in block order if the blocks were
     * {@code [0, size)} (a file cached from its start to its end, as a table blob's run of frames is mapped),
     * else in the table's order. A deleted blob's frames then come back ascending, with no sort
     * ({@link PageCache#dropAll}), where the table's order needed one (a sort of 256 frames and the scan
     * were a third of a doomed 1 MiB blob's deletion).
     */
    int[] clear() {
        int[] out = new int[size];
        long last = EMPTY;
        for (long k : keys) {
            last = Math.max(last, k); // EMPTY is below every block
        }
        boolean dense = last < size; // size distinct blocks, none past size - 1: exactly [0, size)
        int n = 0;
        for (int s = 0; s < keys.length; s++) {
            long k = keys[s];
            if (k != EMPTY) {
                out[dense ? (int) k : n++] = frames[s];
            }
        }
        if (keys.length > 16) { // a freed file's big table goes too
            keys = new long[16];
            frames = new int[16];
        }
        Arrays.fill(keys, EMPTY);
        size = 0;
        changes++;
        return out;
    }

    /** Pages cached. */
    int size() {
        return size;
    }

    /** The cached blocks in {@code [from, to)}, ascending. */
    long[] blocks(long from, long to) {
        long[] out = new long[blocksBound(from, to)];
        int n = blocks(from, to, out);
        return n == out.length ? out : Arrays.copyOf(out, n);
    }

    /** The most blocks {@link #blocks} of {@code [from, to)} finds. */
    int blocksBound(long from, long to) {
        return Math.min(size, (int) Math.min(Integer.MAX_VALUE, to - from));
    }

    /** The cached blocks in {@code [from, to)}, ascending, into {@code out} (at least {@link #blocksBound} long); returns how many. */
    int blocks(long from, long to, long[] out) {
        int n = 0, most = blocksBound(from, to);
        if (to - from <= keys.length) {
            for (long b = from; b < to && n < most; b++) {
                if (get(b) >= 0) {
                    out[n++] = b;
                }
            }
            return n;
        }
        for (long k : keys) {
            if (k != EMPTY && k >= from && k < to) {
                out[n++] = k;
            }
        }
        Arrays.sort(out, 0, n);
        return n;
    }
}
