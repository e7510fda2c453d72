package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;

import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Creates of files in one tree directory run side by side ({@code Creator#sharedCreate}): proven by two
 * meeting inside their inserts; creates of one name still end in one success; an unlink, a rename or an
 * rmdir waits for the creates inside; many threads creating, renaming and unlinking in one directory
 * match their models and leave the volume sound; and concurrent creates crashed keep each one fsync
 * acknowledged.
 *
 * <p>{@code -Dferrite.seed=N} fixes each thread's sequence of operations, not how the threads interleave.
 */
@ExtendWith(TestSeed.class)
class SharedCreateTest {
    private static final long SEED = TestSeed.get(21);

    /** A volume with {@code /d} holding {@code files} files, a tree directory. */
    private static Volume withTreeDirectory(MemoryDevice device, int files) {
        Volume v = Volume.open(device, VolumeFixtures.OPTIONS);
        Namespace ns = v.namespace();
        ns.mkdir("/d", 0755);
        for (int i = 0; i < files; i++) {
            ns.create("/d/f" + i, 0644, true);
        }
        assertTrue(ns.stat("/d").blocks() > 0, "/d is still inline");
        return v;
    }

    /**
     * Two creates in one tree directory, each waiting inside its insert for the other to get there too.
     * With the directory's creates one at a time (its inode lock), the second never gets in while the
     * first waits: the first's wait times out.
     */
    @Test
    void twoCreatesInOneTreeDirectoryInsertAtOnce() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            CyclicBarrier both = new CyclicBarrier(2);
            AtomicInteger met = new AtomicInteger();
            ns.creator.onSharedInsert = () -> {
                try {
                    both.await(20, TimeUnit.SECONDS);
                    met.incrementAndGet();
                } catch (TimeoutException | BrokenBarrierException e) {
                    throw new AssertionError("the other create in the directory never came into its insert beside this one", e);
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            };
            String other = otherStripe(ns, "x");
            List<Future<?>> creates = new ArrayList<>();
            try (ExecutorService pool = Executors.newFixedThreadPool(2)) {
                creates.add(pool.submit(() -> ns.create("/d/x", 0644, true)));
                creates.add(pool.submit(() -> ns.create("/d/" + other, 0644, true)));
            }
            ns.creator.onSharedInsert = null;
            for (Future<?> f : creates) {
                f.get();
            }
            assertEquals(2, met.get(), "creates that met inside their inserts");
            assertEquals(202, ns.stat("/d").size());
            assertTrue(ns.stat("/d/x").isRegularFile());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /** A name whose stripe in {@code /d} is not {@code name}'s: creates of one stripe go one at a time. */
    private static String otherStripe(Namespace ns, String name) {
        long d = ns.stat("/d").ino();
        int taken = stripeOf(d, name);
        for (int i = 0; ; i++) {
            if (stripeOf(d, "y" + i) != taken) {
                return "y" + i;
            }
        }
    }

    private static int stripeOf(long dir, String name) {
        return Creator.stripe(dir, EntryKey.of(name.getBytes(StandardCharsets.UTF_8)));
    }

    /**
     * A create held inside its insert while a second create of the same name starts: the second must wait
     * outside (the name's stripe) and then find the name, or both would pass the lookup and insert it.
     */
    @Test
    void twoCreatesOfOneNameGoInOneAtATime() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            CountDownLatch firstInside = new CountDownLatch(1), release = new CountDownLatch(1);
            AtomicInteger inside = new AtomicInteger(), most = new AtomicInteger(), made = new AtomicInteger();
            ns.creator.onSharedInsert = () -> {
                most.accumulateAndGet(inside.incrementAndGet(), Math::max);
                firstInside.countDown();
                try {
                    assertTrue(release.await(20, TimeUnit.SECONDS), "the test never let the create go on");
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
                inside.decrementAndGet();
            };
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Runnable create = () -> {
                try {
                    ns.create("/d/same", 0644, true);
                    made.incrementAndGet();
                } catch (NamespaceException e) {
                    if (e.errno() != Errno.EEXIST) {
                        failure.set(e);
                    }
                } catch (Throwable e) {
                    failure.set(e);
                }
            };
            Thread first = Thread.ofPlatform().start(create);
            assertTrue(firstInside.await(20, TimeUnit.SECONDS), "the first create never came into its insert");
            Thread second = Thread.ofPlatform().start(create);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (second.getState() != Thread.State.WAITING && second.getState() != Thread.State.TIMED_WAITING) {
                assertTrue(System.nanoTime() < deadline, "the second create neither blocked nor finished: " + second.getState());
                Thread.onSpinWait();
            }
            int both = most.get();
            release.countDown();
            first.join();
            second.join();
            ns.creator.onSharedInsert = null;
            assertEquals(1, both, "a second create of the name came into its insert while the first was inside");
            assertEquals(null, failure.get());
            assertEquals(1, made.get(), "creates of the name that succeeded");
            VolumeFixtures.assertChecked(ns);
        }
    }

    /** Eight threads create the same names exclusively in one tree directory: each name is made once, the others get EEXIST. */
    @Test
    void createsOfOneNameRaceToOneSuccess() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 100)) {
            Namespace ns = v.namespace();
            int names = 300, threads = 8;
            AtomicInteger[] made = new AtomicInteger[names];
            for (int i = 0; i < names; i++) {
                made[i] = new AtomicInteger();
            }
            AtomicReference<Throwable> failure = new AtomicReference<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                workers.add(Thread.ofPlatform().name("same-name-" + t).start(() -> {
                    try (Handle d = ns.open("/d")) {
                        start.await();
                        for (int i = 0; i < names; i++) {
                            try {
                                ns.create(d, "n" + i, 0644, true).close();
                                made[i].incrementAndGet();
                            } catch (NamespaceException e) {
                                if (e.errno() != Errno.EEXIST) {
                                    throw e;
                                }
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            start.countDown();
            joinAll(workers, v);
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            for (int i = 0; i < names; i++) {
                assertEquals(1, made[i].get(), "creates of n" + i + " that succeeded");
            }
            assertEquals(100 + names, ns.stat("/d").size());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * A create held inside its insert while another thread renames, links or removes in the same
     * directory: the other waits until the create is done, then finds the directory as the create left it
     * (an rmdir of the directory, empty when it began, is refused with ENOTEMPTY).
     */
    @Test
    void renameLinkAndRmdirWaitForTheCreatesInside() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            ns.mkdir("/e", 0755);
            ns.unlink("/d/f1");
            heldCreate(ns, "/d/held2", () -> ns.rename("/d/f2", "/d/g2"));
            heldCreate(ns, "/d/held3", () -> ns.rename("/d/f3", "/e/g3"));
            heldCreate(ns, "/d/held4", () -> ns.link("/d/f4", "/d/g4"));
            for (int i = 0; i < 200; i++) {
                if (i < 1 || i > 3) { // f1 is gone, f2 and f3 renamed
                    ns.unlink("/d/f" + i);
                }
            }
            ns.unlink("/d/g2");
            ns.unlink("/d/g4");
            for (int i = 2; i <= 4; i++) {
                ns.unlink("/d/held" + i);
            }
            assertEquals(0, ns.stat("/d").size());
            assertTrue(ns.stat("/d").blocks() > 0, "/d is no longer a tree");
            NamespaceException refused = assertThrows(NamespaceException.class,
                    () -> heldCreate(ns, "/d/last", () -> ns.rmdir("/d")));
            assertEquals(Errno.ENOTEMPTY, refused.errno(), refused.getMessage());
            assertEquals(List.of("last"), ns.list("/d").stream().map(DirEntry::name).toList());
            assertEquals(List.of("g3"), ns.list("/e").stream().map(DirEntry::name).toList());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * An unlink of a file's name in a tree directory runs beside a create held inside its insert there
     * (the shared unlink): it neither takes the directory's lock nor waits for the create. The file has a
     * second link, so that the unlink needs no group's AGI, which the held create holds.
     */
    @Test
    void anUnlinkRunsBesideACreateInside() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            ns.mkdir("/e", 0755);
            ns.link("/d/f1", "/e/kept");
            String held = otherStripe(ns, "f1"); // a create of f1's stripe would hold the unlink out by design
            try (HeldCreate _ = new HeldCreate(ns, "/d/" + held)) {
                FutureTask<Void> unlink = new FutureTask<>(() -> ns.unlink("/d/f1"), null);
                Thread.ofPlatform().start(unlink);
                try {
                    unlink.get(20, TimeUnit.SECONDS);
                } catch (TimeoutException e) {
                    fail("the unlink waited for the create inside the directory");
                }
                assertEquals(1, ns.stat("/e/kept").nlink());
                assertThrows(NamespaceException.class, () -> ns.stat("/d/f1"));
            }
            assertEquals(200, ns.stat("/d").size()); // 200 - f1 + held
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * {@code /d}'s inode (release it after), its tree's reserve spilled down to 4 blocks: below the low
     * mark, so the next create refills it, adding at least 16.
     */
    private static Inode withShortReserve(Volume v) {
        Inode d = v.inodeCache().acquire(v.namespace().lookup("/d"));
        while (v.namespace().dirs.spill(d, 4, 4)) {
            // a batch per transaction
        }
        assertEquals(DirContents.REFILL, v.namespace().dirs.step(d, 8));
        return d;
    }

    /**
     * A refill of a tree directory's block reserve runs beside a writer inside the directory (one with a
     * removal claim, as a shared unlink holds to its commit): the create that finds the reserve short
     * refills it, enters and finishes while that writer stays inside. A refill that kept the writers out
     * ({@link Inode#lockExclusive}) would wait for the writer to leave, which it does only after the create.
     */
    @Test
    void aRefillRunsBesideAWriterInside() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            DirContents dirs = ns.dirs;
            Inode d = withShortReserve(v);
            try {
                int claim = dirs.enter(d, 1, true);
                try {
                    assertFinishes(() -> ns.create("/d/new", 0644, true), "the refill waited for the writer inside the directory");
                    assertEquals(DirContents.READY, dirs.step(d, 8));
                } finally {
                    d.leave(claim);
                }
            } finally {
                v.inodeCache().release(d);
            }
            assertEquals(0100644, ns.stat("/d/new").mode());
            assertEquals(201, ns.stat("/d").size());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * A refill beside the writers inside claims the reserve's capacity its blocks take: with a writer inside
     * whose removal claim leaves too little room (the blocks its merges may give back), the create's refill
     * waits for it to leave rather than add blocks that those merges could push past the reserve's capacity.
     */
    @Test
    void aRefillWaitsForCapacityTheWritersInsideClaimed() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            DirContents dirs = ns.dirs;
            Inode d = withShortReserve(v);
            try {
                int claim = dirs.enter(d, DirEntryFormat.RESERVE_CAPACITY - 8, true); // alone: it enters; leaves room for 4 more
                FutureTask<Void> create = new FutureTask<>(() -> ns.create("/d/new", 0644, true), null);
                try {
                    Thread.ofPlatform().start(create);
                    assertThrows(TimeoutException.class, () -> create.get(2, TimeUnit.SECONDS));
                    assertEquals(DirContents.REFILL, dirs.step(d, 8), "the refill took room the writer inside claimed");
                } finally {
                    d.leave(claim);
                }
                create.get(20, TimeUnit.SECONDS);
            } finally {
                v.inodeCache().release(d);
            }
            assertEquals(0100644, ns.stat("/d/new").mode());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * A refill beside the writers inside waits only for the room the removals inside claimed: writers that
     * take blocks (creates that split) need none of the reserve's free capacity, so with their claims inside
     * covering all of it, the refill still fills the reserve. Counted together with the removals' claims,
     * theirs kept the refill, and every create that found the reserve short, waiting for them to leave.
     */
    @Test
    void aRefillDoesNotWaitForTheClaimsOfWritersThatTakeBlocks() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            DirContents dirs = ns.dirs;
            Inode d = withShortReserve(v);
            try {
                int capacity = DirEntryFormat.RESERVE_CAPACITY - reserve(v, d, false);
                assertTrue(d.tryEnter(d.writers(), capacity), "a writer that takes blocks got in"); // as creates inside, claiming it all
                try {
                    assertFinishes(() -> dirs.prepare(d, 8), "the refill waited for the claims of writers that take blocks");
                    assertEquals(DirContents.READY, dirs.step(d, 8));
                } finally {
                    d.leave(capacity);
                }
            } finally {
                v.inodeCache().release(d);
            }
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * While one thread refills a short reserve (this thread holds the directory's lock, as a refill beside
     * the writers does), a create whose claim fits in the usable blocks left goes in beside it. Before, every
     * create that found the reserve below its low mark waited on the lock for the refill, so all the
     * threads in the directory stopped for each refill, and for its holder's time slice when descheduled.
     */
    @Test
    void aCreateGoesInBesideARefillWhenItsClaimFits() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            Inode d = withShortReserve(v);
            try {
                d.lock();
                try {
                    assertFinishes(() -> ns.create("/d/new", 0644, true), "the create waited for a refill although its claim fitted");
                } finally {
                    d.unlock();
                }
            } finally {
                v.inodeCache().release(d);
            }
            assertEquals(0100644, ns.stat("/d/new").mode());
            assertEquals(201, ns.stat("/d").size());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * A create that finds the reserve below {@link DirContents#RESERVE_EARLY} usable blocks, though not yet
     * short, refills it (nobody else is), so that the threads arriving after it find it full rather than
     * short and waiting for a refill.
     */
    @Test
    void aCreateRefillsTheReserveBeforeItRunsShort() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            Inode d = v.inodeCache().acquire(ns.lookup("/d"));
            try {
                int left = DirContents.RESERVE_EARLY - 2;
                while (ns.dirs.spill(d, left, left)) {
                    // a batch per transaction
                }
                assertEquals(left, reserve(v, d, true));
                assertEquals(DirContents.READY, ns.dirs.step(d, 8), "the reserve is short already");
                ns.create("/d/new", 0644, true);
                assertTrue(reserve(v, d, true) >= DirContents.RESERVE_FILL - 1, "not refilled: " + reserve(v, d, true) + " usable blocks");
            } finally {
                v.inodeCache().release(d);
            }
            VolumeFixtures.assertChecked(ns);
        }
    }

    /** Runs {@code op} on a thread of its own and fails with {@code waited} unless it finishes within 20 seconds. */
    private static void assertFinishes(Runnable op, String waited) throws Exception {
        FutureTask<Void> task = new FutureTask<>(op, null);
        Thread.ofPlatform().start(task);
        try {
            task.get(20, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            fail(waited);
        }
    }

    /**
     * With a writer inside {@code d} claiming {@code claim} ({@code removal}: a removal claim; alone, it
     * enters), {@code op} on another thread finishes; then the writer leaves.
     */
    private static void finishesBeside(DirContents dirs, Inode d, int claim, boolean removal, Runnable op, String waited)
            throws Exception {
        int claimed = dirs.enter(d, claim, removal);
        try {
            assertFinishes(op, waited);
        } finally {
            d.leave(claimed);
        }
    }

    /** The blocks in {@code d}'s tree reserve, all of them ({@code usable} false) or those not busy. */
    private static int reserve(Volume v, Inode d, boolean usable) {
        return v.namespace().records.readRecord(d.ino, (b, r) -> usable
                ? DirAllocator.usable(v.cache(), b, r + InodeFormat.INLINE, DirEntryFormat.RESERVE_CAPACITY)
                : DirEntryFormat.reserveCount(b, r + InodeFormat.INLINE));
    }

    /**
     * A spill of a tree directory's block reserve runs beside a writer inside the directory (one with a
     * claim of 4 blocks for a split, as a shared create holds to its commit): unlinks beside it fill the
     * reserve past its high mark with the blocks their merges give back, and the next unlink spills it
     * and finishes while that writer stays inside, leaving it the usable blocks it may take. A spill that
     * kept the writers out ({@link Inode#lockExclusive}) would wait for the writer to leave, which it does
     * only after that unlink.
     */
    @Test
    void aSpillRunsBesideAWriterInside() throws Exception {
        int files = 3000;
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, files)) {
            Namespace ns = v.namespace();
            Inode d = v.inodeCache().acquire(ns.lookup("/d"));
            int unlinked = 0;
            try {
                int claim = ns.dirs.enter(d, 4, false);
                try {
                    while (reserve(v, d, false) <= DirContents.RESERVE_HIGH) {
                        assertTrue(unlinked < files - 1, "the unlinks' merges never filled the reserve");
                        ns.unlink("/d/f" + unlinked++);
                    }
                    int usable = reserve(v, d, true);
                    String next = "/d/f" + unlinked++;
                    FutureTask<Void> unlink = new FutureTask<>(() -> ns.unlink(next), null);
                    Thread.ofPlatform().start(unlink);
                    try {
                        unlink.get(20, TimeUnit.SECONDS);
                    } catch (TimeoutException e) {
                        fail("the spill waited for the writer inside the directory");
                    }
                    assertTrue(reserve(v, d, false) <= DirContents.RESERVE_HIGH, "the reserve was not spilled");
                    assertTrue(reserve(v, d, true) >= Math.min(usable, DirContents.RESERVE_FILL),
                            "the spill took usable blocks the writer inside may need");
                } finally {
                    d.leave(claim);
                }
            } finally {
                v.inodeCache().release(d);
            }
            assertEquals(files - unlinked, ns.stat("/d").size());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * Shared unlinks in a tree directory, one of each outcome: a name of a file with another link (only
     * the link count drops), an open file's last name (an orphan, freed at the close), a file with data
     * (an orphan freed at once, its directory left), an empty file (freed in the unlink). Afterwards the
     * volume has the inodes and blocks it had before the files were made.
     */
    @Test
    void sharedUnlinksFreeWhatTheirLastLinksLeave() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            ns.mkdir("/e", 0755);
            // refused precisely, nothing changed: a directory's name (the exclusive path's EISDIR), an absent name
            ns.mkdir("/d/sub", 0755);
            NamespaceException isDir = assertThrows(NamespaceException.class, () -> ns.unlink("/d/sub"));
            assertEquals(Errno.EISDIR, isDir.errno(), isDir.getMessage());
            NamespaceException absent = assertThrows(NamespaceException.class, () -> ns.unlink("/d/absent"));
            assertEquals(Errno.ENOENT, absent.errno(), absent.getMessage());
            assertTrue(ns.stat("/d/sub").isDirectory());
            v.sync();
            VolumeStats before = v.statfs();
            ns.create("/d/linked", 0644, true);
            ns.link("/d/linked", "/e/other");
            ns.create("/d/open", 0644, true);
            ns.create("/d/data", 0644, true);
            ns.create("/d/empty", 0644, true);
            try (Handle h = ns.open("/d/data", Namespace.O_RDWR); Arena arena = Arena.ofConfined()) {
                ns.write(h, 0, arena.allocate(64 * 1024, 4096));
            }
            Handle open = ns.open("/d/open", Namespace.O_RDWR);
            try (Arena arena = Arena.ofConfined()) {
                ns.write(open, 0, arena.allocate(8192, 4096));
            }
            for (String name : List.of("linked", "open", "data", "empty")) {
                ns.unlink("/d/" + name);
                assertThrows(NamespaceException.class, () -> ns.stat("/d/" + name));
            }
            assertEquals(1, ns.stat("/e/other").nlink());
            assertEquals(8192, ns.stat(open).size(), "an unlinked file stays readable through its handle");
            open.close();
            ns.unlink("/e/other");
            v.sync();
            VolumeStats after = v.statfs();
            assertEquals(before.freeBlocks(), after.freeBlocks(), "blocks the unlinked files held");
            assertEquals(before.inodes() - before.freeInodes(), after.inodes() - after.freeInodes(), "inodes in use");
            assertEquals(201, ns.stat("/d").size()); // the 200 files and sub
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * A shared create whose group must make a chunk makes it with the directory left. This thread holds
     * the log's space in open transactions, and with them every group's AGI but one that has no free
     * inode; then, with the create waiting for space, a writer that (like an unlink) holds its reservation
     * takes the directory exclusively. Made entered, the chunk's wait for space and the writer's wait for
     * the create to leave never end.
     */
    @Test
    void aGroupsChunkIsMadeWithTheDirectoryLeft() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            AllocationGroup empty = IntStream.range(0, v.geometry().agCount()).mapToObj(v::group)
                    .filter(g -> g.freeInodes() == 0 && g.mayAddChunk()).findFirst().orElse(null);
            assertNotNull(empty, "no group without free inodes to make a chunk in");
            Inode d = v.inodeCache().acquire(ns.lookup("/d"));
            try {
                assertTrue(LogFullWriter.getsIn(v, d, locks -> {
                    for (int g = 0; g < v.geometry().agCount(); g++) {
                        if (v.group(g) != empty) {
                            locks.lock(v.group(g).agi);
                        }
                    }
                }, () -> ns.create("/d/new", 0644, true)), "a writer holding log space waited for a create that waited for log space inside the directory");
            } finally {
                v.inodeCache().release(d);
            }
            assertEquals(0100644, ns.stat("/d/new").mode());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * A create that must make its group's next inode chunk, alone in the tree directory, makes it with the
     * directory left, so a create arriving meanwhile goes in beside it and takes its inode from another
     * group. This thread holds the parent's group's AGF, which the chunk needs, so the chunk's maker waits
     * there. A maker that took the directory exclusively for its chunk (the exclusive path makes it in the
     * create's own transaction) kept the second create out until the chunk was made.
     */
    @Test
    void aCreateMakingItsGroupsChunkLetsTheCreatesArrivingIn() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            AllocationGroup home = v.group(v.geometry().agOfInode(ns.lookup("/d")));
            int filled = 0;
            while (home.freeInodes() > 0) {
                ns.create("/d/g" + filled++, 0644, true);
            }
            assertTrue(home.mayAddChunk(), "the parent's group has no room for a chunk");
            if (home.needsRefill()) {
                home.refillFreeList(); // the chunk's maker would refill it first, waiting for the AGF held below
            }
            FutureTask<Void> maker = new FutureTask<>(() -> ns.create("/d/maker", 0644, true), null);
            try (Txn hold = Txn.begin(v.cache(), 1)) {
                hold.lock(home.agf);
                Thread t = Thread.ofPlatform().start(maker);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (t.getState() != Thread.State.WAITING && t.getState() != Thread.State.TIMED_WAITING) {
                    assertTrue(t.isAlive() && System.nanoTime() < deadline, "the chunk's maker neither waited nor stayed alive: " + t.getState());
                    Thread.onSpinWait();
                }
                Thread.sleep(200); // backing off on the AGF, not passing through another lock
                FutureTask<Void> beside = new FutureTask<>(() -> ns.create("/d/beside", 0644, true), null);
                Thread b = Thread.ofPlatform().start(beside);
                try {
                    beside.get(20, TimeUnit.SECONDS);
                } catch (TimeoutException e) {
                    fail("a create waited for another making its group's inode chunk: at " + Arrays.toString(b.getStackTrace())
                            + "; the chunk's maker at " + Arrays.toString(t.getStackTrace()));
                }
                assertFalse(maker.isDone(), "the chunk was made while its group's AGF was held");
            }
            maker.get(20, TimeUnit.SECONDS);
            assertNotEquals(home.agno, v.geometry().agOfInode(ns.lookup("/d/beside")), "the create beside took its inode from the busy group");
            assertEquals(home.agno, v.geometry().agOfInode(ns.lookup("/d/maker")));
            assertEquals(202 + filled, ns.stat("/d").size());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * A create whose insert goes into a leaf with room (no split, so no block taken from the reserve) enters
     * beside the writers inside claiming no usable block: with writers inside that claimed every one, it
     * finishes while they stay. A create that claimed what splits at every level may take (the tree's
     * height and two) waited for them to leave, and only 3–5 creates fitted at once beside a reserve of
     * 12–20 usable blocks; one that claimed a block, only 12–20 (issue 21).
     */
    @Test
    void aCreateThatSplitsNothingClaimsNoUsableBlock() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            Inode d = v.inodeCache().acquire(ns.lookup("/d"));
            try {
                ns.dirs.prepare(d, 8);
                int usable = Math.min(reserve(v, d, true), DirContents.RESERVE_FILL);
                finishesBeside(ns.dirs, d, usable, false, () -> ns.create("/d/new", 0644, true),
                        "the create waited for usable blocks a split would take");
            } finally {
                v.inodeCache().release(d);
            }
            assertEquals(0100644, ns.stat("/d/new").mode());
            assertEquals(201, ns.stat("/d").size());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * An unlink whose delete takes its entry out of a leaf in place (no merge, so no block given back to the
     * reserve) enters beside the writers inside claiming none of the reserve's room: with writers inside
     * that claimed all of it, it finishes while they stay. An unlink that claimed what merges at every
     * level may give back (the tree's height and two) waited for them to leave, and only 2–4 such unlinks
     * fitted at once beside a reserve of 20–28 of its 40 blocks; one that claimed a block, only 12–20
     * (issue 21).
     */
    @Test
    void anUnlinkThatMergesNothingClaimsNoRoom() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = withTreeDirectory(dev, 200)) {
            Namespace ns = v.namespace();
            Inode d = v.inodeCache().acquire(ns.lookup("/d"));
            try {
                int room = DirEntryFormat.RESERVE_CAPACITY - reserve(v, d, false);
                finishesBeside(ns.dirs, d, room, true, () -> ns.unlink("/d/f7"),
                        "the unlink waited for room for blocks a merge would give back");
            } finally {
                v.inodeCache().release(d);
            }
            assertThrows(NamespaceException.class, () -> ns.stat("/d/f7"));
            assertEquals(199, ns.stat("/d").size());
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * Creates {@code path} and, while the create is held inside its insert, starts {@code other} on another
     * thread: it must block, and must not finish before the create is let go. Rethrows what {@code other} threw.
     */
    private static void heldCreate(Namespace ns, String path, Runnable other) throws Exception {
        AtomicReference<Throwable> otherFailed = new AtomicReference<>();
        try (HeldCreate create = new HeldCreate(ns, path)) {
            AtomicInteger finished = new AtomicInteger();
            Thread t = Thread.ofPlatform().start(() -> {
                try {
                    other.run();
                } catch (Throwable e) {
                    otherFailed.set(e);
                } finally {
                    finished.incrementAndGet();
                }
            });
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (t.getState() != Thread.State.WAITING && t.getState() != Thread.State.TIMED_WAITING && finished.get() == 0) {
                assertTrue(System.nanoTime() < deadline, "the other operation neither blocked nor finished: " + t.getState());
                Thread.onSpinWait();
            }
            assertEquals(0, finished.get(), "the other operation finished while a create was inside the directory: "
                    + otherFailed.get());
            create.close();
            t.join();
        }
        if (otherFailed.get() instanceof RuntimeException e) {
            throw e;
        } else if (otherFailed.get() != null) {
            throw new AssertionError(otherFailed.get());
        }
    }

    /** A create of {@code path} on a thread of its own, held inside its insert until closed; close rethrows its failure. */
    private static final class HeldCreate implements AutoCloseable {
        private final Namespace ns;
        private final CountDownLatch release = new CountDownLatch(1);
        private final AtomicReference<Throwable> failed = new AtomicReference<>();
        private final Thread thread;

        HeldCreate(Namespace ns, String path) throws InterruptedException {
            this.ns = ns;
            CountDownLatch inside = new CountDownLatch(1);
            ns.creator.onSharedInsert = () -> {
                inside.countDown();
                try {
                    assertTrue(release.await(20, TimeUnit.SECONDS), "the test never let the create go on");
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            };
            thread = Thread.ofPlatform().start(() -> {
                try {
                    ns.create(path, 0644, true);
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            boolean in = inside.await(20, TimeUnit.SECONDS);
            ns.creator.onSharedInsert = null;
            if (!in) {
                release.countDown();
                fail("the create never came into its insert");
            }
        }

        @Override
        public void close() throws InterruptedException {
            release.countDown();
            ns.creator.onSharedInsert = null;
            thread.join();
            if (failed.get() != null) {
                throw new AssertionError("the create failed", failed.get());
            }
        }
    }

    @Test
    void threadsCreatingRenamingAndUnlinkingInOneDirectoryMatchTheirModels() throws Exception {
        churn(SEED, 8, 1500);
    }

    @Test
    @Tag("stress")
    void sixteenThreadsInOneDirectoryLonger() throws Exception {
        churn(SEED, 16, 20_000);
    }

    /**
     * {@code threads} threads, each with names of its own in one tree directory: creating files and
     * symlinks (exclusively, or not when the name may exist), making and removing subdirectories,
     * renaming within the directory and unlinking, against a model each; at the end the directory holds
     * exactly the models' names and the volume checks clean.
     */
    private static void churn(long seed, int threads, int ops) throws Exception {
        inOneDirectory(seed, threads, "churn", (ns, d, id, r, model) -> {
            for (int i = 0; i < ops; i++) {
                String name = "t" + id + "-" + r.nextInt(200);
                int op = r.nextInt(10);
                if (!model.contains(name)) {
                    switch (op) {
                        case 0 -> ns.mkdir(d, name, 0755).close();
                        case 1 -> ns.symlink(d, name, "target-" + i);
                        case 2 -> ns.create(d, name, 0644, false).close();
                        default -> ns.create(d, name, 0644, true).close();
                    }
                    model.add(name);
                } else if (op < 3) {
                    String to = "t" + id + "-" + r.nextInt(200);
                    if (!model.contains(to)) {
                        ns.rename(d, name, d, to);
                        model.remove(name);
                        model.add(to);
                    }
                } else if (ns.lstat(d, name).isDirectory()) {
                    ns.rmdir(d, name);
                    model.remove(name);
                } else {
                    ns.unlink(d, name);
                    model.remove(name);
                }
            }
        });
    }

    @Test
    void spillsRunBesideSixteenThreadsFillingAndEmptyingOneDirectory() throws Exception {
        waves(SEED, 16, 300, 2);
    }

    @Test
    @Tag("stress")
    void spillsBesideSixteenThreadsLonger() throws Exception {
        waves(SEED, 16, 1500, 6);
    }

    /**
     * {@code threads} threads fill one tree directory and empty it again, {@code waves} times, each with long
     * names of its own (few to a leaf): growing, a thread creates four times as often as it unlinks one
     * of its names at random; shrinking, the other way round. The unlinks' merges fill the tree's reserve
     * past its high mark again and again, so its spills run beside creates, whose splits take blocks of
     * it, and beside other unlinks; at the end the directory holds exactly the models' names and the
     * volume checks clean.
     */
    private static void waves(long seed, int threads, int perWave, int waves) throws Exception {
        String padding = "-".repeat(100);
        inOneDirectory(seed, threads, "waves", (ns, d, id, r, model) -> {
            int made = 0;
            for (int w = 0; w < 2 * waves; w++) {
                boolean growing = w % 2 == 0;
                for (int i = 0; i < perWave; i++) {
                    if (model.isEmpty() || r.nextInt(5) < (growing ? 4 : 1)) {
                        String name = "w" + id + padding + made++;
                        ns.create(d, name, 0644, true).close();
                        model.add(name);
                    } else {
                        int k = r.nextInt(model.size());
                        ns.unlink(d, model.get(k));
                        model.set(k, model.getLast());
                        model.removeLast();
                    }
                }
            }
        });
    }

    /** One thread of {@link #inOneDirectory}: its operations in {@code d}, each name it leaves there in {@code model}. */
    private interface DirectoryWorker {
        void run(Namespace ns, Handle d, int id, Random r, List<String> model) throws Exception;
    }

    /**
     * Runs {@code worker} on {@code threads} threads started together in {@code /d}, a tree directory of
     * 100 files on a fresh volume, each thread with its random sequence from {@code seed} and a model of
     * its names; at the end {@code /d} holds exactly the 100 files and the models' names and the volume
     * checks clean.
     */
    private static void inOneDirectory(long seed, int threads, String name, DirectoryWorker worker) throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(32_768, 4096)) {
            Volume.format(dev, VolumeFixtures.OPTIONS);
            try (Volume v = withTreeDirectory(dev, 100)) {
                Namespace ns = v.namespace();
                List<List<String>> models = new ArrayList<>();
                AtomicReference<Throwable> failure = new AtomicReference<>();
                CountDownLatch start = new CountDownLatch(1);
                List<Thread> workers = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int id = t;
                    List<String> model = new ArrayList<>();
                    models.add(model);
                    workers.add(Thread.ofPlatform().name(name + "-" + id).start(() -> {
                        try (Handle d = ns.open("/d")) {
                            start.await();
                            worker.run(ns, d, id, new Random(seed * 31 + id), model);
                        } catch (Throwable e) {
                            failure.compareAndSet(null, e);
                        }
                    }));
                }
                start.countDown();
                joinAll(workers, v);
                if (failure.get() != null) {
                    throw new AssertionError("seed " + seed, failure.get());
                }
                Set<String> expect = new HashSet<>();
                for (int i = 0; i < 100; i++) {
                    expect.add("f" + i);
                }
                models.forEach(expect::addAll);
                Set<String> found = new HashSet<>();
                ns.list("/d").forEach(e -> found.add(e.name()));
                assertEquals(expect, found, "seed " + seed);
                assertEquals(expect.size(), ns.stat("/d").size(), "seed " + seed);
                CheckReport report = ns.check();
                assertTrue(report.clean(), "seed " + seed + ":\n" + report);
            }
        }
    }

    private static void joinAll(List<Thread> workers, Volume v) throws InterruptedException {
        for (Thread t : workers) {
            t.join(TimeUnit.MINUTES.toMillis(3));
            assertFalse(t.isAlive(), t.getName() + " is stuck: " + v.diagnostics());
        }
    }

    // ------------------------------------------------------------------ crashes

    @Test
    void concurrentCreatesInOneDirectoryKeepEachFsyncedOneAfterCrashes() throws Exception {
        crashConcurrentCreates(SEED, 4, 80, 6, 12);
    }

    @Test
    @Tag("stress")
    void concurrentCreatesCrashedLonger() throws Exception {
        crashConcurrentCreates(SEED, 8, 400, 30, 60);
    }

    /**
     * Threads create files of their own in one tree directory and unlink some they made before; a third
     * of the creates are fsynced through the new file's handle (and never unlinked). At the flush after
     * which such an fsync returned (and later ones), each of those files is there; at sampled crash
     * points (a flush with some of the next epoch's writes, torn or not, or inside an epoch) the volume
     * checks clean and every name present is one a thread created.
     */
    private static void crashConcurrentCreates(long seed, int threads, int perThread, int ackedStates, int sampled) throws Exception {
        Random rnd = new Random(seed);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            List<long[]> acked = Collections.synchronizedList(new ArrayList<>()); // {thread, i, flush index}
            Set<String> made = ConcurrentHashMap.newKeySet();
            int firstFlush;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                for (int i = 0; i < 150; i++) {
                    ns.create("/d/f" + i, 0644, true);
                    made.add("f" + i);
                }
                assertTrue(ns.stat("/d").blocks() > 0, "/d is still inline");
                v.sync();
                firstFlush = rec.flushCount() - 1;
                List<Future<?>> done = new ArrayList<>();
                try (ExecutorService pool = Executors.newFixedThreadPool(threads)) {
                    for (int t = 0; t < threads; t++) {
                        int id = t;
                        done.add(pool.submit(() -> {
                            Random r = new Random(seed * 31 + id);
                            List<Integer> unlinkable = new ArrayList<>();
                            try (Handle d = ns.open("/d")) {
                                for (int i = 0; i < perThread; i++) {
                                    if (!unlinkable.isEmpty() && r.nextInt(4) == 0) {
                                        ns.unlink(d, crashName(id, unlinkable.remove(r.nextInt(unlinkable.size()))));
                                        continue;
                                    }
                                    String name = crashName(id, i);
                                    made.add(name);
                                    try (Handle f = ns.create(d, name, 0644, true)) {
                                        if (r.nextInt(3) == 0) {
                                            ns.fsync(f);
                                            acked.add(new long[] {id, i, rec.flushCount() - 1});
                                        } else {
                                            unlinkable.add(i);
                                        }
                                    }
                                }
                            }
                            return null;
                        }));
                    }
                }
                for (Future<?> f : done) {
                    f.get();
                }
            }
            assertTrue(acked.size() > threads * perThread / 6, "fsynced creates: " + acked.size());
            forEachCrash(rec, rnd, seed, acked, ackedStates, sampled, firstFlush, (crash, where, present) -> {
                for (String name : present) {
                    assertTrue(made.contains(name), where + ": " + name + " was never created");
                }
                for (long[] a : acked) { // every create fsynced by the flush the crash follows is there
                    if (a[2] <= crash.afterFlush()) {
                        String name = crashName((int) a[0], (int) a[1]);
                        assertTrue(present.contains(name), where + ": the fsynced create of " + name + " is lost");
                    }
                }
            });
        }
    }

    /** What a crash test checks of one crash state: {@code present}, the names in {@code /d} after recovery. */
    private interface CrashCheck {
        void check(CrashTest.Crash crash, String where, Set<String> present);
    }

    /**
     * Recovers each crash state {@link CrashTest#ackedAndSampled} chooses (after the flushes in {@code acked}'s
     * third column, and sampled ones past {@code firstFlush}); checks {@code /d}'s entry count, then
     * {@code check}, then the checker.
     */
    private static void forEachCrash(RecordingDevice rec, Random rnd, long seed, List<long[]> acked, int ackedStates, int sampled,
                                     int firstFlush, CrashCheck check) {
        for (CrashTest.Crash crash : CrashTest.ackedAndSampled(rec, rnd, acked.stream().map(a -> (int) a[2]).toList(),
                ackedStates, sampled, firstFlush)) {
            RecordingDevice.CrashState state = crash.state();
            String where = "seed " + seed + ", crash " + state;
            try (MemoryDevice crashed = rec.materialize(state); Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                Set<String> present = new HashSet<>();
                for (DirEntry e : ns.list("/d")) {
                    present.add(e.name());
                }
                assertEquals(present.size(), ns.stat("/d").size(), where + ": the directory's entry count");
                check.check(crash, where, present);
                CheckReport report = ns.check();
                assertTrue(report.clean(), where + ": " + report);
            } catch (RuntimeException e) {
                fail(where + ": " + e, e);
            }
        }
    }

    @Test
    void concurrentUnlinksInOneDirectoryKeepEachFsyncedOneAfterCrashes() throws Exception {
        crashConcurrentUnlinks(SEED, 8, 40, 6, 12);
    }

    /**
     * Threads unlink files of their own from one tree directory at once (shared unlinks meeting on their
     * groups' AGIs), a fifth of them held open across the unlink (orphans, freed at the close); after a
     * third of the unlinks the thread fsyncs the directory. At the flush after which such an fsync
     * returned (and later ones), that file and those the thread unlinked before it are gone; at sampled
     * crash points every name present is one made before, and the volume checks clean (no unlinked
     * inode left allocated without an orphan record, none freed while named).
     */
    private static void crashConcurrentUnlinks(long seed, int threads, int perThread, int ackedStates, int sampled) throws Exception {
        Random rnd = new Random(seed);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            List<long[]> acked = Collections.synchronizedList(new ArrayList<>()); // {thread, files unlinked, flush index}
            int firstFlush;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                for (int t = 0; t < threads; t++) {
                    for (int i = 0; i < perThread; i++) {
                        ns.create("/d/" + crashName(t, i), 0644, true);
                    }
                }
                assertTrue(ns.stat("/d").blocks() > 0, "/d is still inline");
                v.sync();
                firstFlush = rec.flushCount() - 1;
                List<Thread> workers = new ArrayList<>();
                AtomicReference<Throwable> failed = new AtomicReference<>();
                for (int t = 0; t < threads; t++) {
                    int id = t;
                    workers.add(Thread.ofPlatform().daemon().name("unlinker-" + t).start(() -> {
                        Random r = new Random(seed * 31 + id);
                        try (Handle d = ns.open("/d")) {
                            for (int i = 0; i < perThread; i++) {
                                String name = crashName(id, i);
                                if (r.nextInt(5) == 0) {
                                    try (Handle _ = ns.open(d, name, Namespace.O_RDWR)) {
                                        ns.unlink(d, name);
                                    }
                                } else {
                                    ns.unlink(d, name);
                                }
                                if (r.nextInt(3) == 0) {
                                    ns.fsync(d);
                                    acked.add(new long[] {id, i + 1, rec.flushCount() - 1});
                                }
                            }
                        } catch (Throwable e) {
                            failed.compareAndSet(null, e);
                        }
                    }));
                }
                joinAll(workers, v);
                if (failed.get() != null) {
                    throw new AssertionError("seed " + seed, failed.get());
                }
            }
            assertTrue(acked.size() > threads * perThread / 6, "fsynced unlinks: " + acked.size());
            forEachCrash(rec, rnd, seed, acked, ackedStates, sampled, firstFlush, (crash, where, present) -> {
                for (long[] a : acked) { // every unlink fsynced by the flush the crash follows, and those before it, stays done
                    if (a[2] <= crash.afterFlush()) {
                        for (int i = 0; i < a[1]; i++) {
                            String name = crashName((int) a[0], i);
                            assertFalse(present.contains(name), where + ": the fsynced unlink of " + name + " is lost");
                        }
                    }
                }
                for (String name : present) {
                    assertTrue(name.matches("w0[0-9]-000[0-9]{2}"), where + ": " + name + " was never created");
                }
            });
        }
    }

    private static String crashName(int thread, int i) {
        return String.format("w%02d-%05d", thread, i);
    }
}
