package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;

import dev.ferrite.perf.bench.DeviceRegions;
import dev.ferrite.perf.bench.KvBench;
import dev.ferrite.perf.bench.KvKeys;
import dev.ferrite.perf.bench.KvRounds;
import dev.ferrite.perf.bench.KvTarget;
import dev.ferrite.perf.bench.LoopDevice;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultJson;
import dev.ferrite.perf.bench.ScratchFile;
import dev.ferrite.perf.bench.Skipped;
import dev.ferrite.perf.bench.Storage;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "kv", header = "Ferrite's tables beside RocksDB, LMDB, Xodus and MVStore.",
        description = {
                "Ferrite's B-tree beside RocksDB, LMDB, Xodus, H2's MVStore and the in-memory",
                "ceiling, the same key-value workload on each in one run, every store fresh in",
                "its own directory and, unless --same-jvm, in a JVM of its own:",
                "",
                "  insert   N keys of 16-40 bytes in hashed order, 64-byte values; then sync",
                "  get      every key, value checked, pass after pass for --scan-seconds",
                "  scan     the whole key range forward, every value read in full, pass after",
                "           pass for --scan-seconds (rate: entries/s)",
                "  delete   every key; then sync",
                "and with --phases batch and ycsb, after the scan (insert always runs: the load):",
                "  batch1, batch100, batch1000  N puts of uniformly random loaded keys, a commit",
                "           after every 1, 100, 1000 (one atomic transaction where the store has",
                "           one over several keys); then sync. Latency: per batch",
                "  ycsb-a, -b, -c, -e  YCSB mixes for --ycsb-seconds each, keys scrambled-Zipfian",
                "           (theta 0.99): A 50%% gets/50%% updates, B 95/5, C gets only, E 95%%",
                "           scans of 1-100 entries/5%% inserts of new keys; each update or insert",
                "           commits by itself; the writing mixes end with a sync",
                "",
                "Each phase runs at each --threads count and --value-sizes size (fresh stores for",
                "each; sizes other than 64 B name their phases, e.g. insert-1KiB, and keep at",
                "most 256 MiB of values: fewer keys; a store that cannot keep a size skips it,",
                "with the reason in the table). Threads split the keys (scan: the key range).",
                "The rate includes the closing sync. Latency is per operation, except that LMDB's",
                "and Xodus's write transactions of 1000 and every 1024 scanned entries count as",
                "their time divided among their operations. Durability is alike but for the",
                "ceiling: writes are not synced one by one (MVStore keeps them in memory until",
                "its next auto-commit), and each write phase ends durable.",
                "  ferrite  a table: a transaction per put/delete (Durability.NONE), a",
                "           WriteTransaction per batch; Volume.sync at phase end",
                "  rocksdb  single writes, WAL on, no sync; flushWal(true) at phase end",
                "  lmdb     MDB_NOSYNC, 1000 writes per transaction; env sync at phase end",
                "  xodus    durableWrite off, 1000 writes per exclusive transaction; flushAndSync",
                "           at phase end",
                "  mvstore  auto-commit (a chunk per ~1 MiB of changes or second), each write a",
                "           committed map change, a TransactionStore transaction per batch",
                "           (keys locked to its commit; a batch that waits over 2 s for a lock",
                "           or deadlocks is rolled back and run again, counted in a note);",
                "           commit() and file sync at phase end",
                "  memory   the ceiling: a ConcurrentSkipListMap, nothing logged or synced",
                "The table gives the first target's rate over each other's. An untimed warm-up",
                "(as many keys as the run, at most 300,000; repeated up to 4,096 operations",
                "where large values leave fewer keys) runs on each target before the first",
                "phases at each value size, then shorter ones on fresh stores while the JIT stays",
                "busy (docs/benchmarks.md).",
                ""})
final class KvCommand implements Callable<Integer> {
    @Option(names = "--targets", paramLabel = "T", split = ",", defaultValue = "ferrite,rocksdb,lmdb,xodus,mvstore,memory",
            description = "stores to run, in this order: ferrite, rocksdb, lmdb, xodus, mvstore, memory"
                    + " (default: ${DEFAULT-VALUE})")
    List<KvTarget> targets;

    @Option(names = "--keys", paramLabel = "N", defaultValue = "1000000",
            description = "keys to insert, get, scan and delete (default: ${DEFAULT-VALUE})")
    long keys;

    @Mixin
    ThreadsOption threads;

    @Mixin
    RunDir runDir;

