package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * A benchmark run as one self-contained HTML page: per workload, a chart of the rate of every target at
 * every phase and thread count (for {@code dirscale}, the rate against the directory's size), a chart of
 * the latency percentiles (p50, p99, p99.9, max, on a log scale), and the numbers in a table; with a summary
 * of Ferrite beside its best baseline on top ({@link SuiteSummary}). Inline SVG, no script, no external
 * font or style: it opens anywhere, and is well-formed XML (XHTML) so that a test can parse it.
 */
public final class HtmlReport {
    private static final String[] COLORS = {"#1f6fb2", "#d9822b", "#3a9a4b", "#c23b3b", "#7d5ba6", "#8c6d31", "#2aa1a8", "#666666"};
    private static final int WIDTH = 900, BAR = 14, LABEL = 230, GAP = 8;

    private HtmlReport() {
    }

    /** The page for {@code results} measured on {@code machine}. */
    public static String render(String title, Machine machine, List<Result> results) {
        StringBuilder sb = new StringBuilder(16_384);
        sb.append("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head><meta charset=\"utf-8\"/>")
                .append("<title>").append(esc(title)).append("</title><style>")
                .append("body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:12px}")
                .append("td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child{text-align:left}")
                .append("svg{display:block;margin:8px 0 20px 0}h2{margin-top:32px}.short{color:#c23b3b}.pass{color:#3a9a4b}")
                .append("</style></head><body>\n");
        sb.append("<h1>").append(esc(title)).append("</h1>\n<p>").append(esc(machine.hostname())).append(", ")
                .append(machine.cpus()).append(" CPUs (").append(esc(machine.cpuModel())).append("), ")
                .append(machine.memoryBytes() >> 20).append(" MiB, ").append(esc(machine.kernel())).append(", JDK ")
                .append(esc(machine.jdk())).append(", ").append(esc(machine.date())).append("</p>\n");
        summary(sb, results);
        Map<String, List<Result>> byWorkload = new LinkedHashMap<>();
        for (Result r : results) {
            byWorkload.computeIfAbsent(r.workload(), k -> new ArrayList<>()).add(r);
        }
        for (Map.Entry<String, List<Result>> e : byWorkload.entrySet()) {
            sb.append("<h2>").append(esc(e.getKey())).append("</h2>\n");
            if (e.getKey().equals("dirscale")) {
                lineChart(sb, e.getValue());
            } else {
                rateChart(sb, e.getValue());
            }
            latencyChart(sb, e.getValue());
            table(sb, e.getValue());
        }
        return sb.append("</body></html>\n").toString();
    }

    /** Charts the report draws for {@code results}: two per workload. */
    public static int charts(List<Result> results) {
        return 2 * (int) results.stream().map(Result::workload).distinct().count();
    }

    private static void summary(StringBuilder sb, List<Result> results) {
        List<SuiteSummary.Row> rows = SuiteSummary.rows(results);
        if (rows.isEmpty()) {
            return;
        }
        sb.append("<h2>summary</h2>\n<table><tr><th>workload</th><th>phase</th><th>threads</th><th>ferrite</th>")
                .append("<th>best baseline</th><th>vs best</th><th>vs memory</th><th>target</th></tr>\n");
        for (SuiteSummary.Row r : rows) {
            sb.append("<tr><td>").append(esc(r.workload())).append("</td><td>").append(esc(r.phase())).append("</td><td>")
                    .append(r.threads()).append("</td><td>").append(rate(r.ferrite())).append("</td><td>")
                    .append(r.best() == null ? "–" : esc(r.best().target()) + " " + rate(r.best())).append("</td><td>")
                    .append(number(r.ratio())).append("</td><td>").append(number(r.ofMemory())).append("</td><td>");
            if (r.target() != null) {
                sb.append(esc(r.target())).append(r.pass() == null ? " <b>not judged</b>"
                        : r.pass() ? " <b class=\"pass\">pass</b>" : " <b class=\"short\">SHORT</b>");
            }
            sb.append("</td></tr>\n");
        }
        sb.append("</table>\n");
    }

    /** Horizontal bars: a group per phase and thread count, a bar per target, scaled to the group's largest. */
    private static void rateChart(StringBuilder sb, List<Result> results) {
        Map<String, List<Result>> groups = groups(results);
        List<String> targets = targets(results);
        int height = 24;
        for (List<Result> g : groups.values()) {
            height += g.size() * BAR + GAP;
        }
        svg(sb, height, "rate by target");
        int y = 20;
        text(sb, 0, 12, "rate (each group scaled to its largest; the figure at the bar's end)", "start", 11);
        for (Map.Entry<String, List<Result>> e : groups.entrySet()) {
            double max = e.getValue().stream().mapToDouble(Result::rate).max().orElse(1);
            text(sb, LABEL - 6, y + BAR * e.getValue().size() / 2 + 4, e.getKey(), "end", 11);
            for (Result r : e.getValue()) {
                int w = (int) Math.max(1, Math.round((WIDTH - LABEL - 150) * r.rate() / max));
                rect(sb, LABEL, y, w, BAR - 2, color(targets, r.target()), r.target() + ": " + rate(r));
                text(sb, LABEL + w + 4, y + BAR - 4, r.target() + " " + rate(r), "start", 10);
                y += BAR;
            }
            y += GAP;
        }
        sb.append("</svg>\n");
    }

    /** Latency p50, p99 and max of each result on a log scale from 1 µs to the largest max. */
    private static void latencyChart(StringBuilder sb, List<Result> results) {
        List<Result> timed = results.stream().filter(r -> Double.isFinite(r.maxUs()) && r.maxUs() > 0).toList();
        List<String> targets = targets(results);
        int height = 40 + timed.size() * BAR;
        svg(sb, height, "latency percentiles");
        text(sb, 0, 12, "latency µs, log scale: p50 (dark), p99, p99.9, max (light)", "start", 11);
        double top = Math.log10(Math.max(10, timed.stream().mapToDouble(Result::maxUs).max().orElse(10)));
        int span = WIDTH - LABEL - 140;
        int y = 24;
        for (Result r : timed) {
            text(sb, LABEL - 6, y + BAR - 4, r.phase() + " x" + r.threads() + " " + r.target(), "end", 10);
            String c = color(targets, r.target());
            double[] values = {r.maxUs(), r.p999Us(), r.p99Us(), r.p50Us()};
            double[] opacity = {0.2, 0.4, 0.65, 1.0};
            for (int k = 0; k < values.length; k++) {
                if (Double.isFinite(values[k]) && values[k] > 0) {
                    int w = (int) Math.max(1, Math.round(span * Math.max(0, Math.log10(Math.max(1, values[k]))) / top));
                    sb.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" fill-opacity=\"%.1f\"/>",
                            LABEL, y, w, BAR - 2, c, opacity[k]));
                }
            }
            text(sb, LABEL + span + 4, y + BAR - 4, String.format(Locale.ROOT, "%s / %s / %s / %s", micros(r.p50Us()), micros(r.p99Us()),
                    micros(r.p999Us()), micros(r.maxUs())), "start", 9);
            y += BAR;
        }
        sb.append("</svg>\n");
    }

    /** dirscale: the rate of each target against the window (directory size), a line per target. */
    private static void lineChart(StringBuilder sb, List<Result> results) {
        List<String> targets = targets(results);
        List<String> windows = new ArrayList<>(new LinkedHashSet<>(results.stream().map(Result::phase).toList()));
        double max = results.stream().mapToDouble(Result::rate).max().orElse(1);
        int height = 260, left = 80, bottom = 220, plot = WIDTH - left - 160;
        svg(sb, height, "rate against directory size");
        text(sb, 0, 12, "creates/s against the directory's size (" + String.format(Locale.ROOT, "%,.0f", max) + " at the top)", "start", 11);
        sb.append(String.format(Locale.ROOT, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", left, bottom, left + plot, bottom));
        for (int i = 0; i < windows.size(); i++) {
            text(sb, x(i, windows.size(), left, plot), bottom + 14, windows.get(i), "middle", 10);
        }
        for (String t : targets) {
            StringBuilder points = new StringBuilder();
            for (Result r : results) {
                if (r.target().equals(t)) {
                    int px = x(windows.indexOf(r.phase()), windows.size(), left, plot);
                    int py = bottom - (int) Math.round((bottom - 30) * r.rate() / max);
                    points.append(px).append(',').append(py).append(' ');
                    sb.append(String.format(Locale.ROOT, "<circle cx=\"%d\" cy=\"%d\" r=\"3\" fill=\"%s\"/>", px, py, color(targets, t)));
                }
            }
            sb.append("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"").append(color(targets, t)).append("\" points=\"")
                    .append(points.toString().strip()).append("\"/>");
        }
        for (int i = 0; i < targets.size(); i++) {
            rect(sb, left + plot + 20, 30 + 18 * i, 12, 12, color(targets, targets.get(i)), targets.get(i));
            text(sb, left + plot + 36, 40 + 18 * i, targets.get(i), "start", 11);
        }
        sb.append("</svg>\n");
    }

    private static int x(int i, int n, int left, int plot) {
        return left + (n == 1 ? plot / 2 : plot * i / (n - 1));
    }

    private static void table(StringBuilder sb, List<Result> results) {
        sb.append("<table><tr><th>phase</th><th>threads</th><th>target</th><th>rate</th><th>p50 µs</th><th>p99 µs</th><th>p99.9 µs</th>")
                .append("<th>max µs</th><th>busy CPUs</th></tr>\n");
        for (Result r : results) {
            sb.append("<tr><td>").append(esc(r.phase())).append("</td><td>").append(r.threads()).append("</td><td>")
                    .append(esc(r.target())).append("</td><td>").append(rate(r)).append("</td><td>").append(micros(r.p50Us()))
                    .append("</td><td>").append(micros(r.p99Us())).append("</td><td>").append(micros(r.p999Us()))
                    .append("</td><td>").append(micros(r.maxUs())).append("</td><td>")
                    .append(number(r.cpus())).append("</td></tr>\n");
        }
        sb.append("</table>\n");
    }

    private static Map<String, List<Result>> groups(List<Result> results) {
        Map<String, List<Result>> groups = new LinkedHashMap<>();
        for (Result r : results) {
            groups.computeIfAbsent(r.phase() + " x" + r.threads(), k -> new ArrayList<>()).add(r);
        }
        return groups;
    }

    /** The targets of {@code results}, Ferrite's first, so that it has the same colour in every chart. */
    private static List<String> targets(List<Result> results) {
        Set<String> s = new LinkedHashSet<>();
        for (Result r : results) {
            if (SuiteSummary.isFerrite(r.target())) {
                s.add(r.target());
            }
        }
        for (Result r : results) {
            s.add(r.target());
        }
        return List.copyOf(s);
    }

    private static String color(List<String> targets, String target) {
        return COLORS[Math.max(0, targets.indexOf(target)) % COLORS.length];
    }

    private static void svg(StringBuilder sb, int height, String label) {
        sb.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"%s\">",
                WIDTH, height, esc(label)));
    }

    private static void rect(StringBuilder sb, int x, int y, int w, int h, String fill, String title) {
        sb.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"><title>%s</title></rect>",
                x, y, w, h, fill, esc(title)));
    }

    private static void text(StringBuilder sb, int x, int y, String s, String anchor, int size) {
        sb.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" text-anchor=\"%s\" font-size=\"%d\">%s</text>", x, y, anchor, size, esc(s)));
    }

    private static String rate(Result r) {
        return String.format(Locale.ROOT, "%,.0f %s", r.rate(), esc(r.unit()));
    }

    private static String micros(double us) {
        return Double.isFinite(us) ? String.format(Locale.ROOT, us < 10 ? "%.2f" : "%,.0f", us) : "–";
    }

    private static String number(double v) {
        return Double.isFinite(v) ? String.format(Locale.ROOT, "%.2f", v) : "–";
    }

    private static String esc(String s) {
        if (s == null) {
            return "";
        }
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }
}
