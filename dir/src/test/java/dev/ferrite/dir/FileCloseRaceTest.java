package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import dev.ferrite.io.Errno;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An operation that passed its handle's EBADF check while the last close of its unlinked file frees the
 * inode, and a new file takes the freed slot, before the operation takes the I/O lock: it must fail with
 * EBADF and leave the new file alone.
 */
class FileCloseRaceTest extends FileTestBase {
    @Test
    void aWriteRacingTheLastCloseDoesNotWriteIntoTheSlotsNextFile() throws Exception {
        raceWithLastClose(a -> ns.write(a, 0, stamped(0, 1, 2)));
    }

    @Test
    void aReadRacingTheLastCloseDoesNotReadTheSlotsNextFile() throws Exception {
        MemorySegment r = buffer(1);
        raceWithLastClose(a -> ns.read(a, 0, r));
        assertStamped(r, 0, 0);
    }

    @Test
    void anAppendRacingTheLastCloseDoesNotExtendTheSlotsNextFile() throws Exception {
        raceWithLastClose(a -> ns.append(a, stamped(BS, 1, 2)));
    }

    @Test
    void aTruncateOrPunchRacingTheLastCloseDoesNotFreeTheSlotsNextFilesBlocks() throws Exception {
        raceWithLastClose(a -> ns.truncate(a, 0));
        raceWithLastClose(a -> ns.fallocate(a, Namespace.FALLOC_FL_KEEP_SIZE | Namespace.FALLOC_FL_PUNCH_HOLE, 0, BS));
    }

    /**
     * Holds {@code op} on unlinked file {@code a} between its handle check and its I/O lock while {@code a}'s
     * last handle closes (freeing it) and file {@code b} is created in its slot and written; then lets it go.
     */
    private void raceWithLastClose(Consumer<Handle> op) throws Exception {
        long start = free();
        Handle a = ns.create(root, "a", 0644, true);
        ns.write(a, 0, stamped(0, 1, 1));
        ns.unlink(root, "a");
        CountDownLatch checked = new CountDownLatch(1), go = new CountDownLatch(1);
        ns.files.beforeIoLock = () -> {
            checked.countDown();
            try {
                assertTrue(go.await(60, TimeUnit.SECONDS));
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        };
        Throwable[] failed = new Throwable[1];
        Thread t = new Thread(() -> {
            try {
                op.accept(a);
            } catch (Throwable e) {
                failed[0] = e;
            }
        }, "racing-op");
        t.start();
        try {
            assertTrue(checked.await(60, TimeUnit.SECONDS), "the operation reached its I/O lock");
            ns.files.beforeIoLock = null;
            a.close();
            assertEquals(start, free(), "the last close freed the orphan");
        } catch (Throwable e) {
            go.countDown();
            throw e;
        }
        Handle b = ns.create(root, "b", 0644, true);
        try {
            assertEquals(a.ino(), b.ino(), "the new file takes the freed inode's slot");
            ns.write(b, 0, stamped(0, 1, 3));
            go.countDown();
            t.join(60_000);
            assertTrue(!t.isAlive(), "the operation finished");
            assertEquals(BS, ns.stat(b).size(), "the new file's size");
            MemorySegment r = buffer(1);
            assertEquals(BS, ns.read(b, 0, r));
            assertStamped(r, 0, 3);
            VolumeFixtures.assertChecked(ns);
            NamespaceException e = assertInstanceOf(NamespaceException.class, failed[0], "the operation on the closed handle");
            assertEquals(Errno.EBADF, e.errno(), e.getMessage());
        } finally {
            go.countDown();
            b.close();
            ns.unlink(root, "b");
        }
        assertEquals(start, free());
    }
}
