package dev.ferrite.io.testkit;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice.CrashState;
import dev.ferrite.io.testkit.RecordingDevice.Event.Kind;
import dev.ferrite.io.testkit.RecordingDevice.Event;
import dev.ferrite.io.testkit.RecordingDevice.Op;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

@ExtendWith(TestSeed.class)
class RecordingDeviceTest {
    private static final int BS = 4096;
    private static final int SECTOR = BlockDevice.SECTOR_SIZE;
    /** Seed of the randomized tests. */
    private static final long SEED = TestSeed.get(0x5EED_F3A1L);

    private Arena arena;

    @BeforeEach
    void openArena() {
        arena = Arena.ofShared();
    }

    @AfterEach
    void closeArena() {
        arena.close();
    }

    // ------------------------------------------------------------------------------------- recording

    @Test
    void recordsWritesDiscardsFlushesAndBatchWritesInOneOrder() {
        Random r = new Random(1);
        byte[] a = random(r, BS), b = random(r, 2 * BS), c = random(r, BS), d = random(r, BS), e = random(r, BS);
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 16, BS))) {
            write(rec, 2, a);
            rec.discard(5, 3);
            rec.flush();
            write(rec, 7, b);
            MemorySegment readBack = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            rec.submit(new IoBatch(3).write(0, segment(c)).read(2, readBack).write(9, segment(d)));
            List<Event> snapshot = rec.events();
            rec.flush();
            write(rec, 1, e);

            assertArrayEquals(a, readBack.toArray(JAVA_BYTE), "batch read sees the earlier write");
            assertEquals(6, snapshot.size(), "events() is a snapshot");
            List<Event> events = rec.events();
            assertEquals(8, rec.eventCount());
            assertEquals(8, events.size());
            assertEvent(events.get(0), 0, Kind.WRITE, 2, 1, a);
            assertEvent(events.get(1), 1, Kind.DISCARD, 5, 3, new byte[0]);
            assertEvent(events.get(2), 2, Kind.FLUSH, -1, 0, new byte[0]);
            assertEvent(events.get(3), 3, Kind.WRITE, 7, 2, b);
            assertEvent(events.get(4), 4, Kind.WRITE, 0, 1, c);
            assertEvent(events.get(5), 5, Kind.WRITE, 9, 1, d);
            assertEvent(events.get(6), 6, Kind.FLUSH, -1, 0, new byte[0]);
            assertEvent(events.get(7), 7, Kind.WRITE, 1, 1, e);
            for (int i = 0; i < events.size(); i++) {
                assertEquals(events.get(i), rec.event(i));
            }
            assertEquals(16, events.get(3).sectorCount());
            assertEquals(0, events.get(1).sectorCount());

            assertEquals(2, rec.flushCount());
            assertEquals(2, rec.flushEvent(0));
            assertEquals(6, rec.flushEvent(1));
            assertEquals(1, rec.issued(Op.READ));
            assertEquals(5, rec.issued(Op.WRITE));
            assertEquals(2, rec.issued(Op.FLUSH));
            assertEquals(1, rec.issued(Op.DISCARD));
        }
    }

    @Test
    void eventDataIsAPrivateReadOnlyCopy() {
        byte[] a = random(new Random(2), BS);
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 4, BS))) {
            MemorySegment src = segment(a);
            rec.write(1, src);
            src.fill((byte) 0x5A);
            MemorySegment data = rec.event(0).data();
            assertTrue(data.isReadOnly());
            assertArrayEquals(a, data.toArray(JAVA_BYTE));
        }
    }

    @Test
    void savesEachBlocksBaseContentsOnFirstTouchOnly() {
        Random r = new Random(3);
        MemoryDevice inner = MemoryDevice.create("dev", 16, BS);
        byte[] initial = random(r, 16 * BS);
        write(inner, 0, initial);
        byte[] x1 = random(r, BS), x2 = random(r, BS), y = random(r, 3 * BS), z = random(r, BS);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            assertEquals(0, rec.savedBaseBlocks());
            write(rec, 3, x1);
            write(rec, 3, x2);
            write(rec, 5, y);
            write(rec, 6, z);
            rec.discard(9, 2);
            rec.flush();
            rec.read(12, arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT));
            assertEquals(6, rec.savedBaseBlocks(), "blocks 3, 5, 6, 7, 9, 10 and nothing else");

            assertFalse(Arrays.equals(initial, contents(inner)), "the wrapped device has changed");
            assertArrayEquals(initial, image(rec, 0), "image 0 is the base image");

            byte[] expected = initial.clone();
            put(expected, 3, x1, BS);
            assertArrayEquals(expected, image(rec, 1));
            put(expected, 3, x2, BS);
            assertArrayEquals(expected, image(rec, 2));
            put(expected, 5, y, BS);
            assertArrayEquals(expected, image(rec, 3));
            put(expected, 6, z, BS);
            assertArrayEquals(expected, image(rec, 4));
            Arrays.fill(expected, 9 * BS, 11 * BS, (byte) 0);
            assertArrayEquals(expected, image(rec, 5), "discarded blocks read as zeros in images");
            assertArrayEquals(contents(inner), image(rec, 6));
        }
    }

    @Test
    void imageAtEveryPrefixMatchesAnIndependentReplay() {
        Random r = new Random(4);
        MemoryDevice inner = MemoryDevice.create("dev", 12, BS);
        byte[] initial = random(r, 12 * BS);
        write(inner, 0, initial);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            Script s = new Script(rec, initial);
            s.write(0, random(r, BS));
            s.write(4, random(r, 3 * BS));
            s.flush();
            s.write(5, random(r, BS));
            s.discard(3, 2);
            s.write(11, random(r, BS));
            s.batch(new long[] {1, 4, 11}, new byte[][] {random(r, BS), random(r, 2 * BS), random(r, BS)});
            s.flush();
            s.flush();
            s.write(0, random(r, 12 * BS));
            s.discard(0, 1);
            s.write(6, random(r, 2 * BS));

            s.assertEventsMatch();
            int n = rec.eventCount();
            assertEquals(s.model.events.size(), n);
            for (int i = 0; i <= n; i++) {
                assertArrayEquals(s.model.snapshots.get(i), image(rec, i), "image after " + i + " events");
            }
            assertArrayEquals(contents(inner), image(rec, n), "replaying everything gives the device's contents");
        }
    }

    @Test
    void flushEpochsSplitTheRecordingAtEachFlush() {
        Random r = new Random(5);
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 8, BS))) {
            write(rec, 0, random(r, BS));   // 0
            write(rec, 1, random(r, BS));   // 1
            rec.flush();                    // 2: flush 0
            rec.flush();                    // 3: flush 1, epoch 1 empty
            rec.discard(2, 1);              // 4
            write(rec, 2, random(r, BS));   // 5
            rec.flush();                    // 6: flush 2
            write(rec, 3, random(r, BS));   // 7
            write(rec, 3, random(r, BS));   // 8: unflushed tail

            assertEquals(3, rec.flushCount());
            assertEquals(2, rec.flushEvent(0));
            assertEquals(3, rec.flushEvent(1));
            assertEquals(6, rec.flushEvent(2));
            assertEquals(List.of(0, 1), indices(rec.epochWrites(0)));
            assertEquals(List.of(), indices(rec.epochWrites(1)));
            assertEquals(List.of(5), indices(rec.epochWrites(2)), "the discard is not a write");
            assertEquals(List.of(7, 8), indices(rec.epochWrites(3)), "the tail");

            assertEquals(new CrashState(0), rec.crashAfterFlush(-1));
            assertEquals(new CrashState(3), rec.crashAfterFlush(0));
            assertEquals(new CrashState(4), rec.crashAfterFlush(1));
            assertEquals(new CrashState(7).plus(8).plus(7), rec.crashAfterFlush(2, 8, 7));
        }
    }

    // ---------------------------------------------------------------------------------- crash states

    @Test
    void crashStatesApplyTheChosenWritesInTheGivenOrder() {
        Random r = new Random(6);
        byte[] a = random(r, BS), b = random(r, BS), c = random(r, BS), d = random(r, 2 * BS), e = random(r, BS);
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 8, BS))) {
            write(rec, 0, a); // 0
            rec.flush();      // 1
            write(rec, 1, b); // 2
            write(rec, 1, c); // 3
            write(rec, 2, d); // 4: blocks 2 and 3
            write(rec, 2, e); // 5

            byte[] zero = new byte[8 * BS];
            assertArrayEquals(zero, materialize(rec, rec.crashAfterFlush(-1)));
            byte[] flushed = zero.clone();
            put(flushed, 0, a, BS);
            assertArrayEquals(flushed, materialize(rec, rec.crashAfterFlush(0)));

            byte[] cLast = materialize(rec, rec.crashAfterFlush(0, 2, 3));
            byte[] bLast = materialize(rec, rec.crashAfterFlush(0, 3, 2));
            assertArrayEquals(with(flushed, 1, c), cLast);
            assertArrayEquals(with(flushed, 1, b), bLast);
            assertFalse(Arrays.equals(cLast, bLast), "reordered overlapping writes give different images");

            assertArrayEquals(with(with(flushed, 2, d), 2, e), materialize(rec, rec.crashAfterFlush(0, 4, 5)));
            assertArrayEquals(with(flushed, 2, d), materialize(rec, rec.crashAfterFlush(0, 5, 4)));
            assertArrayEquals(with(flushed, 2, d), materialize(rec, rec.crashAfterFlush(0, 4)), "a subset");
            assertArrayEquals(with(with(flushed, 1, c), 2, e),
                    materialize(rec, rec.crashAfterFlush(0, 5, 3)), "a subset, out of order");
            assertArrayEquals(with(with(with(flushed, 1, b), 2, d), 1, c),
                    materialize(rec, new CrashState(2).plus(4).plus(3)), "a general prefix plus extras");
        }
    }

    @Test
    void imagesAreIndependentDevices() {
        byte[] a = random(new Random(7), BS);
        MemoryDevice inner = MemoryDevice.create("dev", 4, BS);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            write(rec, 0, a);
            try (MemoryDevice one = rec.imageAt(1); MemoryDevice two = rec.imageAt(1)) {
                write(one, 0, new byte[BS]);
                assertArrayEquals(a, Arrays.copyOf(contents(two), BS));
                assertArrayEquals(a, Arrays.copyOf(contents(inner), BS));
                assertEquals(1, rec.eventCount());
            }
        }
    }

    @Test
    void tornWriteKeepsExactlyTheChosenSectorsAtEveryMask() {
        Random r = new Random(8);
        MemoryDevice inner = MemoryDevice.create("dev", 4, BS);
        byte[] initial = random(r, 4 * BS);
        write(inner, 0, initial);
        byte[] old = random(r, BS), neu = random(r, BS);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            write(rec, 1, old); // 0
            rec.flush();        // 1
            write(rec, 1, neu); // 2
            assertEquals(8, rec.event(2).sectorCount());
            for (int mask = 0; mask < 256; mask++) {
                BitSet sectors = BitSet.valueOf(new long[] {mask});
                CrashState state = rec.crashTornAt(2, sectors);
                assertEquals(rec.crashAfterFlush(0).plusTorn(2, sectors), state);
                byte[] image = materialize(rec, state);
                for (int s = 0; s < 8; s++) {
                    int at = BS + s * SECTOR;
                    byte[] want = sectors.get(s) ? neu : old;
                    assertArrayEquals(Arrays.copyOfRange(want, s * SECTOR, (s + 1) * SECTOR),
                            Arrays.copyOfRange(image, at, at + SECTOR), "mask " + sectors + ", sector " + s);
                }
                assertArrayEquals(Arrays.copyOf(initial, BS), Arrays.copyOf(image, BS), "block 0, mask " + sectors);
                assertArrayEquals(Arrays.copyOfRange(initial, 2 * BS, 4 * BS),
                        Arrays.copyOfRange(image, 2 * BS, 4 * BS), "blocks 2-3, mask " + sectors);
            }
        }
    }

    @Test
    void tornMaskIndexesSectorsAcrossTheBlocksOfAWrite() {
        Random r = new Random(9);
        MemoryDevice inner = MemoryDevice.create("dev", 6, SECTOR);
        byte[] initial = random(r, 6 * SECTOR);
        write(inner, 0, initial);
        byte[] neu = random(r, 3 * SECTOR);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            write(rec, 2, neu);
            assertEquals(3, rec.event(0).sectorCount());
            for (int mask = 0; mask < 8; mask++) {
                BitSet sectors = BitSet.valueOf(new long[] {mask});
                byte[] expected = initial.clone();
                for (int s = 0; s < 3; s++) {
                    if (sectors.get(s)) {
                        System.arraycopy(neu, s * SECTOR, expected, (2 + s) * SECTOR, SECTOR);
                    }
                }
                assertArrayEquals(expected, materialize(rec, rec.crashTornAt(0, sectors)), "mask " + sectors);
            }
        }
    }

    @Test
    void rejectsInvalidCrashStatesWithPreciseMessages() {
        Random r = new Random(10);
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 8, BS))) {
            write(rec, 0, random(r, BS)); // 0
            rec.flush();                  // 1
            rec.discard(1, 1);            // 2
            write(rec, 2, random(r, BS)); // 3
            write(rec, 3, random(r, BS)); // 4

            assertInvalid("crash state prefix -1 is negative", () -> new CrashState(-1));
            assertInvalid("crash state extra event -1 is negative", () -> new CrashState(2).plus(-1));
            assertInvalid("torn write of event 3 needs a sector mask", () -> new CrashState(2).plusTorn(3, null));
            assertInvalid("crash state extras must be a list, not null", () -> new CrashState(0, null));
            assertInvalid("crash state extra #1 is null",
                    () -> new CrashState(0, Arrays.asList(CrashState.Extra.whole(3), null)));

            assertInvalid("dev: crash state prefix 6 exceeds the 5 recorded events", () -> rec.imageAt(6));
            assertInvalid("dev: crash state prefix 6 exceeds the 5 recorded events",
                    () -> rec.materialize(new CrashState(6)));
            assertInvalid("dev: crash state extra #0 (event 0) lies inside the prefix of 2 events; extras must come after it",
                    () -> rec.materialize(new CrashState(2).plus(0)));
            assertInvalid("dev: crash state extra #1 (event 9) does not exist; 5 events recorded",
                    () -> rec.materialize(new CrashState(2).plus(3).plus(9)));
            assertInvalid("dev: crash state extra #0 (event 1) is a FLUSH, not a WRITE",
                    () -> rec.materialize(new CrashState(0).plus(1)));
            assertInvalid("dev: crash state extra #0 (event 2) is a DISCARD, not a WRITE",
                    () -> rec.materialize(new CrashState(2).plus(2)));
            assertInvalid("dev: crash state extra #2 (event 3) is listed more than once",
                    () -> rec.materialize(new CrashState(2).plus(3).plus(4).plusTorn(3, new BitSet())));
            BitSet beyond = new BitSet();
            beyond.set(1);
            beyond.set(8);
            assertInvalid("dev: crash state extra #0 (event 3): torn mask {1, 8} names sector 8 but the write covers sectors 0..7",
                    () -> rec.materialize(new CrashState(2).plusTorn(3, beyond)));

            assertInvalid("dev: flush 1 does not exist; 1 flushes recorded (-1 means before the first)",
                    () -> rec.crashAfterFlush(1));
            assertInvalid("dev: flush -2 does not exist; 1 flushes recorded (-1 means before the first)",
                    () -> rec.crashAfterFlush(-2));
            assertInvalid("dev: event 3 is not in epoch 0, which holds events [0, 1)", () -> rec.crashAfterFlush(-1, 3));
            assertInvalid("dev: event 0 is not in epoch 1, which holds events [2, 5)", () -> rec.crashAfterFlush(0, 0));
            assertInvalid("dev: crash state extra #0 (event 2) is a DISCARD, not a WRITE", () -> rec.crashAfterFlush(0, 2));
            assertInvalid("dev: crash state extra #1 (event 4) is listed more than once", () -> rec.crashAfterFlush(0, 4, 4));
            assertInvalid("dev: crash state extra #0 (event 1) is a FLUSH, not a WRITE", () -> rec.crashTornAt(1, new BitSet()));

            assertInvalid("dev: event 5 does not exist; 5 events recorded", () -> rec.event(5));
            assertInvalid("dev: flush 1 does not exist; 1 flushes recorded", () -> rec.flushEvent(1));
            assertInvalid("dev: epoch 2 does not exist; epochs are 0..1 with 1 flushes recorded", () -> rec.epochWrites(2));
            assertInvalid("dev: fault on write number 0 from now; the next one is 1", () -> rec.failOnce(Op.WRITE, 0, Errno.EIO));
            assertInvalid("dev: errno 0 is not an error", () -> rec.failFrom(Op.READ, 1, 0));
            assertInvalid("cannot record on a null device", () -> RecordingDevice.wrap(null));

            assertEquals(5, rec.eventCount(), "rejected requests record nothing");
        }
    }

    @Test
    void crashStateValuesAreImmutable() {
        BitSet mask = new BitSet();
        mask.set(2);
        CrashState state = new CrashState(1).plusTorn(4, mask);
        mask.set(3);
        BitSet got = state.extras().getFirst().sectors();
        assertEquals(BitSet.valueOf(new long[] {4}), got);
        got.set(5);
        assertEquals(BitSet.valueOf(new long[] {4}), state.extras().getFirst().sectors());
        assertNull(new CrashState(1).plus(4).extras().getFirst().sectors());
        assertThrows(UnsupportedOperationException.class, () -> state.extras().clear());
        assertEquals("CrashState[prefix 1, extras [4 torn {2}, 5]]", state.plus(5).toString());
    }

    // ---------------------------------------------------------------------------------------- faults

    @Test
    void readFaultOnceFailsOnlyTheNthReadAndTouchesNothing() {
        byte[] a = random(new Random(11), BS);
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 4, BS))) {
            write(rec, 3, a);
            MemorySegment dst = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            rec.read(3, dst);
            rec.failOnce(Op.READ, 2, Errno.EIO);
            rec.read(3, dst);
            dst.fill((byte) 0x77);
            DeviceException e = assertThrows(DeviceException.class, () -> rec.read(3, dst));
            assertDeviceException(e, "read", 3L * BS, Errno.EIO);
            byte[] untouched = new byte[BS];
            Arrays.fill(untouched, (byte) 0x77);
            assertArrayEquals(untouched, dst.toArray(JAVA_BYTE), "a failed read leaves the buffer alone");
            rec.read(3, dst);
            assertArrayEquals(a, dst.toArray(JAVA_BYTE));
            assertEquals(4, rec.issued(Op.READ), "failed reads count too");
            assertEquals(1, rec.eventCount(), "reads are not recorded");
        }
    }

    @Test
    void stickyReadFaultFailsEveryLaterReadUntilCleared() {
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 4, BS))) {
            MemorySegment dst = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            rec.failFrom(Op.READ, 1, Errno.ENXIO);
            for (int i = 0; i < 3; i++) {
                assertDeviceException(assertThrows(DeviceException.class, () -> rec.read(1, dst)), "read", BS, Errno.ENXIO);
            }
            write(rec, 1, new byte[BS]);
            rec.flush();
            rec.clearFaults();
            rec.read(1, dst);
            assertEquals(4, rec.issued(Op.READ));
        }
    }

    @Test
    void writeFaultOnceFailsOnlyTheNthWriteCountingFromArming() {
        Random r = new Random(12);
        MemoryDevice inner = MemoryDevice.create("dev", 4, BS);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            byte[] w0 = random(r, BS), w1 = random(r, BS), w2 = random(r, BS), w3 = random(r, BS);
            write(rec, 0, w0);
            rec.failOnce(Op.WRITE, 2, Errno.ENOSPC);
            write(rec, 1, w1);
            byte[] before = contents(inner);
            DeviceException e = assertThrows(DeviceException.class, () -> write(rec, 2, w2));
            assertDeviceException(e, "write", 2L * BS, Errno.ENOSPC);
            assertArrayEquals(before, contents(inner), "a failed write changes nothing");
            assertEquals(2, rec.eventCount(), "a failed write records nothing");
            write(rec, 2, w3);
            assertEquals(3, rec.eventCount());
            assertEvent(rec.event(2), 2, Kind.WRITE, 2, 1, w3);
            assertEquals(4, rec.issued(Op.WRITE));
            assertArrayEquals(contents(inner), image(rec, 3));
        }
    }

    @Test
    void stickyWriteFaultModelsADeadDevice() {
        Random r = new Random(13);
        MemoryDevice inner = MemoryDevice.create("dev", 4, BS);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            byte[] w0 = random(r, BS);
            rec.failFrom(Op.WRITE, 2, Errno.EIO);
            write(rec, 0, w0);
            byte[] before = contents(inner);
            for (int i = 0; i < 3; i++) {
                int block = i;
                assertDeviceException(assertThrows(DeviceException.class, () -> write(rec, block, random(r, BS))),
                        "write", (long) block * BS, Errno.EIO);
            }
            IoBatch batch = new IoBatch(1).write(3, segment(random(r, BS)));
            assertThrows(DeviceException.class, () -> rec.submit(batch));
            assertEquals(Errno.EIO, batch.error(0));
            assertArrayEquals(before, contents(inner));
            assertEquals(1, rec.eventCount());
            rec.flush();
            assertEquals(2, rec.eventCount(), "other kinds of operation still work");
            rec.clearFaults();
            write(rec, 1, random(r, BS));
            assertEquals(3, rec.eventCount());
            assertEquals(6, rec.issued(Op.WRITE));
        }
    }

    @Test
    void flushFaultsOnceAndSticky() {
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 4, BS))) {
            write(rec, 0, new byte[BS]);
            rec.failOnce(Op.FLUSH, 1, Errno.EIO);
            assertDeviceException(assertThrows(DeviceException.class, rec::flush), "flush", -1, Errno.EIO);
            assertEquals(0, rec.flushCount(), "a failed flush records nothing");
            assertEquals(1, rec.eventCount());
            rec.flush();
            assertEquals(1, rec.flushCount());
            assertEquals(1, rec.flushEvent(0));

            rec.failFrom(Op.FLUSH, 2, Errno.EDQUOT);
            rec.flush();
            for (int i = 0; i < 3; i++) {
                assertDeviceException(assertThrows(DeviceException.class, rec::flush), "flush", -1, Errno.EDQUOT);
            }
            assertEquals(2, rec.flushCount());
            assertEquals(3, rec.eventCount());
            assertEquals(6, rec.issued(Op.FLUSH));
        }
    }

    @Test
    void aStalledFlushWaitsUntilResumedWhileWritesAndReadsGoOn() throws Exception {
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 4, BS))) {
            write(rec, 0, new byte[BS]);
            rec.stall(Op.FLUSH);
            CountDownLatch flushed = new CountDownLatch(1);
            Thread t = Thread.ofPlatform().daemon().start(() -> {
                rec.flush();
                flushed.countDown();
            });
            while (t.getState() != Thread.State.TIMED_WAITING) {
                assertTrue(t.isAlive(), "the stalled flush ended before it was resumed");
                Thread.onSpinWait();
            }
            byte[] b = random(new Random(16), BS);
            write(rec, 1, b); // the stalled flush holds no lock of the device
            MemorySegment back = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            rec.read(1, back);
            assertArrayEquals(b, back.toArray(JAVA_BYTE));
            assertEquals(0, rec.issued(Op.FLUSH), "a stalled flush has not reached the device");
            assertFalse(flushed.await(50, TimeUnit.MILLISECONDS));
            rec.resume(Op.FLUSH);
            assertTrue(flushed.await(10, TimeUnit.SECONDS), "resume let the flush go on");
            rec.flush(); // not stalled any more
            assertEquals(2, rec.flushCount());
            assertEquals(2, rec.flushEvent(0), "the flush landed after the write made while it waited");
        }
    }

    @Test
    void releaseHeldLetsTheHeldFlushGoOnAndHoldsTheNext() throws Exception {
        try (RecordingDevice rec = RecordingDevice.wrap(MemoryDevice.create("dev", 4, BS))) {
            rec.stall(Op.FLUSH);
            CountDownLatch first = new CountDownLatch(1);
            CountDownLatch second = new CountDownLatch(1);
            Thread t = Thread.ofPlatform().daemon().start(() -> {
                rec.flush();
                first.countDown();
                rec.flush();
                second.countDown();
            });
            while (t.getState() != Thread.State.TIMED_WAITING) {
                assertTrue(t.isAlive(), "the stalled flush ended before it was released");
                Thread.onSpinWait();
            }
            rec.releaseHeld(Op.FLUSH);
            assertTrue(first.await(10, TimeUnit.SECONDS), "the held flush went on");
            assertFalse(second.await(100, TimeUnit.MILLISECONDS), "the next flush is held");
            assertEquals(1, rec.issued(Op.FLUSH));
            rec.resume(Op.FLUSH);
            assertTrue(second.await(10, TimeUnit.SECONDS), "resume let the next flush go on");
            assertEquals(2, rec.issued(Op.FLUSH));
        }
    }

    @Test
    void discardFaultChangesAndRecordsNothing() {
        MemoryDevice inner = MemoryDevice.create("dev", 4, BS);
        byte[] initial = random(new Random(14), 4 * BS);
        write(inner, 0, initial);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            rec.failOnce(Op.DISCARD, 1, Errno.EOPNOTSUPP);
            assertDeviceException(assertThrows(DeviceException.class, () -> rec.discard(1, 2)), "discard", BS, Errno.EOPNOTSUPP);
            assertArrayEquals(initial, contents(inner));
            assertEquals(0, rec.eventCount());
            rec.discard(1, 2);
            assertEquals(Kind.DISCARD, rec.event(0).kind());
        }
    }

    @Test
    void batchRequestsRunAndFailIndividually() {
        Random r = new Random(15);
        MemoryDevice inner = MemoryDevice.create("dev", 8, BS);
        byte[] initial = random(r, 8 * BS);
        write(inner, 0, initial);
        byte[] a = random(r, BS), b = random(r, BS), c = random(r, 2 * BS);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            MemorySegment dst = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            IoBatch batch = new IoBatch(4).write(0, segment(a)).read(5, dst).write(1, segment(b)).write(2, segment(c));
            rec.failOnce(Op.WRITE, 2, Errno.EIO);
            DeviceException e = assertThrows(DeviceException.class, () -> rec.submit(batch));
            assertDeviceException(e, "write", BS, Errno.EIO);
            assertTrue(e.getMessage().contains("batch request 2 of 4 (1 failed)"), e.getMessage());
            assertEquals(0, batch.error(0));
            assertEquals(0, batch.error(1));
            assertEquals(Errno.EIO, batch.error(2));
            assertEquals(0, batch.error(3));
            assertArrayEquals(Arrays.copyOfRange(initial, 5 * BS, 6 * BS), dst.toArray(JAVA_BYTE));

            assertEquals(2, rec.eventCount(), "one event per successful write, none for the failed one");
            assertEvent(rec.event(0), 0, Kind.WRITE, 0, 1, a);
            assertEvent(rec.event(1), 1, Kind.WRITE, 2, 2, c);
            byte[] expected = with(with(initial, 0, a), 2, c);
            assertArrayEquals(expected, contents(inner), "block 1 was not written");
            assertArrayEquals(expected, image(rec, 2));

            rec.failOnce(Op.READ, 1, Errno.EIO);
            IoBatch reads = new IoBatch(2).read(0, dst).read(1, arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT));
            assertThrows(DeviceException.class, () -> rec.submit(reads));
            assertEquals(Errno.EIO, reads.error(0));
            assertEquals(0, reads.error(1));
            assertEquals(3, rec.issued(Op.READ));
            assertEquals(3, rec.issued(Op.WRITE));
        }
    }

    // ---------------------------------------------------------------------------------- concurrency

    /**
     * Threads hammer a few blocks in short rounds; after each round the recording, replayed in order,
     * must give the device's contents. Many rounds, because a write recorded out of the order it was
     * applied only shows while no later write to the same block hides it.
     */
    @Test
    void concurrentWritersProduceARecordingThatReplaysToTheDevice() throws Exception {
        runConcurrentWriters(SEED);
    }

    private void runConcurrentWriters(long seed) throws Exception {
        int threads = 4, rounds = 400, opsPerRound = 12, blocks = 3, bs = SECTOR;
        MemoryDevice inner = MemoryDevice.create("dev", blocks, bs);
        try (RecordingDevice rec = RecordingDevice.wrap(inner);
             ExecutorService pool = Executors.newFixedThreadPool(threads)) {
            // Every buffer address must be 4096-aligned, so the second write of a batch gets its own segment.
            MemorySegment[] sources = new MemorySegment[threads * opsPerRound];
            MemorySegment[] seconds = new MemorySegment[threads * opsPerRound];
            Random init = new Random(seed);
            for (int i = 0; i < sources.length; i++) {
                sources[i] = segment(random(init, 2 * bs));
                seconds[i] = segment(random(init, bs));
            }
            byte[] replay = new byte[blocks * bs];
            int replayed = 0, writes = 0, flushes = 0, discards = 0;
            for (int round = 0; round < rounds; round++) {
                CyclicBarrier start = new CyclicBarrier(threads);
                List<Future<int[]>> done = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    Random r = new Random(seed + round * (long) threads + t);
                    int first = t * opsPerRound;
                    done.add(pool.submit(() -> {
                        int[] counts = new int[3];
                        IoBatch batch = new IoBatch(2);
                        start.await(10, TimeUnit.SECONDS);
                        for (int i = 0; i < opsPerRound; i++) {
                            MemorySegment src = sources[first + i];
                            int kind = r.nextInt(20);
                            if (kind < 14) {
                                int n = kind < 11 ? 1 : 2;
                                rec.write(r.nextInt(blocks - n + 1), src.asSlice(0, (long) n * bs));
                                counts[0]++;
                            } else if (kind < 17) {
                                batch.clear();
                                rec.submit(batch.write(r.nextInt(blocks), src.asSlice(0, bs))
                                        .write(r.nextInt(blocks), seconds[first + i]));
                                counts[0] += 2;
                            } else if (kind < 19) {
                                rec.flush();
                                counts[1]++;
                            } else {
                                rec.discard(r.nextInt(blocks), 1);
                                counts[2]++;
                            }
                        }
                        return counts;
                    }));
                }
                for (Future<int[]> f : done) {
                    int[] c = f.get(30, TimeUnit.SECONDS);
                    writes += c[0];
                    flushes += c[1];
                    discards += c[2];
                }

                List<Event> events = rec.events();
                assertEquals(writes + flushes + discards, events.size());
                for (; replayed < events.size(); replayed++) {
                    Event e = events.get(replayed);
                    assertEquals(replayed, e.index());
                    switch (e.kind()) {
                        case WRITE -> put(replay, e.block(), e.data().toArray(JAVA_BYTE), bs);
                        case DISCARD -> Arrays.fill(replay, (int) e.block() * bs, (int) (e.block() + 1) * bs, (byte) 0);
                        case FLUSH -> { }
                    }
                }
                assertArrayEquals(contents(inner), replay, "round " + round
                        + ": replaying the recording in order gives the device's contents");
            }
            assertEquals(flushes, rec.flushCount());
            assertEquals(writes, rec.issued(Op.WRITE));
            assertArrayEquals(replay, image(rec, rec.eventCount()));
        }
    }

    /**
     * Deterministic half of the above: while one write is held inside the wrapped device, a write, a
     * discard and a flush from other threads must all wait for it rather than reach the device, and the
     * held write is recorded first.
     */
    @Test
    void aWriteInsideTheDeviceHoldsBackEveryOtherMutation() throws Exception {
        Random r = new Random(18);
        byte[] a = random(r, BS), b = random(r, BS);
        GatedDevice gated = new GatedDevice(MemoryDevice.create("dev", 4, BS));
        try (RecordingDevice rec = RecordingDevice.wrap(gated)) {
            MemorySegment srcA = segment(a), srcB = segment(b);
            gated.holdNextWrite();
            Thread first = Thread.ofPlatform().start(() -> rec.write(0, srcA));
            List<Thread> others;
            try {
                assertTrue(gated.held.await(10, TimeUnit.SECONDS), "the first write reaches the device");
                others = List.of(
                        Thread.ofPlatform().start(() -> rec.write(0, srcB)),
                        Thread.ofPlatform().start(() -> rec.discard(1, 1)),
                        Thread.ofPlatform().start(rec::flush));
                awaitCondition("the other mutations wait, finish or reach the device", () -> gated.maxActive.get() > 1
                        || others.stream().map(Thread::getState).allMatch(s -> s == Thread.State.WAITING
                                || s == Thread.State.BLOCKED || s == Thread.State.TERMINATED));
                assertEquals(1, gated.maxActive.get(), "no other mutation reached the device while the write was in it");
                assertTrue(others.stream().allMatch(Thread::isAlive), "the other mutations wait for the held write");
            } finally {
                gated.release.countDown();
            }
            first.join(10_000);
            for (Thread t : others) {
                t.join(10_000);
            }
            assertEquals(1, gated.maxActive.get());
            List<Event> events = rec.events();
            assertEquals(4, events.size());
            assertEvent(events.getFirst(), 0, Kind.WRITE, 0, 1, a);
            assertArrayEquals(contents(gated.inner), image(rec, 4));
        }
    }

    // -------------------------------------------------------------------------------------- lifecycle

    @Test
    void closeClosesTheWrappedDeviceAndKeepsTheRecordingReadable() {
        MemoryDevice inner = MemoryDevice.create("dev", 4, BS);
        RecordingDevice rec = RecordingDevice.wrap(inner);
        write(rec, 0, new byte[BS]);
        rec.flush();
        rec.close();
        rec.close();
        MemorySegment dst = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
        assertEquals(Errno.EBADF, assertThrows(DeviceException.class, () -> inner.read(0, dst)).errno());
        assertEquals(Errno.EBADF, assertThrows(DeviceException.class, () -> rec.write(0, dst)).errno());
        assertEquals(2, rec.eventCount());
        assertEquals(1, rec.flushCount());
        DeviceException e = assertThrows(DeviceException.class, () -> rec.imageAt(1));
        assertDeviceException(e, "materialize", -1, Errno.EBADF);
    }

    // --------------------------------------------------------------------------------- property test

    /**
     * Random writes, discards, flushes, batches and reads with faults armed now and then, checked against
     * a byte-array model: the recorded events, every prefix image, the flush epochs, and random crash
     * states with reordered and torn extras.
     */
    @Test
    void randomizedRecordingMatchesAModel() {
        runRandomized(SEED);
    }

    private void runRandomized(long seed) {
        Random r = new Random(seed);
        int bs = r.nextBoolean() ? SECTOR : BS;
        int blocks = 6 + r.nextInt(10);
        MemoryDevice inner = MemoryDevice.create("dev", blocks, bs);
        byte[] initial = random(r, blocks * bs);
        write(inner, 0, initial);
        try (RecordingDevice rec = RecordingDevice.wrap(inner)) {
            Script s = new Script(rec, initial);
            FaultModel faults = new FaultModel();
            for (int step = 0; step < 160; step++) {
                int what = r.nextInt(100);
                if (what < 6) {
                    Op op = Op.values()[r.nextInt(4)];
                    long nth = 1 + r.nextInt(3);
                    int errno = r.nextBoolean() ? Errno.EIO : Errno.ENOSPC;
                    boolean sticky = r.nextInt(4) == 0;
                    if (sticky) {
                        rec.failFrom(op, nth, errno);
                    } else {
                        rec.failOnce(op, nth, errno);
                    }
                    faults.arm(op, nth, errno, sticky);
                } else if (what < 9) {
                    rec.clearFaults();
                    faults.clear();
                } else if (what < 45) {
                    int n = 1 + r.nextInt(3);
                    long block = r.nextInt(blocks - n + 1);
                    byte[] data = random(r, n * bs);
                    int errno = faults.next(Op.WRITE);
                    if (errno == 0) {
                        s.write(block, data);
                    } else {
                        expectFault(errno, () -> write(rec, block, data));
                    }
                } else if (what < 57) {
                    int n = 1 + r.nextInt(2);
                    long block = r.nextInt(blocks - n + 1);
                    int errno = faults.next(Op.DISCARD);
                    if (errno == 0) {
                        s.discard(block, n);
                    } else {
                        expectFault(errno, () -> rec.discard(block, n));
                    }
                } else if (what < 70) {
                    int errno = faults.next(Op.FLUSH);
                    if (errno == 0) {
                        s.flush();
                    } else {
                        expectFault(errno, rec::flush);
                    }
                } else if (what < 85) {
                    randomBatch(r, s, faults, bs, blocks);
                } else {
                    long block = r.nextInt(blocks);
                    MemorySegment dst = arena.allocate(bs, BlockDevice.BUFFER_ALIGNMENT);
                    int errno = faults.next(Op.READ);
                    if (errno == 0) {
                        rec.read(block, dst);
                        assertArrayEquals(Arrays.copyOfRange(s.model.image, (int) block * bs, (int) (block + 1) * bs),
                                dst.toArray(JAVA_BYTE), "read of block " + block + " at step " + step);
                    } else {
                        expectFault(errno, () -> rec.read(block, dst));
                    }
                }
            }
            for (Op op : Op.values()) {
                assertEquals(faults.issued[op.ordinal()], rec.issued(op), "issued " + op);
            }
            s.assertEventsMatch();
            Model m = s.model;
            int n = rec.eventCount();
            for (int i = 0; i <= n; i++) {
                assertArrayEquals(m.snapshots.get(i), image(rec, i), "image after " + i + " events");
            }

            List<Integer> flushes = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                if (m.events.get(i).kind == Kind.FLUSH) {
                    flushes.add(i);
                }
            }
            assertEquals(flushes.size(), rec.flushCount());
            for (int k = 0; k <= flushes.size(); k++) {
                int from = k == 0 ? 0 : flushes.get(k - 1) + 1, to = k == flushes.size() ? n : flushes.get(k);
                List<Integer> expected = new ArrayList<>();
                for (int i = from; i < to; i++) {
                    if (m.events.get(i).kind == Kind.WRITE) {
                        expected.add(i);
                    }
                }
                assertEquals(expected, indices(rec.epochWrites(k)), "epoch " + k);
            }

            for (int c = 0; c < 150; c++) {
                int prefix = r.nextInt(n + 1);
                List<Integer> candidates = new ArrayList<>();
                for (int i = prefix; i < n; i++) {
                    if (m.events.get(i).kind == Kind.WRITE && r.nextInt(3) > 0) {
                        candidates.add(i);
                    }
                }
                Collections.shuffle(candidates, r);
                CrashState state = new CrashState(prefix);
                for (int e : candidates) {
                    if (r.nextInt(4) == 0) {
                        int sectors = m.events.get(e).data.length / SECTOR;
                        BitSet mask = new BitSet();
                        for (int b = 0; b < sectors; b++) {
                            if (r.nextBoolean()) {
                                mask.set(b);
                            }
                        }
                        state = state.plusTorn(e, mask);
                    } else {
                        state = state.plus(e);
                    }
                }
                assertArrayEquals(m.crash(state), materialize(rec, state), state.toString());
            }
        }
    }

    private void randomBatch(Random r, Script s, FaultModel faults, int bs, int blocks) {
        int size = 1 + r.nextInt(4);
        IoBatch batch = new IoBatch(size);
        int[] expectedErrno = new int[size];
        byte[][] writes = new byte[size][];
        boolean[] written = new boolean[blocks];
        for (int i = 0; i < size; i++) {
            long block = r.nextInt(blocks);
            MemorySegment buf = arena.allocate(bs, BlockDevice.BUFFER_ALIGNMENT);
            if (r.nextBoolean()) {
                writes[i] = random(r, bs);
                buf.copyFrom(MemorySegment.ofArray(writes[i]));
                batch.write(block, buf);
                expectedErrno[i] = faults.next(Op.WRITE);
                written[(int) block] = true;
            } else {
                batch.read(block, buf);
                expectedErrno[i] = faults.next(Op.READ);
            }
        }
        boolean anyFailed = Arrays.stream(expectedErrno).anyMatch(e -> e != 0);
        byte[] before = s.model.image.clone();
        if (anyFailed) {
            assertThrows(DeviceException.class, () -> s.rec.submit(batch));
        } else {
            s.rec.submit(batch);
        }
        for (int i = 0; i < size; i++) {
            assertEquals(expectedErrno[i], batch.error(i), "batch request " + i);
            if (expectedErrno[i] != 0) {
                continue;
            }
            int block = (int) batch.block(i);
            if (batch.isWrite(i)) {
                s.model.write(block, writes[i]);
            } else if (!written[block]) {
                assertArrayEquals(Arrays.copyOfRange(before, block * bs, (block + 1) * bs),
                        batch.buffer(i).toArray(JAVA_BYTE), "batch read of block " + block);
            }
        }
    }

    private static void expectFault(int errno, Executable op) {
        assertEquals(errno, assertThrows(DeviceException.class, op).errno());
    }

    /** The fault rules, restated: counts per kind, the n-th from arming fails, sticky ones keep failing. */
    private static final class FaultModel {
        final long[] issued = new long[4];
        final long[] target = new long[4];
        final int[] errno = new int[4];
        final boolean[] sticky = new boolean[4];

        void arm(Op op, long nth, int err, boolean isSticky) {
            int i = op.ordinal();
            target[i] = issued[i] + nth;
            errno[i] = err;
            sticky[i] = isSticky;
        }

        void clear() {
            Arrays.fill(errno, 0);
        }

        /** Counts one operation; returns the errno it must fail with, or 0. */
        int next(Op op) {
            int i = op.ordinal();
            long n = ++issued[i];
            return errno[i] != 0 && (n == target[i] || sticky[i] && n > target[i]) ? errno[i] : 0;
        }
    }

    // ----------------------------------------------------------------------------------------- model

    private record Expected(Kind kind, long block, long blockCount, byte[] data) {
    }

    /** The device as plain bytes, with a snapshot after every event. */
    private static final class Model {
        final int bs;
        final byte[] image;
        final List<byte[]> snapshots = new ArrayList<>();
        final List<Expected> events = new ArrayList<>();

        Model(byte[] base, int bs) {
            this.bs = bs;
            this.image = base.clone();
            snapshots.add(base.clone());
        }

        void write(long block, byte[] data) {
            put(image, block, data, bs);
            record(new Expected(Kind.WRITE, block, data.length / bs, data));
        }

        void discard(long block, long count) {
            Arrays.fill(image, (int) (block * bs), (int) ((block + count) * bs), (byte) 0);
            record(new Expected(Kind.DISCARD, block, count, new byte[0]));
        }

        void flush() {
            record(new Expected(Kind.FLUSH, -1, 0, new byte[0]));
        }

        private void record(Expected e) {
            events.add(e);
            snapshots.add(image.clone());
        }

        byte[] crash(CrashState state) {
            byte[] out = snapshots.get(state.prefix()).clone();
            for (CrashState.Extra x : state.extras()) {
                Expected e = events.get(x.event());
                int at = (int) (e.block * bs);
                BitSet sectors = x.sectors();
                for (int s = 0; s < e.data.length / SECTOR; s++) {
                    if (sectors == null || sectors.get(s)) {
                        System.arraycopy(e.data, s * SECTOR, out, at + s * SECTOR, SECTOR);
                    }
                }
            }
            return out;
        }
    }

    /** Runs operations on the recorder and the model side by side. */
    private final class Script {
        final RecordingDevice rec;
        final Model model;

        Script(RecordingDevice rec, byte[] base) {
            this.rec = rec;
            this.model = new Model(base, rec.blockSize());
        }

        void write(long block, byte[] data) {
            RecordingDeviceTest.this.write(rec, block, data);
            model.write(block, data);
        }

        void discard(long block, long count) {
            rec.discard(block, count);
            model.discard(block, count);
        }

        void flush() {
            rec.flush();
            model.flush();
        }

        void batch(long[] blocks, byte[][] data) {
            IoBatch batch = new IoBatch(blocks.length);
            for (int i = 0; i < blocks.length; i++) {
                batch.write(blocks[i], segment(data[i]));
            }
            rec.submit(batch);
            for (int i = 0; i < blocks.length; i++) {
                model.write(blocks[i], data[i]);
            }
        }

        void assertEventsMatch() {
            List<Event> got = rec.events();
            assertEquals(model.events.size(), got.size(), "event count");
            for (int i = 0; i < got.size(); i++) {
                Expected e = model.events.get(i);
                assertEvent(got.get(i), i, e.kind, e.block, e.blockCount, e.data);
            }
        }
    }

    /**
     * Passes everything to a memory device, tracks how many mutating calls are inside it at once, and can
     * hold the next write inside until released.
     */
    private static final class GatedDevice extends ForwardingDevice {
        final AtomicInteger active = new AtomicInteger();
        final AtomicInteger maxActive = new AtomicInteger();
        final CountDownLatch held = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        private volatile boolean holdNext;

        GatedDevice(MemoryDevice inner) {
            super(inner);
        }

        void holdNextWrite() {
            holdNext = true;
        }

        private void mutate(Runnable op, boolean isWrite) {
            maxActive.accumulateAndGet(active.incrementAndGet(), Math::max);
            try {
                if (isWrite && holdNext) {
                    holdNext = false;
                    held.countDown();
                    awaitUninterruptibly(release);
                }
                op.run();
            } finally {
                active.decrementAndGet();
            }
        }

        @Override public void write(long block, MemorySegment src) { mutate(() -> inner.write(block, src), true); }
        @Override public void submit(IoBatch batch) { mutate(() -> inner.submit(batch), false); }
        @Override public void flush() { mutate(inner::flush, false); }
        @Override public void discard(long block, long count) { mutate(() -> inner.discard(block, count), false); }

        private static void awaitUninterruptibly(CountDownLatch latch) {
            try {
                if (!latch.await(10, TimeUnit.SECONDS)) {
                    throw new AssertionError("the test never released the held write");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    private static void awaitCondition(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out waiting until " + what);
            }
            LockSupport.parkNanos(100_000);
        }
    }

    // --------------------------------------------------------------------------------------- helpers

    private static void assertEvent(Event e, int index, Kind kind, long block, long blockCount, byte[] data) {
        assertEquals(index, e.index(), "index of " + e);
        assertEquals(kind, e.kind(), "kind of " + e);
        assertEquals(block, e.block(), "block of " + e);
        assertEquals(blockCount, e.blockCount(), "block count of " + e);
        assertArrayEquals(data, e.data().toArray(JAVA_BYTE), "data of " + e);
    }

    private static void assertDeviceException(DeviceException e, String op, long offset, int errno) {
        assertEquals("dev", e.device());
        assertEquals(op, e.operation());
        assertEquals(offset, e.offset());
        assertEquals(errno, e.errno());
        assertTrue(e.getMessage().startsWith("dev: " + op), e.getMessage());
        assertTrue(e.getMessage().contains(Errno.name(errno)), e.getMessage());
    }

    private static void assertInvalid(String message, Executable call) {
        assertEquals(message, assertThrows(InvalidArgumentException.class, call).getMessage());
    }

    private static List<Integer> indices(List<Event> events) {
        return events.stream().map(Event::index).toList();
    }

    private static byte[] random(Random r, int length) {
        byte[] b = new byte[length];
        r.nextBytes(b);
        return b;
    }

    private static void put(byte[] image, long block, byte[] data, int bs) {
        System.arraycopy(data, 0, image, (int) (block * bs), data.length);
    }

    private static byte[] with(byte[] image, long block, byte[] data) {
        byte[] out = image.clone();
        put(out, block, data, BS);
        return out;
    }

    private MemorySegment segment(byte[] data) {
        MemorySegment s = arena.allocate(data.length, BlockDevice.BUFFER_ALIGNMENT);
        MemorySegment.copy(data, 0, s, JAVA_BYTE, 0, data.length);
        return s;
    }

    private void write(BlockDevice device, long block, byte[] data) {
        device.write(block, segment(data));
    }

    private static byte[] contents(BlockDevice device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment all = a.allocate(device.size(), BlockDevice.BUFFER_ALIGNMENT);
            device.read(0, all);
            return all.toArray(JAVA_BYTE);
        }
    }

    private static byte[] image(RecordingDevice rec, int n) {
        try (MemoryDevice image = rec.imageAt(n)) {
            return contents(image);
        }
    }

    private static byte[] materialize(RecordingDevice rec, CrashState state) {
        try (MemoryDevice image = rec.materialize(state)) {
            return contents(image);
        }
    }
}
