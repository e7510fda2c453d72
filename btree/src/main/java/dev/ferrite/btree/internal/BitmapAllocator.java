package dev.ferrite.btree.internal;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;

/**
 * The simplest journaled allocator: a bitmap over a contiguous range of blocks, kept in bitmap blocks
 * that stay resident in the cache (they are locked while tree nodes are). Allocation scans forward from a
 * rotating hint one 64-bit word at a time; it serves standalone trees (tests, benchmarks); the namespace
 * brings its own per-group free-space trees.
 *
 * <p>Bitmap blocks are locked in ascending order within a transaction, after any tree node.
 */
public final class BitmapAllocator implements BlockAllocator {
    /** How long to keep forcing the log and looking again while only busy blocks are free. */
    private static final long BUSY_TIMEOUT_NANOS = 10_000_000_000L;
    private static final long BUSY_WAIT_NANOS = 100_000;

    private final BufferCache cache;
    private final long bitmapStart;
    private final int bitmapBlocks;
    private final long first;
    private final long count;
    private final long owner;
    private final int perBitmap;
    private final Buffer[] bitmaps;
    private final AtomicLong hint = new AtomicLong();
    private final AtomicLong free = new AtomicLong();

    private BitmapAllocator(BufferCache cache, long bitmapStart, long first, long count, long owner) {
        this.cache = cache;
        this.bitmapStart = bitmapStart;
        this.first = first;
        this.count = count;
        this.owner = owner;
        this.perBitmap = BitmapFormat.capacity(cache.blockSize());
        this.bitmapBlocks = (int) ((count + perBitmap - 1) / perBitmap);
        this.bitmaps = new Buffer[bitmapBlocks];
    }

    /** Bitmap blocks needed to cover {@code count} blocks. */
    public static int bitmapBlocks(int blockSize, long count) {
        return (int) ((count + BitmapFormat.capacity(blockSize) - 1) / BitmapFormat.capacity(blockSize));
    }

    /**
     * Writes empty bitmaps for {@code [first, first + count)} at {@code bitmapStart} (outside that range)
     * in {@code txn}, and returns the allocator. Its reservation must cover {@link #bitmapBlocks} items.
     */
    public static BitmapAllocator format(Txn txn, long bitmapStart, long first, long count, long owner) {
        BufferCache cache = txn.cache();
        requireRanges(cache, bitmapStart, first, count);
        BitmapAllocator a = new BitmapAllocator(cache, bitmapStart, first, count, owner);
        for (int i = 0; i < a.bitmapBlocks; i++) {
            Buffer b = cache.create(txn, bitmapStart + i, BitmapFormat.MAGIC, owner);
            int covered = (int) Math.min(a.perBitmap, count - (long) i * a.perBitmap);
            BitmapFormat.init(b.data(), first + (long) i * a.perBitmap, covered);
            cache.makeResident(b);
            a.bitmaps[i] = b;
        }
        a.free.set(count);
        return a;
    }

    /** Reads the bitmaps written by {@link #format} and counts the free blocks. */
    public static BitmapAllocator open(BufferCache cache, long bitmapStart, long first, long count, long owner) {
        requireRanges(cache, bitmapStart, first, count);
        BitmapAllocator a = new BitmapAllocator(cache, bitmapStart, first, count, owner);
        long used = 0;
        for (int i = 0; i < a.bitmapBlocks; i++) {
            long block = bitmapStart + i;
            Buffer b = cache.get(block, BitmapFormat.MAGIC, owner, "allocation bitmap");
            cache.makeResident(b);
            int covered = (int) Math.min(a.perBitmap, count - (long) i * a.perBitmap);
            if (BitmapFormat.first(b.data()) != first + (long) i * a.perBitmap || BitmapFormat.covered(b.data()) != covered) {
                throw new CorruptionException(block, "allocation bitmap", "covers " + BitmapFormat.covered(b.data())
                        + " blocks from " + BitmapFormat.first(b.data()) + ", expected " + covered + " from "
                        + (first + (long) i * a.perBitmap));
            }
            for (int w = 0; w < (covered + 63) / 64; w++) {
                used += Long.bitCount(BitmapFormat.word(b.data(), w));
            }
            a.bitmaps[i] = b;
        }
        a.free.set(count - used);
        return a;
    }

    private static void requireRanges(BufferCache cache, long bitmapStart, long first, long count) {
        long blocks = cache.device().blockCount();
        int n = bitmapBlocks(cache.blockSize(), count);
        if (count < 1 || first < 1 || first + count > blocks || bitmapStart < 1 || bitmapStart + n > blocks
                || bitmapStart < first + count && first < bitmapStart + n) {
            throw new InvalidArgumentException("allocator range of " + count + " blocks at " + first + " with "
                    + n + " bitmap blocks at " + bitmapStart + " does not fit, or overlaps itself, on a device of "
                    + blocks + " blocks (block 0 is reserved)");
        }
    }

