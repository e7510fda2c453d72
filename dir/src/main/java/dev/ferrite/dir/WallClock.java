package dev.ferrite.dir;

import java.time.Instant;

/**
 * The wall clock in nanoseconds since the epoch for inode times, read without allocating: the monotonic
 * clock's distance from an anchor that pairs it with the wall clock ({@link Instant#now()} allocates an
 * {@code Instant} per read, on every create and unlink). The anchor is taken again once a second, so the
 * time follows a stepped or slewed system clock within a second, and a read is never behind the
 * millisecond wall clock ({@link System#currentTimeMillis}), which stamps data writes' times.
 */
final class WallClock {
    private static final long ANCHOR_NANOS = 1_000_000_000L;

    /** A wall-clock time and the monotonic clock's reading at it; replaced whole, never changed. */
    private record Anchor(long epochNanos, long monotonicNanos) {
    }

    private static volatile Anchor anchor = anchorNow();

    private WallClock() {
    }

    private static Anchor anchorNow() {
        long mono = System.nanoTime();
        Instant t = Instant.now();
        return new Anchor(t.getEpochSecond() * 1_000_000_000L + t.getNano(), mono);
    }

    static long nowNanos() {
        Anchor a = anchor;
        long since = System.nanoTime() - a.monotonicNanos;
        if (since < 0 || since >= ANCHOR_NANOS) {
            a = anchorNow(); // racing threads each take one: any of them is a good anchor
            anchor = a;
            since = 0;
        }
        return Math.max(a.epochNanos + since, System.currentTimeMillis() * 1_000_000L);
    }
}
