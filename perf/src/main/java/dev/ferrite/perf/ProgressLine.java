package dev.ferrite.perf;

import dev.ferrite.perf.bench.Progress;

import java.io.Console;
import java.io.PrintWriter;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Draws a running phase on stderr: on a terminal as one line rewritten in place with a carriage return;
 * into a file or pipe as a line of its own every {@link #LOG_INTERVAL_NANOS}, so that logs of long runs
 * show progress without a wall of carriage returns.
 */
final class ProgressLine implements Progress {
    static final long LOG_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final PrintWriter err;
    private final boolean terminal;
    private int width;
    private long lastLogged;

    ProgressLine(PrintWriter err) {
        this(err, isTerminal());
    }

    ProgressLine(PrintWriter err, boolean terminal) {
        this.err = err;
        this.terminal = terminal;
    }

    private static boolean isTerminal() {
        Console c = System.console();
        return c != null && c.isTerminal();
    }

    @Override
    public void update(String phase, String target, long ops, long elapsedNanos) {
        update(phase, target, ops, "ops", elapsedNanos);
    }

    @Override
    public void update(String phase, String target, long count, String unit, long elapsedNanos) {
        double seconds = elapsedNanos / 1e9;
        String line = count < 0
                ? String.format(Locale.ROOT, "%s  %s  running  %.0f s", phase, target, seconds)
                : String.format(Locale.ROOT, "%s  %s  %,d %s  %,.0f %s/s  %.0f s", phase, target, count, unit, count / seconds, unit,
                seconds);
        if (!terminal) {
            if (elapsedNanos - lastLogged >= LOG_INTERVAL_NANOS) {
                err.println(line);
                err.flush();
                lastLogged = elapsedNanos;
            }
            return;
        }
        // Pad over the tail of a longer previous line.
        err.print("\r" + line + " ".repeat(Math.max(0, width - line.length())));
        err.flush();
        width = line.length();
    }

    @Override
    public void done() {
        lastLogged = 0;
        if (width > 0) {
            err.print("\r" + " ".repeat(width) + "\r");
            err.flush();
            width = 0;
        }
    }
}
