package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import dev.ferrite.io.NoSpaceException;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
            assertEquals(pages + PageCache.FILE_META_BLOCKS, reserved());
            ns.truncate(f, 60L * BS);
            assertEquals(60 + PageCache.FILE_META_BLOCKS, reserved());
            ns.fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10L * BS, 20L * BS);
            assertEquals(40 + PageCache.FILE_META_BLOCKS, reserved());
            ns.write(f, 10L * BS, MemorySegment.ofArray(chunk(3, 10L * BS, BS))); // into the hole again
            assertEquals(41 + PageCache.FILE_META_BLOCKS, reserved());
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 60L * BS); // blocks under the dirty pages: nothing left to reserve
            assertEquals(0, reserved());
            ns.truncate(f, 0);
        }
        try (Handle f = ns.create(root, "d", 0644, true)) {
            ns.write(f, 0, MemorySegment.ofArray(chunk(3, 0, pages * BS)));
        }
        ns.unlink(root, "d"); // before its deferred close wrote it back
        assertEquals(0, reserved());
    }

    /** Gives all but about 600 spare blocks to a file of fallocated blocks; returns how many pages one file can reserve less {@code margin}. */
    private int pagesLeaving(int margin) {
        try (Handle hog = ns.create(root, "hog", 0644, true)) {
            ns.fallocate(hog, 0, 0, (v.spareBlocks() - 600) * BS);
        }
        return (int) (v.spareBlocks() - PageCache.FILE_META_BLOCKS - margin);
    }

    @Test
    void theSpaceOfAnUnlinkedFilesReservationsIsUsableAtOnce() throws Exception {
        int n = pagesLeaving(20);
        try (Handle b = ns.create(root, "b", 0644, true)) {
            ns.write(b, 0, MemorySegment.ofArray(chunk(4, 0, n * BS)));
            assertEquals(n + PageCache.FILE_META_BLOCKS, reserved());
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
            assertEquals(0, reserved());
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
}
