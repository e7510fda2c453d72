package dev.ferrite.dir;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice.Op;
import dev.ferrite.io.testkit.RecordingDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Freeing an orphaned tree directory reads its tree's blocks; that must not happen while the block
 * holding its inode record is locked, since other inodes' records share that block. The test orphans a
 * tree directory whose tree is no longer cached (a cache of 64 frames, churned by another directory),
 * stalls the device's reads, and lets the last close free it: once that close waits for a read, a stat
 * of a file whose record shares the block must still finish.
 */
class OrphanDestroyTest {
    private static final long READER_BOUND_MS = 3_000;

    @Test
    void aStatOfANeighbourIsNotBlockedWhileAnOrphanTreeIsRead() throws Exception {
        VolumeOptions options = VolumeOptions.defaults().withAgCount(1).withCacheBytes(64 * 4096);
        try (RecordingDevice dev = RecordingDevice.wrap(MemoryDevice.create(16384, 4096))) {
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options)) {
                Namespace ns = v.namespace();
                long big = ns.mkdir("/big", 0755);
                long sib = ns.create("/sib", 0644, true);
                assertEquals(v.geometry().inodeBlock(big), v.geometry().inodeBlock(sib), "records in one block");
                for (int i = 0; i < 400; i++) { // a tree of several leaves
                    ns.create("/big/f" + i, 0644, true);
                }
                for (int i = 0; i < 400; i++) {
                    ns.unlink("/big/f" + i);
                }
                Handle orphan = ns.open("/big");
                ns.rmdir("/big");
                ns.mkdir("/churn", 0755);
                for (int i = 0; i < 3000; i++) { // pushes the orphan's tree out of the cache
                    ns.create("/churn/f" + i, 0644, true);
                }
                v.quiesce();
                try (Handle neighbour = ns.open("/sib")) {
                    ns.stat(neighbour); // its record's block (the orphan's too) is cached now
                    dev.stall(Op.READ);
                    Thread closer = Thread.ofPlatform().daemon().name("last-close").start(orphan::close);
                    try {
                        awaitStalledTreeRead(closer, dev);
                        long readsBefore = dev.issued(Op.READ);
                        CompletableFuture<Void> read = CompletableFuture.runAsync(() -> ns.stat(neighbour),
                                r -> Thread.ofPlatform().daemon().name("neighbour-stat").start(r));
                        try {
                            read.get(READER_BOUND_MS, TimeUnit.MILLISECONDS);
                        } catch (TimeoutException e) {
                            fail("a stat of inode " + sib + " waited over " + READER_BOUND_MS
                                    + " ms while the orphan's tree was read (" + v.diagnostics() + ")");
                        } catch (ExecutionException e) {
                            throw new AssertionError("the stat failed", e.getCause());
                        }
                        assertEquals(readsBefore, dev.issued(Op.READ), "the stat needed no read");
                    } finally {
                        dev.resume(Op.READ);
                    }
                    closer.join(TimeUnit.SECONDS.toMillis(30));
                    assertFalse(closer.isAlive(), "the last close did not finish");
                }
                VolumeFixtures.assertChecked(ns);
            }
        }
    }

    /**
     * Waits (bounded) until {@code t} waits at the device's read stall inside the tree's destroy; a read
     * it stalls at before that (freeing the directory's block reserve) is let through.
     */
    private static void awaitStalledTreeRead(Thread t, RecordingDevice dev) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            boolean stalled = false, inDestroy = false;
            for (StackTraceElement e : t.getStackTrace()) {
                stalled |= e.getMethodName().equals("awaitStall");
                inDestroy |= e.getClassName().equals("dev.ferrite.btree.internal.BTree") && e.getMethodName().equals("destroy");
            }
            if (stalled && inDestroy) {
                return;
            }
            if (stalled) {
                // let this read through, and no other: wait until it has passed before looking again
                long passed = dev.issued(Op.READ);
                dev.releaseHeld(Op.READ);
                while (dev.issued(Op.READ) == passed && t.isAlive() && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
            }
            if (!t.isAlive()) {
                fail("the last close freed the orphan without reading its tree: the tree stayed cached");
            }
            Thread.onSpinWait();
        }
        fail("the last close never came to read the orphan's tree");
    }
}
