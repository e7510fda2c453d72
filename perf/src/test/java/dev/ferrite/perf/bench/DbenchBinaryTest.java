package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import dev.ferrite.io.FerriteException;
import dev.ferrite.perf.bench.DbenchLoadfile.Kind;
import dev.ferrite.perf.bench.DbenchResult.OpRow;

import org.junit.jupiter.api.Test;

/** Reads a report in the layout dbench 4.00 prints (a sample written for this test). */
class DbenchBinaryTest {
    @Test
    void readsThroughputTableAndComplaints() throws IOException {
        DbenchResult r = DbenchBinary.parse(resource("dbench-output.txt"), "xfs", 1.5);
        assertEquals("xfs", r.target());
        assertEquals(3, r.clients());
        assertEquals(463.25, r.mbPerSec());
        assertEquals(11.875, r.maxLatencyMs());
        assertEquals(1.5, r.cpus());
        assertEquals(10, r.ops().size());
        assertEquals(new OpRow(Kind.NTCREATEX, 31500, 0.041, 7.125, Double.NaN), r.ops().getFirst());
        assertEquals(new OpRow(Kind.QUERY_PATH_INFORMATION, 28250, 0.004, 2.0, Double.NaN), r.ops().get(4));
        assertEquals(new OpRow(Kind.FLUSH, 2200, 0.640, 11.875, Double.NaN), r.ops().getLast());
        assertEquals(173433, r.totalOps());
        assertEquals(2, r.mismatches());
        assertEquals(List.of("[4411] open /mnt/x/clients/client2/~dmtmp/WORD/A.DOC failed for handle 10231 (No such file or directory)",
                "[4412] read failed on handle 10231 (Bad file descriptor)"), r.mismatchSamples());
        Result row = r.toResult();
        assertEquals(new Result("dbench", "dbench", "xfs", 3, 173433, 463.25, "MB/s", Double.NaN, Double.NaN, Double.NaN, 11875, 1.5), row);
    }

    /**
     * dbench leaves the last second's operations out of {@code max_latency} (its alarm that ends the run
     * skips the fold), while its table times them all: the longer of the two is the run's longest operation.
     */
    @Test
    void theMaxLatencyIsTheLongestOperationInTheTableOrTheSummary() throws IOException {
        String report = resource("dbench-output.txt");
        String shortSummary = report.replace("max_latency=11.875 ms", "max_latency=4.000 ms");
        assertEquals(11.875, DbenchBinary.parse(shortSummary, "xfs", Double.NaN).maxLatencyMs());
        String longSummary = report.replace("max_latency=11.875 ms", "max_latency=13.500 ms");
        assertEquals(13.5, DbenchBinary.parse(longSummary, "xfs", Double.NaN).maxLatencyMs());
    }

    @Test
    void aReportWithoutThroughputIsAnError() throws IOException {
        String cut = resource("dbench-output.txt").lines().filter(l -> !l.startsWith("Throughput")).reduce("", (a, b) -> a + b + "\n");
        FerriteException e = assertThrows(FerriteException.class, () -> DbenchBinary.parse(cut, "ext4", Double.NaN));
        assertEquals("dbench printed no Throughput line on ext4: WriteX         15700     0.009     3.125"
                + " | ReadX          48800     0.003     2.875"
                + " | Flush           2200     0.640    11.875", e.getMessage());
    }

    @Test
    void anUnknownOperationInTheTableIsAnError() throws IOException {
        String odd = resource("dbench-output.txt").replace(" Qfsinfo ", " Frobnicate ");
        FerriteException e = assertThrows(FerriteException.class, () -> DbenchBinary.parse(odd, "btrfs", Double.NaN));
        assertEquals("dbench's table has a line this parser does not know: 'Frobnicate         5250     0.002     0.250'", e.getMessage());
    }

    private static String resource(String name) throws IOException {
        try (InputStream in = DbenchBinaryTest.class.getResourceAsStream(name)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }
}
