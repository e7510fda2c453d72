package dev.ferrite.io.testkit;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.IoBatch;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The {@link BlockDevice} contract, run against every implementation by a subclass that says how to make
 * a fresh read-write device of {@link #BLOCKS} blocks of {@link #BLOCK} bytes. Part of the test kit so
 * that a {@code BlockDevice} written elsewhere can be held to the same contract.
 */
@ExtendWith(TestSeed.class)
public abstract class BlockDeviceContract {
    protected static final int BLOCK = 4096;
    protected static final int BLOCKS = 64;

    /** The device under test, made by {@link #create} before each test and closed after it. */
    protected BlockDevice device;
    /** Where a test's buffers come from; closed after each test. */
    protected Arena arena;

    /** A new read-write device of {@code blocks} blocks of {@code blockSize} bytes. */
    protected abstract BlockDevice create(long blocks, int blockSize) throws Exception;

    /** Whether discarded blocks read back as zeros on this device (the contract leaves it unspecified). */
    protected abstract boolean discardReadsZero();

    /**
     * Asserts that the device, closed by the test, still holds {@code expected}: file-backed devices reopen
     * their file; a memory device is gone, so only the caller's buffers can show a change.
     */
    protected abstract void assertContentsAfterClose(byte[] expected) throws Exception;

    @BeforeEach
    void openDevice() throws Exception {
        arena = Arena.ofShared();
        device = create(BLOCKS, BLOCK);
    }

    @AfterEach
    void closeDevice() {
        if (device != null) {
            device.close();
        }
        arena.close();
    }

    @Test
    void reportsItsGeometry() {
        assertEquals(BLOCK, device.blockSize());
        assertEquals(BLOCKS, device.blockCount());
        assertEquals((long) BLOCKS * BLOCK, device.size());
        assertFalse(device.isReadOnly());
        assertFalse(device.name().isEmpty());
    }

    @Test
    void singleBlocksRoundTripAtFirstMiddleAndLastBlock() {
        Blocks.writeAll(device, 1);
        long[] targets = {0, BLOCKS / 2, BLOCKS - 1};
        for (long b : targets) {
            device.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 2 + b));
        }
        MemorySegment one = buffer(arena, BLOCK);
        for (long b = 0; b < BLOCKS; b++) {
            device.read(b, one);
            boolean target = b == 0 || b == BLOCKS / 2 || b == BLOCKS - 1;
            assertHolds(one, b, BLOCK, target ? 2 + b : 1);
        }
    }

    @Test
    void multiBlockWriteReadsBackBlockByBlockAndWhole() {
        Blocks.writeAll(device, 1);
        device.write(10, fill(buffer(arena, 8L * BLOCK), 10, BLOCK, 5));
        MemorySegment one = buffer(arena, BLOCK);
        for (long b = 9; b <= 18; b++) {
            device.read(b, one);
            assertHolds(one, b, BLOCK, b >= 10 && b < 18 ? 5 : 1);
        }
        MemorySegment whole = buffer(arena, 10L * BLOCK);
        device.read(9, whole);
        assertHolds(whole.asSlice(0, BLOCK), 9, BLOCK, 1);
        assertHolds(whole.asSlice(BLOCK, 8L * BLOCK), 10, BLOCK, 5);
        assertHolds(whole.asSlice(9L * BLOCK), 18, BLOCK, 1);
    }

    @Test
    void blockByBlockWritesReadBackAsOneTransfer() {
        for (long b = BLOCKS - 5; b < BLOCKS; b++) {
            device.write(b, fill(buffer(arena, BLOCK), b, BLOCK, 7));
        }
        MemorySegment tail = buffer(arena, 5L * BLOCK);
        device.read(BLOCKS - 5, tail);
        assertHolds(tail, BLOCKS - 5, BLOCK, 7);
    }

    @Test
    void wholeDeviceTransferCoversFirstAndLastBlock() {
        Blocks.writeAll(device, 3);
        MemorySegment all = buffer(arena, device.size());
        device.read(0, all);
        assertHolds(all, 0, BLOCK, 3);
    }

    @Test
    void overwriteReplacesOlderData() {
        MemorySegment buf = buffer(arena, 2L * BLOCK);
        device.write(20, fill(buf, 20, BLOCK, 1));
        device.write(20, fill(buf, 20, BLOCK, 2));
        MemorySegment back = buffer(arena, 2L * BLOCK);
        device.read(20, back);
        assertHolds(back, 20, BLOCK, 2);
    }

    @Test
    void flushKeepsWrittenData() {
        Blocks.writeAll(device, 4);
        device.flush();
        device.write(1, fill(buffer(arena, BLOCK), 1, BLOCK, 5));
        device.flush();
        device.flush(); // nothing new to flush is fine too
        MemorySegment two = buffer(arena, 2L * BLOCK);
        device.read(0, two);
        assertHolds(two.asSlice(0, BLOCK), 0, BLOCK, 4);
        assertHolds(two.asSlice(BLOCK), 1, BLOCK, 5);
    }

    @Test
    void discardLeavesEveryOtherBlockIntact() {
        Blocks.writeAll(device, 1);
        device.discard(10, 4);
        device.discard(BLOCKS - 1, 1);
        MemorySegment one = buffer(arena, BLOCK);
        for (long b = 0; b < BLOCKS; b++) {
            device.read(b, one);
            boolean discarded = b >= 10 && b < 14 || b == BLOCKS - 1;
            if (!discarded) {
                assertHolds(one, b, BLOCK, 1);
            } else if (discardReadsZero()) {
                Blocks.assertAllZero(one, "discarded block " + b);
            }
        }
        device.discard(0, BLOCKS);
        device.write(12, fill(one, 12, BLOCK, 2));
        device.read(12, one);
        assertHolds(one, 12, BLOCK, 2);
    }

    @Test
    void batchOfReadsAndWritesMatchesAModel() {
        Random random = TestSeed.random(1);
        long[] generation = new long[BLOCKS];
        Blocks.writeAll(device, 1);
        java.util.Arrays.fill(generation, 1);
        IoBatch batch = new IoBatch(BLOCKS);
        for (int round = 2; round < 6; round++) {
            batch.clear();
            List<long[]> expectedReads = new ArrayList<>(); // per read request: the generation of each of its blocks
            for (long b = 0; b < BLOCKS; ) {
                int n = 1 + random.nextInt(3);
                if (b + n > BLOCKS) {
                    n = (int) (BLOCKS - b);
                }
                MemorySegment buf = buffer(arena, (long) n * BLOCK);
                switch (random.nextInt(3)) {
                    case 0 -> {
                        batch.write(b, fill(buf, b, BLOCK, round));
                        java.util.Arrays.fill(generation, (int) b, (int) b + n, round);
                    }
                    case 1 -> {
                        batch.read(b, buf);
                        expectedReads.add(java.util.Arrays.copyOfRange(generation, (int) b, (int) b + n));
                    }
                    default -> {
                    }
                }
                b += n;
            }
            device.submit(batch);
            for (int i = 0, r = 0; i < batch.size(); i++) {
                assertEquals(0, batch.error(i), "request " + i);
                if (!batch.isWrite(i)) {
                    long[] expected = expectedReads.get(r++);
                    for (int k = 0; k < expected.length; k++) {
                        assertHolds(batch.buffer(i).asSlice((long) k * BLOCK, BLOCK), batch.block(i) + k, BLOCK, expected[k]);
                    }
                }
            }
        }
        MemorySegment one = buffer(arena, BLOCK);
        for (long b = 0; b < BLOCKS; b++) {
            device.read(b, one);
            assertHolds(one, b, BLOCK, generation[(int) b]);
        }
    }

    @Test
    void emptyBatchDoesNothing() {
        Blocks.writeAll(device, 1);
        byte[] before = Blocks.contents(device);
        device.submit(new IoBatch(4));
        assertArrayEquals(before, Blocks.contents(device));
    }

    // ---- Invalid requests: precise exception, message naming device, operation and block, nothing changed.

    @Test
    void misalignedBufferIsRejected() {
        MemorySegment misaligned = buffer(arena, 2L * BLOCK).asSlice(512, BLOCK);
        assertRejected("not aligned to 4096", 3, misaligned);
        MemorySegment odd = buffer(arena, 2L * BLOCK).asSlice(1, BLOCK);
        assertRejected("not aligned to 4096", 3, odd);
    }

    @Test
    void heapSegmentIsRejected() {
        assertRejected("Java heap", 3, MemorySegment.ofArray(new byte[BLOCK]));
        assertRejected("Java heap", 3, MemorySegment.ofArray(new long[BLOCK / 8]));
    }

    @Test
    void lengthThatIsNotABlockMultipleIsRejected() {
        assertRejected("buffer length 4608 is not a positive multiple of the block size 4096", 3,
                buffer(arena, BLOCK + 512L));
        assertRejected("buffer length 512 is not a positive multiple of the block size 4096", 3, buffer(arena, 512));
    }

    @Test
    void zeroLengthIsRejected() {
        assertRejected("buffer length 0 is not a positive multiple", 3, buffer(arena, BLOCK).asSlice(0, 0));
    }

    @Test
    void bufferOfAClosedArenaIsRejected() {
        MemorySegment freed;
        try (Arena gone = Arena.ofShared()) {
            freed = buffer(gone, BLOCK);
        }
        assertRejected("buffer's arena is closed", 3, freed);
    }

    @Test
    void missingBufferIsRejected() {
        assertRejected("has no buffer", 3, null);
    }

    @Test
    void blocksOutsideTheDeviceAreRejected() {
        MemorySegment one = buffer(arena, BLOCK);
        MemorySegment four = buffer(arena, 4L * BLOCK);
        assertRejected("of 1 blocks at block -1 lies outside the device's 64 blocks", -1, one);
        assertRejected("of 1 blocks at block 64 lies outside the device's 64 blocks", BLOCKS, one);
        assertRejected("of 4 blocks at block 61 lies outside the device's 64 blocks", BLOCKS - 3, four);
        assertRejected("lies outside the device's 64 blocks", Long.MAX_VALUE, one);
        assertRejected("lies outside the device's 64 blocks", Long.MIN_VALUE, four);
        // Just inside both ends is fine.
        device.read(BLOCKS - 4, four);
        device.read(0, four);
    }

    @Test
    void discardOutsideTheDeviceIsRejected() {
        Blocks.writeAll(device, 1);
        byte[] before = Blocks.contents(device);
        for (long[] bad : new long[][] {{-1, 1}, {BLOCKS, 1}, {BLOCKS - 2, 3}, {0, 0}, {5, -1}, {1, Long.MAX_VALUE},
                {Long.MAX_VALUE, 1}}) {
            var e = assertThrows(InvalidArgumentException.class, () -> device.discard(bad[0], bad[1]));
            assertTrue(e.getMessage().startsWith(device.name() + ": discard of " + bad[1] + " blocks at block " + bad[0]),
                    e.getMessage());
        }
        assertArrayEquals(before, Blocks.contents(device), "a rejected discard changed the device");
    }

    @Test
    void batchWithOneInvalidRequestRunsNone() {
        Blocks.writeAll(device, 1);
        byte[] before = Blocks.contents(device);
        IoBatch batch = new IoBatch(3)
                .write(5, fill(buffer(arena, BLOCK), 5, BLOCK, 9))
                .write(6, fill(buffer(arena, BLOCK), 6, BLOCK, 9))
                .read(BLOCKS, buffer(arena, BLOCK));
        var e = assertThrows(InvalidArgumentException.class, () -> device.submit(batch));
        assertTrue(e.getMessage().contains(device.name() + ": read of 1 blocks at block 64 lies outside"), e.getMessage());
        assertArrayEquals(before, Blocks.contents(device), "a rejected batch wrote something");
    }

    /**
     * Tries {@code buf} at {@code block} as a read, a write and in batches of each, expecting each to be an
     * InvalidArgumentException naming the device, operation and block, with {@code reason} in it; and that
     * neither the device nor the buffer changed.
     */
    private void assertRejected(String reason, long block, MemorySegment buf) {
        Blocks.writeAll(device, 1);
        byte[] before = Blocks.contents(device);
        boolean observable = buf != null && buf.scope().isAlive();
        if (observable && buf.isNative()) {
            fill(buf, 0, 8, 77); // a sentinel a read must not overwrite
        }
        byte[] bufBefore = observable ? buf.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE) : null;
        for (String op : new String[] {"read", "write"}) {
            Executable single = op.equals("read") ? () -> device.read(block, buf) : () -> device.write(block, buf);
            IoBatch batch = new IoBatch(1);
            if (op.equals("read")) {
                batch.read(block, buf);
            } else {
                batch.write(block, buf);
            }
            for (Executable call : List.of(single, (Executable) () -> device.submit(batch))) {
                var e = assertThrows(InvalidArgumentException.class, call, op + " at block " + block);
                String m = e.getMessage();
                assertTrue(m.startsWith(device.name() + ": " + op), "message should name device and operation: " + m);
                assertTrue(m.contains("block " + block), "message should name block " + block + ": " + m);
                assertTrue(m.contains(reason), "message should say '" + reason + "': " + m);
            }
        }
        assertArrayEquals(before, Blocks.contents(device), "a rejected request changed the device");
        if (observable) {
            assertArrayEquals(bufBefore, buf.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE), "a rejected read changed the buffer");
        }
    }

    // ---- Closed device.

    @Test
    void closedDeviceFailsEveryCallWithEbadfAndChangesNothing() throws Exception {
        Blocks.writeAll(device, 1);
        device.flush();
        byte[] before = Blocks.contents(device);
        device.close();
        device.close(); // idempotent

        MemorySegment dst = fill(buffer(arena, BLOCK), 0, 8, 77);
        MemorySegment src = fill(buffer(arena, BLOCK), 7, BLOCK, 2);
        assertClosed("read", 7L * BLOCK, () -> device.read(7, dst));
        assertClosed("write", 7L * BLOCK, () -> device.write(7, src));
        assertClosed("submit", -1, () -> device.submit(new IoBatch(2).write(7, src).read(8, dst)));
        assertClosed("submit", -1, () -> device.submit(new IoBatch(1)));
        assertClosed("flush", -1, device::flush);
        assertClosed("discard", 7L * BLOCK, () -> device.discard(7, 1));
        assertHolds(dst, 0, 8, 77);
        // Still describes itself after close.
        assertEquals(BLOCKS, device.blockCount());
        assertContentsAfterClose(before);
    }

    private void assertClosed(String op, long offset, Executable call) {
        var e = assertThrows(DeviceException.class, call, op + " after close");
        assertEquals(Errno.EBADF, e.errno(), e.getMessage());
        assertEquals(op, e.operation());
        assertEquals(device.name(), e.device());
        assertEquals(offset, e.offset());
        String where = offset >= 0 ? " at offset " + offset : "";
        assertTrue(e.getMessage().startsWith(device.name() + ": " + op + where + " failed: EBADF"), e.getMessage());
    }

    @Test
    void closeWaitsForCallsInProgressAndLaterCallsFailCleanly() throws Exception {
        int threads = 3;
        CountDownLatch running = new CountDownLatch(threads);
        ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int block = t * 16; // big transfers, so close() nearly always finds some in progress
            workers.add(Thread.ofPlatform().name("closer-" + t).start(() -> {
                try (Arena local = Arena.ofConfined()) {
                    MemorySegment buf = fill(buffer(local, 16L * BLOCK), block, BLOCK, 1);
                    IoBatch batch = new IoBatch(2).write(block, buf.asSlice(0, 8L * BLOCK)).read(block + 8, buf.asSlice(8L * BLOCK));
                    for (long i = 0; ; i++) {
                        switch ((int) (i % 3)) {
                            case 0 -> device.write(block, buf);
                            case 1 -> device.read(block, buf);
                            default -> device.submit(batch);
                        }
                        if (i == 50) {
                            running.countDown();
                        }
                    }
                } catch (DeviceException e) {
                    if (e.errno() != Errno.EBADF) {
                        unexpected.add(e);
                    }
                } catch (Throwable e) {
                    unexpected.add(e); // e.g. IllegalStateException from memory freed under a transfer
                } finally {
                    running.countDown();
                }
            }));
        }
        assertTrue(running.await(20, TimeUnit.SECONDS), "workers did not get going");
        device.close();
        for (Thread w : workers) {
            w.join(TimeUnit.SECONDS.toMillis(20));
            assertFalse(w.isAlive(), w.getName() + " is still running after close");
        }
        assertTrue(unexpected.isEmpty(), () -> "calls racing close failed otherwise than with EBADF: " + unexpected);
    }

    @Test
    void concurrentWritersToDisjointBlocksAllLand() throws Exception {
        int threads = 4;
        int per = BLOCKS / threads;
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int first = t * per;
            workers.add(Thread.ofPlatform().start(() -> {
                try (Arena local = Arena.ofConfined()) {
                    MemorySegment buf = buffer(local, BLOCK);
                    start.await();
                    for (int gen = 1; gen <= 20; gen++) {
                        for (int b = first; b < first + per; b++) {
                            device.write(b, fill(buf, b, BLOCK, gen));
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
        }
        start.countDown();
        for (Thread w : workers) {
            w.join(TimeUnit.SECONDS.toMillis(30));
        }
        assertTrue(failures.isEmpty(), () -> failures.toString());
        MemorySegment all = buffer(arena, device.size());
        device.read(0, all);
        assertHolds(all, 0, BLOCK, 20);
    }
}
