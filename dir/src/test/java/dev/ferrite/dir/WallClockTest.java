package dev.ferrite.dir;

import java.time.Instant;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** Inode times from the allocation-free clock lie between the wall clock's readings around them. */
class WallClockTest {
    private static long instantNanos() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    @Test
    void readsTheWallClock() {
        for (int i = 0; i < 1000; i++) {
            long before = System.currentTimeMillis() * 1_000_000L;
            long t = WallClock.nowNanos();
            long after = instantNanos();
            // not behind the millisecond clock; ahead of the wall clock by no more than the monotonic clock's drift in a second
            assertTrue(t >= before && t <= after + 1_000_000L, before + " <= " + t + " <= " + after);
        }
    }
}
