package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * Renders results side by side with a baseline target (fio, a kernel filesystem, ...): one row per phase,
 * thread count and non-baseline target, with the baseline's rate at the same phase and thread count, the
 * ratio of the two rates and both latency summaries; and, where measured, the CPUs the machine kept
 * busy during each, and the collector's pauses in the JVM during the row's phase (count, the longest in
 * milliseconds). Without baseline results the comparison columns are left out. Phases a target
 * skipped ({@link Skipped}) follow its results, the reason in place of the rate; a baseline that skipped
 * a phase shows {@code skipped} in its rate column.
 * <pre>
 * phase          target            rate            fio rate      vs fio  p50 / p99 / p99.9 / max µs  fio p50 / p99 / p99.9 / max µs
 * randwrite-qd32 ferrite/io_uring  118,003 IOPS    125,412 IOPS    0.94  250 / 598 / 1,210 / 4,120   244 / 570 / 1,020 / 3,900
 * </pre>
 */
public final class ResultTable {
    private ResultTable() {
    }

    public static String render(List<Result> results, String baseline) {
        return render(results, List.of(), baseline);
    }

    public static String render(List<Result> results, List<Skipped> skipped, String baseline) {
        boolean compare = results.stream().anyMatch(r -> r.target().equals(baseline));
        boolean cpus = results.stream().anyMatch(r -> Double.isFinite(r.cpus()));
        boolean gc = results.stream().anyMatch(r -> !r.target().equals(baseline) && Double.isFinite(r.gcPauses()));
        List<String[]> rows = new ArrayList<>();
        List<String> head = new ArrayList<>(List.of("phase", "target", "rate"));
        if (cpus) {
            head.add("busy CPUs");
        }
        if (gc) {
            head.add("GC pauses (max ms)");
        }
        if (compare) {
            head.add(baseline + " rate");
            if (cpus) {
                head.add(baseline + " busy CPUs");
            }
            head.add("vs " + baseline);
        }
        head.add("p50 / p99 / p99.9 / max µs");
        if (compare) {
            head.add(baseline + " p50 / p99 / p99.9 / max µs");
        }
        rows.add(head.toArray(String[]::new));
        for (Result r : results) {
            if (r.target().equals(baseline)) {
                continue;
            }
            List<String> row = new ArrayList<>(List.of(label(r.phase(), r.threads()), r.target(), rate(r)));
            if (cpus) {
                row.add(number(r.cpus()));
            }
            if (gc) {
                row.add(pauses(r));
            }
            Result b = !compare ? null : baselineOf(results, r.workload(), r.phase(), r.threads(), baseline);
            if (compare) {
                row.add(b == null ? baselineMissing(skipped, r, baseline) : rate(b));
                if (cpus) {
                    row.add(b == null ? "-" : number(b.cpus()));
                }
                row.add(b == null || !Objects.equals(b.unit(), r.unit()) ? "-" : String.format(Locale.ROOT, "%.2f", r.rate() / b.rate()));
            }
            row.add(latencies(r));
            if (compare) {
                row.add(b == null ? "-" : latencies(b));
            }
            rows.add(row.toArray(String[]::new));
        }
        for (Skipped k : skipped) {
            if (k.target().equals(baseline)) {
                continue;
            }
            List<String> row = new ArrayList<>(List.of(label(k.phase(), k.threads()), k.target(), "skipped: " + k.reason()));
            if (cpus) {
                row.add("-");
            }
            if (gc) {
                row.add("-");
            }
            Result b = !compare ? null : baselineOf(results, k.workload(), k.phase(), k.threads(), baseline);
            if (compare) {
                row.add(b == null ? "-" : rate(b));
                if (cpus) {
                    row.add(b == null ? "-" : number(b.cpus()));
                }
                row.add("-");
            }
            row.add("-");
            if (compare) {
                row.add(b == null ? "-" : latencies(b));
            }
            rows.add(row.toArray(String[]::new));
        }
        return format(rows, 2);
    }

    private static Result baselineOf(List<Result> results, String workload, String phase, int threads, String baseline) {
        return results.stream()
                .filter(x -> x.target().equals(baseline) && x.workload().equals(workload)
                        && x.phase().equals(phase) && x.threads() == threads)
                .findFirst().orElse(null);
    }

    /** The baseline's rate column where it has no result: {@code skipped} if it skipped the phase. */
    private static String baselineMissing(List<Skipped> skipped, Result r, String baseline) {
        return skipped.stream().anyMatch(k -> k.sameRow(r, baseline)) ? "skipped" : "-";
    }

    /**
     * Rows padded into columns two spaces apart: the first {@code leftColumns} (names) left-aligned, the
     * others (numbers) right-aligned so that their digits line up.
     */
    static String format(List<String[]> rows, int leftColumns) {
        int columns = rows.getFirst().length;
        int[] width = new int[columns];
        for (String[] row : rows) {
            for (int c = 0; c < columns; c++) {
                width[c] = Math.max(width[c], row[c].length());
            }
        }
        StringBuilder sb = new StringBuilder();
        for (String[] row : rows) {
            StringBuilder line = new StringBuilder();
            for (int c = 0; c < columns; c++) {
                int pad = width[c] - row[c].length();
                if (c > 0) {
                    line.append("  ");
                }
                if (c < leftColumns) {
                    line.append(row[c]).repeat(' ', pad);
                } else {
                    line.repeat(' ', pad).append(row[c]);
                }
            }
            sb.append(line.toString().stripTrailing()).append('\n');
        }
        return sb.toString();
    }

    /** The phase, with the thread count when more than one thread ran it. */
    private static String label(String phase, int threads) {
        return threads == 1 ? phase : phase + " x" + threads;
    }

    private static String rate(Result r) {
        return number(r.rate()) + " " + r.unit();
    }

    private static String latencies(Result r) {
        return number(r.p50Us()) + " / " + number(r.p99Us()) + " / " + number(r.p999Us()) + " / " + number(r.maxUs());
    }

    /** "0", "12 (45)", "3 (<1)": the pauses and the longest in milliseconds; "-" if not measured. */
    static String pauses(Result r) {
        if (!Double.isFinite(r.gcPauses())) {
            return "-";
        }
        long n = (long) r.gcPauses();
        if (n == 0) {
            return "0";
        }
        double max = r.gcMaxMs();
        return String.format(Locale.ROOT, "%,d (%s)", n, !Double.isFinite(max) ? "?" : max < 1 ? "<1" : String.format(Locale.ROOT, "%,.0f", max));
    }

    /** Three significant digits or more: 12.3, 456, 7,890. */
    private static String number(double v) {
        if (!Double.isFinite(v)) {
            return "-";
        }
        return String.format(Locale.ROOT, Math.abs(v) < 10 ? "%.2f" : Math.abs(v) < 100 ? "%.1f" : "%,.0f", v);
    }
}
