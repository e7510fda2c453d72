package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The default suite's summary: best baseline, ratios, CPU per operation and the design's targets. */
class SuiteSummaryTest {
    private static Result r(String workload, String phase, String target, int threads, double rate, String unit, double maxUs,
                            double cpus) {
        return new Result(workload, phase, target, threads, 1000, rate, unit, 1, 2, 3, maxUs, cpus);
    }

    @Test
    void ferriteIsSetBesideItsFastestBaselineAndTheCeiling() {
        List<SuiteSummary.Row> rows = SuiteSummary.rows(List.of(
                r("kv", "get", "ferrite", 1, 300, "ops/s", 10, 1.5),
                r("kv", "get", "rocksdb", 1, 100, "ops/s", 10, 1.0),
                r("kv", "get", "lmdb", 1, 200, "ops/s", 10, 1.0),
                r("kv", "get", "memory", 1, 500, "ops/s", 10, 1.0),
                r("kv", "get", "lmdb", 2, 900, "ops/s", 10, 1.0))); // no Ferrite at 2 threads: no row
        assertEquals(1, rows.size());
        SuiteSummary.Row row = rows.getFirst();
        assertEquals("lmdb", row.best().target(), "the fastest baseline, not the ceiling");
        assertEquals(1.5, row.ratio(), 1e-9);
        assertEquals(0.6, row.ofMemory(), 1e-9);
        assertEquals(5000, SuiteSummary.cpuMicros(row.ferrite()), 1e-9, "1.5 busy CPUs at 300 ops/s");
        assertEquals(Boolean.TRUE, row.pass(), "ahead of every peer and within 2x of the ceiling");
    }

    /** The log is judged against the device flushed as often as the log flushes, though the unflushed device is faster. */
    @Test
    void theLogWriteIsJudgedAgainstTheDeviceFlushedAsTheLogIs() {
        for (List<Result> results : List.of(
                List.of(r("journal", "log-write", "device", 1, 2000, "MB/s", 1, Double.NaN),
                        r("journal", "log-write", JournalBench.FLUSHED, 1, 1000, "MB/s", 1, Double.NaN),
                        r("journal", "log-write", "ferrite", 1, 950, "MB/s", 1, Double.NaN)),
                List.of(r("journal", "log-write", JournalBench.FLUSHED, 1, 1000, "MB/s", 1, Double.NaN),
                        r("journal", "log-write", "device", 1, 2000, "MB/s", 1, Double.NaN),
                        r("journal", "log-write", "ferrite", 1, 950, "MB/s", 1, Double.NaN)))) {
            SuiteSummary.Row row = SuiteSummary.rows(results).getFirst();
            assertEquals(JournalBench.FLUSHED, row.best().target(), results.toString());
            assertEquals(0.95, row.ratio(), 1e-9);
            assertEquals(Boolean.TRUE, row.pass());
            assertEquals("≥ 0.90 of the device, as flushed", row.target());
        }
        SuiteSummary.Row unflushed = SuiteSummary.rows(List.of(r("journal", "log-write", "device", 1, 2000, "MB/s", 1, Double.NaN),
                r("journal", "log-write", "ferrite", 1, 950, "MB/s", 1, Double.NaN))).getFirst();
        assertEquals(Boolean.FALSE, unflushed.pass(), "without the flushed side, the plain device");
        assertEquals("≥ 0.90 of the device", unflushed.target());
    }

