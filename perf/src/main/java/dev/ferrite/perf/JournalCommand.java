package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import dev.ferrite.perf.bench.JournalBench;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultTable;
import dev.ferrite.perf.bench.Storage;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "journal", header = "The journal: forced commits and log bandwidth, beside the device.",
        description = {
                "Measures the journal on a file or block device (O_DIRECT), each phase next to",
                "what the device does without it, in the same run:",
                "",
                "  forced-commit   each thread commits a one-item transaction and forces it,",
                "                  over and over: durable commits per second (group commit)",
                "                  device: each thread writes 4 KiB, then waits for an",
                "                  fdatasync begun after its write, shared by the waiters",
                "                  (leader and followers: a database log's group commit);",
                "                  the two alternate in rounds of about a second",
                "  log-write       one thread commits 32-block transactions, checkpoints in",
                "                  the background: payload bytes (what the transactions",
                "                  logged, no record overhead) per second, timed after an",
                "                  untimed quarter of each round (the steady state)",
                "                  device: 1 MiB sequential O_DIRECT writes over the log;",
                "                  the two alternate in rounds of about a second",
                "",
                "The first 64 MiB hold the items' home blocks, the rest is the log, written",
                "over once before anything is timed. Every phase of both sides is warmed up",
                "untimed first. The contents are overwritten. Without --device a temporary",
                "file is used.",
                ""})
final class JournalCommand implements Callable<Integer> {
    @Option(names = "--size", paramLabel = "SIZE", defaultValue = "512M", converter = ByteSize.Converter.class,
            description = "bytes to use: 64 MiB of home blocks, the rest log; K/M/G/T suffixes (default: ${DEFAULT-VALUE})")
    long size;

    @Option(names = "--threads", paramLabel = "N,N,...", split = ",", defaultValue = "1,2,8,64",
            description = "committing thread counts for forced-commit (default: ${DEFAULT-VALUE})")
    List<Integer> threads;

    @Mixin
    BenchDeviceOptions device;

    @Mixin
    BenchOptions options;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        options.validate(spec);
        if (threads.stream().anyMatch(t -> t < 1 || t > 1024)) {
            throw new ParameterException(spec.commandLine(), "--threads " + threads + ": each count must be 1..1024");
        }
        if (size < 128L << 20) {
            throw new ParameterException(spec.commandLine(), "--size " + ByteSize.format(size)
                    + " is too small: 64 MiB of home blocks plus at least 64 MiB of log");
        }
        return device.run(spec, "ferrite-journal-", this::bench);
    }

    private int bench(Path path, boolean temporary) throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        Storage storage = Storage.of(path);
        out.printf(Locale.ROOT, "device: %s (%s%s), %s, %s s per phase%n", storage.path(), storage.describe(),
                temporary ? ", temporary" : "", ByteSize.format(size), options.seconds);
        out.flush();
        Machine machine = Machine.collect(storage);
        JournalBench bench = new JournalBench(path, size, options.seconds, threads);
        List<Result> results = bench.run(new ProgressLine(spec.commandLine().getErr()));
        out.println();
        out.print(ResultTable.render(results, JournalBench.BASELINE));
        RunDir.printContention(out, bench.contention());
        out.flush();
        options.json.write(out, machine, results);
        out.flush();
        return 0;
    }
}
