package dev.ferrite.perf;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

import dev.ferrite.perf.bench.DeviceRegions;
import dev.ferrite.perf.bench.LoopDevice;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultTable;
import dev.ferrite.perf.bench.Skipped;
import dev.ferrite.perf.bench.Storage;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/**
 * {@code --dir DIR}, the directory a multi-target workload runs in, and {@code --device PATH}, the device
 * its targets' storage is carved from instead of RAM (a picocli mixin); and how its results print: what
 * kv, meta, dirscale, randwrite, appends and dbench share.
 */
final class RunDir {
    private static final Path SHM = Path.of("/dev/shm");

    @Option(names = "--dir", paramLabel = "DIR",
            description = "where the run's files go: the Ferrite volume file, posix targets' directories, the"
                    + " key-value stores' files (default: /dev/shm if it exists, else java.io.tmpdir)")
    Path dir;

    @Option(names = "--device", paramLabel = "PATH",
            description = "run every target on a loop device over a region of this existing file or block device"
                    + " (direct I/O) instead of a RAM-backed image; its contents are destroyed. Needs root and"
                    + " losetup; kv's stores share an XFS file system made there")
    Path device;

    @Option(names = "--force", description = "allow --device to name a block device, whose contents are destroyed")
    boolean force;

    /** Installs {@code --device} for the run after checking it ({@link DeviceRegions}); without it, a scope that does nothing. */
    DeviceRegions.Scope useDevice(CommandSpec spec) {
        if (device == null) {
            return () -> { };
        }
        if (!Files.exists(device)) {
            throw new ParameterException(spec.commandLine(), "--device " + device + " does not exist");
        }
        if (Storage.of(device).isBlockDevice() && !force) {
            throw new ParameterException(spec.commandLine(), "--device " + device
                    + " is a block device; add --force to destroy its contents");
        }
        if (!LoopDevice.available(LoopDevice.Kind.RAW)) {
            throw new ParameterException(spec.commandLine(), "--device needs root and losetup: every target runs on a"
                    + " loop device over a region of it");
        }
        return DeviceRegions.use(device);
    }

    /** What the run's storage is: the device regions are carved from, or {@code base}'s file system. */
    static Storage storage(Path base) {
        return DeviceRegions.current().map(r -> Storage.of(r.device())).orElseGet(() -> Storage.of(base));
    }

    /** The line saying what a workload's per-target loop devices of {@code bytes} are made over. */
    static String loopDevices(long bytes, Path base) {
        return DeviceRegions.current()
                .map(r -> String.format(Locale.ROOT, "loop devices of %s over regions of %s (%s, direct I/O), one per target",
                        ByteSize.format(bytes), r.device(), Storage.of(r.device()).describe()))
                .orElseGet(() -> {
                    Storage storage = Storage.of(base);
                    return String.format(Locale.ROOT, "loop devices of %s over images in %s (%s), one per target",
                            ByteSize.format(bytes), storage.path(), storage.describe());
                });
    }

    /** The directory given, refused if it is not one, or the default. */
    Path resolve(CommandSpec spec) {
        if (dir == null) {
            return defaultDir();
        }
        if (!Files.isDirectory(dir)) {
            throw new ParameterException(spec.commandLine(), "--dir " + dir + " is not a directory");
        }
        return dir;
    }

    boolean isDefault() {
        return dir == null;
    }

    /** /dev/shm (RAM-backed) if it is there and writable, else java.io.tmpdir. */
    static Path defaultDir() {
        return Files.isDirectory(SHM) && Files.isWritable(SHM) ? SHM : Path.of(System.getProperty("java.io.tmpdir"));
    }

    /** One table per other target, each beside the first target's rows: the ratio is first over other. */
    static void printTables(PrintWriter out, List<Result> results, List<String> targets) {
        printTables(out, results, List.of(), targets);
    }

    /** The same, with the phases targets skipped as rows of their own ({@link Skipped}). */
    static void printTables(PrintWriter out, List<Result> results, List<Skipped> skipped, List<String> targets) {
        String first = targets.getFirst();
        if (targets.size() == 1) {
            out.println();
            out.print(ResultTable.render(results, skipped, ""));
            return;
        }
        for (String other : targets.subList(1, targets.size())) {
            out.println();
            out.println(first + " vs " + other);
            out.print(ResultTable.render(results.stream()
                    .filter(r -> r.target().equals(first) || r.target().equals(other)).toList(),
                    skipped.stream().filter(k -> k.target().equals(first) || k.target().equals(other)).toList(), other));
        }
    }

    /** What each phase's slow operations spent their time on (see {@code --stalls}), after the counters. */
    static void printStalls(PrintWriter out, List<String> lines) {
        printSection(out, "what the slow operations spent their time on, per phase (--stalls):", lines);
    }

    /** Ferrite's counters over each phase ({@link dev.ferrite.perf.bench.Contention}), after the tables. */
    static void printContention(PrintWriter out, List<String> lines) {
        printSection(out, "where Ferrite's threads waited and what they paid, per phase:", lines);
    }

    private static void printSection(PrintWriter out, String heading, List<String> lines) {
        if (lines.isEmpty()) {
            return;
        }
        out.println();
        out.println(heading);
        for (String l : lines) {
            out.println("  " + l);
        }
    }
}
