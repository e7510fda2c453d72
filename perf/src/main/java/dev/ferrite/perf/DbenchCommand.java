package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.perf.bench.BaselineTools;
import dev.ferrite.perf.bench.DeviceRegions;
import dev.ferrite.perf.bench.DbenchBench;
import dev.ferrite.perf.bench.DbenchBench.Target;
import dev.ferrite.perf.bench.DbenchBinary;
import dev.ferrite.perf.bench.DbenchLoadfile;
import dev.ferrite.perf.bench.DbenchReport;
import dev.ferrite.perf.bench.DbenchResult;
import dev.ferrite.perf.bench.DbenchRounds;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.Storage;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "dbench", header = "dbench's NetBench workload beside XFS, ext4 and btrfs.",
        description = {
                "dbench's NetBench workload: N clients each replay a loadfile (NTCreateX,",
                "ReadX, WriteX, Close, Rename, Unlink, FIND_FIRST, QUERY_*, Flush, LockX ...)",
                "in a tree of its own, looping until the time is up, after a warm-up of a",
                "fifth of it. Each target gets its own RAM-backed loop device of the same",
                "size, made for it and removed after it (needs root and losetup):",
                "",
                "  ferrite  a volume on the device; the loadfile replayed through the",
                "           namespace API, each status checked against the loadfile's",
                "  fuse     the same volume mounted through FUSE; the real dbench on it",
                "           (results as ferrite-fuse; needs /dev/fuse; not run by default)",
                "  xfs      mkfs.xfs defaults, mounted; the real dbench on it",
                "  ext4     mkfs.ext4 defaults, mounted; the real dbench on it",
                "  btrfs    mkfs.btrfs defaults, mounted; the real dbench on it",
                "",
                "Every side makes data durable only at the loadfile's Flush (fsync): no",
                "O_SYNC. Throughput is dbench's: bytes of ReadX and WriteX over the measured",
                "time.",
                ""})
final class DbenchCommand implements Callable<Integer> {
    @Option(names = "--loadfile", paramLabel = "FILE", defaultValue = BaselineTools.DBENCH_CLIENT_TXT,
            description = "the NetBench loadfile (dbench 4.0 format) (default: ${DEFAULT-VALUE})")
    Path loadfile;

    @Option(names = "--clients", paramLabel = "N", split = ",", defaultValue = "1,2,8",
            description = "client counts, one run each per target (default: ${DEFAULT-VALUE})")
    List<Integer> clients;

    @Option(names = "--seconds", paramLabel = "S", defaultValue = "10",
            description = "measured seconds of each run, whole seconds as dbench's -t takes them; a warm-up of a"
                    + " fifth of them comes first (default: ${DEFAULT-VALUE})")
    int seconds;

    @Option(names = "--targets", paramLabel = "T", split = ",", defaultValue = "ferrite,xfs,ext4,btrfs",
            description = "ferrite, fuse, xfs, ext4, btrfs, in run order (default: ${DEFAULT-VALUE})")
    List<String> targets;

    @Option(names = "--data-cache", paramLabel = "SIZE", converter = ByteSize.Converter.class,
            description = "Ferrite's data page cache budget (the kernel's page cache may take all free memory);"
                    + " K/M/G suffixes (default: the volume's default)")
    long dataCache;

    @Option(names = "--jit-warmup", paramLabel = "S", defaultValue = "10",
            description = "seconds Ferrite's replay runs untimed with the most clients before its first run, so that"
                    + " the JVM has compiled it (dbench is native code), then a second at a time more while the JIT's"
                    + " threads use over a tenth of the CPU, up to twice as long again; 0 for none (default: ${DEFAULT-VALUE})")
    int jitWarmup;

    @Mixin
    RoundsOption rounds;

