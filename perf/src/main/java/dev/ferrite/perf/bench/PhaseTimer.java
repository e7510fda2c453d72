package dev.ferrite.perf.bench;

import java.util.concurrent.TimeUnit;

/**
 * The clock of one time-bounded phase: says when it is over and reports {@link Progress} at most once a
 * second. Loops pass in the {@link System#nanoTime()} they already read for their latency samples, so
 * the timer adds no clock reads of its own.
 */
final class PhaseTimer {
    private static final long REPORT_INTERVAL = TimeUnit.SECONDS.toNanos(1);

    private final String phase;
    private final String target;
    private final Progress progress;
    private final long start;
    private final long deadline;
    private long nextReport;

    PhaseTimer(String phase, String target, long durationNanos, Progress progress) {
        this.phase = phase;
        this.target = target;
        this.progress = progress;
        this.start = System.nanoTime();
        this.deadline = start + durationNanos;
        this.nextReport = start + REPORT_INTERVAL;
    }

    /** When the phase started, by {@link System#nanoTime()}. */
    long start() {
        return start;
    }

    /** True until the phase's time is up; {@code ops} is the count so far, for the progress line. */
    boolean running(long ops, long now) {
        if (now - nextReport >= 0) {
            progress.update(phase, target, ops, now - start);
            nextReport = now + REPORT_INTERVAL;
        }
        return now - deadline < 0;
    }

    /** Ends the phase at {@code now}; returns its length in nanoseconds. */
    long finish(long now) {
        progress.done();
        return now - start;
    }
}
