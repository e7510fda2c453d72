package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;

import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.perf.bench.DbenchLoadfile.Kind;

import org.junit.jupiter.api.Test;

/** Short replays on a RAM device: statuses as the loadfile expects them, dbench's accounting, the cleanup. */
class FerriteDbenchTest {
    /** Runs {@code load} with {@code clients} clients for about a second on a fresh volume; checks the volume after. */
    private static <T> T replay(DbenchLoadfile load, int clients, double seconds, Function<DbenchResult, T> check) {
        VolumeOptions options = VolumeOptions.defaults();
        try (MemoryDevice device = MemoryDevice.create(65_536, 4096)) {
            Volume.format(device, options);
            try (Volume v = Volume.open(device, options)) {
                DbenchResult r = new FerriteDbench(v, load).run(clients, seconds, 0, Progress.NONE);
                T checked = check.apply(r);
                Namespace ns = v.namespace();
                assertTrue(ns.list("/").isEmpty(), "the cleanup removes every client's tree: " + ns.list("/"));
                assertTrue(ns.check().clean(), ns.check().toString());
                return checked;
            }
        }
    }

    /**
     * The synthetic loadfile (every operation, unaligned I/O, missing names and paths, searches) by two
     * clients: every status as expected. Needs the buffered path for I/O that is not block-aligned: without
     * it the run stops at the first such WriteX.
     */
    @Test
    void twoClientsReplayEveryOperationWithTheExpectedStatuses() throws IOException {
        DbenchLoadfile load = DbenchLoadfile.parse(DbenchLoadfileTest.sample(), "sample");
        replay(load, 2, 1.0, r -> {
            assertEquals(0, r.mismatches(), () -> "mismatches: " + r.mismatchSamples());
            assertEquals(Arrays.stream(Kind.values()).toList(), r.ops().stream().map(DbenchResult.OpRow::kind).toList(),
                    "every operation ran and was timed");
            assertTrue(r.mbPerSec() > 0, "throughput " + r.mbPerSec());
            assertTrue(r.maxLatencyMs() >= r.ops().stream().mapToDouble(DbenchResult.OpRow::avgMs).max().orElseThrow());
            return null;
        });
    }

    @Test
    void watchedStallsSplitEveryMeasuredOperationAtAThresholdOfOneNanosecond() throws IOException {
        DbenchLoadfile load = DbenchLoadfile.parse(DbenchLoadfileTest.sample(), "sample");
        VolumeOptions options = VolumeOptions.defaults();
        try (MemoryDevice device = MemoryDevice.create(65_536, 4096)) {
            Volume.format(device, options);
            try (Volume v = Volume.open(device, options)) {
                Stalls watch = Stalls.watch(1, FerriteDbench.WORKERS + "-");
                DbenchResult r = new FerriteDbench(v, load).run(1, 0.5, 0.2, Progress.NONE, watch);
                String line = watch.summary(r.totalOps());
                String all = String.format(java.util.Locale.ROOT, "%,d of %,d operations took 0.0 ms or more", r.totalOps(), r.totalOps());
                assertTrue(line.startsWith(all), "the warm-up's operations left out, every measured one in: " + line);
            }
        }
    }

