package dev.ferrite.dir;

import java.time.Duration;
import java.util.Random;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

/**
 * Write transactions whose blocks stay in the buffer cache until their group ends: every block a group's
 * context logs stays dirty, not evictable, until the context's checkpoint, which waits for the group. On
 * the volume {@code bench kv} makes (a 64 MiB log, whose contexts grow to 8 MiB before a push) with an
 * 8 MiB cache (2,048 frames), a context could hold the whole cache when a group began on it, or a group's
 * own blocks could fill it: its holder then waited for a frame that only its own context's push could free,
 * the push waited 30 s for the group, and the volume shut down ("CIL context 1 stayed pinned by 1
 * group(s) for 30000 ms"), in the NONE batches of 1,000 random keys that fill the table here. Now a group
 * starts on a context holding at most an eighth of the frames and stops, undone, once its context holds
 * three quarters of them.
 */
@ExtendWith(TestSeed.class)
class TableCacheFullTest {
    private static final long SEED = TestSeed.get(17);
    private static final VolumeOptions OPTIONS = VolumeOptions.defaults().withAgCount(4).withLogBlocks(16384).withCacheBytes(8L << 20);
    private static final int BATCH = 1000;

    /**
     * 100 batches of 1,000 random 16-byte keys with 100-byte values (NONE), then five SYNC ones: all
     * commit, in time, and the table holds every key.
     */
    @Test
    void batchesOfAThousandRandomKeysCommitOnAnEightMiBCache() {
        Random r = new Random(SEED);
        try (Volume v = Volume.open(formatted(), OPTIONS); Table t = v.tables().create("t")) {
            assertTimeoutPreemptively(Duration.ofSeconds(120), () -> {
                fill(v, t, r);
                for (int b = 0; b < 5; b++) {
                    batch(v, t, r, Durability.SYNC, BATCH, 100);
                }
            }, "a batch hung (seed " + SEED + ")");
            assertEquals(105 * BATCH, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A batch of 1,000 random keys with 1 KiB values over 100,000 keys splits about a leaf a key: more
     * blocks than three quarters of the cache. It is refused TOO_LARGE, in time, having changed nothing;
     * batches of 100 such keys then commit.
     */
    @Test
    void aBatchWhoseBlocksWouldFillTheCacheIsRefusedHavingChangedNothing() {
        Random r = new Random(SEED);
        try (Volume v = Volume.open(formatted(), OPTIONS); Table t = v.tables().create("t")) {
            assertTimeoutPreemptively(Duration.ofSeconds(120), () -> {
                fill(v, t, r);
                TableException e = assertThrows(TableException.class, () -> batch(v, t, r, Durability.SYNC, BATCH, 1024));
                assertEquals(TableException.Kind.TOO_LARGE, e.kind(), e.getMessage());
                assertEquals(100 * BATCH, t.count(), "nothing of the refused batch is left");
                for (int b = 0; b < 10; b++) {
                    batch(v, t, r, Durability.SYNC, BATCH / 10, 1024);
                }
            }, "a batch hung (seed " + SEED + ")");
            assertEquals(101 * BATCH, t.count());
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    private static MemoryDevice formatted() {
        MemoryDevice dev = MemoryDevice.create(65536, 4096);
        Volume.format(dev, OPTIONS);
        return dev;
    }

    /** 100 NONE batches of 1,000 random keys with 100-byte values: where the base hung. */
    private static void fill(Volume v, Table t, Random r) {
        for (int b = 0; b < 100; b++) {
            batch(v, t, r, Durability.NONE, BATCH, 100);
        }
    }

    private static void batch(Volume v, Table t, Random r, Durability d, int keys, int valueBytes) {
        try (WriteTransaction tx = v.begin(d)) {
            for (int i = 0; i < keys; i++) {
                byte[] k = new byte[16], value = new byte[valueBytes];
                r.nextBytes(k);
                r.nextBytes(value);
                tx.put(t, k, value);
            }
            tx.commit();
        }
    }
}
