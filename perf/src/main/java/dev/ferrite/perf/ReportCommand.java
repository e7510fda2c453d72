package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

import dev.ferrite.perf.bench.HtmlReport;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultJson;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "report", header = "Makes the HTML report of a run's results.",
        description = {"Makes the HTML report of a run's results (the JSON any bench command writes",
                "with --json, or the suite's results.json): charts of every workload's rates and",
                "latency percentiles, the summary and the numbers, in one self-contained page.",
                "Given several runs (before and after a change, say), it also prints every rate",
                "of the last beside the first's, with their ratio; the page is the last run's.",
                ""})
final class ReportCommand implements Callable<Integer> {
    @Parameters(paramLabel = "RESULTS.json", arity = "1..*", description = "results files, oldest first")
    List<Path> runs;

    @Option(names = "--out", paramLabel = "FILE", defaultValue = "report.html",
            description = "the page to write (default: ${DEFAULT-VALUE})")
    Path out;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        List<List<Result>> results = new ArrayList<>();
        String last = null;
        for (Path p : runs) {
            if (!Files.isRegularFile(p)) {
                throw new ParameterException(spec.commandLine(), p + " is not a file");
            }
            last = Files.readString(p);
            results.add(ResultJson.read(last));
        }
        PrintWriter print = spec.commandLine().getOut();
        if (runs.size() > 1) {
            compare(print, results.getFirst(), results.getLast());
        }
        Files.writeString(out, HtmlReport.render("Ferrite benchmarks: " + runs.getLast().getFileName(),
                ResultJson.readMachine(last), results.getLast()));
        print.println("report: " + out.toAbsolutePath());
        print.flush();
        return 0;
    }

    /** Every rate of {@code after} beside {@code before}'s for the same workload, phase, target and threads. */
    private static void compare(PrintWriter print, List<Result> before, List<Result> after) {
        Map<String, Result> old = new LinkedHashMap<>();
        for (Result r : before) {
            old.put(key(r), r);
        }
        String row = "%-9s %-18s %3s %-16s %16s %16s %7s%n";
        print.printf(Locale.ROOT, row, "workload", "phase", "thr", "target", "first", "last", "last/1st");
        for (Result r : after) {
            Result o = old.get(key(r));
            print.printf(Locale.ROOT, row, r.workload(), r.phase(), r.threads(), r.target(),
                    o == null ? "–" : String.format(Locale.ROOT, "%,.0f", o.rate()), String.format(Locale.ROOT, "%,.0f", r.rate()),
                    o == null ? "–" : String.format(Locale.ROOT, "%.2f", r.rate() / o.rate()));
        }
        print.println();
    }

    private static String key(Result r) {
        return r.workload() + '\u0000' + r.phase() + '\u0000' + r.target() + '\u0000' + r.threads();
    }
}
