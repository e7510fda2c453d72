package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.function.LongConsumer;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
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

    /**
     * The warm-up runs its full pass, a tenth, then quarters while the compilers are busy through one, for
     * at most three times the first pass: a pass that compiles nothing new stops the repeats at once.
     */
    @Test
    void repeatsQuartersOnlyWhileTheCompilerIsBusyAndForABoundedTime() {
        List<Long> passes = new ArrayList<>();
        long start = System.nanoTime();
        LongConsumer pass = n -> {
            passes.add(n);
            try {
                Thread.sleep(n == 1_000 ? 100 : 40);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        };
        String note = JitSettle.warmUp(Progress.NONE, 1_000, pass, pass);
        long tookMillis = (System.nanoTime() - start) / 1_000_000;
        assertEquals(List.of(1_000L, 100L), passes.subList(0, 2), passes.toString());
        assertTrue(passes.size() >= 3 && passes.size() <= 2 + 8, passes.toString());
        assertTrue(passes.subList(2, passes.size()).stream().allMatch(n -> n == 250), passes.toString());
        assertTrue(tookMillis < 100 + 40 + 300 + 40 + 1_000, "warm-up took " + tookMillis + " ms");
        assertTrue(note.matches("warm-up of 1,000 operations, a tenth and " + (passes.size() - 2)
                + " quarters? more on fresh stores while the JIT was busy; after the warm-up the JIT .*"), note);
    }

    /**
     * The repeats {@code dbench}'s warm-up runs after its timed passes: at least one, more only while the
     * compilers are busy, within twice the first pass's time; none when that time is up already.
     */
    @Test
    void repeatsWhileBusyWithinTwiceTheFirstPass() {
        int[] runs = {0};
        Runnable sleep = () -> {
            runs[0]++;
            try {
                Thread.sleep(40);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        };
        long start = System.nanoTime();
        int repeats = JitSettle.whileBusy(sleep, 100_000_000L);
        long tookMillis = (System.nanoTime() - start) / 1_000_000;
        assertEquals(runs[0], repeats);
        assertTrue(repeats >= 1 && repeats <= 6, repeats + " repeats");
        assertTrue(tookMillis < 200 + 40 + 1_000, "repeats took " + tookMillis + " ms");
        assertEquals(0, JitSettle.whileBusy(sleep, 0));
    }

    /** Full passes first, as many as asked for (a large value size's few keys), then the tenth and the quarters. */
    @Test
    void runsTheFullPassesAskedForBeforeTheTenth() {
        List<Long> passes = new ArrayList<>();
        String note = JitSettle.warmUp(Progress.NONE, 256, 16, passes::add, passes::add);
        assertEquals(java.util.Collections.nCopies(16, 256L), passes.subList(0, 16), passes.toString());
        assertEquals(25L, passes.get(16), passes.toString());
        assertTrue(passes.subList(17, passes.size()).stream().allMatch(n -> n == 64), passes.toString());
        assertTrue(note.startsWith("warm-up of 16 passes of 256 operations, a tenth and "), note);
    }
}
