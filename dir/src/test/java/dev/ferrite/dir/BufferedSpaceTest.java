package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.LongConsumer;

import dev.ferrite.io.NoSpaceException;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_ZERO_RANGE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Buffered writes reserve their blocks at write time (issue 16): on a full volume they stop with
 * NoSpaceException, promptly, and lose nothing they acknowledged; the reservations go back when pages
 * are written back or dropped.
 */
class BufferedSpaceTest extends FileTestBase {
    /** Bytes a writer hands over at a time: heap memory, so the buffered path takes them. */
    private static final int CHUNK = 64 << 10;
    /** The longest a fill may take: it ends in seconds (before reservations it never ended). */
    private static final long BOUND_SECONDS = 60;

    /** The byte file {@code id} holds at {@code offset}. */
    private static byte pattern(int id, long offset) {
        return (byte) (offset * 31 + id * 7 + (offset >>> 12));
    }

    private static byte[] chunk(int id, long offset, int len) {
        byte[] b = new byte[len];
        for (int k = 0; k < len; k++) {
            b[k] = pattern(id, offset + k);
        }
        return b;
    }

    private long reserved() {
        return v.pageCache().stats().reservedBlocks();
    }

    /** Writes file {@code name} ({@code id}'s pattern) in chunks until NoSpaceException; returns the bytes acknowledged. */
    private long fill(String name, int id) {
        try (Handle f = ns.create(root, name, 0644, true)) {
            long at = 0;
            for (;;) {
                try {
                    ns.write(f, at, MemorySegment.ofArray(chunk(id, at, CHUNK)));
                } catch (NoSpaceException full) {
                    return at;
                }
                at += CHUNK;
            }
        }
    }

