package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Threads creating, renaming and unlinking in a shared directory and in private ones, each keeping its
 * own names so that the end state is known exactly; a reader walking the shared directory meanwhile must
 * see every name that exists throughout its walk once and no name twice.
 *
 * <p>{@code -Dferrite.seed=N} fixes each thread's own sequence of operations, not how the threads
 * interleave: a failure may not repeat with its seed.
 */
@ExtendWith(TestSeed.class)
class NamespaceConcurrencyTest {
    private static final long SEED = TestSeed.get(11);
    @Test
    void createsRenamesAndUnlinksLoseAndDuplicateNothing() throws Exception {
        run(4, 20_000);
    }

    /** Twice the threads, each running three times the default's operations (six times the total). */
    @Test
    @Tag("stress")
    void eightThreadsLonger() throws Exception {
        run(8, 60_000);
    }

    private static final String LINK = "l";

    private static void run(int threadCount, int ops) throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096)) {
            Volume.format(dev, VolumeFixtures.OPTIONS);
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/shared", 0755);
                ns.mkdir("/shared/sub", 0755);
                for (int i = 0; i < 200; i++) {
                    ns.create("/shared/stable-" + i, 0644, true); // present throughout: every walk must see each once
                }
                List<Set<String>> shared = new ArrayList<>();
                List<Set<String>> mine = new ArrayList<>();
                AtomicReference<Throwable> failure = new AtomicReference<>();
                AtomicBoolean done = new AtomicBoolean();
                CountDownLatch start = new CountDownLatch(1);
                List<Thread> threads = new ArrayList<>();
                for (int t = 0; t < threadCount; t++) {
                    int id = t;
                    Set<String> s = new HashSet<>(), m = new HashSet<>();
                    shared.add(s);
                    mine.add(m);
                    ns.mkdir("/p" + id, 0755);
                    threads.add(Thread.ofPlatform().name("ns-worker-" + id).start(() -> {
                        Random rnd = new Random(SEED * 31 + id);
                        try {
                            start.await();
                            for (int i = 0; i < ops; i++) {
                                String name = "t" + id + "-" + rnd.nextInt(300);
                                boolean inShared = rnd.nextBoolean();
                                Set<String> set = inShared ? s : m;
                                String dir = inShared ? "/shared/" : "/p" + id + "/";
                                int op = rnd.nextInt(4);
                                if (!set.contains(name) && op < 2) {
                                    switch (rnd.nextInt(3)) {
                                        case 0 -> ns.create(dir + name, 0644, true);
                                        case 1 -> ns.mkdir(dir + name, 0755);
                                        default -> ns.symlink(LINK.repeat(500 + rnd.nextInt(3000)), dir + name); // a block of its own
                                    }
                                    set.add(name);
                                } else if (set.contains(name) && op == 2) {
                                    String to = "t" + id + "-r" + rnd.nextInt(300);
                                    Set<String> other = rnd.nextBoolean() ? s : m;
                                    String toDir = other == s ? "/shared/" : "/p" + id + "/";
                                    if (!other.contains(to)) {
                                        ns.rename(dir + name, toDir + to);
                                        set.remove(name);
                                        other.add(to);
                                    }
                                } else if (set.contains(name)) {
                                    if (ns.lstat(dir + name).isDirectory()) {
                                        ns.rmdir(dir + name);
                                    } else {
                                        ns.unlink(dir + name);
                                    }
                                    set.remove(name);
                                }
                            }
                        } catch (Throwable e) {
                            failure.compareAndSet(null, e);
                        }
                    }));
                }
                Thread walker = Thread.ofPlatform().name("ns-walker").start(() -> {
                    try {
                        start.await();
                        while (!done.get()) {
                            Set<String> seen = new HashSet<>();
                            DirCookie c = DirCookie.START;
                            for (;;) {
                                DirPage p = ns.readdir("/shared", c, 13);
                                for (DirEntry e : p.entries()) {
                                    assertTrue(seen.add(e.name()), "readdir returned " + e.name() + " twice, seed " + SEED);
                                    if (e.type() == InodeFormat.S_IFLNK) {
                                        readLongLink(ns, e);
                                    }
                                }
                                if (p.end()) {
                                    break;
                                }
                                c = p.next();
                            }
                            for (int i = 0; i < 200; i++) {
                                assertTrue(seen.contains("stable-" + i), "readdir skipped stable-" + i + ", seed " + SEED);
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                });
                start.countDown();
                for (Thread t : threads) {
                    t.join(TimeUnit.MINUTES.toMillis(2));
                    assertTrue(!t.isAlive(), t.getName() + " is stuck, seed " + SEED + ": " + v.diagnostics());
                }
                done.set(true);
                walker.join();
                if (failure.get() != null) {
                    throw new AssertionError("seed " + SEED, failure.get());
                }
                Set<String> expectShared = new HashSet<>();
                expectShared.add("sub");
                for (int i = 0; i < 200; i++) {
                    expectShared.add("stable-" + i);
                }
                for (int t = 0; t < threadCount; t++) {
                    expectShared.addAll(shared.get(t));
                    assertEquals(mine.get(t), names(ns, "/p" + t), "private directory " + t + ", seed " + SEED);
                }
                assertEquals(expectShared, names(ns, "/shared"), "seed " + SEED);
                CheckReport report = ns.check();
                assertTrue(report.clean(), "seed " + SEED + ":\n" + report);
            }
        }
    }

    /** Reads a link that may be unlinked (its inode and block reused) meanwhile: its whole target, or an error saying so. */
    private static void readLongLink(Namespace ns, DirEntry e) {
        String t;
        try {
            t = ns.records.readlinkIno(e.ino());
        } catch (NamespaceException x) {
            // removed, or its inode freed and made a file or directory since
            assertTrue(x.errno() == Errno.ENOENT || x.errno() == Errno.EINVAL, "readlink of " + e + ": " + x.getMessage());
            return;
        }
        assertTrue(t.length() >= 500 && t.replace(LINK, "").isEmpty(), "readlink of " + e + " gave " + t.length() + " bytes");
    }

    private static Set<String> names(Namespace ns, String dir) {
        Set<String> out = ConcurrentHashMap.newKeySet();
        for (DirEntry e : ns.list(dir)) {
            assertTrue(out.add(e.name()), "duplicate " + e.name() + " in " + dir);
        }
        return out;
    }
}