    @Test
    void eachWorkloadIsJudgedByItsOwnTarget() {
        List<Result> results = List.of(
                r("journal", "forced-commit", "ferrite", 1, 89, "commits/s", 1, Double.NaN),
                r("journal", "forced-commit", "device", 1, 100, "commits/s", 1, Double.NaN),
                r("journal", "forced-commit", "ferrite", 8, 50, "commits/s", 1, Double.NaN),
                r("journal", "forced-commit", "device", 8, 100, "commits/s", 1, Double.NaN),
                r("meta", "create-shared", "ferrite", 1, 100, "ops/s", 1, 1),
                r("meta", "create-shared", "ferrite", 16, 120, "ops/s", 1, 1),
                r("meta", "walk-private", "ferrite", 2, 5_100_000, "ops/s", 1, 1),
                r("meta", "walk-private", "memory", 2, 9_000_000, "ops/s", 1, 1),
                r("randwrite", "randwrite-qd1", "ferrite", 1, 95, "IOPS", 1, Double.NaN),
                r("randwrite", "randwrite-qd1", "xfs", 1, 90, "IOPS", 1, Double.NaN),
                r("randwrite", "randwrite-qd1", "raw", 1, 100, "IOPS", 1, Double.NaN),
                r("dbench", "dbench", "ferrite", 1, 120, "MB/s", 9_000, Double.NaN),
                r("dbench", "dbench", "xfs", 1, 100, "MB/s", 2_000, Double.NaN),
                r("dirscale", "create@10k", "ferrite", 1, 100, "ops/s", 1, 1),
                r("dirscale", "create@100k", "ferrite", 1, 95, "ops/s", 1, 1),
                r("dirscale", "create@1M", "ferrite", 1, 89, "ops/s", 1, 1),
                r("device", "seq-write", "ferrite", 1, 100, "MB/s", 1, Double.NaN),
                r("device", "seq-write", "fio", 1, 100, "MB/s", 1, Double.NaN));
        List<SuiteSummary.Row> rows = SuiteSummary.rows(results);
        assertEquals(List.of(false, true, true, true, false, false),
                rows.stream().map(SuiteSummary.Row::pass).filter(p -> p != null).toList(),
                SuiteSummary.format(rows));
        assertNull(rows.get(2).pass(), "create-shared at 1 thread is held to the ceiling, which did not run");
        assertNull(rows.get(1).target(), "group commit at 8 threads has no target of its own");
        assertNull(rows.getLast().target(), "the device has none");
        assertTrue(Double.isNaN(SuiteSummary.cpuMicros(rows.getLast().ferrite())), "no CPUs measured, and MB/s are no operations");
        assertTrue(SuiteSummary.format(rows).endsWith("3 targets met, 3 short, 1 not judged (what they compare against did not run)\n"),
                SuiteSummary.format(rows));
    }

    /**
     * A target is never met by default: on a machine that made no file system (not root) and has no fio,
     * dbench and randwrite ran Ferrite alone, and before, an empty set of baselines passed "ahead of every
     * file system".
     */
    @Test
    void aTargetWhoseBaselinesDidNotRunIsNotJudged() {
        List<SuiteSummary.Row> rows = SuiteSummary.rows(List.of(
                r("dbench", "dbench", "ferrite", 1, 120, "MB/s", 9_000, Double.NaN),
                r("randwrite", "randwrite-qd1", "ferrite", 1, 95, "IOPS", 1, Double.NaN),
                r("randwrite", "randwrite-qd32", "ferrite", 32, 95, "IOPS", 1, Double.NaN),
                r("randwrite", "randwrite-qd32", "raw", 32, 90, "IOPS", 1, Double.NaN),
                r("journal", "forced-commit", "ferrite", 1, 89, "commits/s", 1, Double.NaN),
                r("kv", "insert", "ferrite", 1, 100, "ops/s", 1, 1),
                r("kv", "insert", "memory", 1, 150, "ops/s", 1, 1),
                r("kv", "get", "ferrite", 1, 100, "ops/s", 1, 1),
                r("kv", "get", "lmdb", 1, 90, "ops/s", 1, 1)));
        List<Boolean> verdicts = new ArrayList<>();
        rows.forEach(row -> verdicts.add(row.pass()));
        assertEquals(Arrays.asList(null, null, null, null, null, null), verdicts, SuiteSummary.format(rows));
        String text = SuiteSummary.format(rows);
        assertTrue(text.contains("ahead of every file system, lower max latency  not judged"), text);
        assertTrue(text.endsWith("0 targets met, 0 short, 6 not judged (what they compare against did not run)\n"), text);
    }
}
