package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertSound;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Inode and block allocation in the allocation groups: exact counts, consistent trees, concurrency. */
@ExtendWith(TestSeed.class)
class AllocationTest {
    private static final long SEED = TestSeed.get(11);

    @Test
    void concurrentInodeAllocationAcrossGroupsKeepsExactCounts() throws Exception {
        concurrentAllocation(VolumeFixtures.formatted(), OPTIONS, 4, 2500);
    }

    @Test
    @Tag("stress")
    void concurrentInodeAllocationStress() throws Exception {
        MemoryDevice dev = MemoryDevice.create(65536, 4096);
        VolumeOptions options = OPTIONS.withAgCount(8).withCacheBytes(256L << 20); // every inode block stays cached
        Volume.format(dev, options);
        concurrentAllocation(dev, options, 8, 20_000);
    }

    private static void concurrentAllocation(MemoryDevice device, VolumeOptions options, int threads, int perThread)
            throws Exception {
        try (MemoryDevice dev = device) {
            Set<Long> live = ConcurrentHashMap.newKeySet();
            Set<Long> everAllocated = ConcurrentHashMap.newKeySet();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            try (Volume v = Volume.open(dev, options)) {
                long root = v.rootInode();
                CountDownLatch go = new CountDownLatch(1);
                List<Thread> workers = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    long seed = SEED + t;
                    Thread w = new Thread(() -> {
                        Random rnd = new Random(seed);
                        List<Long> mine = new ArrayList<>();
                        try {
                            go.await();
                            for (int i = 0; i < perThread; i++) {
                                // directories spread by the rotor, files follow their parent's group
                                long parent = mine.isEmpty() || rnd.nextInt(4) == 0 ? root : mine.get(rnd.nextInt(mine.size()));
                                int mode = rnd.nextInt(5) == 0 ? InodeFormat.S_IFDIR | 0755 : InodeFormat.S_IFREG | 0644;
                                long ino = VolumeAllocations.allocInode(v, mode, 1000, 1000, 1, parent);
                                if (!everAllocated.add(ino) && !live.add(ino)) {
                                    throw new AssertionError("inode " + ino + " handed out while still live");
                                }
                                live.add(ino);
                                mine.add(ino);
                                if (rnd.nextInt(3) == 0) {
                                    long victim = mine.remove(rnd.nextInt(mine.size()));
                                    live.remove(victim);
                                    VolumeAllocations.freeInode(v, victim);
                                }
                            }
                        } catch (Throwable e) {
                            failure.compareAndSet(null, e);
                        }
                    }, "alloc-" + t);
                    workers.add(w);
                    w.start();
                }
                go.countDown();
                for (Thread w : workers) {
                    w.join(120_000);
                    if (w.isAlive()) {
                        StringBuilder dump = new StringBuilder(w.getName() + " is stuck (seed " + SEED + "); " + v.diagnostics());
                        Thread.getAllStackTraces().forEach((t, stack) -> {
                            if (t.getName().startsWith("alloc-") || t.getName().startsWith("ferrite-")) {
                                dump.append("\n").append(t.getName()).append(' ').append(t.getState());
                                for (StackTraceElement e : stack) {
                                    dump.append("\n    at ").append(e);
                                }
                            }
                        });
                        throw new AssertionError(dump);
                    }
                }
                if (failure.get() != null) {
                    throw new AssertionError("seed " + SEED, failure.get());
                }
                VolumeStats s = v.statfs();
                assertEquals(live.size() + 1, s.inodes() - s.freeInodes(), "live inodes (root included), seed " + SEED);
                int[] perGroup = new int[s.agCount()];
                for (long ino : live) {
                    InodeStat st = v.stat(ino);
                    assertEquals(1000, st.uid());
                    perGroup[v.geometry().agOfInode(ino)]++;
                }
                for (int g = 0; g < perGroup.length; g++) {
                    assertTrue(perGroup[g] > 0, "group " + g + " got no inodes: directories must spread, seed " + SEED);
                }
                assertSound(v);
            }
            try (Volume v = Volume.open(dev, options)) {
                VolumeStats s = v.statfs();
                assertEquals(live.size() + 1, s.inodes() - s.freeInodes());
                assertSound(v);
                for (long ino : live) {
                    v.stat(ino);
                }
            }
        }
    }

    @Test
    void emptyChunksGoBackToFreeSpaceKeepingOneChunkOfFreeInodes() {
        VolumeOptions one = OPTIONS.withAgCount(1);
        try (MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096)) {
            Volume.format(dev, one);
            List<Long> inos = new ArrayList<>();
            long firstOfChunk2;
            int firstGen;
            try (Volume v = Volume.open(dev, one)) {
                VolumeStats empty = v.statfs();
                assertEquals(Geometry.CHUNK_INODES, empty.inodes(), "the root's chunk");
                for (int i = 0; i < 4 * Geometry.CHUNK_INODES; i++) {
                    inos.add(VolumeAllocations.allocInode(v, InodeFormat.S_IFREG | 0600, 0, 0, 1, v.rootInode()));
                }
                VolumeStats full = v.statfs();
                assertEquals(5 * Geometry.CHUNK_INODES, full.inodes());
                firstOfChunk2 = inos.get(2 * Geometry.CHUNK_INODES - 1);
                firstGen = v.stat(firstOfChunk2).generation();
                for (long ino : inos) {
                    VolumeAllocations.freeInode(v, ino);
                }
                VolumeStats after = v.statfs();
                // the root's chunk stays, and one empty chunk: fewer than two chunks' worth of free inodes is kept
                assertEquals(2 * Geometry.CHUNK_INODES, after.inodes(), after.toString());
                assertEquals(2 * Geometry.CHUNK_INODES - 1, after.freeInodes());
                assertTrue(after.freeBlocks() >= full.freeBlocks() + 3 * Geometry.CHUNK_BLOCKS,
                        "three chunks' blocks are free again: " + full + " -> " + after);
                InvalidArgumentException stale = assertThrows(InvalidArgumentException.class, () -> v.stat(firstOfChunk2));
                assertTrue(stale.getMessage().contains("no inode chunk"), stale.getMessage());
                assertSound(v);
            }
            try (Volume v = Volume.open(dev, one)) {
                assertEquals(2 * Geometry.CHUNK_INODES, v.statfs().inodes(), "after remount");
                assertSound(v);
                Set<Long> again = new HashSet<>();
                for (int i = 0; i < 4 * Geometry.CHUNK_INODES; i++) {
                    again.add(VolumeAllocations.allocInode(v, InodeFormat.S_IFREG | 0600, 0, 0, 1, v.rootInode()));
                }
                assertTrue(again.contains(firstOfChunk2), "the freed chunks' space is used for inodes again");
                assertTrue(v.stat(firstOfChunk2).generation() != firstGen, "a remade chunk does not repeat generations");
                assertSound(v);
            }
        }
    }

    @Test
    void generationsGrowAndDoubleFreesAreRefused() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            long ino = VolumeAllocations.allocInode(v, InodeFormat.S_IFREG | 0600, 0, 0, 1, v.rootInode());
            int gen = v.stat(ino).generation();
            VolumeAllocations.freeInode(v, ino);
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> VolumeAllocations.freeInode(v, ino));
            assertTrue(e.getMessage().contains("not allocated"), e.getMessage());
            assertThrows(InvalidArgumentException.class, () -> v.stat(ino));
            long again = VolumeAllocations.allocInode(v, InodeFormat.S_IFREG | 0600, 0, 0, 1, v.rootInode());
            assertEquals(ino, again, "the lowest free slot is reused");
            assertEquals(gen + 1, v.stat(again).generation());
            assertThrows(InvalidArgumentException.class, () -> VolumeAllocations.freeInode(v, 0));
            long outsideChunks = v.geometry().inodeNumber(3, (v.geometry().agLength(3) - 1) << 3);
            InvalidArgumentException none = assertThrows(InvalidArgumentException.class, () -> v.stat(outsideChunks));
            assertTrue(none.getMessage().contains("no inode chunk"), none.getMessage());
            assertThrows(InvalidArgumentException.class, () -> VolumeAllocations.freeInode(v, outsideChunks));
            assertSound(v);
        }
    }

    @Test
    void fragmentingBlockAllocationKeepsTheFreeSpaceTreesConsistent() {
        Random rnd = new Random(SEED);
        try (MemoryDevice dev = MemoryDevice.create(32768, 4096)) {
            VolumeOptions options = OPTIONS.withAgCount(2);
            Volume.format(dev, options);
            TreeMap<Long, Integer> allocated = new TreeMap<>();
            try (Volume v = Volume.open(dev, options)) {
                long free0 = v.statfs().freeBlocks();
                long used = 0;
                // a comb of single blocks: thousands of free extents, so both free-space trees split
                List<Long> singles = new ArrayList<>();
                for (int i = 0; i < 4000; i++) {
                    singles.add(VolumeAllocations.allocBlocks(v, 0, 1));
                }
                for (int i = 0; i < singles.size(); i++) {
                    if (i % 2 == 0) {
                        VolumeAllocations.freeBlocks(v, singles.get(i), 1);
                    } else {
                        allocated.put(singles.get(i), 1);
                        used++;
                    }
                }
                for (int i = 0; i < 6000; i++) {
                    if (allocated.isEmpty() || rnd.nextInt(5) < 3) {
                        int len = 1 + rnd.nextInt(rnd.nextInt(10) == 0 ? 40 : 3);
                        long b;
                        try {
                            b = VolumeAllocations.allocBlocks(v, rnd.nextInt(2), len);
                        } catch (NoSpaceException full) {
                            continue;
                        }
                        assertNull(allocated.floorEntry(b) != null && allocated.floorEntry(b).getKey() + allocated.floorEntry(b).getValue() > b
                                ? "overlap" : null, "block " + b + " handed out twice, seed " + SEED);
                        allocated.put(b, len);
                        used += len;
                    } else {
                        Long b = allocated.ceilingKey(rnd.nextLong(Math.max(1, allocated.lastKey())));
                        b = b == null ? allocated.firstKey() : b;
                        used -= allocated.get(b);
                        VolumeAllocations.freeBlocks(v, b, allocated.remove(b));
                    }
                }
                List<CheckProblem> problems = v.checkGroups(allocated);
                assertTrue(problems.isEmpty(), "seed " + SEED + ":\n" + VolumeFixtures.describe(problems));
                // free space shrank by what was handed out, and by what the free lists took for tree nodes
                long listed0 = 2L * 2 * (4 + 2 * AllocationGroup.RESERVE) - 8;
                long listed = 0;
                for (int g = 0; g < 2; g++) {
                    listed += v.group(g).agfl.count() + v.group(g).agil.count();
                }
                assertTrue(v.statfs().freeBlocks() <= free0 - used, "seed " + SEED);
                assertTrue(listed > 0 && listed0 > 0);
                assertTrue(v.group(0).space.bno.height() > 1 && v.group(0).space.cnt.height() > 1,
                        "the free-space trees must have split for this test to mean much, seed " + SEED);
                for (var e : new ArrayList<>(allocated.entrySet())) {
                    VolumeAllocations.freeBlocks(v, e.getKey(), e.getValue());
                }
                assertSound(v);
                long one = VolumeAllocations.allocBlocks(v, 1, 1);
                VolumeAllocations.freeBlocks(v, one, 1);
                VolumeStats before = v.statfs();
                CorruptionException twice = assertThrows(CorruptionException.class, () -> VolumeAllocations.freeBlocks(v, one, 1));
                assertTrue(twice.getMessage().contains("already free"), twice.getMessage());
                assertEquals(before, v.statfs(), "a refused free changes nothing");
                assertSound(v);
            }
            try (Volume v = Volume.open(dev, options)) {
                assertSound(v);
            }
        }
    }

    @Test
    void inodeExhaustionIsNoSpaceAndChangesNothing() {
        try (MemoryDevice dev = MemoryDevice.create(1600, 4096)) {
            VolumeOptions options = OPTIONS.withAgCount(1).withLogBlocks(1024);
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options)) {
                Set<Long> inos = new HashSet<>();
                NoSpaceException full = null;
                while (full == null) {
                    try {
                        assertTrue(inos.add(VolumeAllocations.allocInode(v, InodeFormat.S_IFREG, 0, 0, 1, v.rootInode())));
                    } catch (NoSpaceException e) {
                        full = e;
                    }
                }
                assertTrue(full.getMessage().contains("no free inode"), full.getMessage());
                VolumeStats s = v.statfs();
                assertEquals(0, s.freeInodes());
                assertTrue(inos.size() > 500, inos.size() + " inodes");
                assertSound(v);
                assertThrows(NoSpaceException.class, () -> VolumeAllocations.allocInode(v, InodeFormat.S_IFREG, 0, 0, 1, 0));
                assertEquals(s, v.statfs(), "a refused allocation changes nothing");
                for (long ino : inos) {
                    VolumeAllocations.freeInode(v, ino);
                }
                assertEquals(1, v.statfs().inodes() - v.statfs().freeInodes());
                assertSound(v);
            }
        }
    }

    @Test
    void setattrIsAtomicForLockFreeReaders() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            long ino = VolumeAllocations.allocInode(v, InodeFormat.S_IFREG | 0644, 0, 0, 1, v.rootInode());
            AtomicReference<Throwable> failure = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(2);
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int base = 10_000 * (t + 1);
                ts.add(new Thread(() -> {
                    try {
                        for (int i = 0; i < 2000; i++) {
                            int id = base + i;
                            v.setattr(ino, 0600 | (i & 7), id, id, id, id, null);
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    } finally {
                        done.countDown();
                    }
                }));
            }
            ts.add(new Thread(() -> {
                try {
                    while (done.getCount() > 0) {
                        InodeStat s = v.stat(ino);
                        if (s.uid() != s.gid() || s.uid() != 0 && s.mtimeNanos() != s.uid() || !s.isRegularFile()) {
                            throw new AssertionError("torn record read: " + s);
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
            ts.forEach(Thread::start);
            for (Thread th : ts) {
                th.join(60_000);
            }
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            InodeStat s = v.stat(ino);
            assertTrue(s.uid() == 11_999 || s.uid() == 21_999, s.toString());
            assertEquals(InodeFormat.S_IFREG | 0607, s.mode());
            assertTrue(s.ctimeNanos() >= s.btimeNanos());
            assertEquals(0, v.inodeCache().peek(ino).refs(), "setattr lets go of its reference");
            VolumeAllocations.freeInode(v, ino);
            assertThrows(InvalidArgumentException.class, () -> v.setattr(ino, 0600, -1, -1, -1, -1, null));
            assertSound(v);
        }
    }
}
