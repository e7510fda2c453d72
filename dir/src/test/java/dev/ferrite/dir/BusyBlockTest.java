package dev.ferrite.dir;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Blocks freed and allocated again before any checkpoint: every allocator of the namespace (a
 * directory's block reserve, the groups' free lists and free-space trees, inode chunks) must skip blocks
 * whose free is not yet in a checkpoint, or recovery could apply the free over the new contents (the
 * buffer cache refuses such a block). The log is large, so nothing is checkpointed unless forced.
 */
class BusyBlockTest {
    private static final VolumeOptions OPTIONS = VolumeOptions.defaults().withAgCount(1).withCacheBytes(64L << 20)
            .withLogBlocks(8192);

    /** A directory tree shrinks and grows again, then a removed directory's blocks go to a new one. */
    @Test
    void directoriesShrinkAndGrowWithoutACheckpoint() {
        try (MemoryDevice dev = MemoryDevice.create(32_768, 4096)) {
            Volume.format(dev, OPTIONS);
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                fill(ns, "/d", 0, 4000);
                ns.sync();
                for (int round = 0; round < 4; round++) {
                    unlinkRange(ns, "/d", 0, 3600);
                    fill(ns, "/d", 0, 3600);
                }
                unlinkRange(ns, "/d", 0, 4000);
                ns.rmdir("/d");
                ns.mkdir("/e", 0755);
                fill(ns, "/e", 0, 4000);
                assertEquals(4000, ns.stat("/e").size());
                VolumeFixtures.assertChecked(ns);
            }
            try (Volume v = Volume.open(dev, OPTIONS)) {
                assertEquals(4000, v.namespace().stat("/e").size());
                VolumeFixtures.assertChecked(v.namespace());
            }
        }
    }

    /** One thread frees what another allocates in the same group: the group's trees give nodes back and take them. */
    @Test
    void blocksFreedByOneThreadAndAllocatedByAnother() throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(32_768, 4096)) {
            Volume.format(dev, OPTIONS);
            ExecutorService pool = Executors.newFixedThreadPool(2);
            try (Volume v = Volume.open(dev, OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/a", 0755);
                ns.mkdir("/b", 0755);
                fill(ns, "/a", 0, 3000);
                ns.sync();
                for (int round = 0; round < 3; round++) {
                    String from = round % 2 == 0 ? "/a" : "/b", to = round % 2 == 0 ? "/b" : "/a";
                    CompletableFuture<Void> freeing = CompletableFuture.runAsync(() -> unlinkRange(ns, from, 0, 3000), pool);
                    CompletableFuture<Void> allocating = CompletableFuture.runAsync(() -> fill(ns, to, 0, 3000), pool);
                    freeing.get(60, TimeUnit.SECONDS);
                    allocating.get(60, TimeUnit.SECONDS);
                }
                VolumeFixtures.assertChecked(ns);
            } finally {
                pool.shutdownNow();
            }
            try (Volume v = Volume.open(dev, OPTIONS)) {
                assertEquals(3000, v.namespace().stat("/b").size());
                VolumeFixtures.assertChecked(v.namespace());
            }
        }
    }

    private static void fill(Namespace ns, String dir, int from, int to) {
        try (Handle d = ns.open(dir)) {
            for (int i = from; i < to; i++) {
                ns.create(d, "entry-with-a-longer-name-" + i, 0644, true).close();
            }
        }
    }

    private static void unlinkRange(Namespace ns, String dir, int from, int to) {
        try (Handle d = ns.open(dir)) {
            for (int i = from; i < to; i++) {
                ns.unlink(d, "entry-with-a-longer-name-" + i);
            }
        }
    }
}
