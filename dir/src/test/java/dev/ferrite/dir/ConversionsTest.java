package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Writers filling one file's unwritten space side by side, each block once in random order, so that their
 * conversions are batched ({@link Conversions}): in a file whose extents go to a tree, and in one small
 * enough to keep them inline, preallocated with and without KEEP_SIZE (the writes move the size, or not).
 * After them every block holds its writer's stamp, every extent of the range says written, the size is
 * the file's whole range and the volume checks clean.
 */
@ExtendWith(TestSeed.class)
class ConversionsTest {
    private static final long SEED = TestSeed.get(16);
    private static final int BS = 4096;
    static final int WRITERS = 8;

    @Test
    void writersFillingATreeFilesUnwrittenSpaceConvertEveryBlock() throws Exception {
        fill(SEED, 1536, FALLOC_FL_KEEP_SIZE, true);
        fill(SEED + 1, 1024, 0, true);
    }

    @Test
    void writersFillingAnInlineFilesUnwrittenSpaceConvertEveryBlock() throws Exception {
        for (int round = 0; round < 20; round++) {
            fill(SEED + round, 12, round % 2 == 0 ? FALLOC_FL_KEEP_SIZE : 0, false);
        }
    }

    /** A writer whose conversion finds the file's turn held parks, and the end of that turn wakes it to convert its own range. */
    @Test
    void aWriterFindingTheTurnHeldParksUntilTheTurnEnds() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, VolumeFixtures.OPTIONS);
             Arena arena = Arena.ofShared()) {
            Namespace ns = v.namespace();
            Handle f = newFile(ns);
            ns.fallocate(f, 0, 0, 2L * BS);
            writeStamped(ns, f, 0, 0, arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT)); // the file's queue exists after it
            Conversions.Queue q = f.inode.conversions;
            assertTrue(q.tryTurn());
            MemorySegment buf = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            Throwable[] failed = new Throwable[1];
            Thread writer = Thread.ofPlatform().name("conv-parked-writer").start(() -> {
                try {
                    writeStamped(ns, f, BS, 1, buf);
                } catch (Throwable t) {
                    failed[0] = t;
                }
            });
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
            while (writer.getState() != Thread.State.WAITING) {
                assertTrue(System.nanoTime() < deadline, "the writer did not park behind the held turn: " + writer.getState());
                Thread.sleep(1);
            }
            assertTrue(ns.extents(f, BS, BS).getFirst().unwritten(), "converted while the turn was held");
            q.endTurn();
            writer.join();
            assertEquals(null, failed[0]);
            for (FileExtent e : ns.extents(f, 0, 2L * BS)) {
                assertFalse(e.unwritten(), e + " is still unwritten");
            }
            assertEquals(2L * BS, ns.stat(f).size());
            f.close();
            CheckReport report = ns.check();
            assertTrue(report.clean(), report.toString());
        }
    }

    /**
     * Ranges published while the turn is held all go in the next turn's one transaction: 16 writers of a
     * tree file, among them three adjacent ranges in one extent (merged into one change) and two adjacent
     * ranges across the edge between two unwritten extents (merged, then, too big a change for one step,
     * converted as two), the rest apart. One transaction carries them all (one per 8 ranges before).
     */
    @Test
    void rangesPublishedBehindAHeldTurnConvertInOneTransaction() throws Exception {
        long[] blocks = {511, 512, 600, 601, 602, 70, 107, 144, 181, 218, 255, 292, 329, 366, 403, 440};
        VolumeOptions options = VolumeFixtures.OPTIONS.withLogBlocks(8192); // room to reserve for every range in one transaction
        try (MemoryDevice dev = MemoryDevice.create(4 * VolumeFixtures.BLOCKS, BS); Arena arena = Arena.ofShared()) {
            Volume.format(dev, options);
            try (Volume v = Volume.open(dev, options)) {
                Namespace ns = v.namespace();
                Handle f = newFile(ns);
                ns.fallocate(f, 0, 0, 512L * BS);
                try (Handle root = ns.openRoot(); Handle g = ns.create(root, "g", 0644, true)) {
                    ns.fallocate(g, 0, 0, BS); // so that the file's next extent does not continue its first on the device
                }
                ns.fallocate(f, 0, 512L * BS, 512L * BS);
                FileExtent low = ns.extents(f, 511L * BS, BS).getFirst(), high = ns.extents(f, 512L * BS, BS).getFirst();
                assertTrue(low.deviceOffset() + low.length() != high.deviceOffset(), "extents " + low + " and " + high + " continue on the device");
                MemorySegment buf = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                for (int b = 0; b < 60; b += 2) {
                    writeStamped(ns, f, (long) b * BS, 0, buf); // 30 written blocks between unwritten ones: a tree
                }
                assertEquals(InodeFormat.FORK_TREE, (int) ns.records.readRecord(f.ino(), InodeFormat::fork));
                Conversions.Queue q = f.inode.conversions;
                assertTrue(q.tryTurn());
                List<Thread> writers = new ArrayList<>();
                Throwable[] failed = new Throwable[blocks.length];
                for (int w = 0; w < blocks.length; w++) {
                    int id = w;
                    MemorySegment own = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                    writers.add(Thread.ofPlatform().name("conv-held-writer-" + w).start(() -> {
                        try {
                            writeStamped(ns, f, blocks[id] * BS, id + 1, own);
                        } catch (Throwable t) {
                            failed[id] = t;
                        }
                    }));
                }
                long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(20);
                for (Thread w : writers) {
                    while (!parkedForConversion(w)) {
                        assertTrue(System.nanoTime() < deadline, w.getName() + " did not park behind the held turn: " + w.getState());
                        Thread.sleep(1);
                    }
                }
                long before = v.journalStats().commits();
                q.endTurn();
                for (Thread w : writers) {
                    w.join();
                }
                for (Throwable t : failed) {
                    assertEquals(null, t);
                }
                assertEquals(1, v.journalStats().commits() - before, "transactions converting " + blocks.length + " ranges");
                MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                for (int w = 0; w < blocks.length; w++) {
                    long offset = blocks[w] * BS;
                    assertFalse(ns.extents(f, offset, BS).getFirst().unwritten(), "block " + blocks[w] + " is still unwritten");
                    assertEquals(BS, ns.read(f, offset, block));
                    assertEquals(stamp(offset, w + 1), block.get(U64, 0), "block " + blocks[w]);
                }
                assertTrue(ns.extents(f, 510L * BS, BS).getFirst().unwritten(), "block 510, never written, says written");
                assertEquals(1024L * BS, ns.stat(f).size());
                f.close();
                CheckReport report = ns.check();
                assertTrue(report.clean(), report.toString());
            }
        }
    }

    /**
     * Rounds of batches with random ranges: each round holds the turn while 12 writers publish ranges of
     * 1 to 3 blocks at random places of a tree file's 2 unwritten extents (beside each other, across the
     * extents' edge, over written blocks, apart), then lets the next turn convert them together. Every
     * block holds its last writer's stamp or zeros if never written, and the volume checks clean.
     */
    @Test
    void randomBatchesBehindAHeldTurnConvertExactlyTheirRanges() throws Exception {
        Random rnd = new Random(SEED);
        int blocks = 256, writers = 12;
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, VolumeFixtures.OPTIONS);
             Arena arena = Arena.ofShared()) {
            Namespace ns = v.namespace();
            Handle f = newFile(ns);
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, 0, blocks / 2L * BS);
            try (Handle root = ns.openRoot(); Handle g = ns.create(root, "g", 0644, true)) {
                ns.fallocate(g, 0, 0, BS);
            }
            ns.fallocate(f, FALLOC_FL_KEEP_SIZE, blocks / 2L * BS, blocks / 2L * BS);
            MemorySegment buf = arena.allocate(3 * BS, BlockDevice.BUFFER_ALIGNMENT);
            int[] owner = new int[blocks]; // the stamp's writer + 1 of each block, 0 for none
            for (int b = 1; b < 60; b += 2) {
                writeStamped(ns, f, (long) b * BS, 0, buf.asSlice(0, BS)); // a tree
                owner[b] = 1;
            }
            for (int round = 0; round < 20; round++) {
                String where = "seed " + SEED + ", round " + round;
                long[][] ranges = new long[writers][];
                boolean[] taken = new boolean[blocks];
                for (int w = 0; w < writers; w++) {
                    for (;;) {
                        int first = rnd.nextInt(blocks), len = 1 + rnd.nextInt(3);
                        if (first + len <= blocks && !taken[first] && !taken[first + len - 1] && (len < 3 || !taken[first + 1])) {
                            for (int b = first; b < first + len; b++) {
                                taken[b] = true;
                                owner[b] = round * writers + w + 2;
                            }
                            ranges[w] = new long[] {first, len};
                            break;
                        }
                    }
                }
                Conversions.Queue q = f.inode.conversions;
                assertTrue(q.tryTurn(), where);
                List<Thread> threads = new ArrayList<>();
                Throwable[] failed = new Throwable[writers];
                for (int w = 0; w < writers; w++) {
                    int id = w, stampOf = round * writers + w + 1;
                    MemorySegment own = arena.allocate(ranges[w][1] * BS, BlockDevice.BUFFER_ALIGNMENT);
                    threads.add(Thread.ofPlatform().name("conv-batch-writer-" + w).start(() -> {
                        try {
                            long offset = ranges[id][0] * BS;
                            for (long at = 0; at < own.byteSize(); at += 8) {
                                own.set(U64, at, stamp(offset + at, stampOf));
                            }
                            ns.write(f, offset, own);
                        } catch (Throwable t) {
                            failed[id] = t;
                        }
                    }));
                }
                long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(20);
                for (Thread t : threads) {
                    while (!parkedForConversion(t) && t.getState() != Thread.State.TERMINATED) {
                        assertTrue(System.nanoTime() < deadline, where + ": " + t.getName() + " neither parked nor finished: " + t.getState());
                        Thread.sleep(1);
                    }
                }
                q.endTurn();
                for (Thread t : threads) {
                    t.join();
                }
                for (Throwable t : failed) {
                    if (t != null) {
                        throw new AssertionError(where, t);
                    }
                }
            }
            MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            int last = blocks - 1;
            while (owner[last] == 0) {
                last--;
            }
            assertEquals((last + 1L) * BS, ns.stat(f).size(), "seed " + SEED + ": size");
            for (int b = 0; b < blocks; b++) {
                long offset = (long) b * BS;
                assertEquals(b <= last ? BS : 0, ns.read(f, offset, block));
                if (b <= last) {
                    assertEquals(owner[b] == 0 ? 0 : stamp(offset, owner[b] - 1), block.get(U64, 0), "seed " + SEED + ": block " + b);
                }
                assertEquals(owner[b] == 0, ns.extents(f, offset, BS).getFirst().unwritten(), "seed " + SEED + ": block " + b);
            }
            f.close();
            CheckReport report = ns.check();
            assertTrue(report.clean(), "seed " + SEED + ":\n" + report);
        }
    }

    /** Whether {@code t} is parked waiting for its range's conversion (not somewhere else on its way there). */
    static boolean parkedForConversion(Thread t) {
        if (t.getState() != Thread.State.WAITING) {
            return false;
        }
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getClassName().equals(Conversions.class.getName()) && e.getMethodName().equals("convert")) {
                return true;
            }
        }
        return false;
    }

    /** A new empty file "f" in the root, open for writing. */
    private static Handle newFile(Namespace ns) {
        try (Handle root = ns.openRoot()) {
            return ns.create(root, "f", 0644, true);
        }
    }

    /** The stamp of every 8-byte word of a block: its file offset and the writer's number (from 1). */
    static long stamp(long offset, int writer) {
        return offset << 16 | writer + 1;
    }

    /** What one writer of {@link #runWriters} does, with a block-sized aligned buffer of its own. */
    interface Writer {
        void run(int id, MemorySegment buf) throws Exception;
    }

    /** Runs {@link #WRITERS} threads doing {@code writer} and waits for them; the first failure fails the test. */
    static void runWriters(String where, Writer writer, Arena arena) throws InterruptedException {
        List<Thread> threads = new ArrayList<>();
        Throwable[] failed = new Throwable[WRITERS];
        for (int w = 0; w < WRITERS; w++) {
            int id = w;
            MemorySegment buf = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            threads.add(Thread.ofPlatform().name("conv-writer-" + w).start(() -> {
                try {
                    writer.run(id, buf);
                } catch (Throwable t) {
                    failed[id] = t;
                }
            }));
        }
        for (Thread t : threads) {
            t.join();
        }
        for (Throwable t : failed) {
            if (t != null) {
                throw new AssertionError(where, t);
            }
        }
    }

    /** Writes the block at {@code offset} of {@code f}, every word {@link #stamp stamped} for {@code writer}. */
    static void writeStamped(Namespace ns, Handle f, long offset, int writer, MemorySegment buf) {
        for (long at = 0; at < BS; at += 8) {
            buf.set(U64, at, stamp(offset + at, writer));
        }
        ns.write(f, offset, buf);
    }

    private static void fill(long seed, int blocks, int mode, boolean tree) throws Exception {
        String where = "seed " + seed + ", " + blocks + " blocks, fallocate mode " + mode;
        List<Integer> order = new ArrayList<>();
        for (int b = 0; b < blocks; b++) {
            order.add(b);
        }
        java.util.Collections.shuffle(order, new Random(seed));
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, VolumeFixtures.OPTIONS);
             Arena arena = Arena.ofShared()) {
            Namespace ns = v.namespace();
            Handle f = newFile(ns);
            ns.fallocate(f, mode, 0, (long) blocks * BS);
            runWriters(where, (id, buf) -> {
                for (int k = id; k < blocks; k += WRITERS) {
                    writeStamped(ns, f, (long) order.get(k) * BS, id, buf);
                }
            }, arena);
            assertEquals(tree, ns.records.readRecord(f.ino(), InodeFormat::fork) == InodeFormat.FORK_TREE, where + ": extent tree");
            assertEquals((long) blocks * BS, ns.stat(f).size(), where + ": size");
            MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            for (int k = 0; k < blocks; k++) {
                long offset = (long) order.get(k) * BS;
                assertEquals(BS, ns.read(f, offset, block));
                for (long at = 0; at < BS; at += 8) {
                    long word = block.get(U64, at);
                    if (word != stamp(offset + at, k % WRITERS)) {
                        throw new AssertionError(where + ": the word at offset " + (offset + at) + " is 0x" + Long.toHexString(word)
                                + ", not writer " + (k % WRITERS) + "'s");
                    }
                }
            }
            long mapped = 0;
            for (FileExtent e : ns.extents(f, 0, (long) blocks * BS)) {
                assertFalse(e.unwritten(), where + ": " + e + " is still unwritten");
                assertEquals(mapped, e.offset(), where + ": extents " + ns.extents(f, 0, (long) blocks * BS));
                mapped += e.length();
            }
            assertEquals((long) blocks * BS, mapped, where + ": bytes mapped");
            f.close();
            CheckReport report = ns.check();
            assertTrue(report.clean(), where + ":\n" + report);
        }
    }
}