    @Option(names = "--cache", paramLabel = "SIZE", defaultValue = "1G", converter = ByteSize.Converter.class,
            description = "block cache of Ferrite and of RocksDB, Xodus's log cache, MVStore's read cache;"
                    + " K/M/G suffixes (default: ${DEFAULT-VALUE})")
    long cache;

    @Option(names = "--seconds-limit", paramLabel = "S", defaultValue = "0",
            description = "stop any phase after S seconds, 0 for no limit; later phases then use the keys"
                    + " inserted, and the batch and YCSB phases skip (default: ${DEFAULT-VALUE})")
    double secondsLimit;

    @Option(names = "--phases", paramLabel = "P", split = ",", defaultValue = "basic",
            description = "phase families to run: basic (get, scan, delete), batch, ycsb; insert always runs"
                    + " (default: ${DEFAULT-VALUE})")
    List<KvBench.Family> phases;

    @Option(names = "--value-sizes", paramLabel = "SIZE", split = ",", defaultValue = "64",
            converter = ByteSize.Converter.class,
            description = "value lengths to run every phase with, 8 bytes to 1M; K/M suffixes; the first also for"
                    + " the warm-up (default: ${DEFAULT-VALUE})")
    List<Long> valueSizes;

    @Option(names = "--ycsb-seconds", paramLabel = "S", defaultValue = "5",
            description = "how long each YCSB mix runs (default: ${DEFAULT-VALUE})")
    double ycsbSeconds;

    @Option(names = "--scan-seconds", paramLabel = "S", defaultValue = "2",
            description = "keep starting get and scan passes until S seconds have gone by, 0 for one pass: a"
                    + " pass over a million keys takes about 0.1 s, too short to time (default: ${DEFAULT-VALUE})")
    double scanSeconds;

    @Mixin
    RoundsOption rounds;

    @Option(names = "--same-jvm",
            description = "run every target in this JVM, one after another; by default each runs in a JVM of its own"
                    + " with this one's flags, so that no store runs beside another's heap, JIT profile or threads")
    boolean sameJvm;

    /** Set by the parent of a run split into a JVM per target: this is one of them. */
    @Option(names = "--target-part", paramLabel = "FILE", hidden = true,
            description = "run as one target's JVM of a run split by target: print no tables, write the results"
                    + " and skipped phases to FILE")
    Path part;

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

    /** With {@code --device}, the stores share an XFS made over the largest free region of it, as a database's files would. */
    private int run() throws IOException {
        validate();
        Path base = runDir.resolve(spec);
        DeviceRegions regions = DeviceRegions.current().orElse(null);
        try (LoopDevice xfs = regions == null ? null : LoopDevice.create(base, regions.largestFree(), LoopDevice.Kind.XFS)) {
            return run(xfs == null ? base : xfs.mountPoint(), xfs);
        }
    }

    private int run(Path base, LoopDevice xfs) throws IOException {
        boolean defaultDir = runDir.isDefault();
        PrintWriter out = spec.commandLine().getOut();
        try (ScratchFile scratch = ScratchFile.directory(base, "ferrite-kv-")) {
            Storage storage = Storage.of(scratch.path());
            KvBench.Plan plan = plan();
            if (part == null) {
                out.printf(Locale.ROOT, "dir:     %s (%s, temporary%s)%n", storage.path(), storage.describe(),
                        xfs != null ? "; mkfs.xfs defaults, mounted " + xfs.mountOptions() + ", over " + xfs.backing()
                                : defaultDir ? "; default: " + (base.startsWith("/dev/shm") ? "/dev/shm, RAM-backed" : "java.io.tmpdir") : "");
                out.printf(Locale.ROOT, "keys:    %,d of 16-40 bytes in hashed order, %s-byte values; threads %s; phases %s%s%n",
                        keys, valueSizes.stream().map(String::valueOf).collect(Collectors.joining(",")), threads,
                        String.join(",", KvBench.phases(plan)),
                        secondsLimit > 0 ? "; phases stop after " + secondsLimit + " s" : "");
                out.flush();
                List<String> extra = childFlags();
                out.println("jvm:     " + Machine.jvm() + (split() ? "; each target in a JVM of its own with these flags"
                        + (extra.isEmpty() ? "" : " and " + String.join(" ", extra)) : ""));
            }
            Machine machine = Machine.collect(storage);
            List<List<Result>> all = new ArrayList<>();
            boolean failed = false;
            for (int round = 1; round <= rounds.count; round++) {
                if (rounds.count > 1) {
                    out.printf(Locale.ROOT, "%n=== round %d of %d%n", round, rounds.count);
                    out.flush();
                }
                List<Result> results = new ArrayList<>();
                failed |= !round(scratch.path(), plan, machine, results);
                if (part != null) {
                    return 0;
                }
                all.add(results);
            }
            if (rounds.count > 1) {
                out.print(KvRounds.render(all, targets.get(0).label(), targets.stream().skip(1).map(KvTarget::label).toList()));
            } else {
                json.write(out, machine, all.get(0));
            }
            out.flush();
            return failed ? 1 : 0;
        }
    }

