package dev.ferrite.perf.bench;

import org.HdrHistogram.Histogram;

/**
 * One measured phase of one workload on one target: the row every workload produces, the table prints
 * and {@link ResultJson} writes.
 *
 * @param workload what ran ({@code device}, later {@code metadata}, {@code dbench}, ...)
 * @param phase    the part of the workload ({@code randwrite-qd32}, {@code create}, ...)
 * @param target   what it ran on: {@code ferrite}, {@code ferrite/io_uring}, {@code fio}, {@code posix:xfs}, ...
 * @param threads  client threads issuing operations
 * @param n        operations measured (each contributes one latency sample)
 * @param rate     throughput in {@code unit}
 * @param unit     {@code IOPS}, {@code MB/s} (10^6 bytes), {@code ops/s}, ...
 * @param p50Us    median latency of one operation in microseconds
 * @param p99Us    99th percentile latency in microseconds
 * @param p999Us   99.9th percentile latency in microseconds (NaN where the tool does not say)
 * @param maxUs    largest latency in microseconds
 * @param cpus     CPUs the whole machine kept busy on average during the phase ({@link CpuMeter}), NaN if
 *                 not measured
 * @param gcPauses the JVM collector's pauses during the phase ({@link GcMeter}), NaN if not measured (a
 *                 target outside the JVM)
 * @param gcMaxMs  the longest of them in whole milliseconds (0: under one), NaN if not measured or unknown
 */
public record Result(String workload, String phase, String target, int threads, long n, double rate, String unit,
                     double p50Us, double p99Us, double p999Us, double maxUs, double cpus, double gcPauses, double gcMaxMs) {

    /** A result without the collector's pauses. */
    public Result(String workload, String phase, String target, int threads, long n, double rate, String unit,
                  double p50Us, double p99Us, double p999Us, double maxUs, double cpus) {
        this(workload, phase, target, threads, n, rate, unit, p50Us, p99Us, p999Us, maxUs, cpus, Double.NaN, Double.NaN);
    }

    /** A result whose latencies come from a histogram of nanosecond samples. */
    public static Result of(String workload, String phase, String target, int threads, double rate, String unit,
                            Histogram nanos) {
        return new Result(workload, phase, target, threads, nanos.getTotalCount(), rate, unit,
                nanos.getValueAtPercentile(50) / 1e3, nanos.getValueAtPercentile(99) / 1e3,
                nanos.getValueAtPercentile(99.9) / 1e3, nanos.getMaxValue() / 1e3,
                Double.NaN);
    }

    /** This result with the machine's busy CPUs over its phase. */
    public Result withCpus(double busyCpus) {
        return new Result(workload, phase, target, threads, n, rate, unit, p50Us, p99Us, p999Us, maxUs, busyCpus, gcPauses, gcMaxMs);
    }

    /** This result with the collector's pauses over its phase. */
    Result withGc(GcMeter.Pauses p) {
        return new Result(workload, phase, target, threads, n, rate, unit, p50Us, p99Us, p999Us, maxUs, cpus, p.count(),
                p.longestMillis() < 0 ? Double.NaN : p.longestMillis());
    }

    /** A histogram for nanosecond latencies: 3 significant digits, grows past a minute rather than failing. */
    public static Histogram newHistogram() {
        Histogram h = new Histogram(60_000_000_000L, 3);
        h.setAutoResize(true);
        return h;
    }
}
