package dev.ferrite.io;

import dev.ferrite.io.testkit.Blocks;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import dev.ferrite.io.testkit.TestSeed;

import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Batches through every engine of {@link DirectDevice} (io_uring, the pread/pwrite thread pool, the
 * submitting thread's own pread/pwrite): big
 * random batches against a model at several depths, per-request errors, latency stamping, and many
 * threads submitting at once to one device.
 */
@ExtendWith(TestSeed.class)
class IoEngineTest {
    private static final int BLOCK = 4096;
    private static final int BLOCKS = 512;

    @TempDir
    Path dir;

    /** Opens a device on the given engine, skipping the test if io_uring was asked for and the kernel refuses it. */
    private DirectDevice open(Path file, IoEngineKind engine, int depth, long blocks) {
        DeviceOptions options = DeviceOptions.defaults().withEngine(engine).withIoDepth(depth).withSize(blocks * BLOCK);
        try {
            DirectDevice device = DirectDevice.open(file, options);
            assertEquals(engine, device.engine());
            return device;
        } catch (DeviceException e) {
            assumeTrue(engine != IoEngineKind.IO_URING || !e.operation().equals("io_uring_setup"),
                    "io_uring is unavailable here (" + e.getMessage() + "); the THREADS runs still cover batches");
            throw e;
        }
    }

    static Stream<Arguments> enginesAndDepths() {
        return Stream.of(IoEngineKind.IO_URING, IoEngineKind.THREADS, IoEngineKind.SYNC)
                .flatMap(e -> Stream.of(1, 32, 64).map(d -> Arguments.of(e, d)));
    }

    @ParameterizedTest(name = "{0} depth {1}")
    @MethodSource("enginesAndDepths")
    void largeRandomBatchesMatchAModel(IoEngineKind engine, int depth) {
        Random random = TestSeed.random(engine.ordinal() * 100L + depth);
        try (Arena arena = Arena.ofConfined(); DirectDevice device = open(dir.resolve("dev"), engine, depth, BLOCKS)) {
            long[] generation = new long[BLOCKS];
            Blocks.writeAll(device, 1);
            Arrays.fill(generation, 1);
            IoBatch batch = new IoBatch(BLOCKS);
            for (int round = 2; round <= 5; round++) {
                batch.clear();
                // Disjoint runs of 1..4 blocks in random order, each read or written: requests in one batch are
                // unordered, so none may touch another's blocks.
                List<long[]> runs = new ArrayList<>();
                for (long b = 0; b < BLOCKS; ) {
                    int n = (int) Math.min(1 + random.nextInt(4), BLOCKS - b);
                    runs.add(new long[] {b, n});
                    b += n;
                }
                java.util.Collections.shuffle(runs, random);
                List<long[]> expected = new ArrayList<>();
                for (long[] run : runs) {
                    int b = (int) run[0], n = (int) run[1];
                    MemorySegment buf = buffer(arena, (long) n * BLOCK);
                    if (random.nextBoolean()) {
                        batch.write(b, fill(buf, b, BLOCK, round));
                        Arrays.fill(generation, b, b + n, round);
                        expected.add(null);
                    } else {
                        batch.read(b, buf);
                        expected.add(Arrays.copyOfRange(generation, b, b + n));
                    }
                }
                assertTrue(batch.size() > depth, "the batch should be deeper than the engine");
                device.submit(batch);
                for (int i = 0; i < batch.size(); i++) {
                    assertEquals(0, batch.error(i), "request " + i);
                    long[] gens = expected.get(i);
                    for (int k = 0; gens != null && k < gens.length; k++) {
                        assertHolds(batch.buffer(i).asSlice((long) k * BLOCK, BLOCK), batch.block(i) + k, BLOCK, gens[k]);
                    }
                }
            }
            MemorySegment all = buffer(arena, device.size());
            device.read(0, all);
            for (int b = 0; b < BLOCKS; b++) {
                assertHolds(all.asSlice((long) b * BLOCK, BLOCK), b, BLOCK, generation[b]);
            }
        }
    }

    /**
     * io_uring submits each stretch of requests that continue one another (same direction, next offset)
     * in one call and everything else singly: stretches longer than the depth, stretches that end where
     * the direction changes or a gap or a backward step begins, and multi-block requests in a stretch.
     */
    @ParameterizedTest(name = "{0} depth {1}")
    @MethodSource("enginesAndDepths")
    void contiguousStretchesAndSingleRequestsMixedInOneBatch(IoEngineKind engine, int depth) {
        try (Arena arena = Arena.ofConfined(); DirectDevice device = open(dir.resolve("dev"), engine, depth, BLOCKS)) {
            Blocks.writeAll(device, 1);
            long[] generation = new long[BLOCKS];
            Arrays.fill(generation, 1);
            IoBatch batch = new IoBatch(BLOCKS);
            List<long[]> reads = new ArrayList<>(); // {batch index, generation of the block read}
            for (int b = 0; b < 100; b++) {                                   // a stretch longer than any depth
                batch.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 2));
                generation[b] = 2;
            }
            batch.write(100, fill(buffer(arena, 4L * BLOCK), 100, BLOCK, 2)); // multi-block, continuing it
            batch.write(104, fill(buffer(arena, BLOCK), 104, BLOCK, 2));
            Arrays.fill(generation, 100, 105, 2);
            for (int b = 105; b < 170; b++) {                                 // the next offset, read
                reads.add(new long[] {batch.size(), generation[b]});
                batch.read(b, buffer(arena, BLOCK));
            }
            for (int b = 300; b < 320; b += 2) {                              // gaps
                batch.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 3));
                generation[b] = 3;
            }
            for (int b = 409; b >= 400; b--) {                                // backward
                batch.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 4));
                generation[b] = 4;
            }
            for (int b = 410; b < 420; b++) {                                 // alternating directions
                if (b % 2 == 0) {
                    reads.add(new long[] {batch.size(), generation[b]});
                    batch.read(b, buffer(arena, BLOCK));
                } else {
                    batch.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 5));
                    generation[b] = 5;
                }
            }
            device.submit(batch);
            for (int i = 0; i < batch.size(); i++) {
                assertEquals(0, batch.error(i), "request " + i);
            }
            for (long[] r : reads) {
                int i = (int) r[0];
                assertHolds(batch.buffer(i), batch.block(i), BLOCK, r[1]);
            }
            MemorySegment all = buffer(arena, device.size());
            device.read(0, all);
            for (int b = 0; b < BLOCKS; b++) {
                assertHolds(all.asSlice((long) b * BLOCK, BLOCK), b, BLOCK, generation[b]);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(names = {"IO_URING", "THREADS", "SYNC"})
    void perRequestErrorsAreReportedWhileTheOtherRequestsRun(IoEngineKind engine) throws IOException {
        Path file = dir.resolve("dev");
        try (Arena arena = Arena.ofConfined(); DirectDevice device = open(file, engine, 8, 16)) {
            Blocks.writeAll(device, 1);
            // Cut the file to 8 blocks behind the device's back: reads of blocks 8..15 now come up short (EIO).
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
                ch.truncate(8L * BLOCK);
            }
            IoBatch batch = new IoBatch(16);
            for (int b = 15; b >= 0; b--) {
                batch.read(b, buffer(arena, BLOCK));
            }
            var e = assertThrows(DeviceException.class, () -> device.submit(batch));
            assertEquals(Errno.EIO, e.errno());
            assertEquals("read", e.operation());
            assertEquals(15L * BLOCK, e.offset(), "the first failed request by batch index is block 15's");
            assertTrue(e.getMessage().startsWith(file + ": read at offset " + 15L * BLOCK + " failed: EIO"), e.getMessage());
            assertTrue(e.getMessage().contains("batch request 0 of 16 (8 failed)"), e.getMessage());
            for (int i = 0; i < 16; i++) {
                long block = batch.block(i);
                if (block >= 8) {
                    assertEquals(Errno.EIO, batch.error(i), "read of block " + block + " past the cut");
                } else {
                    assertEquals(0, batch.error(i), "read of block " + block);
                    assertHolds(batch.buffer(i), block, BLOCK, 1);
                }
            }
            // The same batch object runs again cleanly once the requests can succeed.
            batch.clear();
            batch.read(3, buffer(arena, BLOCK)).write(12, fill(buffer(arena, BLOCK), 12, BLOCK, 2));
            device.submit(batch);
            assertEquals(0, batch.error(0));
            assertEquals(0, batch.error(1));
            assertEquals(13L * BLOCK, Files.size(file), "the write past the cut extended the file");
        }
    }

    @ParameterizedTest
    @EnumSource(names = {"IO_URING", "THREADS", "SYNC"})
    void timedBatchesStampEveryRequestWithAPositiveLatency(IoEngineKind engine) {
        try (Arena arena = Arena.ofConfined(); DirectDevice device = open(dir.resolve("dev"), engine, 16, 64)) {
            IoBatch batch = new IoBatch(64).timed(true);
            assertTrue(batch.isTimed());
            for (int b = 0; b < 64; b++) {
                if (b % 2 == 0) {
                    batch.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 1));
                } else {
                    batch.read(b, buffer(arena, BLOCK));
                }
            }
            long before = System.nanoTime();
            device.submit(batch);
            long wall = System.nanoTime() - before;
            for (int i = 0; i < batch.size(); i++) {
                long latency = batch.latencyNanos(i);
                assertTrue(latency > 0 && latency <= wall, "request " + i + " latency " + latency + " ns, batch took " + wall);
            }
            IoBatch untimed = new IoBatch(1).read(0, buffer(arena, BLOCK));
            device.submit(untimed);
            assertEquals(0, untimed.latencyNanos(0), "an untimed batch stamps nothing");
        }
    }

    @ParameterizedTest
    @EnumSource(names = {"IO_URING", "THREADS", "SYNC"})
    void concurrentBatchesFromManyThreadsOnOneDevice(IoEngineKind engine) throws Exception {
        int threads = 6;
        int perThread = BLOCKS / threads;
        long ringsBefore = openRings();
        DirectDevice device = open(dir.resolve("dev"), engine, 32, BLOCKS);
        try {
            ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int first = t * perThread;
                workers.add(Thread.ofPlatform().name("submitter-" + t).start(() -> {
                    try (Arena arena = Arena.ofConfined()) {
                        IoBatch writes = new IoBatch(perThread);
                        IoBatch reads = new IoBatch(perThread);
                        MemorySegment out = buffer(arena, (long) perThread * BLOCK);
                        MemorySegment in = buffer(arena, (long) perThread * BLOCK);
                        start.await();
                        for (int gen = 1; gen <= 10; gen++) {
                            writes.clear();
                            reads.clear();
                            fill(out, first, BLOCK, gen);
                            for (int k = 0; k < perThread; k++) {
                                writes.write(first + k, out.asSlice((long) k * BLOCK, BLOCK));
                                reads.read(first + k, in.asSlice((long) k * BLOCK, BLOCK));
                            }
                            device.submit(writes);
                            device.submit(reads);
                            assertHolds(in, first, BLOCK, gen);
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            start.countDown();
            for (Thread w : workers) {
                w.join(TimeUnit.SECONDS.toMillis(30));
                assertFalse(w.isAlive(), w.getName() + " did not finish");
            }
            assertTrue(failures.isEmpty(), () -> "submitters failed: " + failures);
            if (engine == IoEngineKind.IO_URING) {
                long rings = openRings() - ringsBefore;
                assertTrue(rings >= 1 && rings <= 16, "the device should keep between 1 and 16 pooled rings, has " + rings);
            }
        } finally {
            device.close();
        }
        assertEquals(ringsBefore, openRings(), "closing the device should close every io_uring it made");
    }

    @ParameterizedTest
    @EnumSource(names = {"IO_URING", "THREADS", "SYNC"})
    void closedDeviceRefusesBatchesWithEbadfAndChangesNothing(IoEngineKind engine) throws IOException {
        Path file = dir.resolve("dev");
        try (Arena arena = Arena.ofConfined()) {
            DirectDevice device = open(file, engine, 4, 16);
            Blocks.writeAll(device, 1);
            device.close();
            byte[] before = Files.readAllBytes(file);
            MemorySegment dst = fill(buffer(arena, BLOCK), 0, 8, 77);
            IoBatch batch = new IoBatch(8).read(0, dst);
            for (int b = 1; b < 8; b++) {
                batch.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 2));
            }
            var e = assertThrows(DeviceException.class, () -> device.submit(batch));
            assertEquals(Errno.EBADF, e.errno());
            assertTrue(e.getMessage().startsWith(file + ": submit failed: EBADF"), e.getMessage());
            assertHolds(dst, 0, 8, 77);
            assertTrue(Arrays.equals(before, Files.readAllBytes(file)), "a batch on a closed device changed the file");
        }
    }

    /** io_uring file descriptors open in this process. */
    private static long openRings() throws IOException {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.filter(fd -> {
                try {
                    return Files.readSymbolicLink(fd).toString().contains("io_uring");
                } catch (IOException gone) {
                    return false; // the descriptor of the listing itself, closed by now
                }
            }).count();
        }
    }
}
