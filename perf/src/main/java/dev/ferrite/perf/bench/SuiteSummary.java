package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The default suite's closing table: each measured phase with Ferrite beside its best baseline (the
 * fastest other target, the {@code memory} ceiling aside), their ratio, Ferrite's ratio to the ceiling,
 * CPU microseconds per operation of both (from the phase's busy CPUs, where the workload measures them),
 * and the target DESIGN §8 sets for it, passed or short, or not judged where what it compares against did
 * not run (no file system made without root, no fio, no ceiling): a target is never met by default.
 * Every rate here is higher-is-better.
 */
public final class SuiteSummary {
    private static final double ONE_MILLION = 1_000_000;

    private SuiteSummary() {
    }

    /**
     * One phase of one workload at one thread count.
     *
     * @param best     the best baseline's target, null if the phase has none
     * @param memory   the ceiling's rate, NaN if it did not run
     * @param target   what DESIGN §8 asks of the phase, null if nothing
     * @param pass     whether Ferrite meets it, null without a target or when what it compares against did not run
     */
    public record Row(String workload, String phase, int threads, Result ferrite, Result best, double memory,
                      String target, Boolean pass) {
        /** Ferrite's rate over the best baseline's, NaN without one. */
        public double ratio() {
            return best == null ? Double.NaN : ferrite.rate() / best.rate();
        }

        /** Ferrite's rate over the ceiling's, NaN without one. */
        public double ofMemory() {
            return ferrite.rate() / memory;
        }
    }

    /** The rows of {@code results}: one per phase and thread count that Ferrite ran, in the order they came. */
    public static List<Row> rows(List<Result> results) {
        Map<String, List<Result>> groups = new LinkedHashMap<>();
        for (Result r : results) {
            groups.computeIfAbsent(r.workload() + '\u0000' + r.phase() + '\u0000' + r.threads(), k -> new ArrayList<>()).add(r);
        }
        List<Row> rows = new ArrayList<>();
        for (List<Result> g : groups.values()) {
            Result ferrite = null, best = null;
            double memory = Double.NaN;
            for (Result r : g) {
                if (isFerrite(r.target())) {
                    ferrite = ferrite == null ? r : ferrite;
                } else if (isMemory(r.target())) {
                    memory = r.rate();
                } else if (best == null || judgedBefore(r, best)) {
                    best = r;
                }
            }
            if (ferrite != null) {
                rows.add(judge(ferrite, best, memory, g, results));
            }
        }
        return rows;
    }

    /**
     * Whether Ferrite is judged against baseline {@code r} rather than {@code best}: the device flushed as
     * often as the log flushes (the same durability) before any other, else the fastest.
     */
    private static boolean judgedBefore(Result r, Result best) {
        boolean flushed = r.target().equals(JournalBench.FLUSHED);
        return flushed != best.target().equals(JournalBench.FLUSHED) ? flushed : r.rate() > best.rate();
    }

    static boolean isFerrite(String target) {
        return target.startsWith("ferrite");
    }

    static boolean isMemory(String target) {
        return target.startsWith("memory");
    }

    /** The row with the target DESIGN §8 sets for its phase, and whether Ferrite meets it. */
    private static Row judge(Result f, Result best, double memory, List<Result> group, List<Result> all) {
        String workload = f.workload(), phase = f.phase();
        double ratio = best == null ? Double.NaN : f.rate() / best.rate();
        double ofMemory = f.rate() / memory;
        String target = null;
        Boolean pass = null;
        switch (workload) {
            case "journal" -> {
                if (phase.equals(JournalBench.FORCED_COMMIT) && f.threads() == 1 || phase.equals(JournalBench.LOG_WRITE)) {
                    target = best != null && best.target().equals(JournalBench.FLUSHED) ? "≥ 0.90 of the device, as flushed"
                            : "≥ 0.90 of the device";
                    pass = best == null ? null : ratio >= 0.9;
                }
            }
            case "kv" -> {
                target = "ahead of every peer, ≥ 0.5 of memory";
                pass = best == null || Double.isNaN(memory) ? null : ratio > 1 && ofMemory >= 0.5;
            }
            case "meta" -> {
                if (f.threads() > 2) {
                    Result one = find(all, workload, phase, f.target(), 1);
                    target = "≥ its 1-thread rate";
                    pass = one != null && f.rate() >= one.rate();
                } else {
                    double floor = phase.startsWith("walk") ? 5 * ONE_MILLION : ONE_MILLION;
                    target = (f.threads() == 2 ? String.format(Locale.ROOT, "≥ %,.0f/s, ", floor) : "") + "≥ 0.5 of memory";
                    pass = Double.isNaN(memory) ? null : ofMemory >= 0.5 && (f.threads() != 2 || f.rate() >= floor);
                }
            }
            case "dirscale" -> {
                List<Result> windows = all.stream().filter(r -> r.workload().equals(workload) && r.target().equals(f.target())).toList();
                if (windows.size() > 1 && windows.getLast() == f) {
                    target = "≥ 0.90 of " + windows.getFirst().phase();
                    pass = f.rate() >= 0.9 * windows.getFirst().rate();
                }
            }
            case "randwrite" -> {
                Result raw = group.stream().filter(r -> r.target().equals("raw")).findFirst().orElse(null);
                List<Result> fileSystems = group.stream().filter(r -> !isFerrite(r.target()) && !r.target().equals("raw")).toList();
                target = "≥ 0.90 of raw, ahead of the file systems";
                pass = raw == null || fileSystems.isEmpty() ? null
                        : f.rate() >= 0.9 * raw.rate() && fileSystems.stream().allMatch(r -> f.rate() > r.rate());
            }
            case "dbench" -> {
                List<Result> fileSystems = group.stream().filter(r -> !isFerrite(r.target())).toList();
                target = "ahead of every file system, lower max latency";
                pass = fileSystems.isEmpty() ? null : fileSystems.stream().allMatch(r -> f.rate() > r.rate() && f.maxUs() < r.maxUs());
            }
            default -> {
            }
        }
        return new Row(workload, phase, f.threads(), f, best, memory, target, pass);
    }

    private static Result find(List<Result> all, String workload, String phase, String target, int threads) {
        for (Result r : all) {
            if (r.workload().equals(workload) && r.phase().equals(phase) && r.target().equals(target) && r.threads() == threads) {
                return r;
            }
        }
        return null;
    }

    /** CPU microseconds per operation: busy CPUs over the rate; NaN where the workload measured no CPUs or the rate is bytes. */
    static double cpuMicros(Result r) {
        return r == null || r.unit().equals("MB/s") ? Double.NaN : r.cpus() * 1e6 / r.rate();
    }

    /** The table, plain text, one row per line after a header; a count of passes and shorts last. */
    public static String format(List<Row> rows) {
        String head = "%-9s %-18s %3s %16s %-24s %7s %7s %13s  %s%n";
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, head, "workload", "phase", "thr", "ferrite", "best baseline", "vs best",
                "vs mem", "CPU µs/op F/B", "target"));
        int passed = 0, short_ = 0, unjudged = 0;
        for (Row r : rows) {
            String best = r.best() == null ? "–" : r.best().target() + " " + rate(r.best());
            String cpu = number(cpuMicros(r.ferrite()), "%.1f") + "/" + number(cpuMicros(r.best()), "%.1f");
            String mark = r.target() == null ? "" : r.target() + "  " + verdict(r);
            if (r.target() != null) {
                if (r.pass() == null) {
                    unjudged++;
                } else if (r.pass()) {
                    passed++;
                } else {
                    short_++;
                }
            }
            sb.append(String.format(Locale.ROOT, head, r.workload(), r.phase(), r.threads(), rate(r.ferrite()),
                    best.length() > 24 ? best.substring(0, 24) : best, number(r.ratio(), "%.2f"), number(r.ofMemory(), "%.2f"),
                    cpu, mark));
        }
        sb.append(String.format(Locale.ROOT, "%d targets met, %d short%s%n", passed, short_,
                unjudged == 0 ? "" : ", " + unjudged + " not judged (what they compare against did not run)"));
        return sb.toString();
    }

    /** "pass", "SHORT", or "not judged" for a row with a target. */
    private static String verdict(Row r) {
        return r.pass() == null ? "not judged" : r.pass() ? "pass" : "SHORT";
    }

    private static String rate(Result r) {
        return String.format(Locale.ROOT, "%,.0f %s", r.rate(), r.unit());
    }

    private static String number(double v, String format) {
        return Double.isFinite(v) ? String.format(Locale.ROOT, format, v) : "–";
    }
}
