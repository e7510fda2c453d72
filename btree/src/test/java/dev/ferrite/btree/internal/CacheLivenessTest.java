package dev.ferrite.btree.internal;

import java.time.Duration;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A tree several times the cache, changed faster than the log pushes on its own: buffers are dirty (pinned
 * in the CIL, below its push threshold) long before any log-space pressure would write them home. The
 * cache must start write-back itself in time; it used to hand out only its last few clean frames, which
 * evicted a descent's own nodes from under it, and the operation never finished.
 */
@ExtendWith(TestSeed.class)
class CacheLivenessTest {
    @Test
    void randomInsertsIntoATreeLargerThanTheCacheFinish() {
        long seed = TestSeed.get(5);
        int logBlocks = 2048; // a CIL push threshold of 1 MiB: four times the cache
        try (MemoryDevice dev = MemoryDevice.create(1 + logBlocks + 1 + 4000, 4096);
             Store s = Store.format(dev, logBlocks, BufferCache.MIN_FRAMES * 4096L)) {
            Random rnd = new Random(seed);
            TreeMap<byte[], byte[]> model = Contents.empty();
            assertTimeoutPreemptively(Duration.ofSeconds(60), () -> {
                for (int i = 0; i < 6000; i++) {
                    byte[] k = Contents.random(rnd, 16, 56);
                    model.put(k, Contents.random(rnd, 0, 200));
                    s.tree.put(k, model.get(k));
                }
            }, () -> "seed " + seed + ": " + s.cache.stats() + "; journal: " + s.journal.diagnostics());
            TreeCheck c = s.tree.check();
            assertTrue(c.ok(), "seed " + seed + ": " + c);
            assertTrue(c.nodes() > 2 * s.cache.capacity(), "seed " + seed + ": the tree fits the cache: " + c);
            Contents.assertEqual(model, s.contents(), "seed " + seed);
        }
    }
}
