package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.journal.VolumeShutdownException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.TableBlobTest.blobFiles;
import static dev.ferrite.dir.TableBlobTest.doomedBlobFiles;
import static dev.ferrite.dir.TableBlobTest.freeCountingReserve;
import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Doomed table blobs are deleted by the background reaper ({@link ParkedThread}), not by the commit that
 * doomed them: with the reaper held back, a delete returns with its blob doomed; a sync deletes what the
 * reaper has not (its space exactly free again), except what an open snapshot may read; a check waits for
 * the deletion under way; an unmount deletes
 * what is still queued; a crash before the reaper ran leaves the doomed blob to the mount, which deletes it;
 * a sync after the journal shut down throws instead of waiting. The volume checks clean throughout.
 */
@ExtendWith(TestSeed.class)
class BlobReaperTest {
    private static final long SEED = TestSeed.get(17);
    private static final int BLOB = Table.MAX_MEDIUM + 1000;

    /**
     * Holds the reaper back, before each blob, until it is stopped (the unmount): waits on that condition,
     * woken by the stop; a blob doomed after this returns is not its (also for {@link TableBlobTest}).
     */
    static void holdReaper(Volume v) {
        TableBlobs blobs = v.tables().blobs;
        CountDownLatch held = new CountDownLatch(1);
        blobs.beforeReap = () -> {
            held.countDown();
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (!blobs.reaper.stopping() && System.nanoTime() < end) {
                LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(1));
            }
        };
        // a reaper still in the pass the warm-up woke it for read no hook, and would delete a blob doomed
        // from here on: woken, it ends that pass and stops in the hook before this returns
        blobs.reaper.wake();
        try {
            assertTrue(held.await(30, TimeUnit.SECONDS), "the reaper never reached its hook");
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    private static byte[] random(Random rnd, int n) {
        byte[] v = new byte[n];
        rnd.nextBytes(v);
        return v;
    }

    /** Puts and deletes {@code n} blob values once (the blob directory made and grown), syncs; returns the free blocks then. */
    private static long warmedUp(Volume v, Table t, Random rnd, int n) {
        for (int i = 0; i < n; i++) {
            t.put(b("w" + i), random(rnd, BLOB));
        }
        for (int i = 0; i < n; i++) {
            t.delete(b("w" + i));
        }
        v.sync();
        assertEquals(List.of(), blobFiles(v));
        return freeCountingReserve(v);
    }

    /** {@link #warmedUp} with two blobs, then the reaper held ({@link #holdReaper}) and {@code t}'s commits {@code SYNC}: the crash cases' start. */
    private static long warmedUpAndHeld(Volume v, Table t, Random rnd) {
        long free = warmedUp(v, t, rnd, 2);
        holdReaper(v);
        t.withDurability(Durability.SYNC);
        return free;
    }

    /** The volume's blob files are {@code n} doomed ones: live names ({@code l<id>}), their inodes flagged. */
    private static void assertDoomed(Volume v, int n) {
        List<String> files = blobFiles(v);
        assertEquals(n, files.size(), "seed " + SEED + ": " + files);
        assertTrue(files.stream().allMatch(f -> f.startsWith("l")), "seed " + SEED + ": " + files);
        assertEquals(files, doomedBlobFiles(v), "seed " + SEED);
    }

    /**
     * Puts and deletes a blob value, holds the reaper once it has taken the blob off the queue, and runs
     * {@code op} on another thread, which must wait for that deletion ({@code what} says what it did if it
     * did not); then lets the reaper go and returns what {@code op} returned.
     */
    private static <T> T waitsForTheBlobTheReaperIsDeleting(Volume v, Table t, Random rnd, Callable<T> op, String what) throws Exception {
        CountDownLatch taken = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        v.tables().blobs.whileReaping = () -> {
            if (Thread.currentThread().getName().equals("ferrite-blob-reaper")) {
                taken.countDown();
                try {
                    go.await(120, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        t.put(b("k"), random(rnd, BLOB));
        t.delete(b("k"));
        assertTrue(taken.await(60, TimeUnit.SECONDS), "the reaper took the doomed blob");
        ExecutorService other = Executors.newSingleThreadExecutor();
        try {
            Future<T> done = other.submit(op);
            // nothing is queued now, yet the blob is not deleted: op must wait for the reaper
            assertThrows(TimeoutException.class, () -> done.get(300, TimeUnit.MILLISECONDS), "seed " + SEED + ": " + what);
            go.countDown();
            return done.get(60, TimeUnit.SECONDS);
        } finally {
            go.countDown();
            other.shutdown();
        }
    }

    @Test
    void aSyncWaitsForTheBlobTheReaperIsDeleting() throws Exception {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            long free = warmedUp(v, t, rnd, 2);
            waitsForTheBlobTheReaperIsDeleting(v, t, rnd, () -> {
                v.sync();
                return null;
            }, "a sync returned while the reaper was still deleting a blob doomed before it");
            assertEquals(List.of(), blobFiles(v), "seed " + SEED);
            assertEquals(free, freeCountingReserve(v), "seed " + SEED);
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A check beside the reaper's deletion of a blob (its name, extents and inode in several transactions)
     * found the blob's blocks both its file's and free, or its inode named but without links: it waits for
     * the deletion under way (and holds the next back), as a sync does.
     */
    @Test
    void aCheckWaitsForTheBlobTheReaperIsDeleting() throws Exception {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            long free = warmedUp(v, t, rnd, 2);
            CheckReport report = waitsForTheBlobTheReaperIsDeleting(v, t, rnd, () -> v.namespace().check(),
                    "a check ran while the reaper was deleting a blob");
            assertTrue(report.clean(), "seed " + SEED + ": " + report);
            assertEquals(List.of(), blobFiles(v), "seed " + SEED);
            assertEquals(free, freeCountingReserve(v), "seed " + SEED);
        }
    }

    /**
     * A delete (or a put of a value that is not a blob) only dooms its key's blob, and a sync deletes it.
     * The doom is a flag on the blob's inode in the key's group, not a rename: two transactions (the key's
     * change, the flag), the file still named {@code l<id>}, its inode flagged {@link InodeFormat#FLAG_DOOMED},
     * the superblock marked {@link SuperblockFormat#INCOMPAT_DOOMED_BLOBS} (code that knows no such flag
     * refuses the volume). The rename to {@code d<id>} deleted a directory entry and inserted another, half
     * of the deleting thread's CPU for a 1 MiB value.
     */
    @Test
    void aDeleteOnlyFlagsItsBlobAndASyncDeletesIt() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            long free = warmedUp(v, t, rnd, 4);
            holdReaper(v);
            for (int i = 0; i < 4; i++) {
                t.put(b("k" + i), random(rnd, BLOB + i));
            }
            List<String> live = blobFiles(v);
            t.put(b("k0"), b("small now"));
            long before = v.journal().stats().commits();
            t.delete(b("k1"));
            assertEquals(2, v.journal().stats().commits() - before, "seed " + SEED + ": transactions of a blob's delete");
            for (int i = 2; i < 4; i++) {
                t.delete(b("k" + i));
            }
            assertEquals(live, blobFiles(v), "seed " + SEED + ": the doomed blobs keep their names");
            assertDoomed(v, 4); // the commits returned with their blobs doomed, not deleted
            assertTrue(v.hasIncompatFeature(SuperblockFormat.INCOMPAT_DOOMED_BLOBS));
            v.sync();
            assertEquals(List.of(), blobFiles(v), "seed " + SEED);
            t.delete(b("k0"));
            assertEquals(free, freeCountingReserve(v), "seed " + SEED + ": every blob's blocks are free after the sync");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * The reaper deletes a doomed blob under its live name only if its inode carries the doom flag: a live
     * blob's name queued by mistake is kept, and its key still reads its value. Without the look, a queue
     * gone wrong deleted the blob a key named.
     */
    @Test
    void aLiveBlobQueuedAsDoomedWithoutItsFlagIsKept() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            byte[] value = random(rnd, BLOB);
            t.put(b("k"), value);
            List<String> live = blobFiles(v);
            assertEquals(1, live.size());
            v.tables().blobs.doomed(live);
            v.sync();
            assertEquals(live, blobFiles(v), "seed " + SEED + ": kept");
            assertArrayEquals(value, t.get(b("k")), "seed " + SEED);
            t.delete(b("k")); // flagged now: the sync deletes it
            v.sync();
            assertEquals(List.of(), blobFiles(v), "seed " + SEED);
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void aSnapshotKeepsDoomedBlobsPastASyncUntilItCloses() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            warmedUp(v, t, rnd, 2);
            byte[] old = random(rnd, BLOB), next = random(rnd, BLOB);
            t.put(b("k"), old);
            long free = freeCountingReserve(v);
            try (Snapshot s = v.tables().snapshot()) {
                t.put(b("k"), next);
                t.put(b("gone"), random(rnd, BLOB));
                t.delete(b("gone"));
                v.sync();
                assertEquals(3, blobFiles(v).size(), "seed " + SEED + ": a sync leaves what a snapshot may read: " + blobFiles(v));
                assertArrayEquals(old, s.get(t, b("k")));
                assertArrayEquals(next, t.get(b("k")));
            }
            v.sync();
            assertEquals(1, blobFiles(v).size(), "seed " + SEED + ": " + blobFiles(v));
            assertEquals(free, freeCountingReserve(v), "seed " + SEED + ": the doomed blobs' blocks are free once the snapshot closed");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A wake-up during a pass whose deletion parks (as a lock's or a journal wait's park does, taking the
     * permit the wake-up left) still makes another pass. Before, the reaper then parked with the work
     * queued, until the next wake-up: {@link #holdReaper} waited 30 s for a pass that never came.
     */
    @Test
    void aWakeUpDuringAPassThatParksMakesAnotherPass() throws Exception {
        CountDownLatch letGo = new CountDownLatch(1), second = new CountDownLatch(1);
        AtomicInteger passes = new AtomicInteger();
        AtomicReference<Thread> thread = new AtomicReference<>();
        ParkedThread r = new ParkedThread("test-parked", () -> {
            if (passes.incrementAndGet() == 1) {
                thread.set(Thread.currentThread());
                try {
                    letGo.await(); // parks: a wake-up's unpark wakes it here, and it parks again
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            } else {
                second.countDown();
            }
        });
        try {
            r.wake(); // starts the thread: its first pass
            awaitParked(thread);
            r.wake(); // the second pass's wake-up, its permit taken by the latch's park
            awaitParked(thread);
            letGo.countDown();
            assertTrue(second.await(10, TimeUnit.SECONDS), "a second pass after the wake-up during the first");
        } finally {
            r.stop();
        }
    }

    /** Waits until the thread {@code t} holds has parked. */
    private static void awaitParked(AtomicReference<Thread> t) throws InterruptedException {
        Thread.sleep(20); // a wake-up just sent: let it run first
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (t.get() == null || t.get().getState() != Thread.State.WAITING) {
            assertTrue(System.nanoTime() < end, "the reaper never parked in its pass");
            Thread.sleep(1);
        }
    }

    @Test
    void anUnmountDeletesTheBlobsStillQueued() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formatted();
        long free, reserved;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            free = warmedUp(v, t, rnd, 3);
            holdReaper(v);
            for (int i = 0; i < 3; i++) {
                t.put(b("k" + i), random(rnd, BLOB));
                t.delete(b("k" + i));
            }
            assertDoomed(v, 3);
            reserved = v.statfs().reservedBlocks(); // no clone: each group's refcount tree's whole reservation
        }
        // the superblock counts the free-space trees' blocks, the reservations in them, which statfs leaves out
        assertEquals(free + reserved, superblockFreeBlocks(dev), "seed " + SEED + ": the unmount deleted the doomed blobs");
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            assertEquals(List.of(), blobFiles(v));
            assertEquals(free, freeCountingReserve(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** The free blocks a clean unmount wrote to the primary superblock (before any mount could delete blobs). */
    private static long superblockFreeBlocks(BlockDevice dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            dev.read(SuperblockFormat.PRIMARY, b);
            return SuperblockFormat.read(b).freeBlocks();
        }
    }

    /** A crash after a delete's SYNC commit, before the reaper got to its blob: the mount deletes the doomed blob. */
    @Test
    void aCrashBeforeTheReaperRanLeavesTheDoomedBlobToTheMount() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            byte[] kept = random(rnd, BLOB);
            long free;
            RecordingDevice.CrashState crash;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                free = warmedUpAndHeld(v, t, rnd);
                t.put(b("gone"), random(rnd, BLOB));
                t.put(b("kept"), kept);
                t.delete(b("gone"));
                crash = rec.crashAfterFlush(rec.flushCount() - 1); // the delete durable, the reaper held
                assertEquals(List.of("l", "l"), blobFiles(v).stream().map(f -> f.substring(0, 1)).toList(), blobFiles(v).toString());
                assertEquals(1, doomedBlobFiles(v).size(), blobFiles(v).toString());
            }
            try (MemoryDevice crashed = rec.materialize(crash); Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS);
                 Table t = v.tables().open("t")) {
                String where = "seed " + SEED + ", crash " + crash;
                assertEquals(1, blobFiles(v).size(), where + ": " + blobFiles(v));
                assertTrue(blobFiles(v).getFirst().startsWith("l"), where + ": " + blobFiles(v));
                assertEquals(List.of(), doomedBlobFiles(v), where + ": the mount deleted the flagged blob");
                assertArrayEquals(kept, t.get(b("kept")), where);
                assertNull(t.get(b("gone")), where);
                VolumeFixtures.assertChecked(v.namespace());
                t.delete(b("kept"));
                v.sync();
                assertEquals(free, freeCountingReserve(v), where + ": every blob's blocks are free again");
            }
        }
    }

    /**
     * A put replacing a blob with a blob moves the doomed flag, in one transaction of its group: the new
     * blob, made flagged as {@code l} under its own id, loses it, and the old one gains it (queued for the
     * reaper); no file is renamed. Before, the two files' names were exchanged (the new blob {@code l}
     * under the old one's id, the old one {@code p}). A crash after any flush of the replacement (a random
     * part of the next epoch's writes landed, or one torn) leaves the key's old value or its new one, one
     * live blob and no other (no flagged file, no file no key names), every block accounted for, and, once
     * the key is deleted, every blob's block free.
     */
    @Test
    void aReplacingPutMovesTheDoomedFlagAndACrashKeepsOneOfThem() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            byte[] old = random(rnd, BLOB), next = random(rnd, BLOB + 5000);
            long free;
            int before, replaced;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                free = warmedUpAndHeld(v, t, rnd);
                t.put(b("k"), old);
                List<String> live = blobFiles(v);
                before = rec.flushCount();
                t.put(b("k"), next);
                replaced = rec.flushCount();
                List<String> files = blobFiles(v);
                assertEquals(2, files.size(), files.toString());
                assertTrue(files.stream().allMatch(f -> f.startsWith("l")), "no file is renamed: " + files);
                assertEquals(live, doomedBlobFiles(v), "the old blob keeps its name and is flagged doomed: " + files);
                assertArrayEquals(next, t.get(b("k")));
            }
            assertCrashesKeepOneValue(rec, rnd, before, replaced, old, next, free);
        }
    }