    /** {@code tasks} on daemon threads, each within {@link #BOUND_SECONDS}: a hang fails the test. */
    private static <T> List<T> bounded(List<Callable<T>> tasks) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(tasks.size(), r -> {
            Thread t = new Thread(r, "buffered-space-writer");
            t.setDaemon(true);
            return t;
        });
        try {
            List<Future<T>> futures = new ArrayList<>();
            for (Callable<T> t : tasks) {
                futures.add(pool.submit(t));
            }
            List<T> out = new ArrayList<>();
            for (Future<T> f : futures) {
                out.add(f.get(BOUND_SECONDS, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    /** {@code name}'s first {@code bytes} hold {@code id}'s pattern, and its size is at least that. */
    private void assertHolds(String name, int id, long bytes) {
        try (Handle f = ns.open(root, name)) {
            long size = ns.stat(f).size();
            assertTrue(size >= bytes, name + " is " + size + " bytes, " + bytes + " were acknowledged");
            for (long at = 0; at < size; at += CHUNK) { // a short write's bytes past the acknowledged ones are kept too
                int n = (int) Math.min(CHUNK, size - at);
                byte[] got = new byte[n];
                assertEquals(n, ns.read(f, at, MemorySegment.ofArray(got)));
                assertArrayEquals(chunk(id, at, n), got, name + " at offset " + at);
            }
        }
    }

    @Test
    void writesIntoAFullVolumeStopWithNoSpaceAndLoseNothing() throws Exception {
        long start = free();
        long acked = bounded(List.<Callable<Long>>of(() -> fill("big", 1))).getFirst();
        assertTrue(acked > start * BS / 2, "only " + acked + " bytes went into a volume of " + start + " free blocks");
        ns.sync(); // reports no write-back error: every page had its block
        assertEquals(0, reserved());
        assertTrue(free() < start / 10, free() + " blocks left free of " + start); // the groups hold back the rest
        assertHolds("big", 1, acked);
        ns.unlink(root, "big");
        assertEquals(0, reserved());
    }

    @Test
    void fsyncAfterNoSpaceReportsNoErrorAndTheCloseReleasesEverything() throws Exception {
        long acked = bounded(List.<Callable<Long>>of(() -> {
            try (Handle f = ns.create(root, "f", 0644, true)) {
                long at = 0;
                for (;; at += CHUNK) {
                    try {
                        ns.write(f, at, MemorySegment.ofArray(chunk(2, at, CHUNK)));
                    } catch (NoSpaceException full) {
                        ns.fsync(f);
                        return at;
                    }
                }
            }
        })).getFirst();
        assertTrue(v.pageCache().awaitClosedFinished(10_000));
        assertEquals(0, reserved());
        assertHolds("f", 2, acked);
    }

    @Test
    void truncatePunchAndUnlinkGiveReservationsBack() throws Exception {
        int pages = 100;
        try (Handle f = ns.create(root, "a", 0644, true)) {
            ns.write(f, 0, MemorySegment.ofArray(chunk(3, 0, pages * BS)));
            assertEquals(pages + PageCache.meta(pages), reserved());
            ns.truncate(f, 60L * BS);
            assertEquals(60 + PageCache.meta(60), reserved());
            ns.fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10L * BS, 20L * BS);
            assertEquals(40 + PageCache.meta(40), reserved());
            ns.write(f, 10L * BS, MemorySegment.ofArray(chunk(3, 10L * BS, BS))); // into the hole again
            assertEquals(41 + PageCache.meta(41), reserved());
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 60L * BS); // unwritten blocks under the dirty pages: their map's share left
            assertEquals(PageCache.meta(41), reserved());
            ns.truncate(f, 0);
        }
        try (Handle f = ns.create(root, "d", 0644, true)) {
            ns.write(f, 0, MemorySegment.ofArray(chunk(3, 0, pages * BS)));
        }
        ns.unlink(root, "d"); // before its deferred close wrote it back
        assertEquals(0, reserved());
    }

    /** Gives all but about 600 spare blocks to a file of fallocated blocks; returns how many pages one file can reserve leaving {@code margin}. */
    private int pagesLeaving(int margin) {
        try (Handle hog = ns.create(root, "hog", 0644, true)) {
            ns.fallocate(hog, 0, 0, (v.spareBlocks() - 600) * BS);
        }
        int n = (int) (v.spareBlocks() - margin);
        while (n + PageCache.meta(n) > v.spareBlocks() - margin) {
            n--;
        }
        return n;
    }

    @Test
    void theSpaceOfAnUnlinkedFilesReservationsIsUsableAtOnce() throws Exception {
        int n = pagesLeaving(20);
        try (Handle b = ns.create(root, "b", 0644, true)) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            assertEquals(n + PageCache.meta(n), reserved());
        }
        ns.unlink(root, "b");
        assertEquals(0, reserved());
        try (Handle c = ns.create(root, "c", 0644, true)) { // as much again: only if b's reservations went back
            ns.write(c, 0, MemorySegment.ofArray(chunk(5, 0, n * BS)));
            ns.fsync(c);
        }
        assertHolds("c", 5, (long) n * BS);
        assertEquals(0, reserved());
    }

    @Test
    void directWritesAndFallocateLeaveReservedBlocksToTheirPages() throws Exception {
        int n = pagesLeaving(100);
        try (Handle b = ns.create(root, "b", 0644, true); Handle d = ns.create(root, "d", 0644, true)) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            MemorySegment aligned = buffer(200);
            assertThrows(NoSpaceException.class, () -> ns.write(d, 0, aligned)); // direct: into holes
            assertThrows(NoSpaceException.class, () -> ns.fallocate(d, 0, 0, 200L * BS));
            ns.fallocate(b, FALLOC_FL_KEEP_SIZE, 0, (long) n * BS); // under b's own reserved pages: their room
            assertEquals(PageCache.meta(n), reserved()); // the pages' conversions may still grow b's map
            ns.fsync(b); // every reserved page found its block
        }
        assertHolds("b", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    @Test
    void truncateOfAFullVolumesFileFreesItsReservations() throws Exception {
        bounded(List.<Callable<Long>>of(() -> fill("b", 6)));
        try (Handle f = ns.open(root, "b")) {
            ns.truncate(f, 0);
            assertEquals(0, reserved());
            ns.write(f, 0, MemorySegment.ofArray(chunk(6, 0, 4 << 20)));
            ns.fsync(f);
        }
        assertHolds("b", 6, 4 << 20);
    }

    @Test
    void overwritesOfAllocatedBlocksSucceedOnAFullVolume() throws Exception {
        int len = 256 << 10;
        try (Handle f = ns.create(root, "old", 0644, true)) {
            ns.write(f, 0, MemorySegment.ofArray(chunk(7, 0, len)));
            ns.fsync(f);
        }
        bounded(List.<Callable<Long>>of(() -> fill("hog", 8)));
        try (Handle f = ns.open(root, "old")) {
            assertThrows(NoSpaceException.class, () -> ns.write(f, len, MemorySegment.ofArray(chunk(9, len, CHUNK))));
            for (int at = 0; at < len; at += 1000) { // unaligned: buffered, over written blocks
                ns.write(f, at, MemorySegment.ofArray(chunk(9, at, Math.min(1000, len - at))));
            }
            ns.fsync(f);
        }
        assertHolds("old", 9, len);
        assertEquals(0, reserved());
    }

    @Test
    void concurrentWritersAllGetNoSpaceAndLoseNothing() throws Exception {
        int writers = 4;
        List<Callable<Long>> tasks = new ArrayList<>();
        for (int t = 0; t < writers; t++) {
            int id = 10 + t;
            tasks.add(() -> fill("w" + id, id));
        }
        List<Long> acked = bounded(tasks);
        ns.sync();
        assertEquals(0, reserved());
        long total = 0;
        for (int t = 0; t < writers; t++) {
            assertHolds("w" + (10 + t), 10 + t, acked.get(t));
            total += acked.get(t);
        }
        assertTrue(total > (long) VolumeFixtures.BLOCKS * BS / 2, "the writers got " + total + " bytes in");
        for (int t = 0; t < writers; t++) {
            ns.unlink(root, "w" + (10 + t));
        }
        assertEquals(0, reserved());
    }

    /** A file of 25 one-extent pieces inline, the most a list holds: filling one of its holes makes it a tree. */
    private void fragmented(String name) {
        try (Handle f = written(name, 60, 1)) {
            for (int b = 1; b < 48; b += 2) {
                ns.fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (long) b * BS, BS);
            }
            assertEquals(25, ns.extents(f, 0, Long.MAX_VALUE).size());
        }
    }

    @Test
    void directWritesAndFallocateThatMakeATreeTakeNoBlockDirtyPagesReserved() throws Exception {
        for (int k = 0; k < 3; k++) {
            fragmented("f" + k);
        }
        int n = pagesLeaving(5);
        try (Handle b = ns.create(root, "b", 0644, true)) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS))); // 5 blocks left that no page reserved
            for (int k = 0; k < 3; k++) { // each would make a tree of 20 blocks: before, they took them, then failed
                try (Handle f = ns.open(root, "f" + k)) {
                    assertThrows(NoSpaceException.class, () -> ns.write(f, BS, stamped(BS, 1, 2)));
                    assertThrows(NoSpaceException.class, () -> ns.fallocate(f, 0, 3L * BS, BS));
                    assertEquals(25, ns.extents(f, 0, Long.MAX_VALUE).size());
                }
            }
            ns.fsync(b); // before: NoSpaceException, 60 blocks reserved for b's pages gone to the trees
        }
        assertHolds("b", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    /**
     * Two direct writes into unwritten blocks of a file whose inline list holds 23 extents, each splitting
     * an extent in three: each fits alone (25, the most a list holds), so neither promises a tree, but both
     * check before either converts (the file's conversion turn held meanwhile), and together they need one.
     * The conversion that no longer fits promises the tree's blocks first; with all but 5 spare blocks
     * promised to b's pages it cannot, and fails with NoSpaceException, its block still unwritten. Before,
     * the tree was made unpromised, out of the blocks b's pages had reserved, and b's fsync failed.
     */
    @Test
    void directWritesWhoseConversionsTogetherNoLongerFitPromiseTheTree() throws Exception {
        try (Handle f = ns.create(root, "f", 0644, true)) {
            ns.fallocate(f, 0, 0, 100L * BS); // one unwritten extent inside the size
            for (int b = 1; b < 22; b += 2) { // the file's conversion queue exists after them
                ns.write(f, (long) b * BS, stamped((long) b * BS, 1, 1));
            }
            assertEquals(23, ns.extents(f, 0, Long.MAX_VALUE).size());
            int n = pagesLeaving(5);
            try (Handle b = ns.create(root, "b", 0644, true)) {
                ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
                raceTwoConversions(f);
                ns.fsync(b); // before: NoSpaceException, the tree made of blocks b's pages reserved
            }
            assertHolds("b", 4, (long) n * BS);
        }
        assertEquals(0, reserved());
    }

    /**
     * A direct write filling a 4-block hole past the end of a file whose inline list holds 24 extents: one
     * more fits, so it promises the hole's blocks and no tree; but where free space lies in single blocks the
     * hole is taken a block at a time, and after the first the list no longer fits. The tree is promised
     * before it is made; with all but 5 spare blocks promised to p's pages it cannot be, and the write fails
     * with NoSpaceException. Before, the tree was made unpromised, out of the blocks p's pages reserved.
     */
    @Test
    void aDirectWriteWhoseHoleIsTakenInMorePiecesThanItCountedPromisesTheTree() throws Exception {
        try (Handle f = written("f", 60, 1)) {
            for (int b = 1; b < 46; b += 2) {
                ns.fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (long) b * BS, BS);
            }
            assertEquals(24, ns.extents(f, 0, Long.MAX_VALUE).size());
        }
        freeSpaceInSingleBlocks(v, root);
        int n = pagesLeaving(5 + 4);
        try (Handle p = ns.create(root, "p", 0644, true); Handle f = ns.open(root, "f")) {
            ns.write(p, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            assertThrows(NoSpaceException.class, () -> ns.write(f, 70L * BS, stamped(70L * BS, 4, 2)));
            assertTrue(v.counters().promised() <= v.spareBlocks(), v.counters().promised() + " blocks promised, " + v.spareBlocks() + " spare");
            assertTrue(ns.extents(f, 0, Long.MAX_VALUE).size() <= 25, "a tree was made");
            assertEquals(60L * BS, ns.stat(f).size());
            ns.fsync(p); // before: NoSpaceException, the tree made of blocks p's pages reserved
        }
        assertHolds("p", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    /**
     * Two direct writes of {@code f}, into its unwritten blocks 40 and 60, that both check before either
     * converts: the file's conversion turn is held until both wait for it. Each succeeds, its block stamped,
     * or fails with NoSpaceException, its block still unwritten; exactly one must fail (both in: a tree made).
     */
    private void raceTwoConversions(Handle f) throws Exception {
        Conversions.Queue q = f.inode.conversions;
        assertTrue(q.tryTurn());
        long[] at = {40, 60};
        Throwable[] failed = new Throwable[at.length];
        List<Thread> writers = new ArrayList<>();
        for (int w = 0; w < at.length; w++) {
            int id = w;
            MemorySegment own = stamped(at[w] * BS, 1, 2);
            Thread t = new Thread(() -> {
                try {
                    ns.write(f, at[id] * BS, own);
                } catch (Throwable e) {
                    failed[id] = e;
                }
            }, "inline-race-writer-" + w);
            t.setDaemon(true);
            t.start();
            writers.add(t);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(BOUND_SECONDS);
        try {
            for (Thread t : writers) {
                while (!ConversionsTest.parkedForConversion(t)) {
                    assertTrue(t.isAlive() && System.nanoTime() < deadline, t.getName() + " did not park behind the held turn: "
                            + t.getState() + ", " + Arrays.toString(failed));
                    Thread.sleep(1);
                }
            }
        } finally {
            q.endTurn();
        }
        for (Thread t : writers) {
            t.join(TimeUnit.SECONDS.toMillis(BOUND_SECONDS));
            assertTrue(!t.isAlive(), t.getName() + " hangs");
        }
        assertTrue(v.counters().promised() <= v.spareBlocks(), v.counters().promised() + " blocks promised, " + v.spareBlocks() + " spare");
        int fails = 0;
        for (int w = 0; w < at.length; w++) {
            MemorySegment got = buffer(1);
            ns.read(f, at[w] * BS, got);
            if (failed[w] == null) {
                assertStamped(got, at[w] * BS, 2);
            } else {
                assertTrue(failed[w] instanceof NoSpaceException, "writer " + w + " failed with " + failed[w]);
                assertStamped(got, at[w] * BS, 0); // its block still unwritten
                fails++;
            }
        }
        // each fits alone: the batch that found no tree's blocks goes again a run at a time, and only the
        // second fails (before, the batch failed both)
        assertEquals(1, fails, "conversions that failed, of two: " + Arrays.toString(failed));
        assertTrue(ns.extents(f, 0, Long.MAX_VALUE).size() <= 25, "a tree was made");
    }

    @Test
    void bufferedOverwritesOfUnwrittenBlocksReserveTheirFilesMap() throws Exception {
        for (int k = 0; k < 3; k++) {
            try (Handle f = ns.create(root, "f" + k, 0644, true)) {
                ns.fallocate(f, 0, 0, 60L * BS); // one unwritten extent inside the size
                for (int b = 1; b < 24; b += 2) {
                    ns.write(f, (long) b * BS, stamped((long) b * BS, 1, 1)); // written blocks between unwritten ones
                }
                assertEquals(25, ns.extents(f, 0, Long.MAX_VALUE).size());
            }
        }
        int n = pagesLeaving(5);
        try (Handle b = ns.create(root, "b", 0644, true)) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            for (int k = 0; k < 3; k++) {
                try (Handle f = ns.open(root, "f" + k)) {
                    // its write-back splits the last unwritten extent in three: a tree of 20 blocks, reserved first
                    // (the write finds them once b is written back), or NoSpaceException
                    try {
                        ns.write(f, 40L * BS + 10, MemorySegment.ofArray(new byte[] {1, 2, 3}));
                    } catch (NoSpaceException full) {
                        // nothing promised is left for f's map
                    }
                    ns.fsync(f);
                }
            }
            ns.fsync(b); // before: NoSpaceException, the trees made by f0-f2's write-backs in b's blocks
        }
        assertHolds("b", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    @Test
    void namespaceAllocationsTakeNoBlockDirtyPagesReserved() throws Exception {
        int n = pagesLeaving(5);
        Handle d = ns.mkdir(root, "d", 0755);
        try (Handle b = ns.create(root, "b", 0644, true)) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            // new names grow the directory into a tree and take inode chunks: before, past what no page reserved
            int made = 0;
            try {
                for (; made < 1000; made++) {
                    ns.create(d, "name-" + made, 0644, false).close();
                }
            } catch (NoSpaceException full) {
                // the blocks left are the pages'
            }
            ns.fsync(b); // before: NoSpaceException, the directory's tree and inode chunks in b's blocks
            for (int k = 0; k < made; k++) {
                ns.unlink(d, "name-" + k);
            }
        } finally {
            d.close();
        }
        assertHolds("b", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    @Test
    void scatteredPagesReserveForTheExtentsTheirWriteBackMakes() throws Exception {
        int pages = 3000; // every other block: an extent each once written back, a tree of about 30 blocks
        try (Handle hog = ns.create(root, "hog", 0644, true)) {
            ns.fallocate(hog, 0, 0, (v.spareBlocks() - pages - PageCache.FILE_META_BLOCKS - 5) * BS);
        }
        int acked = 0;
        try (Handle b = ns.create(root, "b", 0644, true)) {
            for (; acked < pages; acked++) {
                long at = 2L * acked * BS;
                try {
                    ns.write(b, at, MemorySegment.ofArray(chunk(4, at, BS)));
                } catch (NoSpaceException full) {
                    break; // the extents' blocks are reserved too: fewer pages fit
                }
            }
            ns.fsync(b); // before: NoSpaceException, the tree and the free-space trees grown past 29 blocks
            for (int k = 0; k < acked; k++) {
                long at = 2L * k * BS;
                byte[] got = new byte[BS];
                ns.read(b, at, MemorySegment.ofArray(got));
                assertArrayEquals(chunk(4, at, BS), got, "block " + 2 * k);
            }
        }
        assertTrue(acked > pages * 9 / 10, acked + " of " + pages + " pages written");
        assertEquals(0, reserved());
    }

    /**
     * A file of {@code blocks} fallocated blocks inside its size whose extents are a tree: every other block
     * of its first 60 written. The rest is one unwritten extent whose conversions split it.
     */
    private void unwrittenTree(String name, int blocks) {
        try (Handle f = ns.create(root, name, 0644, true)) {
            ns.fallocate(f, 0, 0, (long) blocks * BS);
            for (int b = 1; b < 60; b += 2) {
                ns.write(f, (long) b * BS, stamped((long) b * BS, 1, 1));
            }
        }
    }

    /** Writes every other block of {@code f} from block 61 by {@code write}; true if all went in, false at NoSpaceException. */
    private boolean everyOtherBlock(Handle f, int blocks, LongConsumer write) {
        try {
            for (long b = 61; b < blocks; b += 2) {
                write.accept(b);
            }
            return true;
        } catch (NoSpaceException full) {
            return false; // nothing unpromised is left for the tree's reserve
        }
    }

    /**
     * Gives all but 5 spare blocks to a file b's dirty pages, then runs {@code change} on every other block
     * from 61 of the trees f0-f2 until NoSpaceException: b's write-back then finds every block it reserved.
     */
    private void changeTreesBesideReservedPages(int blocks, BiConsumer<Handle, Long> change) {
        int n = pagesLeaving(5);
        try (Handle b = ns.create(root, "b", 0644, true)) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            for (int k = 0; k < 3; k++) {
                try (Handle f = ns.open(root, "f" + k)) {
                    everyOtherBlock(f, blocks, fb -> change.accept(f, fb));
                }
            }
            ns.fsync(b); // before: NoSpaceException, the trees' refills in b's blocks
        }
        assertHolds("b", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    @Test
    void directWritesIntoUnwrittenBlocksOfATreeClaimWhatItsConversionsTake() throws Exception {
        int blocks = 1700; // 820 conversions a file, each splitting the unwritten extent: about 2,000 keys, a refill or two
        for (int k = 0; k < 3; k++) {
            unwrittenTree("f" + k, blocks);
        }
        MemorySegment one = stamped(0, 1, 2);
        changeTreesBesideReservedPages(blocks, (f, fb) -> ns.write(f, fb * BS, one));
    }

    @Test
    void zeroRangesSplittingATreeClaimWhatTheyTake() throws Exception {
        int blocks = 1700;
        for (int k = 0; k < 3; k++) {
            unwrittenTree("f" + k, blocks);
            try (Handle f = ns.open(root, "f" + k)) {
                ns.write(f, 60L * BS, stamped(60L * BS, blocks - 60, 1)); // written: each zeroed block splits its extent
            }
        }
        changeTreesBesideReservedPages(blocks, (f, fb) -> ns.fallocate(f, FALLOC_FL_ZERO_RANGE, fb * BS, BS));
    }

    @Test
    void clonesOfManyExtentsClaimTheTreesTheyMake() throws Exception {
        int blocks = 1200;
        unwrittenTree("s", blocks); // 1,200 extents: every other block written
        try (Handle s = ns.open(root, "s")) {
            MemorySegment one = stamped(0, 1, 2);
            assertTrue(everyOtherBlock(s, blocks, fb -> ns.write(s, fb * BS, one)));
        }
        written("small", 4, 3).close();
        int n = pagesLeaving(5);
        try (Handle b = ns.create(root, "b", 0644, true); Handle s = ns.open(root, "s")) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            for (int k = 0; k < 3; k++) {
                try (Handle d = ns.create(root, "d" + k, 0644, true)) {
                    ns.cloneRange(s, 0, d, 0, (long) blocks * BS); // a tree of 1,200 extents
                    assertEquals(blocks, ns.extents(d, 0, Long.MAX_VALUE).size());
                } catch (NoSpaceException full) { // before: part way, in b's blocks
                    try (Handle d = ns.open(root, "d" + k)) {
                        assertEquals(0, ns.extents(d, 0, Long.MAX_VALUE).size(), "a clone that failed for space mapped blocks");
                    }
                }
            }
            try (Handle small = ns.open(root, "small"); Handle d = ns.create(root, "d-small", 0644, true)) {
                ns.cloneRange(small, 0, d, 0, 4L * BS); // an inline list stays one: nothing to promise
            }
            ns.fsync(b); // before: NoSpaceException, the clones' trees in b's blocks
        }
        assertHolds("b", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    @Test
    void partialPunchesOfSharedBlocksReserveTheirCopies() throws Exception {
        int blocks = 120;
        try (Handle s = written("s", blocks, 1); Handle d = ns.create(root, "d", 0644, true)) {
            ns.cloneRange(s, 0, d, 0, (long) blocks * BS); // every block of d shared
        }
        int n = pagesLeaving(5);
        int acked = 0;
        try (Handle b = ns.create(root, "b", 0644, true); Handle d = ns.open(root, "d")) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            // a partial block zeroed in the cache over a shared block: its write-back copies it to a block of d's own
            for (; acked < blocks; acked += 2) {
                try {
                    ns.fallocate(d, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (long) acked * BS + 8, 16);
                } catch (NoSpaceException full) {
                    break; // nothing is left to promise for the copy
                }
            }
            ns.fsync(d); // before: NoSpaceException, or d's copies took b's blocks
            ns.fsync(b);
            MemorySegment got = buffer(1);
            for (int k = 0; k < blocks; k++) {
                ns.read(d, (long) k * BS, got);
                MemorySegment want = stamped((long) k * BS, 1, 1);
                if (k % 2 == 0 && k < acked) {
                    want.asSlice(8, 16).fill((byte) 0);
                }
                assertEquals(-1, want.mismatch(got), "block " + k + " of d");
            }
        }
        assertHolds("b", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    /** Converts {@link #unwrittenTree} {@code f} of {@code blocks} until the next change adding a key would refill its tree's reserve. */
    private void runReserveLow(int blocks) {
        try (Handle f = ns.open(root, "f")) {
            long fb = 61;
            for (MemorySegment one = stamped(0, 1, 2); ns.dirs.step(f.inode, 0) != DirContents.REFILL; fb += 2) {
                ns.write(f, fb * BS, one);
            }
            assertTrue(fb < blocks, "the reserve never ran low");
        }
    }

    /** Truncates f to {@code size} beside pages b reserved all but 5 spare blocks for: it takes no block. */
    private void truncateBesideReservedPages(long size) {
        int n = pagesLeaving(5);
        try (Handle b = ns.create(root, "b", 0644, true); Handle f = ns.open(root, "f")) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            long spare = v.spareBlocks();
            ns.truncate(f, size);
            assertTrue(v.spareBlocks() >= spare, "spare blocks " + spare + " before the truncate, " + v.spareBlocks() + " after");
            assertTrue(v.spareBlocks() >= v.counters().promised(), v.counters().promised() + " blocks promised, "
                    + v.spareBlocks() + " spare");
            ns.fsync(b);
        }
        assertHolds("b", 4, (long) n * BS);
        assertEquals(0, reserved());
    }

    @Test
    void truncatingATreeWhoseReserveRunsLowTakesNoBlock() throws Exception {
        int blocks = 1700;
        unwrittenTree("f", blocks);
        runReserveLow(blocks);
        truncateBesideReservedPages((blocks - 1L) * BS); // frees a block; before, refilled the reserve first, unpromised
    }

    @Test
    void truncatingASharedTreeWhoseReserveRunsLowTakesNoBlock() throws Exception {
        int blocks = 1700;
        unwrittenTree("f", blocks);
        try (Handle f = ns.open(root, "f")) { // its last extent written
            ns.write(f, (blocks - 10L) * BS, stamped((blocks - 10L) * BS, 10, 3));
        }
        runReserveLow(blocks);
        try (Handle f = ns.open(root, "f"); Handle d = ns.create(root, "d", 0644, true)) {
            for (int k = 0; k < 5; k++) { // every other block of f's last 10 shared: its last extent's counts alternate
                ns.cloneRange(f, (blocks - 10L + 2 * k) * BS, d, 2L * k * BS, BS);
            }
            assertEquals(DirContents.REFILL, ns.dirs.step(f.inode, 0));
        }
        // frees a run of one count at a time; before, the first run of the last extent's tail, which split it:
        // a key added, the reserve refilled first (more blocks than the 4 it frees), unpromised
        truncateBesideReservedPages((blocks - 4L) * BS);
    }

    @Test
    void treesMadeWhereFreeSpaceLiesInSingleBlocksTakeTheirBlocksFromThem() throws Exception {
        fragmented("f");
        fragmented("g");
        freeSpaceInSingleBlocks(v, root);
        try (Handle f = ns.open(root, "f")) {
            ns.write(f, 70L * BS, MemorySegment.ofArray(chunk(4, 70L * BS, BS))); // a 26th extent: a tree at write-back
            ns.fsync(f); // before: NoSpaceException, no group having 12 free blocks together for the tree
            assertEquals(26, ns.extents(f, 0, Long.MAX_VALUE).size());
            byte[] got = new byte[BS];
            ns.read(f, 70L * BS, MemorySegment.ofArray(got));
            assertArrayEquals(chunk(4, 70L * BS, BS), got);
        }
        try (Handle g = ns.open(root, "g")) {
            ns.fallocate(g, 0, 70L * BS, BS); // before: NoSpaceException likewise
            assertEquals(26, ns.extents(g, 0, Long.MAX_VALUE).size());
        }
        assertEquals(0, reserved());
    }

    @Test
    void aDirectoryGrowsIntoATreeWhereFreeSpaceLiesInSingleBlocks() throws Exception {
        Handle d = ns.mkdir(root, "d", 0755);
        try (d; Handle t = ns.create(root, "t", 0644, true)) {
            freeSpaceInSingleBlocks(v, root);
            for (int k = 0; k < 400; k++) { // links take no inode: a tree, its reserve refilled twice over
                ns.link(t, d, "a-name-long-enough-to-fill-the-inline-area-" + k);
            }
            assertEquals(400, ns.dirs.allEntries(d.ino()).size());
        }
    }

    /** The seed of {@link #directBufferedAndFallocateRacingForTheLastBlocksLoseNothing}: {@code -Dferrite.seed}, else fixed. */
    private static final long SEED = Long.getLong("ferrite.seed", 20261204L);
    /** How long its workers run. */
    private static final long RACE_MILLIS = 4_000;

    @Test
    void directBufferedAndFallocateRacingForTheLastBlocksLoseNothing() throws Exception {
        long start = free();
        try (Handle hog = ns.create(root, "hog", 0644, true)) { // about 6 MiB left: the workers fill it many times
            ns.fallocate(hog, 0, 0, (v.spareBlocks() - 1500) * BS);
        }
        long end = System.nanoTime() + RACE_MILLIS * 1_000_000;
        List<Callable<Long>> tasks = new ArrayList<>();
        for (int t = 0; t < 5; t++) {
            int id = 20 + t;
            SplittableRandom r = new SplittableRandom(SEED + t);
            tasks.add(switch (t) {
                case 0, 1 -> () -> raceBuffered(id, r, end);
                case 2, 3 -> () -> raceDirect(id, r, end);
                default -> () -> raceFallocate(id, r, end);
            });
        }
        try {
            List<Long> rounds = bounded(tasks);
            assertTrue(rounds.stream().mapToLong(Long::longValue).sum() > 0, "the workers filled the volume " + rounds + " times");
            ns.unlink(root, "hog");
            ns.sync();
            assertTrue(v.pageCache().awaitClosedFinished(10_000));
            assertEquals(0, reserved());
            assertEquals(start, free(), "free blocks after deleting every file");
        } catch (AssertionError | ExecutionException e) {
            throw new AssertionError("seed " + SEED + " (-Dferrite.seed): " + e, e);
        }
    }

    /** A worker's file {@code k}: made again after NoSpaceException, when the volume may be full for a while. */
    private Handle raceFile(int id, int k) throws InterruptedException {
        for (int tries = 0; ; tries++) {
            try {
                return ns.create(root, "r" + id + "-" + k, 0644, true);
            } catch (NoSpaceException full) {
                if (tries > 1000) {
                    throw full;
                }
                Thread.sleep(1);
            }
        }
    }

    /** Buffered appends of odd lengths until ENOSPC, then fsync (no error), the bytes checked, the file deleted: the rounds to ENOSPC. */
    private long raceBuffered(int id, SplittableRandom r, long end) throws Exception {
        long rounds = 0;
        for (int k = 0; System.nanoTime() < end; k++) {
            String name = "r" + id + "-" + k;
            try (Handle f = raceFile(id, k)) {
                for (long at = 0; System.nanoTime() < end; ) {
                    int len = 1 + r.nextInt(3 * CHUNK);
                    try {
                        ns.write(f, at, MemorySegment.ofArray(chunk(id, at, len)));
                    } catch (NoSpaceException full) {
                        rounds++;
                        break;
                    }
                    at += len;
                }
                ns.fsync(f); // every page it took had its block
            }
            assertHolds(name, id, 0);
            ns.unlink(root, name);
        }
        return rounds;
    }

    /** Direct writes of 1-16 blocks at random offsets (holes, trees) until ENOSPC; then as {@link #raceBuffered}. */
    private long raceDirect(int id, SplittableRandom r, long end) throws Exception {
        long rounds = 0;
        MemorySegment buf = buffer(16);
        for (int k = 0; System.nanoTime() < end; k++) {
            String name = "r" + id + "-" + k;
            int[] gens = new int[1024]; // each block's last acknowledged generation; -1: a failed write's, unknown
            try (Handle f = raceFile(id, k)) {
                for (int gen = 1; System.nanoTime() < end; gen++) {
                    int n = 1 + r.nextInt(16), at = r.nextInt(gens.length - n);
                    MemorySegment m = buf.asSlice(0, (long) n * BS);
                    for (long w = 0; w < m.byteSize(); w += 8) {
                        m.set(U64, w, ((long) at * BS + w) << 16 | gen);
                    }
                    try {
                        ns.write(f, (long) at * BS, m);
                        Arrays.fill(gens, at, at + n, gen);
                    } catch (NoSpaceException full) {
                        Arrays.fill(gens, at, at + n, -1);
                        rounds++;
                        break;
                    }
                }
                ns.fsync(f);
                MemorySegment one = buffer(1);
                for (int b = 0; b < gens.length; b++) {
                    if (gens[b] >= 0 && (long) b * BS < ns.stat(f).size()) {
                        ns.read(f, (long) b * BS, one);
                        assertStamped(one, (long) b * BS, gens[b]);
                    }
                }
            }
            ns.unlink(root, name);
        }
        return rounds;
    }

    /** Fallocates, zero ranges and punches at random until ENOSPC (the file reads zeros all along); then as {@link #raceBuffered}. */
    private long raceFallocate(int id, SplittableRandom r, long end) throws Exception {
        long rounds = 0;
        int[] modes = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE};
        for (int k = 0; System.nanoTime() < end; k++) {
            String name = "r" + id + "-" + k;
            try (Handle f = raceFile(id, k)) {
                while (System.nanoTime() < end) {
                    long at = r.nextLong(4L << 20), len = 1 + r.nextLong(256L << 10);
                    try {
                        ns.fallocate(f, modes[r.nextInt(modes.length)], at, len);
                    } catch (NoSpaceException full) {
                        rounds++;
                        break;
                    }
                }
                ns.fsync(f);
                long size = ns.stat(f).size();
                byte[] got = new byte[(int) Math.min(size, 8L << 20)];
                ns.read(f, 0, MemorySegment.ofArray(got));
                for (int b = 0; b < got.length; b++) {
                    if (got[b] != 0) {
                        fail(name + " reads " + got[b] + " at " + b + ", never written");
                    }
                }
            }
            ns.unlink(root, name);
        }
        return rounds;
    }
}
