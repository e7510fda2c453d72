package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.testkit.TestSeed;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@ExtendWith(TestSeed.class)
class InodeCacheTest {
    private static final long SEED = TestSeed.get(3);

    @Test
    void lookupsShareOneObjectAndReclaimTakesOnlyUnreferencedOnes() {
        InodeCache c = new InodeCache(16);
        Inode a = c.acquire(42);
        assertSame(a, c.acquire(42));
        assertEquals(2, a.refs());
        List<Inode> held = new ArrayList<>();
        for (long i = 100; i < 140; i++) {
            c.release(c.acquire(i)); // unreferenced at once: reclaimable
        }
        held.add(c.acquire(1000));
        assertTrue(c.size() <= 16 + 2, "swept back under capacity: " + c.size());
        assertSame(a, c.peek(42), "a referenced inode is never reclaimed");
        assertSame(held.getFirst(), c.peek(1000));
        c.release(a);
        c.release(a);
        assertThrows(IllegalStateException.class, () -> c.release(a));
    }

    /**
     * A cache full of referenced inodes (a FUSE mount holds one per inode the kernel caches) cannot get
     * back under its capacity: each release looks at a bounded part of it, not all of it, and the
     * unreferenced inodes among the held ones are still reclaimed as the hand comes round.
     */
    @Test
    void aSweepOverReferencedInodesLooksAtABoundedPartOfTheCache() {
        InodeCache c = new InodeCache(1024);
        List<Inode> held = new ArrayList<>();
        for (long i = 1; i <= 20_000; i++) {
            held.add(c.acquire(i));
        }
        long before = c.sweepVisits();
        for (long i = 50_000; i < 50_100; i++) {
            c.release(c.acquire(i));
        }
        long perRelease = (c.sweepVisits() - before) / 100;
        assertTrue(perRelease <= InodeCache.SWEEP_VISITS, "a release's sweep looked at " + perRelease
                + " buckets and inodes of a cache of " + c.size());
        held.forEach(c::release);
        for (int n = 0; n < 1_000 && c.size() > 1024; n++) {
            c.release(c.acquire(100_000 + n));
        }
        assertTrue(c.size() <= 1024, "reclaimed as the hand came round: " + c.size());
    }

    @Test
    void missesAndEvictionsAreCounted() {
        InodeCache c = new InodeCache(16);
        Inode a = c.acquire(42);
        c.acquire(42);
        assertEquals(new InodeCacheStats(16, 1, 1, 0), c.stats(), "the second lookup hit");
        for (long i = 100; i < 140; i++) {
            c.release(c.acquire(i));
        }
        InodeCacheStats s = c.stats();
        assertEquals(41, s.misses());
        assertEquals(41 - s.cached(), s.evictions(), "every inode made and no longer cached was evicted: " + s);
        assertTrue(s.evictions() >= 40 - 16, s.toString());
        c.release(a);
        c.release(a);
    }

    @Test
    void reclaimRacingWithLookupKeepsOneLiveObjectPerInode() throws Exception {
        InodeCache c = new InodeCache(64);
        int threads = 4, keys = 512, pinned = 16;
        // objects referenced for the whole run: every lookup of their numbers must return them, however
        // hard the sweeps run over their chains
        Inode[] pins = new Inode[pinned];
        for (int k = 0; k < pinned; k++) {
            pins[k] = c.acquire(k);
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            long seed = SEED + t;
            Thread th = new Thread(() -> {
                Random rnd = new Random(seed);
                try {
                    for (int i = 0; i < 200_000; i++) {
                        int k = rnd.nextInt(keys);
                        Inode x = c.acquire(k);
                        if (x.refs() <= 0 || x.ino != k) {
                            throw new AssertionError("acquired " + x + " for inode " + k);
                        }
                        if (k < pinned && x != pins[k]) {
                            throw new AssertionError("inode " + k + " has a second live object " + x + " beside " + pins[k]);
                        }
                        c.release(x);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) {
            th.join(60_000);
            assertTrue(!th.isAlive(), "stuck, seed " + SEED);
        }
        if (failure.get() != null) {
            throw new AssertionError("seed " + SEED, failure.get());
        }
        for (int k = 0; k < pinned; k++) {
            assertEquals(1, pins[k].refs(), "inode " + k);
        }
        assertTrue(c.size() <= 64 + threads + pinned, "size " + c.size());
    }

    @Test
    void aDeadInodeIsReplacedByAFreshOne() {
        InodeCache c = new InodeCache(1);
        Inode a = c.acquire(7);
        c.release(a);
        c.release(c.acquire(8)); // over capacity: sweeps 7 and 8 away
        assertNull(c.peek(7));
        Inode b = c.acquire(7);
        assertNotSame(a, b);
        assertEquals(Inode.DEAD, a.refs());
        assertEquals(1, b.refs());
    }
}