    @Mixin
    RunDir runDir;

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
        if (seconds < 1 || seconds > 86_400) {
            throw new ParameterException(spec.commandLine(), "--seconds " + seconds + ": give 1 to 86400");
        }
        for (int c : clients) {
            if (c < 1 || c > 128) {
                throw new ParameterException(spec.commandLine(), "--clients " + clients + ": each count must be 1..128");
            }
        }
        List<Target> ts = TargetNames.parse(spec, Target.class, targets);
        if (dataCache < 0 || dataCache > 1L << 40) {
            throw new ParameterException(spec.commandLine(), "--data-cache " + ByteSize.format(dataCache) + ": give 0 to 1 TiB");
        }
        rounds.count(spec);
        if (jitWarmup < 0 || jitWarmup > 3600) {
            throw new ParameterException(spec.commandLine(), "--jit-warmup " + jitWarmup + ": give 0 to 3600");
        }
        if (!Files.isReadable(loadfile)) {
            throw new ParameterException(spec.commandLine(), "--loadfile " + loadfile
                    + ": cannot read it (Debian/Ubuntu: apt-get install dbench puts one at " + BaselineTools.DBENCH_LOADFILE + ")");
        }
        DbenchLoadfile load;
        try {
            load = DbenchLoadfile.read(loadfile);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), "--loadfile " + e.getMessage());
        }
        Path base = runDir.resolve(spec);
        DbenchBinary dbench = DbenchBinary.find().orElse(null);
        VolumeOptions volume = VolumeOptions.defaults().withDataCacheBytes(dataCache);
        DbenchBench first = bench(base, load, dbench, ts, volume, stallNanos);
        PrintWriter out = spec.commandLine().getOut();
        Storage storage = RunDir.storage(base);
        out.println("devices:  " + RunDir.loopDevices(first.deviceBytes(), base));
        out.printf(Locale.ROOT, "loadfile: %s (%,d operations); clients %s; %d s measured after a %d s warm-up%s%n",
                loadfile, load.ops().size(), clients.stream().map(String::valueOf).reduce((a, b) -> a + "," + b).orElse(""),
                seconds, first.warmupSeconds(), rounds.count == 1 ? "" : "; " + rounds.count + " rounds");
        out.println(dbench != null ? "dbench:   " + dbench.executable() + " (" + dbench.version() + ")"
                : "dbench:   not on the PATH: ferrite only");
        out.flush();
        out.println("jvm:      " + Machine.jvm());
        Machine machine = Machine.collect(storage);
        List<List<DbenchResult>> each = new ArrayList<>();
        List<String> ran = List.of();
        for (int round = 1; round <= rounds.count; round++) {
            DbenchBench bench = round == 1 ? first : bench(base, load, dbench, ts, volume, stallNanos);
            List<DbenchResult> results = bench.run(new ProgressLine(spec.commandLine().getErr()));
            each.add(results);
            out.println();
            if (rounds.count > 1) {
                out.println("round " + round + " of " + rounds.count);
            }
            if (round == 1) {
                out.println("configuration and durability:");
                bench.configurations().forEach(c -> out.println("  " + c));
            }
            for (String note : bench.notes()) {
                out.println(note);
            }
            ran = ts.stream().map(Target::label).filter(l -> each.stream().flatMap(List::stream).anyMatch(r -> r.target().equals(l))).toList();
            if (!results.isEmpty()) {
                out.print(DbenchReport.render(results, ran, seconds));
            }
            RunDir.printContention(out, bench.contention());
            RunDir.printStalls(out, bench.stalls());
            for (DbenchResult r : results) {
                if (!r.mismatchSamples().isEmpty()) {
                    out.println();
                    out.println(r.target() + " x" + r.clients() + ": " + r.mismatches() + " status mismatches, the first:");
                    r.mismatchSamples().forEach(s -> out.println("  " + s));
                }
            }
            out.flush();
        }
        if (rounds.count > 1 && !ran.isEmpty()) {
            out.print(DbenchRounds.render(each, ran));
        }
        List<Result> rows = each.stream().flatMap(List::stream).map(DbenchResult::toResult).toList();
        json.write(out, machine, rows);
        out.flush();
        return 0;
    }

    private DbenchBench bench(Path base, DbenchLoadfile load, DbenchBinary dbench, List<Target> ts, VolumeOptions volume, long stallNanos) {
        DbenchBench bench = new DbenchBench(base, load, loadfile, clients, seconds, ts, dbench, volume, jitWarmup);
        bench.watchStalls(stallNanos);
        return bench;
    }
}
