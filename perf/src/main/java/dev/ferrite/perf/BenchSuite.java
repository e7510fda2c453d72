package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import dev.ferrite.perf.bench.BaselineTools;
import dev.ferrite.perf.bench.HtmlReport;
import dev.ferrite.perf.bench.LoopDevice;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultJson;
import dev.ferrite.perf.bench.SuiteSummary;
import picocli.CommandLine;

/**
 * {@code ./ferrite bench} without a workload: every workload in turn, each beside its baselines and run
 * by its own command in a JVM of its own (so each prints its tables and configuration, and measures,
 * as when run alone), at sizes that take a few minutes on 2 cores, or with {@code --full} at the
 * workloads' own defaults; then one summary table ({@link SuiteSummary}) and every result in one
 * {@code results.json}.
 * <p>
 * A JVM per step because a step run after others in the same JVM ran beside what they left behind: a heap
 * grown by a million-entry directory, JIT code compiled for other workloads' profiles, peers' threads.
 * Run that way, three fresh-clone suites put random overwrites at 0.57–0.85 of the raw device, where the
 * same command run alone gave 0.99–1.13.
 */
final class BenchSuite {
    /**
     * One workload's command line, as a user would type it after {@code ./ferrite bench}, and why it cannot
     * run on this machine (null if it can): a step missing what only a package brings is skipped, named in
     * the summary, and fails nothing, so a fresh machine runs the rest.
     */
    record Step(String title, List<String> args, String skip) {
        Step(String title, List<String> args) {
            this(title, args, null);
        }

        String command() {
            return args.getFirst();
        }
    }

    private BenchSuite() {
    }

    /**
     * The steps: the quick sizes, or the workloads' defaults (1M files, a 10M-entry directory, 8 dbench
     * clients ...) with {@code full}. {@code noFio} skips fio's baselines. With a {@code device} (null for
     * none), every step runs on it, its contents destroyed: device and journal on the whole of it, the
     * others' targets on loop devices over regions of it.
     */
    static List<Step> steps(boolean full, boolean noFio, Path device) {
        List<String> on = device == null ? List.of() : List.of("--device", device.toString(), "--force");
        String fs = LoopDevice.available(LoopDevice.Kind.XFS) ? "xfs" : "posix:" + System.getProperty("java.io.tmpdir");
        List<Step> steps = new ArrayList<>();
        steps.add(step("the device beside fio", noFio, on, full ? List.of("device") : List.of("device", "--size", "256M", "--seconds", "1")));
        steps.add(step("the journal beside the device", false, on, full ? List.of("journal")
                : List.of("journal", "--size", "256M", "--seconds", "1", "--threads", "1,8")));
        steps.add(step("key-value beside RocksDB, LMDB, Xodus, MVStore and the ceiling", false, on, full ? List.of("kv")
                : List.of("kv", "--keys", "200000", "--threads", "1,2", "--scan-seconds", "0.5")));
        steps.add(step("metadata beside the kernel's file systems and the ceiling", false, on, full ? List.of("meta")
                : List.of("meta", "--files", "50000", "--threads", "1,2")));
        steps.add(step("16 threads in one directory (the contention case)", false, on,
                List.of("meta", "--files", full ? "1000000" : "50000", "--threads", "1,16", "--layout", "shared",
                        "--targets", "ferrite," + fs + ",memory")));
        steps.add(step("one directory growing", false, on, List.of("dirscale", "--max", full ? "10000000" : "1000000",
                "--targets", "ferrite," + fs + ",memory")));
        steps.add(step("random overwrites through a file beside fio", noFio, on, full ? List.of("randwrite")
                : List.of("randwrite", "--file-size", "256M", "--seconds", "2")));
        Step dbench = step("dbench beside the kernel's file systems", false, on, full ? List.of("dbench")
                : List.of("dbench", "--clients", "1,2", "--seconds", "3"));
        steps.add(Files.isReadable(BaselineTools.DBENCH_LOADFILE) ? dbench : new Step(dbench.title(), dbench.args(),
                "its loadfile " + BaselineTools.DBENCH_LOADFILE + " is not on this machine (Debian/Ubuntu: apt-get install dbench)"));
        return steps;
    }