    @Override
    public long allocate(Txn txn) {
        long deadline = 0;
        for (int attempt = 0; ; attempt++) {
            long block = tryAllocate(txn);
            if (block > 0) {
                return block;
            }
            long now = System.nanoTime();
            if (attempt == 0) {
                deadline = now + BUSY_TIMEOUT_NANOS;
            } else if (now - deadline > 0) {
                throw new NoSpaceException("allocator " + owner + ": all " + count + " blocks are in use or freed"
                        + " since the last checkpoint");
            }
            // Every free block is busy: make the frees durable (they leave the busy set once their checkpoint
            // reaches the AIL, just after the force returns) and look again, as XFS forces the log for busy
            // extents. This waits on log I/O with the caller's nodes held; only an allocator all but full does.
            cache.journal().forceAll();
            LockSupport.parkNanos(Math.min(BUSY_WAIT_NANOS << Math.min(attempt, 4), 1_000_000));
        }
    }

    /** A free, non-busy block marked used in {@code txn}, or 0 if every free block is busy. */
    private long tryAllocate(Txn txn) {
        if (free.get() <= 0) {
            throw new NoSpaceException("allocator " + owner + ": all " + count + " blocks are in use");
        }
        long start = Long.remainderUnsigned(hint.get(), count);
        int startMap = (int) (start / perBitmap);
        // scan bitmaps in ascending order from the hint's (lock order), then wrap to the ones before it
        for (int pass = 0; pass < 2; pass++) {
            int from = pass == 0 ? startMap : 0;
            int to = pass == 0 ? bitmapBlocks : startMap + 1;
            for (int m = from; m < to; m++) {
                Buffer b = bitmaps[m];
                if (!txn.lock(b)) {
                    throw new IllegalStateException("resident bitmap block " + b.block() + " became obsolete");
                }
                int covered = BitmapFormat.covered(b.data());
                int words = (covered + 63) / 64;
                int firstWord = m == startMap && pass == 0 ? (int) (start % perBitmap) / 64 : 0;
                for (int k = 0; k < words; k++) {
                    int w = (firstWord + k) % words;
                    long bits = BitmapFormat.word(b.data(), w);
                    int validBits = Math.min(64, covered - 64 * w);
                    long mask = validBits == 64 ? -1L : (1L << validBits) - 1;
                    for (long freeBits = ~bits & mask; freeBits != 0; freeBits &= freeBits - 1) {
                        int bit = Long.numberOfTrailingZeros(freeBits);
                        long index = (long) m * perBitmap + 64L * w + bit;
                        if (cache.isBusy(first + index)) {
                            continue; // freed since the last checkpoint
                        }
                        BitmapFormat.setWord(b.data(), w, bits | (1L << bit));
                        txn.log(b, BitmapFormat.wordOffset(w), 8);
                        hint.set(index + 1);
                        free.decrementAndGet();
                        return first + index;
                    }
                }
                txn.releaseUnchanged(b);
            }
        }
        return 0;
    }

    @Override
    public void free(Txn txn, long block) {
        if (block < first || block >= first + count) {
            throw new InvalidArgumentException("block " + block + " is outside allocator " + owner + "'s range ["
                    + first + ", " + (first + count) + ")");
        }
        long index = block - first;
        Buffer b = bitmaps[(int) (index / perBitmap)];
        if (!txn.lock(b)) {
            throw new IllegalStateException("resident bitmap block " + b.block() + " became obsolete");
        }
        int w = (int) (index % perBitmap) / 64;
        int bit = (int) (index % 64);
        long bits = BitmapFormat.word(b.data(), w);
        if ((bits & (1L << bit)) == 0) {
            throw new CorruptionException(b.block(), "allocation bitmap", "block " + block + " is freed but already free");
        }
        BitmapFormat.setWord(b.data(), w, bits & ~(1L << bit));
        txn.log(b, BitmapFormat.wordOffset(w), 8);
        free.incrementAndGet();
    }

    /** True if {@code block} is marked in use (for checkers). Reads without locking: call when quiet. */
    public boolean isAllocated(long block) {
        long index = block - first;
        Buffer b = bitmaps[(int) (index / perBitmap)];
        return (BitmapFormat.word(b.data(), (int) (index % perBitmap) / 64) & (1L << (index % 64))) != 0;
    }

    public long firstBlock() {
        return first;
    }

    public long blockCount() {
        return count;
    }

    @Override
    public long freeBlocks() {
        return free.get();
    }

    @Override
    public int itemsPerChange() {
        return 1;
    }
}
