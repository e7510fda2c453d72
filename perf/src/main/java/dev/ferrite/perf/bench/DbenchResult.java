package dev.ferrite.perf.bench;

import java.util.List;

import dev.ferrite.perf.bench.DbenchLoadfile.Kind;

/**
 * What one dbench run reports, on any target: dbench's throughput (bytes of ReadX and WriteX over the
 * measured time, after the warm-up, in 10^6 bytes per second), its worst latency, and its table of
 * operations; for the Ferrite replay also each operation's p99.9 and the status mismatches.
 *
 * @param target           {@code ferrite}, {@code xfs}, ...
 * @param clients          clients replaying the loadfile at once
 * @param mbPerSec         dbench's "Throughput" figure
 * @param maxLatencyMs     the longest operation, in milliseconds
 * @param ops              one row per operation that ran, in dbench's table order
 * @param mismatches       operations whose status was not the one the loadfile expects (dbench's real
 *                         binary prints those it checks and stops at some; -1 when not known)
 * @param mismatchSamples  the first few mismatches, one line each
 * @param cpus             CPUs the machine kept busy on average over the run, NaN if not measured
 */
public record DbenchResult(String target, int clients, double mbPerSec, double maxLatencyMs, List<OpRow> ops,
                           long mismatches, List<String> mismatchSamples, double cpus) {
    public static final String WORKLOAD = "dbench";

    /**
     * One line of dbench's table.
     *
     * @param p999Ms the 99.9th percentile latency in milliseconds; NaN where not measured (dbench prints none)
     */
    public record OpRow(Kind kind, long count, double avgMs, double maxMs, double p999Ms) {
    }

    public DbenchResult {
        ops = List.copyOf(ops);
        mismatchSamples = List.copyOf(mismatchSamples);
    }

    /** Operations of every kind counted in the measured time. */
    public long totalOps() {
        return ops.stream().mapToLong(OpRow::count).sum();
    }

    /**
     * Microseconds of machine CPU per operation: busy CPUs over the operations per second of the measured
     * time; NaN when the CPUs were not measured.
     */
    public double cpuUsPerOp(double seconds) {
        long n = totalOps();
        return n == 0 || !Double.isFinite(cpus) ? Double.NaN : cpus * 1e6 * seconds / n;
    }

    /** The row the shared table and JSON take: throughput in MB/s, the largest latency as max. */
    public Result toResult() {
        return new Result(WORKLOAD, WORKLOAD, target, clients, totalOps(), mbPerSec, "MB/s", Double.NaN, Double.NaN,
                Double.NaN, maxLatencyMs * 1e3, cpus);
    }
}