    /**
     * A new blob is made {@code l<id>} with its inode flagged doomed, in its create's transaction, and a put
     * only clears the flag: a blob written but never linked is flagged in every state the device passes
     * through, so that the mount deletes it; before, it was {@code p<id>}, renamed {@code l<id>} by the
     * commit. A crash after any flush from the blob's create through its key's SYNC commit leaves the key
     * absent and no blob, or the key's value and its one live blob; every block accounted for.
     */
    @Test
    void aNewBlobIsBornFlaggedAndACrashBeforeItsCommitLeavesNone() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            byte[] value = random(rnd, BLOB + 3000);
            long free;
            int before, put;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                free = warmedUpAndHeld(v, t, rnd);
                before = rec.flushCount();
                TableValueFormat.Blob pending = v.tables().blobs.write(MemorySegment.ofArray(value));
                String name = TableBlobs.name('l', pending.id());
                assertEquals(List.of(name), blobFiles(v), "seed " + SEED);
                assertEquals(List.of(name), doomedBlobFiles(v), "seed " + SEED + ": a blob no key names is flagged from its create on");
                v.sync(); // its create and size durable, no key naming it
                v.tables().blobs.discard(pending.id());
                assertEquals(List.of(), blobFiles(v), "seed " + SEED);
                t.put(b("k"), value);
                put = rec.flushCount();
                assertEquals(1, blobFiles(v).size(), "seed " + SEED);
                assertEquals(List.of(), doomedBlobFiles(v), "seed " + SEED + ": the put cleared its blob's flag");
            }
            assertCrashesKeepOneValue(rec, rnd, before, put, null, value, free);
        }
    }

    /**
     * Mounts the crash states after flushes {@code before - 1} to {@code after} of {@code rec} (a random part
     * of the next epoch's writes landed, or one torn): key {@code k} holds {@code old} (null: absent) or
     * {@code next}, {@code next} from flush {@code after} on; exactly the blob the key names is left, not
     * flagged; the volume checks; once the key is deleted every blob's block is free ({@code free}).
     */
    private static void assertCrashesKeepOneValue(RecordingDevice rec, Random rnd, int before, int after, byte[] old, byte[] next, long free) {
        for (int k = before - 1; k <= after; k++) {
            RecordingDevice.CrashState crash = TableCrashTest.sampleAfter(rec, k, rnd);
            try (MemoryDevice crashed = rec.materialize(crash); Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS);
                 Table t = v.tables().open("t")) {
                String where = "seed " + SEED + ", crash after flush " + k + " (" + before + " to " + after + "): " + crash;
                byte[] got = t.get(b("k"));
                assertTrue(Arrays.equals(old, got) || Arrays.equals(next, got), where + ": the key holds neither value");
                if (k >= after) {
                    assertArrayEquals(next, got, where + ": the SYNC put was acknowledged");
                }
                assertEquals(got == null ? 0 : 1, blobFiles(v).size(), where + ": " + blobFiles(v));
                assertTrue(blobFiles(v).stream().allMatch(f -> f.startsWith("l")), where + ": " + blobFiles(v));
                assertEquals(List.of(), doomedBlobFiles(v), where + ": the mount deleted the flagged blobs");
                VolumeFixtures.assertChecked(v.namespace());
                t.delete(b("k"));
                v.sync();
                assertEquals(List.of(), blobFiles(v), where);
                assertEquals(free, freeCountingReserve(v), where + ": every blob's block is free again");
            }
        }
    }

    /**
     * Deleting a doomed blob whose blocks are one extent takes two transactions: the name's removal (the
     * inode an orphan), then the inode's free with its orphan record and its extent's free, where the
     * extent's free was a transaction of its own between them (three; 1 MiB values, one a replacing put).
     * A crash after any flush from the delete on (a random part of the next epoch's writes landed, or one
     * torn) leaves the blob doomed or gone, the volume consistent, and after the mount every blob's block free.
     */
    @Test
    void aDoomedBlobsExtentIsFreedWithItsInodeAndACrashLosesNoBlock() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            long free;
            int before, deleted;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
                free = warmedUpAndHeld(v, t, rnd);
                t.put(b("k"), random(rnd, 1 << 20));
                before = rec.flushCount();
                t.delete(b("k"));
                assertDoomed(v, 1);
                long commits = v.journal().stats().commits();
                v.tables().blobs.deleteDoomed();
                assertEquals(2, v.journal().stats().commits() - commits, "seed " + SEED + ": transactions of a doomed blob's deletion");
                assertEquals(List.of(), blobFiles(v), "seed " + SEED);
                v.sync();
                deleted = rec.flushCount();
                assertEquals(free, freeCountingReserve(v), "seed " + SEED + ": the blob's blocks are free");
                VolumeFixtures.assertChecked(v.namespace());
            }
            for (int k = before - 1; k <= deleted; k++) {
                RecordingDevice.CrashState crash = TableCrashTest.sampleAfter(rec, k, rnd);
                try (MemoryDevice crashed = rec.materialize(crash); Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
                    String where = "seed " + SEED + ", crash after flush " + k + " (" + before + " to " + deleted + "): " + crash;
                    VolumeFixtures.assertChecked(v.namespace());
                    assertTrue(blobFiles(v).stream().allMatch(f -> f.startsWith("l")), where + ": " + blobFiles(v));
                    try (Table t = v.tables().open("t")) {
                        t.delete(b("k"));
                    }
                    v.sync();
                    assertEquals(List.of(), blobFiles(v), where);
                    assertEquals(free, freeCountingReserve(v), where + ": every blob's blocks are free again");
                    VolumeFixtures.assertChecked(v.namespace());
                }
            }
        }
    }

    /** With the journal shut down under queued doomed blobs, a sync throws at once instead of waiting for them. */
    @Test
    void aSyncAfterTheJournalShutDownThrowsInsteadOfWaiting() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formatted();
        FaultDevice faulty = new FaultDevice(dev);
        try (Volume v = Volume.open(faulty, VolumeFixtures.OPTIONS)) {
            Table t = v.tables().create("t"); // not closed: the volume's unmount after the shutdown lets it go
            warmedUp(v, t, rnd, 2);
            t.withDurability(Durability.NONE);
            for (int i = 0; i < 4; i++) {
                t.put(b("k" + i), random(rnd, BLOB));
            }
            v.sync();
            Geometry g = v.geometry();
            faulty.failWrites(blk -> blk > g.logStart() && blk < g.dataStart(), null, Errno.EIO);
            try {
                for (int i = 0; i < 4; i++) {
                    t.delete(b("k" + i));
                }
            } catch (VolumeShutdownException e) { // the log write that failed came before the last delete
            }
            assertTimeoutPreemptively(Duration.ofSeconds(60), () -> assertThrows(VolumeShutdownException.class, v::sync),
                    "seed " + SEED);
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            assertTrue(blobFiles(v).stream().allMatch(f -> f.startsWith("l")), "seed " + SEED + ": " + blobFiles(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }
}
