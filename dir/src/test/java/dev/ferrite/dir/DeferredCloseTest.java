package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.RecordingDevice;
import org.junit.jupiter.api.Test;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The last close of a file with dirty cached pages does no I/O: the write-back thread writes it back
 * after the close delay and trims it then; an unlinked file's pages are never written; a failure of that
 * write-back reaches the file's next fsync; unmount writes deferred files back.
 */
class DeferredCloseTest extends FileTestBase {
    private RecordingDevice rec;

    @Override
    BlockDevice device(MemoryDevice formatted) {
        return rec = RecordingDevice.wrap(formatted);
    }

    private PageCache cache() {
        return v.pageCache();
    }

    private static MemorySegment bytes(int n, int value) {
        byte[] b = new byte[n];
        Arrays.fill(b, (byte) value);
        return MemorySegment.ofArray(b);
    }

    private byte[] read(String name, int n) {
        try (Handle f = ns.open(root, name)) {
            byte[] b = new byte[n];
            assertEquals(n, ns.read(f, 0, MemorySegment.ofArray(b)));
            return b;
        }
    }

    private void awaitFinished() throws InterruptedException {
        assertTrue(cache().awaitClosedFinished(10_000), "no deferred write-back within 10 s: " + cache().stats());
    }

    @Test
    void theLastCloseReturnsWithoutWritingAndTheWriteBackThreadWritesTheFileLater() throws InterruptedException {
        long free = v.statfs().freeBlocks();
        Handle f = ns.create(root, "f", 0644, true);
        ns.write(f, 0, bytes(3 * BS + 100, 7));
        rec.stall(RecordingDevice.Op.WRITE);
        try {
            f.close(); // a write-back on this thread would wait for the stalled device (and fail with EIO after a minute)
            assertEquals(0, cache().stats().writtenBack(), "the close wrote back");
        } finally {
            rec.resume(RecordingDevice.Op.WRITE);
        }
        assertArrayEquals(bytes(3 * BS + 100, 7).toArray(JAVA_BYTE), read("f", 3 * BS + 100));
        awaitFinished();
        assertEquals(4, cache().stats().writtenBack());
        assertEquals(0, cache().stats().dirtyPages());
        assertEquals(free - 4, v.statfs().freeBlocks(), "the speculative blocks the write-back took were trimmed after it");
        assertEquals(3 * BS + 100, ns.stat("/f").size());
        assertArrayEquals(bytes(3 * BS + 100, 7).toArray(JAVA_BYTE), read("f", 3 * BS + 100));
    }

    @Test
    void anUnlinkedFilesPagesAreNeverWritten() throws InterruptedException {
        long free = v.statfs().freeBlocks();
        Handle a = ns.create(root, "open", 0644, true);
        ns.write(a, 0, bytes(5 * BS, 1));
        ns.unlink(root, "open");
        a.close(); // the orphan's last close: freed, its pages dropped
        try (Handle b = ns.create(root, "closed", 0644, true)) {
            ns.write(b, 0, bytes(5 * BS, 2));
        }
        ns.unlink(root, "closed"); // well within the close delay: freed with its pages unwritten
        assertTrue(cache().awaitClosedFinished(0), "freeing it took it off the queue of closed files");
        awaitFinished();
        assertEquals(0, cache().stats().writtenBack(), "pages of deleted files were written: " + cache().stats());
        assertEquals(0, cache().stats().dirtyPages());
        assertEquals(free, v.statfs().freeBlocks());
    }

    @Test
    void aBurstOfLastClosesWakesTheWriteBackThreadOnlyForTheFirstToFallDue() throws InterruptedException {
        int files = 200;
        long start = System.nanoTime();
        for (int k = 0; k < files; k++) {
            try (Handle f = ns.create(root, "f" + k, 0644, true)) {
                ns.write(f, 0, bytes(100, k)); // a file's first dirty page, then its deferred last close
            }
        }
        long wakeups = cache().stats().wakeups();
        long elapsedMillis = (System.nanoTime() - start) / 1_000_000;
        assumeTrue(elapsedMillis < PageCache.CLOSE_DELAY_MILLIS / 2, "the burst took " + elapsedMillis + " ms: files fell due in it");
        // the first close moves the thread's wake-up from the first page's expiry to its close delay; nothing later is due sooner
        assertTrue(wakeups <= 2, "the write-back thread woke " + wakeups + " times for " + files + " closes, none due: " + cache().stats());
        awaitFinished();
        assertEquals(files, cache().stats().writtenBack());
        for (int k = 0; k < files; k += 37) {
            assertArrayEquals(bytes(100, k).toArray(JAVA_BYTE), read("f" + k, 100));
        }
    }

    @Test
    void aFailedDeferredWriteBackReachesTheNextFsyncOfTheFile() throws InterruptedException {
        try (Handle hog = ns.create(root, "hog", 0644, true)) {
            // every free block goes to another file, kept past its end (PREALLOC: never reclaimed)
            // reservations unbounded: the write-back meets the full volume, not the write; and the fill takes what
            // the spare count leaves out too (the set-aside pool, the trees' share of each claim)
            v.counters().setSpare(() -> Long.MAX_VALUE);
            takeAllSpace(hog);
            try (Handle f = ns.create(root, "f", 0644, true)) {
                for (int k = 0; k < 8; k++) {
                    ns.write(f, 2L * k * BS + 1, bytes(1, 5));
                }
            } // no error yet: the write-back comes after
            awaitFinished();
            try (Handle g = ns.open(root, "f")) {
                assertThrows(NoSpaceException.class, () -> ns.fsync(g));
                ns.fsync(g); // reported once
            }
            assertEquals(0, cache().stats().dirtyPages());
            ns.truncate(hog, 0);
        }
    }

    @Test
    void unmountWritesDeferredFilesBackAndTrimsThem() {
        long free = v.statfs().freeBlocks();
        for (int k = 0; k < 4; k++) {
            try (Handle f = ns.create(root, "f" + k, 0644, true)) {
                ns.write(f, 0, bytes(2 * BS + k, k + 1));
            }
        }
        root.close();
        v.close(); // well within the close delay
        v = Volume.open(rec, options());
        ns = v.namespace();
        root = ns.openRoot();
        for (int k = 0; k < 4; k++) {
            assertArrayEquals(bytes(2 * BS + k, k + 1).toArray(JAVA_BYTE), read("f" + k, 2 * BS + k));
        }
        assertEquals(free - (2 + 3 * 3), v.statfs().freeBlocks(), "speculative blocks left after unmount");
    }
}
