package dev.ferrite.perf.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The one writer of the benchmark result format, shared by every workload:
 * <pre>{@code
 * {"machine": {"hostname", "cpus", "memory_bytes", "kernel", "cpu_model", "jdk", "date",
 *              "storage": {"path", "filesystem", "source"} | null},
 *  "results": [{"workload", "phase", "target", "threads", "n", "rate", "unit", "p50_us", "p99_us", "p999_us", "max_us",
 *               "busy_cpus", "gc_pauses", "gc_max_ms"}, ...],
 *  "skipped": [{"workload", "phase", "target", "threads", "reason"}, ...]}
 * }</pre>
 * ({@code "skipped"}, the phases a target did not run, only if there are any.)
 * One result per line so that runs diff well. Rates and latencies keep three decimals; a value that is
 * not finite is written as {@code null}.
 */
public final class ResultJson {
    private ResultJson() {
    }

    public static void write(Path file, Machine machine, List<Result> results) throws IOException {
        write(file, machine, results, List.of());
    }

    public static void write(Path file, Machine machine, List<Result> results, List<Skipped> skipped) throws IOException {
        Files.writeString(file, format(machine, results, skipped));
    }

    /** The results of a document {@link #format} wrote (a {@code null} figure reads as NaN). */
    public static List<Result> read(String json) {
        Object root = JsonReader.parse(json);
        List<Result> out = new ArrayList<>();
        if (!(JsonReader.at(root, "results") instanceof List<?> results)) {
            throw new IllegalArgumentException("\"results\" in the JSON document is not a list");
        }
        for (int i = 0; i < results.size(); i++) {
            out.add(new Result(text(root, i, "workload"), text(root, i, "phase"), text(root, i, "target"),
                    (int) JsonReader.number(root, "results", i, "threads"), (long) JsonReader.number(root, "results", i, "n"),
                    figure(root, i, "rate"), text(root, i, "unit"), figure(root, i, "p50_us"), figure(root, i, "p99_us"),
                    optional(root, i, "p999_us"), figure(root, i, "max_us"), figure(root, i, "busy_cpus"),
                    optional(root, i, "gc_pauses"), optional(root, i, "gc_max_ms")));
        }
        return out;
    }

    /** The skipped phases of a document {@link #format} wrote (none if it has no {@code "skipped"}). */
    public static List<Skipped> readSkipped(String json) {
        Object root = JsonReader.parse(json);
        List<Skipped> out = new ArrayList<>();
        if (root instanceof java.util.Map<?, ?> m && m.get("skipped") instanceof List<?> skipped) {
            for (int i = 0; i < skipped.size(); i++) {
                out.add(new Skipped((String) JsonReader.at(root, "skipped", i, "workload"), (String) JsonReader.at(root, "skipped", i, "phase"),
                        (String) JsonReader.at(root, "skipped", i, "target"), (int) JsonReader.number(root, "skipped", i, "threads"),
                        (String) JsonReader.at(root, "skipped", i, "reason")));
            }
        }
        return out;
    }

    /** The machine of a document {@link #format} wrote. */
    public static Machine readMachine(String json) {
        Object root = JsonReader.parse(json);
        Object storage = JsonReader.at(root, "machine", "storage");
        return new Machine(string(root, "hostname"), (int) JsonReader.number(root, "machine", "cpus"),
                (long) JsonReader.number(root, "machine", "memory_bytes"), string(root, "kernel"), string(root, "cpu_model"),
                string(root, "jdk"), string(root, "date"), storage == null ? null
                : new Storage((String) JsonReader.at(storage, "path"), (String) JsonReader.at(storage, "filesystem"),
                        (String) JsonReader.at(storage, "source")));
    }

    private static String string(Object root, String field) {
        return JsonReader.at(root, "machine", field) instanceof String s ? s : null;
    }

    private static String text(Object root, int i, String field) {
        return JsonReader.at(root, "results", i, field) instanceof String s ? s : null;
    }

