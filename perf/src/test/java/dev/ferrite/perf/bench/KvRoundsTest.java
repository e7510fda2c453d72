package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Test;

class KvRoundsTest {
    private static Result r(String phase, String target, int threads, double rate) {
        return new Result("kv", phase, target, threads, 1000, rate, "ops/s", 1, 2, 3, 4, Double.NaN);
    }

    @Test
    void eachPhaseGetsTheMedianOfItsSameRoundRatios() {
        List<List<Result>> rounds = List.of(
                List.of(r("insert", "ferrite", 1, 300), r("insert", "lmdb", 1, 200), r("insert", "ferrite", 2, 100), r("insert", "lmdb", 2, 400)),
                List.of(r("insert", "ferrite", 1, 100), r("insert", "lmdb", 1, 200), r("insert", "ferrite", 2, 300), r("insert", "lmdb", 2, 200)),
                List.of(r("insert", "ferrite", 1, 400), r("insert", "lmdb", 1, 100), r("insert", "ferrite", 2, 300)));
        assertEquals("""

                ferrite vs lmdb over 3 rounds  median  lowest  highest  ahead
                insert                           1.50    0.50     4.00    2/3
                insert x2                        0.88    0.25     1.50    1/2
                """, KvRounds.render(rounds, "ferrite", List.of("lmdb")));
    }

    /** A round without one of the two at a phase (a store that skipped it) is left out of that phase's ratios; one round makes no summary. */
    @Test
    void aRoundMissingEitherIsLeftOutAndOneRoundIsNoSummary() {
        List<List<Result>> rounds = List.of(
                List.of(r("get-16KiB", "ferrite", 1, 10), r("get-16KiB", "rocksdb", 1, 5)),
                List.of(r("get-16KiB", "rocksdb", 1, 5)));
        assertArrayEquals(new double[] {2.0}, KvRounds.ratios(rounds, "get-16KiB", "ferrite", "rocksdb"));
        assertEquals("", KvRounds.render(rounds.subList(0, 1), "ferrite", List.of("rocksdb")));
    }
}
