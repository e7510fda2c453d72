package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;

import dev.ferrite.perf.bench.DeviceRegions;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.MetaApi;
import dev.ferrite.perf.bench.MetaBench;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultTable;
import dev.ferrite.perf.bench.ScratchFile;
import dev.ferrite.perf.bench.Storage;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "meta", header = "fs_mark-style create, walk and unlink beside XFS and ext4.",
        description = {
                "fs_mark-style metadata workload, the same on each target in one run:",
                "",
                "  create   each thread creates N/T empty files with hashed names, in its own",
                "           directory (private) or all in one (shared); then sync",
                "           (untimed: caches dropped, as by a remount)",
                "  walk     readdir every directory and stat every entry",
                "  unlink   each thread removes its files; then sync",
                "",
                "Targets: ferrite (a volume on a file in --dir), fuse (a volume on a loop",
                "device mounted through FUSE, driven by system calls as the kernel's are;",
                "needs root, losetup and /dev/fuse), xfs, ext4, btrfs (each made",
                "for the run with mkfs's defaults and room for the files on a loop device over",
                "an image in --dir, mounted privately, removed afterwards; needs root, losetup",
                "and the mkfs), posix (a directory in --dir), posix:DIR (a directory in DIR),",
                "memory (the ceiling: a ConcurrentSkipListMap per directory, nothing durable).",
                "The table gives the first target's rate over each other's. The kernel file",
                "systems drop their caches before the walk when run as root, else walk warm and",
                "say so.",
                "--api handle (the default) has every target open each directory once and",
                "name files relative to it; --api path has every call name the full path.",
                ""})
final class MetaCommand implements Callable<Integer> {
    @Option(names = "--targets", paramLabel = "T", split = ",",
            description = "ferrite, fuse, xfs, ext4, btrfs, posix, posix:DIR, memory, in run order (default: ferrite, "
                    + "each of xfs, ext4 and btrfs this process can make, memory; without any of them posix:TMP, "
                    + "a directory in java.io.tmpdir, in their place)")
    List<String> targets;

    @Option(names = "--files", paramLabel = "N", defaultValue = "1000000",
            description = "files created, walked and unlinked per run (default: ${DEFAULT-VALUE})")
    long files;

    @Mixin
    ThreadsOption threads;

    @Option(names = "--layout", paramLabel = "L", split = ",", defaultValue = "private,shared",
            description = "private (a directory per thread), shared (one directory) (default: ${DEFAULT-VALUE})")
    List<String> layouts;

    @Mixin
    ApiOption api;

    @Mixin
    RunDir runDir;

    @Option(names = "--cache", paramLabel = "SIZE", defaultValue = "1G", converter = ByteSize.Converter.class,
            description = "Ferrite's buffer cache; K/M/G suffixes (default: ${DEFAULT-VALUE})")
    long cache;

    @Mixin
    JsonOption json;

    @Mixin
    StallsOption stalls;

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
        long stallNanos = stalls.nanos(spec);
        List<MetaBench.Layout> ls = layouts.stream().map(this::layout).distinct().toList();
        if (files < 1 || files > MetaBench.MAX_FILES) {
            throw new ParameterException(spec.commandLine(), "--files " + files + ": give 1 to " + MetaBench.MAX_FILES);
        }
        threads.validate(spec, MetaBench.MAX_THREADS, files, "--files");
        MetaApi calls = api.resolve(spec);
        Path base = runDir.resolve(spec);
        PrintWriter out = spec.commandLine().getOut();
        try (ScratchFile scratch = ScratchFile.directory(base, "ferrite-meta-")) {
            List<MetaBench.Target> ts = MetaTargets.parse(spec, targets != null ? targets : MetaTargets.defaults(),
                    scratch.path(), cache, calls);
            Storage storage = RunDir.storage(scratch.path());
            out.printf(Locale.ROOT, "dir:     %s (%s, temporary)%n", scratch.path(), Storage.of(scratch.path()).describe());
            DeviceRegions.current().ifPresent(r -> out.printf(Locale.ROOT, "device:  %s (%s): Ferrite and the kernel's"
                    + " file systems on loop devices over regions of it%n", r.device(), storage.describe()));
            out.printf(Locale.ROOT, "files:   %,d; threads %s; layouts %s; api %s%n", files,
                    threads,
                    ls.stream().map(MetaBench.Layout::label).collect(Collectors.joining(",")), calls.label());
            out.flush();
            out.println("jvm:     " + Machine.jvm());
            Machine machine = Machine.collect(storage);
            MetaBench bench = new MetaBench(ts, files, threads.counts, ls);
            bench.watchStalls(stallNanos);
            List<Result> results = bench.run(new ProgressLine(spec.commandLine().getErr()));
            for (String note : bench.notes()) {
                out.println(note);
            }
            if (!bench.jit().isEmpty()) {
                out.println("note:    " + bench.jit());
            }
            out.println();
            out.println("api:     " + calls.label() + ", on every target");
            RunDir.printTables(out, results, ts.stream().map(MetaBench.Target::label).toList());
            RunDir.printContention(out, bench.contention());
            RunDir.printStalls(out, bench.stalls());
            json.write(out, machine, results);
        }
        out.flush();
        return 0;
    }

    private MetaBench.Layout layout(String s) {
        return switch (s) {
            case "private" -> MetaBench.Layout.PRIVATE;
            case "shared" -> MetaBench.Layout.SHARED;
            default -> throw new ParameterException(spec.commandLine(), "--layout " + s + ": give private or shared");
        };
    }
}