    /**
     * One round: every target's phases (each in a JVM of its own if split), their tables and counters
     * printed (in a target's own JVM, written to {@link #part} instead); false if a target's JVM failed.
     */
    private boolean round(Path dir, KvBench.Plan plan, Machine machine, List<Result> results) throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        List<Skipped> skipped = new ArrayList<>();
        List<String> contention = new ArrayList<>(), stallLines = new ArrayList<>();
        boolean failed = false;
        if (split()) {
            for (KvTarget t : targets) {
                failed |= !runChild(t, dir, results, skipped);
            }
        } else {
            KvBench bench = new KvBench(dir, targets, keys, threads.counts, cache, secondsLimit, scanSeconds, plan);
            bench.watchStalls(stalls.nanos(spec));
            results.addAll(bench.run(new ProgressLine(spec.commandLine().getErr())));
            skipped.addAll(bench.skipped());
            for (Map.Entry<KvTarget, String> e : bench.setups().entrySet()) {
                out.printf(Locale.ROOT, "%-8s %s%n", e.getKey().label() + ":", e.getValue());
            }
            if (!bench.jit().isEmpty()) {
                out.println("note:    " + bench.jit());
            }
            for (String note : bench.notes()) {
                out.println("note:    " + note);
            }
            contention.addAll(bench.contention());
            stallLines.addAll(bench.stalls());
        }
        if (part != null) { // one target's JVM: the parent prints the tables of all
            RunDir.printContention(out, contention);
            RunDir.printStalls(out, stallLines);
            out.flush();
            ResultJson.write(part, machine, results, skipped);
            return true;
        }
        RunDir.printTables(out, results, skipped, targets.stream().map(KvTarget::label).toList());
        RunDir.printContention(out, contention); // in a split run each target's JVM printed its own
        RunDir.printStalls(out, stallLines);
        out.flush();
        return !failed;
    }

    /** Whether each target runs in a JVM of its own ({@link #runChild}). */
    private boolean split() {
        return part == null && !sameJvm && targets.size() > 1;
    }

    /**
     * The flags a target's JVM gets after this JVM's: a soft heap bound of the cache and 256 MiB, unless
     * the flags size the heap already. Without one, ZGC lets the heap grow towards a quarter of the RAM
     * before it collects much, so a store that keeps its pages on the heap (MVStore, Xodus) spent its run
     * touching fresh memory, 15-30 us a page on a VM that backs its memory lazily (docs/benchmarks.md).
     */
    private List<String> childFlags() {
        long soft = cache + (256L << 20);
        boolean sized = ChildJvm.flags().stream().anyMatch(f -> f.startsWith("-XX:SoftMaxHeapSize") || f.startsWith("-Xmx")
                || f.startsWith("-XX:MaxHeapSize"));
        return sized || soft >= Runtime.getRuntime().maxMemory() ? List.of() : List.of("-XX:SoftMaxHeapSize=" + (soft >> 20) + "m");
    }

    /**
     * Runs target {@code t} by itself in a JVM of its own, its stores under {@code dir}, adding its results
     * and skipped phases to the lists; false, with the reason printed, if it failed.
     */
    private boolean runChild(KvTarget t, Path dir, List<Result> results, List<Skipped> skipped) throws IOException {
        Path file = dir.resolve(t.label() + ".json");
        List<String> args = new ArrayList<>(List.of("bench", "kv", "--targets", t.label(), "--keys", Long.toString(keys),
                "--threads", threads.counts.stream().map(String::valueOf).collect(Collectors.joining(",")),
                "--cache", Long.toString(cache), "--seconds-limit", Double.toString(secondsLimit),
                "--phases", phases.stream().map(f -> f.name().toLowerCase(Locale.ROOT)).collect(Collectors.joining(",")),
                "--value-sizes", valueSizes.stream().map(String::valueOf).collect(Collectors.joining(",")),
                "--ycsb-seconds", Double.toString(ycsbSeconds), "--scan-seconds", Double.toString(scanSeconds),
                "--dir", dir.toString(), "--target-part", file.toString()));
        if (stalls.millis != null) {
            args.addAll(List.of("--stalls", Double.toString(stalls.millis)));
        }
        OptionSpec recording = spec.findOption("--jfr");
        if (recording != null && recording.getValue() instanceof Path jfr) {
            args.addAll(List.of("--jfr", jfrOf(jfr, t).toString()));
        }
        PrintWriter out = spec.commandLine().getOut();
        out.printf(Locale.ROOT, "%n--- %s%n", t.label());
        out.flush();
        int code = ChildJvm.run(spec.commandLine(), childFlags(), args);
        try {
            if (code == 0 && Files.exists(file)) {
                String text = Files.readString(file);
                results.addAll(ResultJson.read(text));
                skipped.addAll(ResultJson.readSkipped(text));
                return true;
            }
            spec.commandLine().getErr().println("ferrite: " + t.label() + "'s JVM failed (exit " + code + "); its phases are left out");
        } catch (IOException | RuntimeException e) {
            spec.commandLine().getErr().println("ferrite: " + t.label() + "'s results cannot be read: " + e.getMessage());
        }
        return false;
    }

    /** Where target {@code t}'s JVM records when the run was asked to record into {@code jfr}: beside it, named for the target. */
    private static Path jfrOf(Path jfr, KvTarget t) {
        String name = jfr.getFileName().toString();
        int dot = name.lastIndexOf('.');
        String stem = dot > 0 ? name.substring(0, dot) : name;
        return jfr.resolveSibling(stem + "-" + t.label() + (dot > 0 ? name.substring(dot) : ".jfr"));
    }

    private void validate() {
        json.validate(spec);
        if (rounds.count(spec) > 1 && json.file != null) {
            throw new ParameterException(spec.commandLine(), "--json records one round's results: give --rounds 1 with it");
        }
        stalls.nanos(spec); // refused before anything is made; read again when the bench is set up
        if (targets.size() != new HashSet<>(targets).size()) {
            throw new ParameterException(spec.commandLine(), "--targets " + labels() + " names a target twice");
        }
        if (keys < 1 || keys > KvBench.MAX_KEYS) {
            throw new ParameterException(spec.commandLine(), "--keys " + keys + ": give 1 to " + KvBench.MAX_KEYS);
        }
        threads.validate(spec, KvBench.MAX_THREADS, keys, "--keys");
        if (cache < 16L << 20 || cache > 64L << 30) {
            throw new ParameterException(spec.commandLine(), "--cache " + ByteSize.format(cache) + ": give 16 MiB to 64 GiB");
        }
        if (!(secondsLimit >= 0 && secondsLimit <= 86_400)) {
            throw new ParameterException(spec.commandLine(), "--seconds-limit must be 0 to 86400, not " + secondsLimit);
        }
        if (!(scanSeconds >= 0 && scanSeconds <= 86_400)) {
            throw new ParameterException(spec.commandLine(), "--scan-seconds must be 0 to 86400, not " + scanSeconds);
        }
        if (phases.size() != new HashSet<>(phases).size()) {
            throw new ParameterException(spec.commandLine(), "--phases " + phases + " names a family twice");
        }
        for (long v : valueSizes) {
            if (v < KvKeys.VALUE_MIN || v > KvBench.MAX_VALUE_BYTES) {
                throw new ParameterException(spec.commandLine(), "--value-sizes " + ByteSize.format(v) + ": give "
                        + KvKeys.VALUE_MIN + " bytes to " + ByteSize.format(KvBench.MAX_VALUE_BYTES));
            }
        }
        if (valueSizes.size() != new HashSet<>(valueSizes).size()) {
            throw new ParameterException(spec.commandLine(), "--value-sizes " + valueSizes + " names a size twice");
        }
        if (!(ycsbSeconds > 0 && ycsbSeconds <= 86_400)) {
            throw new ParameterException(spec.commandLine(), "--ycsb-seconds must be above 0 and at most 86400, not " + ycsbSeconds);
        }
        runDir.resolve(spec); // refused before measuring, not after
    }

    private KvBench.Plan plan() {
        return new KvBench.Plan(EnumSet.copyOf(phases), valueSizes.stream().map(Long::intValue).toList(), ycsbSeconds);
    }

    private String labels() {
        return targets.stream().map(KvTarget::label).collect(Collectors.joining(","));
    }
}
