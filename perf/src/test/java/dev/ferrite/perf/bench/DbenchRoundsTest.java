package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Test;

class DbenchRoundsTest {
    private static DbenchResult run(String target, int clients, double mb, double maxMs) {
        return new DbenchResult(target, clients, mb, maxMs, List.of(), -1, List.of(), Double.NaN);
    }

    @Test
    void summarisesEachTargetOverTheRoundsPerClientCount() {
        List<List<DbenchResult>> rounds = List.of(
                List.of(run("ferrite", 1, 1800, 10.0), run("xfs", 1, 500, 11.0), run("ferrite", 2, 2100, 9.0), run("xfs", 2, 1000, 7.5)),
                List.of(run("ferrite", 1, 1900, 4.0), run("xfs", 1, 520, 6.0), run("ferrite", 2, 2200, 12.0), run("xfs", 2, 990, 8.0)),
                List.of(run("ferrite", 1, 1700, 5.0), run("xfs", 1, 530, 4.5), run("ferrite", 2, 2000, 6.0)));
        assertEquals("""

                dbench over 3 rounds, 1 client  ferrite     xfs
                throughput MB/s, median         1800.00  520.00
                max latency ms, median            5.000   6.000
                max latency ms, worst            10.000  11.000
                lowest max latency, rounds          2/3     1/3

                dbench over 3 rounds, 2 clients  ferrite     xfs
                throughput MB/s, median          2100.00  995.00
                max latency ms, median             9.000   7.750
                max latency ms, worst             12.000   8.000
                lowest max latency, rounds           1/3     2/3
                """, DbenchRounds.render(rounds, List.of("ferrite", "xfs")));
    }

    /** A round where two targets tie for the lowest counts for neither; a target missing from a round is not compared in it. */
    @Test
    void aTieCountsForNobody() {
        List<List<DbenchResult>> rounds = List.of(
                List.of(run("ferrite", 1, 1, 3.0), run("xfs", 1, 1, 3.0), run("ext4", 1, 1, 4.0)),
                List.of(run("xfs", 1, 1, 5.0), run("ext4", 1, 1, 4.0)));
        assertArrayEquals(new int[] {0, 0, 1}, DbenchRounds.lowestMaxLatency(rounds, List.of("ferrite", "xfs", "ext4"), 1));
    }

    @Test
    void theMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo() {
        assertEquals(2.5, DbenchRounds.median(new double[] {4, 1, 3, 2}));
        assertEquals(3.0, DbenchRounds.median(new double[] {5, 3, 1}));
        assertEquals(Double.NaN, DbenchRounds.median(new double[0]));
    }
}
