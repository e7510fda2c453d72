package dev.ferrite.perf.bench;

import java.util.List;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ResultTableTest {
    private static Result row(String target, int threads, double rate, double cpus) {
        return new Result("metadata", "create-private", target, threads, 1000, rate, "ops/s", 4.5, 25, 120, 900, cpus);
    }

    @Test
    void sideBySideWithBusyCpusWhereMeasured() {
        String t = ResultTable.render(List.of(row("ferrite", 1, 180_000, 1.93), row("posix:/mnt/xfs", 1, 72_000, 1.41)),
                "posix:/mnt/xfs");
        List<String> lines = t.lines().toList();
        assertEquals(2, lines.size(), t);
        List<String> head = List.of(lines.get(0).split("\\s{2,}"));
        assertEquals(List.of("phase", "target", "rate", "busy CPUs", "posix:/mnt/xfs rate", "posix:/mnt/xfs busy CPUs",
                "vs posix:/mnt/xfs", "p50 / p99 / p99.9 / max µs", "posix:/mnt/xfs p50 / p99 / p99.9 / max µs"), head);
        List<String> cells = List.of(lines.get(1).split("\\s{2,}"));
        assertEquals(List.of("create-private", "ferrite", "180,000 ops/s", "1.93", "72,000 ops/s", "1.41", "2.50",
                "4.50 / 25.0 / 120 / 900", "4.50 / 25.0 / 120 / 900"), cells);
    }

    @Test
    void noCpuColumnsWhenNothingMeasuredThem() {
        String t = ResultTable.render(List.of(row("ferrite", 2, 1000, Double.NaN)), "fio");
        assertFalse(t.contains("busy CPUs"), t);
        assertTrue(t.lines().toList().get(1).startsWith("create-private x2"), t);
    }

    @Test
    void collectorPausesBesideTheRowsThatMeasuredThem() {
        Result ferrite = new Result("metadata", "create-private", "ferrite", 1, 1000, 180_000, "ops/s", 4.5, 25, 120, 45_000, 1.9, 12, 45);
        Result zgc = new Result("metadata", "walk-private", "ferrite", 1, 1000, 500_000, "ops/s", 1, 20, 90, 800, 1.1, 3, 0);
        Result none = new Result("metadata", "unlink-private", "ferrite", 1, 1000, 200_000, "ops/s", 4, 14, 80, 700, 1.4, 0, 0);
        Result xfs = row("posix:/mnt/xfs", 1, 72_000, 1.41);
        List<String> lines = ResultTable.render(List.of(ferrite, zgc, none, xfs), "posix:/mnt/xfs").lines().toList();
        assertEquals("GC pauses (max ms)", List.of(lines.get(0).split("\\s{2,}")).get(4), lines.get(0));
        assertEquals("12 (45)", List.of(lines.get(1).split("\\s{2,}")).get(4));
        assertEquals("3 (<1)", List.of(lines.get(2).split("\\s{2,}")).get(4));
        assertEquals("0", List.of(lines.get(3).split("\\s{2,}")).get(4));
        assertFalse(ResultTable.render(List.of(xfs), "fio").contains("GC pauses"), "no column where nothing measured them");
    }
}
