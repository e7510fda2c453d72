package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;

import dev.ferrite.perf.bench.DeviceRegions;
import dev.ferrite.perf.bench.Fio;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.RandWriteBench;
import dev.ferrite.perf.bench.RandWriteBench.Target;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.Storage;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "randwrite", header = "Random 4 KiB overwrites of a file beside fio on XFS, ext4, raw.",
        description = {
                "Random overwrites of an already written file through the direct path: BS-byte",
                "writes at random aligned offsets, O_DIRECT, no fsync, from each --qd count of",
                "synchronous writers. Each target gets its own RAM-backed loop device of the same",
                "size, made for it and removed after it (needs root and losetup):",
                "",
                "  ferrite  a volume on the device; the file written through Namespace.write",
                "  xfs      mkfs.xfs defaults, mounted; fio rw=randwrite direct=1 ioengine=psync",
                "           numjobs=QD",
                "  ext4     mkfs.ext4 defaults, mounted; the same fio job",
                "  fuse     a volume mounted through FUSE; the same fio job (results as",
                "           ferrite-fuse; needs /dev/fuse; not run by default)",
                "  raw      the same fio job on the block device itself: the limit",
                "",
                "With --unwritten each phase instead writes every block of a new fallocated file",
                "once, in random order: each write converts unwritten space (fio",
                "fallocate=native).",
                "The table gives ferrite's rate over each other target's.",
                ""})
final class RandWriteCommand implements Callable<Integer> {
    @Option(names = "--file-size", paramLabel = "SIZE", defaultValue = "1G", converter = ByteSize.Converter.class,
            description = "bytes of the file overwritten, a whole number of MiB; K/M/G suffixes (default: ${DEFAULT-VALUE})")
    long fileSize;

    @Option(names = "--bs", paramLabel = "SIZE", defaultValue = "4K", converter = ByteSize.Converter.class,
            description = "bytes per write, a multiple of 4 KiB up to 1 MiB (default: ${DEFAULT-VALUE})")
    long bs;

    @Option(names = "--qd", paramLabel = "N", split = ",", defaultValue = "1,32",
            description = "synchronous writers per phase, one phase each (default: ${DEFAULT-VALUE})")
    List<Integer> queueDepths;

    @Option(names = "--targets", paramLabel = "T", split = ",", defaultValue = "ferrite,xfs,ext4,raw",
            description = "ferrite, fuse, xfs, ext4, raw, in run order (default: ${DEFAULT-VALUE})")
    List<String> targets;

    @Option(names = "--unwritten",
            description = "first writes instead of overwrites: each phase writes every block of a new, preallocated"
                    + " (fallocated, unwritten) file once, in random order; raw is skipped")
    boolean unwritten;

    @Option(names = "--own-cost",
            description = "after each of ferrite's overwrite phases, as long again alternating 50 ms slices of its writes"
                    + " with this JVM's device writes of the same blocks, and print the difference: Ferrite's own cost"
                    + " per write, apart from the device's drift")
    boolean ownCost;

    @Option(names = "--cloned",
            description = "ferrite's file is cloned before each overwrite phase and the clone kept: every block starts"
                    + " shared, and its first write copies it (copy on write); prints the clone's time beside a copy's."
                    + " XFS's file is cloned the same way (cp --reflink=always); ext4 and the raw device, which have no"
                    + " clones, are skipped")
    boolean cloned;

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
        if (fileSize < 1 << 20 || fileSize % (1 << 20) != 0 || fileSize > 64L << 30) {
            throw new ParameterException(spec.commandLine(), "--file-size " + ByteSize.format(fileSize)
                    + ": give a whole number of MiB up to 64 GiB");
        }
        ByteSize.requireIoSize(spec, "--bs", bs);
        for (int qd : queueDepths) {
            if (qd < 1 || qd > 256) {
                throw new ParameterException(spec.commandLine(), "--qd " + queueDepths + ": each count must be 1..256");
            }
        }
        List<Target> ts = TargetNames.parse(spec, Target.class, targets);
        Path base = runDir.resolve(spec);
        Fio fio = fioOption.noFio ? null : Fio.find().orElse(null);
        RandWriteBench bench = new RandWriteBench(base, fileSize, (int) bs, queueDepths, options.seconds, ts, fio, unwritten, ownCost);
        if (cloned) {
            bench.withClones();
        }
        PrintWriter out = spec.commandLine().getOut();
        Storage storage = RunDir.storage(base);
        out.println("devices: " + RunDir.loopDevices(bench.deviceBytes(), base));
        out.printf(Locale.ROOT, "file:    %s, %s %s, O_DIRECT, no fsync; writers %s; %s s per phase%n",
                ByteSize.format(fileSize), ByteSize.format(bs), unwritten
                        ? "first writes into fallocated (unwritten) space, each block once in random order"
                        : "overwrites at random offsets of a written file",
                queueDepths.stream().map(String::valueOf).collect(Collectors.joining(",")), options.seconds);
        out.println(fio != null ? "fio:    " + fio.version() + " for xfs, ext4 and raw"
                : "fio:    " + (fioOption.noFio ? "skipped (--no-fio)" : "not on the PATH") + ": ferrite only");
        out.flush();
        out.println("jvm:     " + Machine.jvm());
        Machine machine = Machine.collect(storage);
        List<Result> results = bench.run(new ProgressLine(spec.commandLine().getErr()));
        out.println("configuration and durability:");
        bench.configurations().forEach(c -> out.println("  " + c));
        for (String note : bench.notes()) {
            out.println(note);
        }
        List<String> ran = ts.stream().map(Target::label).filter(l -> results.stream().anyMatch(r -> r.target().equals(l))).toList();
        if (!ran.isEmpty()) {
            RunDir.printTables(out, results, ran);
        }
        RunDir.printContention(out, bench.contention());
        if (!bench.clones().isEmpty()) {
            out.println("clones:");
            bench.clones().forEach(l -> out.println("  " + l));
        }
        if (!bench.ownCosts().isEmpty()) {
            out.println();
            out.println("Ferrite's own cost per write (--own-cost):");
            bench.ownCosts().forEach(l -> out.println("  " + l));
        }
        options.json.write(out, machine, results);
        out.flush();
        return 0;
    }
}