    private static Step step(String title, boolean noFio, List<String> device, List<String> args) {
        List<String> a = new ArrayList<>(args);
        a.addAll(device);
        if (noFio) {
            a.add("--no-fio");
        }
        return new Step(title, List.copyOf(a));
    }

    /**
     * Runs every step as {@code ./ferrite bench ...}, in a JVM started with this one's flags, its output
     * copied to {@code bench}'s, each writing its results to a file in {@code out} (and with {@code jfr},
     * not null, its flight recording beside them); a step that fails is reported and the suite goes on.
     * A step with a reason to skip is not started. Prints the summary and writes {@code out/results.json};
     * returns 0 if every step that was not skipped ran, else 1.
     */
    static int run(CommandLine bench, List<Step> steps, Path out, Path jfr, PrintWriter print) {
        try {
            Files.createDirectories(out);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot make " + out + ": " + e.getMessage(), e);
        }
        List<Result> all = new ArrayList<>();
        List<String> failed = new ArrayList<>(), skipped = new ArrayList<>();
        for (int i = 0; i < steps.size(); i++) {
            Step s = steps.get(i);
            print.printf(Locale.ROOT, "%n=== %d/%d  %s: ./ferrite bench %s%n%n", i + 1, steps.size(), s.title(), String.join(" ", s.args()));
            if (s.skip() != null) {
                print.println("skipped: " + s.skip());
                skipped.add(s.command() + " (" + s.skip() + ")");
                continue;
            }
            print.flush();
            Path json = out.resolve(String.format(Locale.ROOT, "%02d-%s.json", i + 1, s.command()));
            List<String> args = new ArrayList<>(List.of("bench"));
            args.addAll(s.args());
            args.add("--json");
            args.add(json.toString());
            if (jfr != null) {
                args.add("--jfr");
                args.add(out.resolve(String.format(Locale.ROOT, "%02d-%s.jfr", i + 1, s.command())).toString());
            }
            int code;
            try {
                code = ChildJvm.run(bench, List.of(), args);
            } catch (IOException e) {
                print.println("ferrite: cannot start " + s.command() + ": " + e.getMessage());
                code = 1;
            }
            try {
                if (code == 0 && Files.exists(json)) {
                    all.addAll(ResultJson.read(Files.readString(json)));
                } else {
                    failed.add(s.command() + " (exit " + code + ")");
                }
            } catch (IOException | RuntimeException e) {
                failed.add(s.command() + " (" + e.getMessage() + ")");
            }
        }
        print.printf(Locale.ROOT, "%n=== summary: Ferrite beside its best baseline and the memory ceiling; targets from DESIGN §8%n%n");
        print.print(SuiteSummary.format(SuiteSummary.rows(all)));
        if (!skipped.isEmpty()) {
            print.println("skipped: " + String.join(", ", skipped));
        }
        if (!failed.isEmpty()) {
            print.println("failed: " + String.join(", ", failed));
        }
        Path results = out.resolve("results.json");
        Machine machine = Machine.collect(null);
        try {
            ResultJson.write(results, machine, all);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + results + ": " + e.getMessage(), e);
        }
        Path report = out.resolve("report.html");
        try {
            Files.writeString(report, HtmlReport.render("Ferrite benchmarks: the default suite", machine, all));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + report + ": " + e.getMessage(), e);
        }
        print.println();
        print.println("results: " + results.toAbsolutePath() + " (each workload's also in " + out.toAbsolutePath() + ")");
        print.println("report:  " + report.toAbsolutePath());
        print.flush();
        return failed.isEmpty() ? 0 : 1;
    }
}
