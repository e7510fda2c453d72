package dev.ferrite.dir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

/**
 * {@link KeyStripes}: sets of stripes taken by several threads at once, overlapping heavily (64 stripes),
 * single stripes beside them. Each holder checks that no one else holds its stripes (mutual exclusion) and
 * every thread must finish (a wake-up lost by a holder letting go without seeing a waiter leaves a thread
 * waiting for ever: the latch's timeout fails it).
 */
class KeyStripesTest {
    private static final long SEED = Long.getLong("ferrite.seed", 17);

    @Test
    void overlappingSetsAndSingleStripesExcludeEachOtherAndAllFinish() throws Exception {
        int stripes = 64, threads = 6, rounds = 20_000;
        KeyStripes k = new KeyStripes(stripes);
        int[] owner = new int[stripes]; // 0 free, else the holder's id; read and written only by holders
        AtomicReference<String> failure = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(threads);
        List<Thread> ts = new ArrayList<>();
        for (int t = 1; t <= threads; t++) {
            int id = t;
            Thread th = new Thread(() -> {
                SplittableRandom r = new SplittableRandom(SEED * 31 + id);
                try {
                    for (int i = 0; i < rounds && failure.get() == null; i++) {
                        int[] set;
                        boolean single = id % 3 == 0;
                        if (single) {
                            set = new int[] {r.nextInt(stripes)};
                            k.lock(set[0]);
                        } else {
                            set = r.ints(1 + r.nextInt(12), 0, stripes).sorted().distinct().toArray();
                            k.lockAll(set);
                        }
                        for (int s : set) {
                            if (owner[s] != 0) {
                                failure.compareAndSet(null, "thread " + id + " took stripe " + s + " held by " + owner[s]
                                        + " (seed " + SEED + ", round " + i + ")");
                            }
                            owner[s] = id;
                        }
                        if (r.nextInt(8) == 0) {
                            Thread.yield(); // let the others come to wait on these
                        }
                        for (int s : set) {
                            owner[s] = 0;
                        }
                        if (single) {
                            k.unlock(set[0]);
                        } else {
                            k.unlockAll(set);
                        }
                    }
                } finally {
                    done.countDown();
                }
            }, "stripes-" + t);
            th.setDaemon(true);
            ts.add(th);
            th.start();
        }
        assertTrue(done.await(120, TimeUnit.SECONDS), "threads still waiting (a lost wake-up?), seed " + SEED + ": "
                + Arrays.toString(ts.stream().filter(Thread::isAlive).map(Thread::getName).toArray()));
        assertEquals(null, failure.get());
        assertTrue(k.waits() > 0, "the threads never waited for each other: the test did not contend");
    }

    /**
     * A key's stripe is the same whether it comes in a segment (a single write's) or an array (a
     * transaction's): else the two would not exclude each other on one key. Every length from empty to past
     * a few words, so each tail length meets the word loop; and keys of a table spread over the stripes as
     * random ones would (65,536 keys into 2^18 stripes fill about 57,990), a table's and the next table's apart.
     */
    @Test
    void segmentAndArrayKeysTakeOneStripeAndSpreadOverAll() {
        SplittableRandom r = new SplittableRandom(SEED);
        for (int length = 0; length <= 70; length++) {
            for (int i = 0; i < 50; i++) {
                byte[] key = new byte[length];
                r.nextBytes(key);
                long ino = r.nextLong(1, 1 << 20);
                int stripe = KeyStripes.of(ino, key);
                assertEquals(stripe, KeyStripes.of(ino, java.lang.foreign.MemorySegment.ofArray(key)), "length " + length);
                assertTrue(stripe >= 0 && stripe < KeyStripes.KEY_STRIPES);
            }
        }
        java.util.BitSet seen = new java.util.BitSet(KeyStripes.KEY_STRIPES);
        int same = 0;
        for (int i = 0; i < 1 << 16; i++) {
            byte[] key = ("user" + i).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
            seen.set(KeyStripes.of(7, key));
            if (KeyStripes.of(7, key) == KeyStripes.of(8, key)) {
                same++;
            }
        }
        assertTrue(seen.cardinality() > 56_000, seen.cardinality() + " stripes for 65,536 keys");
        assertTrue(same < 16, same + " keys share their stripe in two tables");
    }
}
