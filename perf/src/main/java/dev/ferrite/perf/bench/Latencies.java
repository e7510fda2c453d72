package dev.ferrite.perf.bench;

import org.HdrHistogram.Histogram;

/** One worker's latency samples over a phase and, when the phase's stalls are watched, its slow operations. */
final class Latencies {
    final Histogram histogram = Result.newHistogram();
    private final Stalls.Log slow;

    /** Samples only ({@code stalls} null), or samples and slow operations too. */
    Latencies(Stalls stalls) {
        this.slow = stalls == null ? null : stalls.log();
    }

    /** One operation from {@code start} to {@code end} ({@link System#nanoTime()}). */
    void record(long start, long end) {
        histogram.recordValue(end - start);
        if (slow != null) {
            slow.record(start, end);
        }
    }

    /** {@code ops} operations done together from {@code start} to {@code end}: each a sample of an equal share. */
    void record(long start, long end, int ops) {
        histogram.recordValueWithCount((end - start) / ops, ops);
        if (slow != null) {
            slow.record(start, end);
        }
    }
}
