package dev.ferrite.perf;

import dev.ferrite.perf.bench.Progress;

import java.io.PrintWriter;
import java.util.Locale;

/** Draws a running phase as one line on stderr, rewritten in place with a carriage return. */
final class ProgressLine implements Progress {
    private final PrintWriter err;
    private int width;

    ProgressLine(PrintWriter err) {
        this.err = err;
    }

    @Override
    public void update(String phase, String target, long ops, long elapsedNanos) {
        double seconds = elapsedNanos / 1e9;
        String line = ops < 0
                ? String.format(Locale.ROOT, "%s  %s  running  %.0f s", phase, target, seconds)
                : String.format(Locale.ROOT, "%s  %s  %,d ops  %,.0f ops/s  %.0f s", phase, target, ops, ops / seconds, seconds);
        // Pad over the tail of a longer previous line.
        err.print("\r" + line + " ".repeat(Math.max(0, width - line.length())));
        err.flush();
        width = line.length();
    }

    @Override
    public void done() {
        if (width > 0) {
            err.print("\r" + " ".repeat(width) + "\r");
            err.flush();
            width = 0;
        }
    }
}
