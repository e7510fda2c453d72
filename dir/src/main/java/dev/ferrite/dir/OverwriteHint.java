package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import dev.ferrite.btree.internal.Buffer;

import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * The written extents of a file with an inline extent list, as one version of its inode record showed
 * them: the direct path's in-place lookup ({@link FileData}) reads them here instead of finding the
 * record's buffer in the cache and searching the record on every write: about half of what Ferrite
 * adds to a 4 KiB overwrite on a cold CPU cache (p50 0.36–0.42 µs over the device write, 0.18–0.23
 * after; docs/namespace.md).
 *
 * <h2>Why an answer from here is the record's answer</h2>
 * The hint keeps the record's {@link Buffer} and the buffer version it decoded. An answer is used only if
 * that buffer still has that version when it is looked up ({@link Buffer#validate}): every change to the
 * block (a transaction's, to this record or another in the block) moves the version, and an evicted
 * buffer is obsolete, so a valid version means the record is, at that moment, the one decoded — the same
 * optimistic read {@link InodeRecords#readLong} makes, with the decode done once per record version
 * instead of once per write. Only written extents inside the size are kept, each checked as
 * {@link ExtentFormat#writtenBlock} checks the one it finds.
 *
 * <h2>Concurrency</h2>
 * A sequence word guards the fields (a seqlock): odd while one thread rebuilds them; a builder enters by
 * CAS from even, or leaves the rebuild to the thread that holds it. Readers read the fields plainly
 * between two reads of the sequence and discard what they read if it moved. Nothing is allocated per
 * lookup; a rebuild allocates only when the file has more written extents than ever before.
 */
final class OverwriteHint {
    private static final VarHandle SEQ;

    static {
        try {
            SEQ = MethodHandles.lookup().findVarHandle(OverwriteHint.class, "seq", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @SuppressWarnings("unused") // through SEQ
    private volatile long seq;
    /** The record's buffer and the version decoded; null while the hint holds nothing. */
    private Buffer buffer;
    private long version;
    /** Written extents inside the size, sorted: file block, end (exclusive, clamped to the size), device block. */
    private long[] runs = new long[3 * 4];
    private int count;

    /**
     * The device block of file block {@code first} if one written extent holds {@code [first, end)}
     * inside the size, as the record reads now; -1 if the hint cannot say (nothing held, a rebuild under
     * way, the record changed since, or no extent it holds covers the range).
     */
    long lookup(long first, long end) {
        long s = (long) SEQ.getAcquire(this);
        if ((s & 1) != 0) {
            return -1;
        }
        Buffer b = buffer;
        long v = version;
        long[] r = runs;
        int n = Math.min(count, r.length / 3);
        long dev = -1;
        int lo = 0, hi = n - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int at = 3 * mid;
            if (r[at + 1] <= first) {
                lo = mid + 1;
            } else if (r[at] > first) {
                hi = mid - 1;
            } else {
                dev = end <= r[at + 1] ? r[at + 2] + (first - r[at]) : -1;
                break;
            }
        }
        VarHandle.loadLoadFence(); // the field reads above happen before the sequence is read again
        if ((long) SEQ.getOpaque(this) != s || b == null || dev < 0) {
            return -1;
        }
        return b.validate(v) ? dev : -1;
    }

    /**
     * Rebuilds the hint from the record at {@code rec} of {@code b}, read at version {@code v} (the
     * caller validates its own reads of it after); skipped if another thread is rebuilding. A record
     * that is not a regular file's inline list leaves the hint empty. Image reads that go wrong (the
     * block changing under this optimistic read) leave it empty too: the caller's validation fails then.
     */
    void rebuild(Buffer b, long v, MemorySegment m, int rec, Geometry g) {
        long s = (long) SEQ.getOpaque(this);
        if ((s & 1) != 0 || !SEQ.compareAndSet(this, s, s + 1)) {
            return;
        }
        buffer = null;
        count = 0;
        try {
            if ((InodeFormat.mode(m, rec) & InodeFormat.S_IFMT) == InodeFormat.S_IFREG
                    && InodeFormat.fork(m, rec) == InodeFormat.FORK_EXTENTS) {
                long sizeBlocks = Long.divideUnsigned(InodeFormat.size(m, rec), g.blockSize());
                int area = rec + InodeFormat.INLINE;
                int n = Math.min(InodeFormat.inlineUsed(m, rec) / ExtentFormat.SIZE,
                        ExtentFormat.capacity(InodeFormat.inlineCapacity((int) m.byteSize())));
                if (runs.length < 3 * n) {
                    runs = new long[3 * n];
                }
                int k = 0;
                for (int i = 0; i < n; i++) {
                    long fb = ExtentFormat.fileBlock(m, area, i);
                    long stop = Math.min(fb + ExtentFormat.length(m, area, i), sizeBlocks);
                    long word = m.get(U64, area + i * ExtentFormat.SIZE + ExtentFormat.PACKED);
                    long dev = stop > fb ? ExtentFormat.mappedBlock(fb, word, fb, stop, false, g) : -1;
                    if (dev >= 0 && (k == 0 || fb >= runs[3 * k - 2])) { // written, checked, sorted after the last kept
                        runs[3 * k] = fb;
                        runs[3 * k + 1] = stop;
                        runs[3 * k + 2] = dev;
                        k++;
                    }
                }
                count = k;
                version = v;
                buffer = b;
            }
        } catch (RuntimeException e) {
            buffer = null; // a torn read of a changing block: the caller's validation sees the change
            count = 0;
        } finally {
            SEQ.setRelease(this, s + 2);
        }
    }
}