    /**
     * Metadata and block-sized I/O: statuses checked (on every pass: Deltree leaves no directory behind),
     * bytes counted as dbench does.
     */
    @Test
    void metadataAndBlockSizedIoMatchTheirStatuses() {
        DbenchLoadfile load = DbenchLoadfile.parse("""
                Deltree "\\clients\\client1" NT_STATUS_OK
                Mkdir "\\clients" NT_STATUS_OK
                QUERY_PATH_INFORMATION "\\clients\\client1" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
                NTCreateX "\\clients\\client1" 0x1 0x2 1 NT_STATUS_OK
                Close 1 NT_STATUS_OK
                QUERY_PATH_INFORMATION "\\clients\\client1\\a\\b" 1004 NT_STATUS_OBJECT_PATH_NOT_FOUND
                NTCreateX "\\clients\\client1\\f" 0x40 0x1 2 NT_STATUS_OBJECT_NAME_NOT_FOUND
                NTCreateX "\\clients\\client1\\f" 0x40 0x2 2 NT_STATUS_OK
                WriteX 2 0 8192 8192 NT_STATUS_OK
                ReadX 2 4096 4096 4096 NT_STATUS_OK
                LockX 2 10 5 NT_STATUS_OK
                UnlockX 2 10 6 NT_STATUS_RANGE_NOT_LOCKED
                UnlockX 2 10 5 NT_STATUS_OK
                Flush 2 NT_STATUS_OK
                SET_FILE_INFORMATION 2 1004 NT_STATUS_OK
                Close 2 NT_STATUS_OK
                Close 2 NT_STATUS_INVALID_HANDLE
                FIND_FIRST "\\clients\\client1\\F" 260 10 1 NT_STATUS_NO_SUCH_FILE
                FIND_FIRST "\\clients\\client1\\?" 260 10 1 NT_STATUS_OK
                Rename "\\clients\\client1\\f" "\\clients\\client1\\g" NT_STATUS_OK
                Rmdir "\\clients\\client1" NT_STATUS_DIRECTORY_NOT_EMPTY
                Unlink "\\clients\\client1\\g" 0x6 NT_STATUS_OK
                Unlink "\\clients\\client1\\g" 0x6 NT_STATUS_OBJECT_NAME_NOT_FOUND
                """, "aligned");
        replay(load, 2, 0.5, r -> {
            assertEquals(0, r.mismatches(), () -> "mismatches: " + r.mismatchSamples());
            long writes = r.ops().stream().filter(o -> o.kind() == Kind.WRITEX).findFirst().orElseThrow().count();
            long reads = r.ops().stream().filter(o -> o.kind() == Kind.READX).findFirst().orElseThrow().count();
            assertTrue(writes > 0 && Math.abs(writes - reads) <= 2, writes + " writes, " + reads + " reads");
            double mb = (writes * 8192 + reads * 4096) / 1e6 / 0.5;
            assertEquals(mb, r.mbPerSec(), mb * 0.05, "dbench's throughput: ReadX and WriteX bytes over the measured time");
            return null;
        });
    }

    /** Every ReadX and WriteX is buffered, block-sized or not: the buffer is never aligned for the direct path. */
    @Test
    void theIoBufferSitsWhereCallocPutsDbenchs() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = FerriteDbench.ioBuffer(arena, 65536);
            assertEquals(16, b.address() % BlockDevice.BUFFER_ALIGNMENT);
            assertEquals(65536, b.byteSize());
        }
    }

    /** A status other than the expected one is counted and shown with its client, line, path and both statuses. */
    @Test
    void unexpectedStatusesAreCountedAndShown() {
        DbenchLoadfile load = DbenchLoadfile.parse("""
                Mkdir "\\clients" NT_STATUS_OK
                NTCreateX "\\clients\\client1" 0x1 0x2 1 NT_STATUS_OK
                Close 1 NT_STATUS_OK
                QUERY_PATH_INFORMATION "\\clients\\client1\\missing" 1004 NT_STATUS_OK
                NTCreateX "\\clients\\client1" 0x1 0x1 2 NT_STATUS_OBJECT_NAME_NOT_FOUND
                Flush 9 NT_STATUS_OK
                NTCreateX "\\clients\\client1\\empty" 0x40 0x5 3 NT_STATUS_OK
                ReadX 3 0 100 100 NT_STATUS_OK
                Close 3 NT_STATUS_OK
                """, "wrong");
        List<String> samples = replay(load, 1, 0.2, r -> {
            assertTrue(r.mismatches() >= 4, "four per pass: " + r.mismatches());
            return r.mismatchSamples();
        });
        assertEquals(List.of(
                "client 0 line 4 QUERY_PATH_INFORMATION /clients/client0/missing: expected NT_STATUS_OK, got NT_STATUS_OBJECT_NAME_NOT_FOUND",
                "client 0 line 5 NTCreateX /clients/client0: expected NT_STATUS_OBJECT_NAME_NOT_FOUND, got NT_STATUS_OK",
                "client 0 line 6 Flush handle 9: expected NT_STATUS_OK, got NT_STATUS_INVALID_HANDLE",
                "client 0 line 8 ReadX handle 3: expected NT_STATUS_OK, got NT_STATUS_END_OF_FILE (read 0 of 100 bytes at 0)"),
                samples.subList(0, 4));
    }
}
