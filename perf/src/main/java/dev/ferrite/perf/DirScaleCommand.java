package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

import dev.ferrite.perf.bench.DeviceRegions;
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

@Command(name = "dirscale", header = "Create rate as one directory grows to millions of entries.",
        description = {
                "Create rate as one directory grows: one thread creates empty files with hashed",
                "names in one directory up to --max entries; the rate is measured over the last",
                "tenth before 10k, 100k, 1M, ... and --max entries, and over at least 20,000",
                "creates: where the tenth is fewer (the 10k window's 1,000), directories of the",
                "same size beside the big one time their creates too, grown and removed untimed.",
                "Prints each window's rate and the ratio of the last to the first (a directory",
                "that stays O(log n) keeps it near 1), and the first target's rate over each",
                "other's at each window (over memory, the ceiling: a ConcurrentSkipListMap, its",
                "overhead). Nothing is synced.",
                "--api handle (the default) creates by name in the open directory; --api path",
                "names the full path each time. An untimed warm-up on stores of its own comes",
                "first, repeated while the JIT is busy, then a wait for it to settle. Under the",
                "table, a line per Ferrite window: the creating thread's time per create on a",
                "CPU, runnable without one and blocked, and the engine's counters.",
                ""})
final class DirScaleCommand implements Callable<Integer> {
    @Option(names = "--targets", paramLabel = "T", split = ",", defaultValue = "ferrite,memory",
            description = "ferrite, xfs, ext4, btrfs, posix, posix:DIR, memory, in run order (default: ${DEFAULT-VALUE})")
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
        try (DeviceRegions.Scope device = runDir.useDevice(spec)) {
            return run();
        }
    }

    private int run() throws IOException {
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
            Storage storage = RunDir.storage(scratch.path());
            out.printf(Locale.ROOT, "dir:     %s (%s, temporary); one directory up to %,d entries; api %s%n",
                    scratch.path(), Storage.of(scratch.path()).describe(), max, calls.label());
            DeviceRegions.current().ifPresent(r -> out.printf(Locale.ROOT, "device:  %s (%s): Ferrite and the kernel's"
                    + " file systems on loop devices over regions of it%n", r.device(), storage.describe()));
            out.flush();
            out.println("jvm:     " + Machine.jvm());
            Machine machine = Machine.collect(storage);
            DirScaleBench bench = new DirScaleBench(ts, max);
            List<Result> results = bench.run(new ProgressLine(spec.commandLine().getErr()));
            for (Map.Entry<String, String> e : bench.setups().entrySet()) {
                out.printf(Locale.ROOT, "%-8s %s%n", e.getKey() + ":", e.getValue());
            }
            if (!bench.jit().isEmpty()) {
                out.println("note:    " + bench.jit());
            }
            out.println();
            out.print(DirScaleBench.table(results, ts.stream().map(MetaBench.Target::label).toList()));
            RunDir.printContention(out, bench.contention());
            json.write(out, machine, results);
        }
        out.flush();
        return 0;
    }
}
