package dev.ferrite.perf.bench;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

class JitSettleTest {
    /** A small warm-up's wait is bounded by the warm-up's own time, and the note says what the JIT did. */
    @Test
    void theWaitIsBoundedByTheWarmUpAndSaysWhatItSaw() {
        long start = System.nanoTime();
        String note = JitSettle.await(Progress.NONE, 200_000_000L);
        long waitedMillis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(waitedMillis < 1_000, "waited " + waitedMillis + " ms after a 200 ms warm-up");
        assertTrue(note.matches("after the warm-up the JIT (settled|was still compiling) in \\d+\\.\\d s \\([\\d,]+ ms of compile time meanwhile\\)"),
                note);
    }
}
