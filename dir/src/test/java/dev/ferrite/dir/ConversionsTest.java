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

    /**
     * A writer whose conversion finds the file's turn held longer than it spins ({@link Conversions#SPIN_NANOS})
     * parks, and the end of that turn wakes it to convert its own range.
     */
    @Test
    void aWriterWaitingLongerThanItSpinsParksUntilTheTurnEnds() throws Exception {
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
