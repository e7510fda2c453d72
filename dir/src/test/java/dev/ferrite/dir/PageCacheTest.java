package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Arrays;

import dev.ferrite.io.Errno;
import dev.ferrite.io.NoSpaceException;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_ZERO_RANGE;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The data page cache and buffered I/O on one volume whose cache holds {@link PageCache#MIN_FRAMES}
 * frames and whose dirty pages expire after 50 ms: partial blocks read-modify-written, eviction,
 * write-back under pressure and by age, the size a buffered write shows before write-back commits it,
 * truncates and fallocates of partial blocks, and coherence between the buffered and direct paths.
 */
class PageCacheTest extends FileTestBase {
    private static final int FRAMES = PageCache.MIN_FRAMES;

    @Override
    VolumeOptions options() {
        return VolumeFixtures.OPTIONS.withDataCacheBytes((long) FRAMES * BS).withDirtyExpireMillis(50);
    }

    private PageCache cache() {
        return v.pageCache();
    }

    /** The file's size as committed on disk, not as buffered writes show it. */
    private long committed(Handle f) {
        return ns.files.committedSize(f.inode);
    }

    private static MemorySegment bytes(int n, int value) {
        byte[] b = new byte[n];
        Arrays.fill(b, (byte) value);
        return MemorySegment.ofArray(b);
    }

    /** The file's bytes {@code [offset, offset + n)} read through the buffered path (a heap buffer). */
    private byte[] readBuffered(Handle f, long offset, int n) {
        byte[] b = new byte[n];
        assertEquals(n, ns.read(f, offset, MemorySegment.ofArray(b)));
        return b;
    }

    /**
     * Runs of frames side by side (a blob's one direct write): from frames never used, again from the free
     * frames once given back, and none (-1, nothing taken) when the free frames on top are not a run and
     * too few were never used, or (a table value's small run) when frames are free though not a run.
     */
    @Test
    void runsOfFramesComeSideBySideOrNotAtAll() {
        PageCache c = cache();
        FilePages p = new FilePages(null);
        int a = c.allocateRun(p, 0, 4, true), b = c.allocateRun(p, 4, 4, true);
        assertTrue(a >= 0, "a run of 4 in " + FRAMES + " fresh frames");
        assertEquals(a + 4, b, "the next run");
        c.releaseRun(b, 4);
        c.releaseRun(a, 4);
        assertEquals(a, c.allocateRun(p, 0, 4, true), "the run given back last");
        assertEquals(b, c.allocateRun(p, 0, 4, true), "the run given back before it");
        c.releaseRun(a, 4);
        assertEquals(a, c.allocate(p, 9), "a single frame off the top");
        int fresh = c.allocateRun(p, 0, 4, true);
        assertEquals(b + 4, fresh, "three free frames are no run of four: never-used ones instead");
        assertEquals(-1, c.allocateRun(p, 0, FRAMES - fresh - 3, true), "more than were never used, no run free");
        assertEquals(-1, c.allocateRun(p, 0, PageCache.RUN_MAX + 1, true));
        assertEquals(a + 1, c.allocate(p, 10), "the free frames untouched by the refusals");
        int x = c.allocate(p, 11), y = c.allocate(p, 12);
        c.releaseRun(x, 1);
        c.releaseRun(y, 1); // free, but the top is no run
        assertEquals(-1, c.allocateRun(p, 0, 2, false), "not fresh: never-used frames left while others are free");
        assertEquals(fresh + 4, c.allocateRun(p, 0, 2, true), "fresh: never-used ones");
        assertEquals(y, c.allocate(p, 13), "the free frames untouched by the refusal");
    }

    /**
     * A table value's dropped run unmaps exactly its pages that are mapped (one went before it, on its own),
     * none of the next value's, and gives their frames back so that they come off the free frames' top in
     * page order: the pages are removed last first, and the frames must not come back reversed.
     */
    @Test
    void aDroppedRunUnmapsItsPagesAndGivesTheirFramesBackInPageOrder() {
        PageCache c = cache();
        FilePages p = new FilePages(null, 4); // a table-extent stripe's map: a value's pages in consecutive slots
        long page = 7L << 4;
        int n = 8;
        int r = c.allocateRun(p, page, n, true);
        assertTrue(r >= 0, "a run of " + n + " in " + FRAMES + " fresh frames");
        for (int i = 0; i < n; i++) {
            p.put(page + i, r + i);
        }
        int next = c.allocate(p, page + 16);
        p.put(page + 16, next);
        c.drop(p, r + 3);
        c.dropRun(p, page, n, new int[n]);
        for (int i = 0; i < n; i++) {
            assertEquals(-1, p.get(page + i), "page " + i + " of the run");
        }
        assertEquals(next, p.get(page + 16), "the next value's page");
        assertEquals(1, p.size());
        for (int i : new int[] {0, 1, 2, 4, 5, 6, 7, 3}) {
            assertEquals(r + i, c.allocate(p, 100 + i), "the frame of page " + i);
        }
    }

    /**
     * With every frame mapped and none free or never used, a short run (a table value's) evicts clean
     * frames side by side, skipping referenced ones once and never taking a pinned one; where no such
     * window is left it takes nothing mapped that cannot go, and answers -1. Before, such a cache gave no
     * run at all, and every value went block by block.
     */
    @Test
    void aFullCacheEvictsCleanFramesSideBySideForAShortRun() {
        PageCache c = cache();
        FilePages p = new FilePages(null);
        for (int b = 0; b < FRAMES; b++) {
            int f = c.allocate(p, b);
            assertTrue(f >= 0, "frame for block " + b);
            p.put(b, f);
        }
        int r = c.allocateRun(p, 100, 4, false);
        assertTrue(r >= 0 && r + 4 <= FRAMES, "a run evicted for " + r);
        int mapped = 0;
        for (int b = 0; b < FRAMES; b++) {
            int f = p.get(b);
            if (f >= 0) {
                mapped++;
                assertTrue(f < r || f >= r + 4, "block " + b + " still in frame " + f + " of the run");
            }
        }
        assertEquals(FRAMES - 4, mapped, "exactly the run's frames evicted");
        for (int k = 0; k < 4; k++) {
            p.put(100 + k, r + k);
        }
        long[] blockIn = new long[FRAMES];
        for (long b : new long[] {0, 100}) {
            for (long k = b; k < b + FRAMES; k++) {
                if (p.get(k) >= 0) {
                    blockIn[p.get(k)] = k;
                }
            }
        }
        for (int f = 0; f < FRAMES; f += 3) {
            c.pin(f); // no 4 unpinned frames side by side are left
        }
        assertEquals(-1, c.allocateRun(p, 200, 4, false));
        for (int f = 0; f < FRAMES; f += 3) {
            assertEquals(f, p.get(blockIn[f]), "pinned frame " + f + " still mapped");
        }
        assertEquals(-1, c.allocateRun(p, 200, PageCache.EVICT_RUN_MAX + 1, false), "too long a run to evict for");
    }

    @Test
    void aPartialBlockWriteKeepsTheRestOfTheBlockWhateverItWas() {
        try (Handle f = written("f", 2, 1)) {
            ns.write(f, 50, bytes(100, 7)); // over a written block: the old block is read first
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 4 * BS, 2 * BS);
            ns.write(f, 4 * BS + 10, bytes(10, 8)); // into an unwritten extent: zeros around it
            ns.write(f, 7 * BS + 4000, bytes(200, 9)); // into a hole, across a block boundary, extending the file
            assertEquals(7 * BS + 4200, ns.stat(f).size(), "the size a buffered write made, at once");
            assertEquals(2 * BS, committed(f), "not yet written back");
            ns.fsync(f);
            assertEquals(7 * BS + 4200, committed(f), "write-back commits it");
            MemorySegment r = buffer(9);
            assertEquals(7 * BS + 4200, ns.read(f, 0, r)); // direct: what the device has
            MemorySegment want = stamped(0, 2, 1);
            assertEquals(-1, r.asSlice(0, 50).mismatch(want.asSlice(0, 50)));
            assertEquals(-1, r.asSlice(50, 100).mismatch(bytes(100, 7)));
            assertEquals(-1, r.asSlice(150, 2 * BS - 150).mismatch(want.asSlice(150, 2 * BS - 150)));
            assertEquals(-1, r.asSlice(2 * BS, 2 * BS + 10).mismatch(bytes(2 * BS + 10, 0)));
            assertEquals(-1, r.asSlice(4 * BS + 10, 10).mismatch(bytes(10, 8)));
            assertEquals(-1, r.asSlice(4 * BS + 20, 3 * BS - 20 + 4000).mismatch(bytes(3 * BS - 20 + 4000, 0)));
            assertEquals(-1, r.asSlice(7 * BS + 4000, 200).mismatch(bytes(200, 9)));
        }
    }

    /** Read in order, a miss fills a quarter of the cache at once (read-ahead); the pages read before are evicted. */
    @Test
    void cleanPagesAreEvictedUnderATinyBudget() {
        int blocks = 4 * FRAMES;
        try (Handle f = written("f", blocks, 3)) {
            for (int pass = 0; pass < 2; pass++) {
                for (int b = 0; b < blocks; b++) {
                    byte[] got = readBuffered(f, (long) b * BS + 8, BS - 8); // not aligned: buffered
                    MemorySegment want = stamped((long) b * BS, 1, 3).asSlice(8);
                    assertEquals(-1, MemorySegment.ofArray(got).mismatch(want), "block " + b + ", pass " + pass);
                }
            }
            assertTrue(cache().stats().evictions() >= 2L * blocks - FRAMES, "evictions: " + cache().stats());
            assertTrue(cache().stats().fills() <= cache().stats().filled() / 3, "a sequential reader reads ahead: " + cache().stats());
        }
    }

    @Test
    void aWriterFindingHalfTheFramesDirtyWritesBackItself() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            for (int b = 0; b < 4 * FRAMES; b++) {
                ns.write(f, (long) b * BS, bytes(BS, b + 1).asSlice(1)); // one byte short: buffered
                assertTrue(cache().stats().dirtyPages() <= FRAMES / 2 + 1, "dirty: " + cache().stats());
            }
            assertTrue(cache().stats().writtenBack() >= 3 * FRAMES, "written back before any fsync: " + cache().stats());
            for (int b = 0; b < 4 * FRAMES; b++) {
                byte[] got = readBuffered(f, (long) b * BS, BS - 1);
                assertArrayEquals(bytes(BS - 1, b + 1).toArray(JAVA_BYTE), got, "block " + b);
            }
        }
    }

    @Test
    void partialBlocksWrittenPastTheEndAreNotReadFromTheDevice() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, bytes(100, 1));
            ns.write(f, 100, bytes(BS, 2)); // the rest of block 0 (cached) and the start of block 1, past the end
            ns.write(f, 3L * BS + 7, bytes(10, 3)); // past the end with a hole before it
            assertEquals(0, cache().stats().fills(), "reads for blocks past the end: " + cache().stats());
            byte[] want = new byte[3 * BS + 17];
            Arrays.fill(want, 0, 100, (byte) 1);
            Arrays.fill(want, 100, 100 + BS, (byte) 2);
            Arrays.fill(want, 3 * BS + 7, 3 * BS + 17, (byte) 3);
            assertArrayEquals(want, readBuffered(f, 0, want.length));
        }
    }

    @Test
    void theWriteBackThreadWritesDirtyPagesBackOnceTheyExpire() throws InterruptedException {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, bytes(5000, 4));
            assertEquals(0, committed(f));
            assertTrue(cache().awaitClean(10_000), "no write-back within 10 s: " + cache().stats());
            assertEquals(5000, committed(f), "the write-back thread committed the size");
            assertEquals(2, cache().stats().writtenBack());
        }
    }

    @Test
    void aFailedWriteBackDropsItsPagesAndTheNextFsyncReportsIt() {
        try (Handle f = ns.create(root, "f", 0644, true); Handle hog = ns.create(root, "hog", 0644, true)) {
            ns.write(f, 1, bytes(1, 5));
            ns.fsync(f); // its first block is on the device
            // every block left goes to another file (f's preallocated tail too), kept past its end (PREALLOC: never
            // reclaimed): f's next write-back finds none
            // reservations unbounded: the write-back meets the full volume, not the write; and the fill takes what
            // the spare count leaves out too (the set-aside pool, the trees' share of each claim)
            v.counters().setSpare(() -> Long.MAX_VALUE);
            takeAllSpace(hog);
            for (int k = 1; k < 20; k++) {
                ns.write(f, 2L * k * BS + 1, bytes(1, 5)); // buffered: the cache takes them
            }
            long size = 2L * 19 * BS + 2;
            assertEquals(size, ns.stat(f).size());
            assertThrows(NoSpaceException.class, () -> ns.fsync(f));
            ns.fsync(f); // reported once
            assertEquals(0, cache().stats().dirtyPages());
            assertEquals(size, committed(f), "the size the writes made stays");
            assertArrayEquals(new byte[] {0, 5}, readBuffered(f, 0, 2), "the first block was written back before");
            ns.truncate(hog, 0);
        }
    }

    @Test
    void truncateToAPartialBlockZerosItsTail() {
        try (Handle f = written("f", 3, 5)) {
            ns.truncate(f, 5000);
            assertEquals(5000, ns.stat(f).size());
            ns.truncate(f, 3 * BS);
            MemorySegment r = buffer(3);
            assertEquals(3 * BS, ns.read(f, 0, r));
            assertEquals(-1, r.asSlice(0, 5000).mismatch(stamped(0, 2, 5).asSlice(0, 5000)));
            assertEquals(-1, r.asSlice(5000).mismatch(bytes(3 * BS - 5000, 0)), "the cut bytes read zeros after extending");
            ns.write(f, 2 * BS + 7, bytes(3, 6));
            ns.truncate(f, 2 * BS + 8); // a buffered write's pending size, cut
            assertEquals(2 * BS + 8, ns.stat(f).size());
            assertArrayEquals(new byte[] {0, 0, 0, 0, 0, 0, 0, 6}, readBuffered(f, 2 * BS, 8));
            assertEquals(0, ns.read(f, 2 * BS + 8, MemorySegment.ofArray(new byte[4])), "nothing past the cut");
        }
        try (Handle f = ns.open("/f")) { // after the last close: what the device has
            assertEquals(2 * BS + 8, ns.stat(f).size());
            MemorySegment r = buffer(3);
            assertEquals(2 * BS + 8, ns.read(f, 0, r));
            assertEquals(6, r.get(JAVA_BYTE, 2 * BS + 7));
        }
    }

    @Test
    void punchAndZeroRangeOfPartialBlocksZeroThemThroughTheCache() {
        try (Handle f = written("f", 4, 2)) {
            ns.fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 2 * BS); // head partial, block 1 whole, tail partial
            ns.fallocate(f, FALLOC_FL_ZERO_RANGE, 3 * BS + 10, 20); // within one block
            ns.fallocate(f, FALLOC_FL_ZERO_RANGE, 4 * BS - 5, 100); // past the end: extends
            assertEquals(4 * BS + 95, ns.stat(f).size());
            MemorySegment want = stamped(0, 4, 2);
            want.asSlice(100, 2 * BS).fill((byte) 0);
            want.asSlice(3 * BS + 10, 20).fill((byte) 0);
            want.asSlice(4 * BS - 5, 5).fill((byte) 0);
            MemorySegment r = buffer(5);
            assertEquals(4 * BS + 95, ns.read(f, 0, r));
            assertEquals(-1, r.asSlice(0, 4 * BS).mismatch(want));
            assertEquals(-1, r.asSlice(4 * BS, 95).mismatch(bytes(95, 0)));
        }
    }

    @Test
    void directAndBufferedCallsSeeEachOthersWrites() {
        try (Handle f = written("f", 4, 1)) {
            byte[] before = readBuffered(f, BS + 1, 10); // cached now
            ns.write(f, BS, stamped(BS, 1, 2)); // direct: drops the cached page
            assertEquals(-1, MemorySegment.ofArray(readBuffered(f, BS + 1, 10)).mismatch(stamped(BS, 1, 2).asSlice(1, 10)),
                    "a buffered read after a direct write (before it read " + Arrays.toString(before) + ")");
            ns.write(f, 2 * BS + 3, bytes(5, 9)); // buffered: dirty
            MemorySegment r = buffer(1);
            assertEquals(BS, ns.read(f, 2 * BS, r)); // direct: writes back first
            assertEquals(-1, r.asSlice(3, 5).mismatch(bytes(5, 9)));
            assertEquals(0, cache().stats().dirtyPages());
            ns.write(f, 5 * BS + 1, bytes(10, 3)); // buffered, past the end
            MemorySegment tail = buffer(2);
            assertEquals(BS + 11, ns.read(f, 4 * BS, tail), "a direct read sees the buffered size");
            ByteBuffer bb = ByteBuffer.allocate(20).position(5);
            assertEquals(11, ns.read(f, 5 * BS, bb));
            assertEquals(16, bb.position());
            ByteBuffer src = ByteBuffer.allocateDirect(8).put(new byte[] {1, 2, 3, 4, 5, 6, 7, 8}).flip().position(2);
            ns.write(f, 0, src);
            assertEquals(8, src.position());
            assertArrayEquals(new byte[] {3, 4, 5, 6, 7, 8}, readBuffered(f, 0, 6));
        }
    }

    @Test
    void appendsThroughAnAppendHandleGoAtTheEnd() {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.write(f, 0, bytes(10, 1));
        }
        try (Handle a = ns.open("/f", Namespace.O_WRONLY | Namespace.O_APPEND)) {
            ns.write(a, 0, bytes(5, 2)); // the offset is ignored
            assertEquals(15, ns.append(a, bytes(BS - 15, 3)));
            assertEquals(BS, ns.append(a, stamped(BS, 1, 4))); // aligned at an aligned end: direct
            assertEquals(2 * BS, ns.stat(a).size());
        }
        try (Handle r = ns.open("/f", Namespace.O_RDONLY)) {
            byte[] got = readBuffered(r, 8, 10);
            assertArrayEquals(new byte[] {1, 1, 2, 2, 2, 2, 2, 3, 3, 3}, got);
        }
        assertEquals(Errno.EINVAL, assertThrows(NamespaceException.class, () -> ns.create(root, "g", 0644, true, 3)).errno());
        assertEquals(Errno.ENOENT, assertThrows(NamespaceException.class, () -> ns.open("/g")).errno(), "bad flags create nothing");
        try (Handle g = ns.create(root, "g", 0644, true, Namespace.O_WRONLY | Namespace.O_APPEND)) {
            ns.write(g, 100, bytes(3, 1));
            ns.write(g, 100, bytes(3, 2));
            assertEquals(6, ns.stat(g).size(), "both appended");
            assertEquals(Errno.EBADF, assertThrows(NamespaceException.class, () -> ns.read(g, 0, MemorySegment.ofArray(new byte[1])))
                    .errno());
        }
        try (Handle d = ns.mkdir(root, "d", 0755)) {
            assertEquals(Errno.EISDIR, assertThrows(NamespaceException.class, () -> ns.open("/d", Namespace.O_RDWR)).errno());
            ns.open(root, "d", Namespace.O_RDONLY).close();
        }
    }
}
