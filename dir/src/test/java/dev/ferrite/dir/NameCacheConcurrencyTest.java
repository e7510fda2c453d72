package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertChecked;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Walkers resolving paths through the name cache while writers create, unlink, rename and exchange files
 * and rename directories under them. The writers take turns (a lock of the test's), so the namespace's
 * history is a sequence of states, each written down with the times its change began and returned; a
 * walker writes down what each walk answered and when it ran. The checker then finds for every walk
 * states it could have read in order — the directory's name in one, the file's in the same or a later
 * one — all within the walk's time: a cached entry kept past its name's unlink or rename, or an inode
 * number found again under a name it had lost, answers with a state no walk could have read.
 *
 * <p>{@code -Dferrite.seed=N} fixes the writers' and walkers' choices, not how they interleave.
 */
@ExtendWith(TestSeed.class)
class NameCacheConcurrencyTest {
    private static final long SEED = TestSeed.get(21);
    /** Directory names, of which {@link #DIR_INODES} directories hold all but one, and file names in each. */
    private static final int DIR_SLOTS = 4, DIR_INODES = 3, FILE_SLOTS = 10;
    /** A state: the inode of each directory name, then of each file name of each directory inode (0: none). */
    private static final int STATE = DIR_SLOTS + DIR_INODES * FILE_SLOTS;
    /** Walks a walker writes down at most (28 bytes each). */
    private static final int MAX_WALKS = 2_000_000;

    @Test
    void walksAnswerWithAStateTheNamespaceWasIn() throws Exception {
        run(2, 3, 3_000);
    }

    @Test
    @Tag("stress")
    void moreWalkersLonger() throws Exception {
        run(2, 6, 30_000);
    }

    private static void run(int writers, int walkers, int changes) throws Exception {
        // a small cache, so that evictions and collisions happen too
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS.withNameCacheEntries(64))) {
            Namespace ns = v.namespace();
            long[] dirInode = new long[DIR_INODES];
            long[] state = new long[STATE];
            for (int d = 0; d < DIR_INODES; d++) {
                dirInode[d] = state[d] = ns.mkdir("/d" + d, 0755);
            }
            History history = new History(changes + 1);
            history.add(Long.MIN_VALUE, Long.MIN_VALUE, state);
            ReentrantLock turn = new ReentrantLock();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicBoolean done = new AtomicBoolean();
            int[] left = {changes};
            // the writers wait for the walkers to start: on a loaded machine they could otherwise finish first
            CountDownLatch walking = new CountDownLatch(walkers);
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                Random rnd = new Random(SEED * 31 + w);
                threads.add(Thread.ofPlatform().name("name-writer-" + w).start(() -> {
                    try {
                        walking.await();
                        while (failure.get() == null) {
                            turn.lock();
                            try {
                                if (left[0]-- <= 0) {
                                    return;
                                }
                                long began = System.nanoTime();
                                change(ns, rnd, state, dirInode);
                                history.add(began, System.nanoTime(), state);
                            } finally {
                                turn.unlock();
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            List<Walks> walks = new ArrayList<>();
            for (int r = 0; r < walkers; r++) {
                Random rnd = new Random(SEED * 37 + r);
                Walks mine = new Walks();
                walks.add(mine);
                threads.add(Thread.ofPlatform().name("name-walker-" + r).start(() -> {
                    try {
                        walking.countDown();
                        while (!done.get() && failure.get() == null && mine.n < MAX_WALKS) {
                            int d = rnd.nextInt(DIR_SLOTS), f = rnd.nextInt(FILE_SLOTS + 1); // FILE_SLOTS: the directory itself
                            String path = "/d" + d + (f == FILE_SLOTS ? "" : "/f" + f);
                            long began = System.nanoTime();
                            long ino; // not statIfExists: its stat of an inode freed after the walk found it misses too
                            try {
                                ino = ns.lookup(path);
                            } catch (NamespaceException e) {
                                if (e.errno() != Errno.ENOENT) {
                                    throw e;
                                }
                                ino = 0;
                            }
                            mine.add(d, f, ino, began, System.nanoTime());
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            for (int w = 0; w < writers; w++) {
                threads.get(w).join();
            }
            done.set(true);
            for (Thread t : threads) {
                t.join();
            }
            if (failure.get() != null) {
                throw new AssertionError("seed " + SEED, failure.get());
            }
            long checked = 0;
            for (Walks m : walks) {
                for (int i = 0; i < m.n; i++) {
                    history.requireConsistent(m, i, dirInode);
                }
                checked += m.n;
            }
            assertTrue(checked > 0, "no walks ran");
            for (int d = 0; d < DIR_SLOTS; d++) { // the final state is the namespace's, walked once more
                for (int f = 0; f <= FILE_SLOTS; f++) {
                    String path = "/d" + d + (f == FILE_SLOTS ? "" : "/f" + f);
                    StatBuffer sb = new StatBuffer();
                    long ino = ns.statIfExists(path, sb) ? sb.ino() : 0;
                    assertEquals(expected(history.last(), d, f, dirInode), ino, path + ", seed " + SEED);
                }
            }
            assertChecked(ns);
        }
    }

    /** One writer's change, applied to the namespace and to {@code state}. */
    private static void change(Namespace ns, Random rnd, long[] state, long[] dirInode) {
        int op = rnd.nextInt(10);
        if (op == 0) { // a directory renamed to the name that is free: its files' entries stay, its own goes
            int from = rnd.nextInt(DIR_SLOTS), to = free(state);
            if (state[from] != 0) {
                ns.rename("/d" + from, "/d" + to);
                state[to] = state[from];
                state[from] = 0;
            }
            return;
        }
        int d = rnd.nextInt(DIR_INODES), f = rnd.nextInt(FILE_SLOTS);
        String path = "/d" + slotOf(state, dirInode[d]) + "/f" + f;
        int at = DIR_SLOTS + d * FILE_SLOTS + f;
        if (state[at] == 0) {
            if (op < 6) {
                state[at] = ns.create(path, 0644, true);
            }
            return;
        }
        int e = rnd.nextInt(DIR_INODES), g = rnd.nextInt(FILE_SLOTS);
        String other = "/d" + slotOf(state, dirInode[e]) + "/f" + g;
        int to = DIR_SLOTS + e * FILE_SLOTS + g;
        if (op < 4) {
            ns.unlink(path);
            state[at] = 0;
        } else if (op < 7 && at != to) { // the target, if any, replaced and its inode freed for reuse
            ns.rename(path, other);
            state[to] = state[at];
            state[at] = 0;
        } else if (state[to] != 0 && at != to) {
            ns.rename(path, other, RenameMode.EXCHANGE);
            long t = state[to];
            state[to] = state[at];
            state[at] = t;
        }
    }

    private static int free(long[] state) {
        for (int s = 0; s < DIR_SLOTS; s++) {
            if (state[s] == 0) {
                return s;
            }
        }
        throw new IllegalStateException("no free directory name");
    }

    private static int slotOf(long[] state, long dir) {
        for (int s = 0; s < DIR_SLOTS; s++) {
            if (state[s] == dir) {
                return s;
            }
        }
        throw new IllegalStateException("directory " + dir + " has no name");
    }

    /** What path {@code /d<d>[/f<f>]} names in {@code state}, as one atomic walk would find. */
    private static long expected(long[] state, int d, int f, long[] dirInode) {
        long dir = state[d];
        return dir == 0 || f == FILE_SLOTS ? dir : fileIn(state, dir, f, dirInode);
    }

    private static long fileIn(long[] state, long dir, int f, long[] dirInode) {
        for (int i = 0; ; i++) {
            if (dirInode[i] == dir) {
                return state[DIR_SLOTS + i * FILE_SLOTS + f];
            }
        }
    }

    /** A walker's answers: the path's slots, the inode found (0: ENOENT), and when the walk began and ended. */
    private static final class Walks {
        int n;
        int[] path = new int[1 << 12];
        long[] ino = new long[1 << 12], began = new long[1 << 12], ended = new long[1 << 12];

        void add(int d, int f, long found, long t0, long t1) {
            if (n == ino.length) {
                path = Arrays.copyOf(path, n * 2);
                ino = Arrays.copyOf(ino, n * 2);
                began = Arrays.copyOf(began, n * 2);
                ended = Arrays.copyOf(ended, n * 2);
            }
            path[n] = d * (FILE_SLOTS + 1) + f;
            ino[n] = found;
            began[n] = t0;
            ended[n] = t1;
            n++;
        }
    }

    /** The states, each with the times its change began and returned (the first: the start). */
    private static final class History {
        private final long[][] states;
        private final long[] began, returned;
        private int n;

        History(int capacity) {
            states = new long[capacity][];
            began = new long[capacity];
            returned = new long[capacity];
        }

        void add(long t0, long t1, long[] state) {
            states[n] = state.clone();
            began[n] = t0;
            returned[n] = t1;
            n++;
        }

        long[] last() {
            return states[n - 1];
        }

        /**
         * Walk {@code i} of {@code w} read states the namespace was in during it: state k lasted from its
         * change's beginning to the return of the next change, so the walk may have read the states from the
         * one the namespace was in when it began to the last whose change began before it ended; the
         * directory's name in one of them and the file's in the same or a later one.
         */
        void requireConsistent(Walks w, int i, long[] dirInode) {
            long t0 = w.began[i], t1 = w.ended[i];
            int lo = 0, hi = n - 1; // first: the least k whose next change returned at t0 or later
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (returned[mid + 1] < t0) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            int first = lo;
            int last = first;
            while (last + 1 < n && began[last + 1] <= t1) {
                last++;
            }
            int d = w.path[i] / (FILE_SLOTS + 1), f = w.path[i] % (FILE_SLOTS + 1);
            long found = w.ino[i];
            for (int k = first; k <= last; k++) {
                long dir = states[k][d];
                if (dir == 0 || f == FILE_SLOTS) {
                    if (found == dir) {
                        return;
                    }
                    continue;
                }
                for (int j = k; j <= last; j++) {
                    if (fileIn(states[j], dir, f, dirInode) == found) {
                        return;
                    }
                }
            }
            StringBuilder seen = new StringBuilder();
            for (int k = first; k <= last; k++) {
                seen.append(' ').append(expected(states[k], d, f, dirInode));
            }
            fail("a walk of /d" + d + (f == FILE_SLOTS ? "" : "/f" + f) + " found " + found + ", where the namespace's states"
                    + " during it (changes " + first + " to " + last + ") held:" + seen + "; seed " + SEED);
        }
    }
}
