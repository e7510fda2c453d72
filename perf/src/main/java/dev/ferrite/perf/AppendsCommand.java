package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import dev.ferrite.perf.bench.DeviceRegions;
import dev.ferrite.perf.bench.AppendBench;
import dev.ferrite.perf.bench.AppendBench.Target;
import dev.ferrite.perf.bench.Fio;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.Storage;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "appends", header = "Extent counts after small concurrent appends, beside XFS and ext4.",
        description = {
                "Files written by small appends, several at once: each of --writers threads",
                "appends BS bytes at a time (O_DIRECT, one fsync at the end) to a file of its own",
                "until the files hold --size between them; then counts the extents each file",
                "ended in, the figure speculative preallocation is for. Each target gets its own",
                "RAM-backed loop device of the same size, made and removed (needs root, losetup):",
                "",
                "  ferrite  a volume on the device; Namespace.append; Namespace.extents",
                "  xfs      mkfs.xfs defaults, mounted; fio rw=write direct=1 numjobs=W",
                "           end_fsync=1; filefrag",
                "  ext4     mkfs.ext4 defaults, mounted; the same fio job; filefrag",
                "",
                "Each target writes its files in full: --seconds is not a phase length here but",
                "a limit, raised to " + AppendsCommand.LIMIT_SECONDS + " s when given lower.",
                ""})
final class AppendsCommand implements Callable<Integer> {
    /** The least time a target gets to write its files. */
    static final int LIMIT_SECONDS = 600;

    @Option(names = "--size", paramLabel = "SIZE", defaultValue = "1G", converter = ByteSize.Converter.class,
            description = "bytes the files hold between them, a whole number of MiB per writer (default: ${DEFAULT-VALUE})")
    long size;

    @Option(names = "--bs", paramLabel = "SIZE", defaultValue = "4K", converter = ByteSize.Converter.class,
            description = "bytes per append, a multiple of 4 KiB up to 1 MiB (default: ${DEFAULT-VALUE})")
    long bs;

    @Option(names = "--writers", paramLabel = "N", defaultValue = "2",
            description = "concurrent appenders, a file each, 1..64 (default: ${DEFAULT-VALUE})")
    int writers;

    @Option(names = "--targets", paramLabel = "T", split = ",", defaultValue = "ferrite,xfs,ext4",
            description = "ferrite, xfs, ext4, in run order (default: ${DEFAULT-VALUE})")
    List<String> targets;

    @Mixin
    RunDir runDir;

    @Mixin
    BenchOptions options;

    @Mixin
    FioOption fioOption;

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
        options.validate(spec);
        if (writers < 1 || writers > 64) {
            throw new ParameterException(spec.commandLine(), "--writers " + writers + ": give 1..64");
        }
        if (size < (long) writers << 20 || size % ((long) writers << 20) != 0 || size > 64L << 30) {
            throw new ParameterException(spec.commandLine(), "--size " + ByteSize.format(size)
                    + ": give a whole number of MiB per writer, up to 64 GiB");
        }
        ByteSize.requireIoSize(spec, "--bs", bs);
        List<Target> ts = TargetNames.parse(spec, Target.class, targets);
        Path base = runDir.resolve(spec);
        Fio fio = fioOption.noFio ? null : Fio.find().orElse(null);
        AppendBench bench = new AppendBench(base, size, (int) bs, writers, Math.max(options.seconds, LIMIT_SECONDS), ts, fio);
        PrintWriter out = spec.commandLine().getOut();
        Storage storage = RunDir.storage(base);
        out.println("devices: " + RunDir.loopDevices(bench.deviceBytes(), base));
        out.printf(Locale.ROOT, "files:   %d writers, a file each of %s, %s appends, O_DIRECT, fsync at the end%n",
                writers, ByteSize.format(size / writers), ByteSize.format(bs));
        out.println(fio != null ? "fio:     " + fio.version() + " for xfs and ext4"
                : "fio:     " + (fioOption.noFio ? "skipped (--no-fio)" : "not on the PATH") + ": ferrite only");
        out.flush();
        out.println("jvm:     " + Machine.jvm());
        Machine machine = Machine.collect(storage);
        List<Result> results = bench.run(new ProgressLine(spec.commandLine().getErr()));
        out.println("configuration and durability:");
        bench.configurations().forEach(c -> out.println("  " + c));
        List<String> ran = ts.stream().map(Target::label).filter(l -> results.stream().anyMatch(r -> r.target().equals(l))).toList();
        if (!ran.isEmpty()) {
            RunDir.printTables(out, results, ran);
        }
        for (String note : bench.notes()) {
            out.println(note);
        }
        options.json.write(out, machine, results);
        out.flush();
        return 0;
    }
}