    /** A figure files written before it existed lack: NaN there. */
    private static double optional(Object root, int i, String field) {
        return JsonReader.at(root, "results", i) instanceof java.util.Map<?, ?> m && m.containsKey(field) ? figure(root, i, field) : Double.NaN;
    }

    private static double figure(Object root, int i, String field) {
        return JsonReader.at(root, "results", i, field) == null ? Double.NaN : JsonReader.number(root, "results", i, field);
    }

    public static String format(Machine machine, List<Result> results) {
        return format(machine, results, List.of());
    }

    public static String format(Machine machine, List<Result> results, List<Skipped> skipped) {
        StringBuilder sb = new StringBuilder(256 + 256 * results.size());
        sb.append("{\n  \"machine\": {");
        field(sb, "hostname", machine.hostname()).append(", ");
        field(sb, "cpus", machine.cpus()).append(", ");
        field(sb, "memory_bytes", machine.memoryBytes()).append(", ");
        field(sb, "kernel", machine.kernel()).append(", ");
        field(sb, "cpu_model", machine.cpuModel()).append(", ");
        field(sb, "jdk", machine.jdk()).append(", ");
        field(sb, "date", machine.date()).append(", ");
        Storage s = machine.storage();
        if (s == null) {
            sb.append("\"storage\": null");
        } else {
            sb.append("\"storage\": {");
            field(sb, "path", s.path()).append(", ");
            field(sb, "filesystem", s.filesystem()).append(", ");
            field(sb, "source", s.source()).append('}');
        }
        sb.append("},\n  \"results\": [");
        for (int i = 0; i < results.size(); i++) {
            Result r = results.get(i);
            sb.append(i == 0 ? "\n    {" : ",\n    {");
            field(sb, "workload", r.workload()).append(", ");
            field(sb, "phase", r.phase()).append(", ");
            field(sb, "target", r.target()).append(", ");
            field(sb, "threads", r.threads()).append(", ");
            field(sb, "n", r.n()).append(", ");
            field(sb, "rate", r.rate()).append(", ");
            field(sb, "unit", r.unit()).append(", ");
            field(sb, "p50_us", r.p50Us()).append(", ");
            field(sb, "p99_us", r.p99Us()).append(", ");
            field(sb, "p999_us", r.p999Us()).append(", ");
            field(sb, "max_us", r.maxUs()).append(", ");
            field(sb, "busy_cpus", r.cpus()).append(", ");
            field(sb, "gc_pauses", r.gcPauses()).append(", ");
            field(sb, "gc_max_ms", r.gcMaxMs()).append('}');
        }
        sb.append(results.isEmpty() ? "]" : "\n  ]");
        if (!skipped.isEmpty()) {
            sb.append(",\n  \"skipped\": [");
            for (int i = 0; i < skipped.size(); i++) {
                Skipped k = skipped.get(i);
                sb.append(i == 0 ? "\n    {" : ",\n    {");
                field(sb, "workload", k.workload()).append(", ");
                field(sb, "phase", k.phase()).append(", ");
                field(sb, "target", k.target()).append(", ");
                field(sb, "threads", k.threads()).append(", ");
                field(sb, "reason", k.reason()).append('}');
            }
            sb.append("\n  ]");
        }
        return sb.append("\n}\n").toString();
    }

    private static StringBuilder field(StringBuilder sb, String name, String value) {
        quote(sb.append('"').append(name).append("\": "), value);
        return sb;
    }

    private static StringBuilder field(StringBuilder sb, String name, long value) {
        return sb.append('"').append(name).append("\": ").append(value);
    }

    private static StringBuilder field(StringBuilder sb, String name, double value) {
        sb.append('"').append(name).append("\": ");
        return Double.isFinite(value) ? sb.append(String.format(Locale.ROOT, "%.3f", value)) : sb.append("null");
    }

    /** Appends {@code s} as a JSON string (null as null). */
    public static void quote(StringBuilder sb, String s) {
        if (s == null) {
            sb.append("null");
            return;
        }
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }
}
