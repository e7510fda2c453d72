package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Function;

import dev.ferrite.perf.bench.DbenchLoadfile.Kind;

/**
 * dbench's report for every target side by side, one block per client count: the summary (throughput and
 * its ratio to the first target, max latency, busy CPUs, CPU per operation, status mismatches) and then
 * dbench's operation table — count, mean and largest latency in ms, and for the Ferrite replay the
 * p99.9 — each target's columns beside the others'.
 */
public final class DbenchReport {
    private DbenchReport() {
    }

    /**
     * @param targets the targets in column order; the first is the one the ratios put over the others
     * @param seconds the measured time of each run, for CPU per operation
     */
    public static String render(List<DbenchResult> results, List<String> targets, int seconds) {
        StringBuilder sb = new StringBuilder();
        List<Integer> clientCounts = results.stream().map(DbenchResult::clients).distinct().sorted().toList();
        for (int c : clientCounts) {
            List<Optional<DbenchResult>> row = targets.stream()
                    .map(t -> results.stream().filter(r -> r.target().equals(t) && r.clients() == c).findFirst()).toList();
            sb.append('\n').append(summary(c, targets, row, seconds)).append('\n').append(operations(targets, row));
        }
        return sb.toString();
    }

    private static String summary(int clients, List<String> targets, List<Optional<DbenchResult>> row, int seconds) {
        List<String[]> rows = new ArrayList<>();
        List<String> head = new ArrayList<>(List.of("dbench, " + clients + (clients == 1 ? " client" : " clients")));
        head.addAll(targets);
        rows.add(head.toArray(String[]::new));
        double first = row.getFirst().map(DbenchResult::mbPerSec).orElse(Double.NaN);
        rows.add(line("throughput MB/s", row, r -> fixed(r.mbPerSec(), 2)));
        rows.add(line(targets.getFirst() + " / this", row, r -> fixed(first / r.mbPerSec(), 2)));
        rows.add(line("max latency ms", row, r -> fixed(r.maxLatencyMs(), 3)));
        rows.add(line("busy CPUs", row, r -> fixed(r.cpus(), 2)));
        rows.add(line("CPU µs per op", row, r -> fixed(r.cpuUsPerOp(seconds), 1)));
        rows.add(line("status mismatches", row, r -> r.mismatches() < 0 ? "-" : String.valueOf(r.mismatches())));
        return ResultTable.format(rows, 1);
    }

    private static String[] line(String label, List<Optional<DbenchResult>> row, Function<DbenchResult, String> cell) {
        List<String> cells = new ArrayList<>(List.of(label));
        row.forEach(r -> cells.add(r.map(cell).orElse("-")));
        return cells.toArray(String[]::new);
    }

    private static String operations(List<String> targets, List<Optional<DbenchResult>> row) {
        List<String[]> rows = new ArrayList<>();
        List<String> names = new ArrayList<>(List.of(""));
        List<String> head = new ArrayList<>(List.of("Operation"));
        for (int i = 0; i < targets.size(); i++) {
            boolean p999 = hasP999(row.get(i));
            names.add(targets.get(i));
            names.addAll(p999 ? List.of("", "", "") : List.of("", ""));
            head.addAll(p999 ? List.of("Count", "AvgLat", "MaxLat", "p99.9") : List.of("Count", "AvgLat", "MaxLat"));
        }
        rows.add(names.toArray(String[]::new));
        rows.add(head.toArray(String[]::new));
        for (Kind k : Kind.values()) {
            if (row.stream().noneMatch(r -> r.map(x -> find(x, k) != null).orElse(false))) {
                continue;
            }
            List<String> cells = new ArrayList<>(List.of(k.tableName()));
            for (Optional<DbenchResult> r : row) {
                DbenchResult.OpRow op = r.map(x -> find(x, k)).orElse(null);
                cells.add(op == null ? "-" : String.valueOf(op.count()));
                cells.add(op == null ? "-" : fixed(op.avgMs(), 3));
                cells.add(op == null ? "-" : fixed(op.maxMs(), 3));
                if (hasP999(r)) {
                    cells.add(op == null ? "-" : fixed(op.p999Ms(), 3));
                }
            }
            rows.add(cells.toArray(String[]::new));
        }
        return "latencies in ms\n" + ResultTable.format(rows, 1);
    }

    private static boolean hasP999(Optional<DbenchResult> r) {
        return r.map(x -> x.ops().stream().anyMatch(o -> Double.isFinite(o.p999Ms()))).orElse(false);
    }

    private static DbenchResult.OpRow find(DbenchResult r, Kind k) {
        return r.ops().stream().filter(o -> o.kind() == k).findFirst().orElse(null);
    }

    private static String fixed(double v, int decimals) {
        return Double.isFinite(v) ? String.format(Locale.ROOT, "%." + decimals + "f", v) : "-";
    }
}
