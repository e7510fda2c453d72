package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import dev.ferrite.perf.bench.DirScaleBench;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.MetaApi;
import dev.ferrite.perf.bench.MetaBench;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ScratchFile;
import dev.ferrite.perf.bench.Storage;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "dirscale",
        description = {
                "Create rate as one directory grows: one thread creates empty files with hashed",
                "names in one directory up to --max entries; the rate is measured over the last",
                "tenth before 10k, 100k, 1M, ... and --max entries. Prints each window's rate",
                "and the ratio of the last to the first (a directory that stays O(log n) keeps it",
                "near 1). Nothing is synced. --api handle (the default) creates by name in the",
                "open directory; --api path names the full path each time.",
                ""})
final class DirScaleCommand implements Callable<Integer> {
    @Option(names = "--targets", paramLabel = "T", split = ",", defaultValue = "ferrite",
            description = "ferrite, posix, posix:DIR, in run order (default: ${DEFAULT-VALUE})")
    List<String> targets;

    @Option(names = "--max", paramLabel = "N", defaultValue = "10000000",
            description = "entries the directory grows to (default: ${DEFAULT-VALUE})")
    long max;

    @Mixin
    ApiOption api;

    @Mixin
    RunDir runDir;

    @Option(names = "--cache", paramLabel = "SIZE", defaultValue = "2G", converter = ByteSize.Converter.class,
            description = "Ferrite's buffer cache; K/M/G suffixes (default: ${DEFAULT-VALUE})")
    long cache;

    @Mixin
    JsonOption json;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        json.validate(spec);
        if (max < DirScaleBench.MIN_MAX || max > DirScaleBench.MAX_MAX) {
            throw new ParameterException(spec.commandLine(), "--max " + max + ": give " + DirScaleBench.MIN_MAX
                    + " to " + DirScaleBench.MAX_MAX);
        }
        MetaApi calls = api.resolve(spec);
        Path base = runDir.resolve(spec);
        PrintWriter out = spec.commandLine().getOut();
        try (ScratchFile scratch = ScratchFile.directory(base, "ferrite-dirscale-")) {
            List<MetaBench.Target> ts = MetaTargets.parse(spec, targets, scratch.path(), cache, calls);
            Storage storage = Storage.of(scratch.path());
            out.printf(Locale.ROOT, "dir:     %s (%s, temporary); one directory up to %,d entries; api %s%n",
                    storage.path(), storage.describe(), max, calls.label());
            out.flush();
            Machine machine = Machine.collect(storage);
            List<Result> results = new DirScaleBench(ts, max).run(new ProgressLine(spec.commandLine().getErr()));
            out.println();
            int width = Math.max("target".length(), ts.stream().mapToInt(t -> t.label().length()).max().orElse(0));
            String row = "%-" + width + "s  %-6s  %-14s %14s %10s%n";
            out.printf(Locale.ROOT, row, "target", "api", "window", "creates/s", "vs first");
            for (MetaBench.Target t : ts) {
                List<Result> mine = results.stream().filter(r -> r.target().equals(t.label())).toList();
                double first = mine.getFirst().rate();
                for (Result r : mine) {
                    out.printf(Locale.ROOT, row, t.label(), calls.label(), r.phase(), String.format(Locale.ROOT, "%,.0f", r.rate()),
                            String.format(Locale.ROOT, "%.2f", r.rate() / first));
                }
            }
            json.write(out, machine, results);
        }
        out.flush();
        return 0;
    }
}
