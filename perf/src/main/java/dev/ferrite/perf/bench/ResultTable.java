package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * Renders results side by side with a baseline target (fio, a kernel filesystem, ...): one row per phase,
 * thread count and non-baseline target, with the baseline's rate at the same phase and thread count, the
 * ratio of the two rates and both latency summaries. Without baseline results the comparison columns
 * are left out.
 * <pre>
 * phase          target            rate            fio rate      vs fio  p50 / p99 / max µs     fio p50 / p99 / max µs
 * randwrite-qd32 ferrite/io_uring  118,003 IOPS    125,412 IOPS    0.94  250 / 598 / 4,120      244 / 570 / 3,900
 * </pre>
 */
public final class ResultTable {
    private ResultTable() {
    }

    public static String render(List<Result> results, String baseline) {
        boolean compare = results.stream().anyMatch(r -> r.target().equals(baseline));
        List<String[]> rows = new ArrayList<>();
        rows.add(compare
                ? new String[] {"phase", "target", "rate", baseline + " rate", "vs " + baseline, "p50 / p99 / max µs",
                        baseline + " p50 / p99 / max µs"}
                : new String[] {"phase", "target", "rate", "p50 / p99 / max µs"});
        for (Result r : results) {
            if (r.target().equals(baseline)) {
                continue;
            }
            if (!compare) {
                rows.add(new String[] {label(r), r.target(), rate(r), latencies(r)});
                continue;
            }
            Result b = results.stream()
                    .filter(x -> x.target().equals(baseline) && x.workload().equals(r.workload())
                            && x.phase().equals(r.phase()) && x.threads() == r.threads())
                    .findFirst().orElse(null);
            rows.add(new String[] {label(r), r.target(), rate(r),
                    b == null ? "-" : rate(b),
                    b == null || !Objects.equals(b.unit(), r.unit()) ? "-" : String.format(Locale.ROOT, "%.2f", r.rate() / b.rate()),
                    latencies(r),
                    b == null ? "-" : latencies(b)});
        }
        return format(rows);
    }

    private static String format(List<String[]> rows) {
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
                // Names read left-aligned, numbers right-aligned so that their digits line up.
                if (c < 2) {
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
    private static String label(Result r) {
        return r.threads() == 1 ? r.phase() : r.phase() + " x" + r.threads();
    }

    private static String rate(Result r) {
        return number(r.rate()) + " " + r.unit();
    }

    private static String latencies(Result r) {
        return number(r.p50Us()) + " / " + number(r.p99Us()) + " / " + number(r.maxUs());
    }

    /** Three significant digits or more: 12.3, 456, 7,890. */
    private static String number(double v) {
        if (!Double.isFinite(v)) {
            return "-";
        }
        return String.format(Locale.ROOT, Math.abs(v) < 10 ? "%.2f" : Math.abs(v) < 100 ? "%.1f" : "%,.0f", v);
    }
}
