package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

import dev.ferrite.perf.crash.Apps;
import dev.ferrite.perf.crash.Crashtest;
import dev.ferrite.perf.crash.Kills;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "crashtest", header = "Crash-tests Ferrite: crash states, killed JVMs, real programs.",
        description = {
        "Crash-tests Ferrite: generates workloads of file, directory and table",
        "operations with fsync, fdatasync, SYNC commits and volume syncs among them",
        "(every one and two-op sequence of a small alphabet, ACE-style, and longer",
        "random ones, some on two threads), records each on a RecordingDevice, and",
        "for every crash state (each flush-epoch prefix, subsets and reorderings of",
        "an epoch's writes, 512-byte sector tears) recovers the volume, runs the",
        "checker, checks that everything acknowledged durable is there and nothing",
        "appears that was never written, then recovers the recovered image again.",
        "Each failure prints the workload, the crash state, what is wrong and a",
        "--replay argument that repeats it alone.",
        "With --kill: rounds of a child JVM working on a volume file, SIGKILLed at",
        "random moments; after each the volume is checked and everything the",
        "children acknowledged must hold.",
        "With --apps: real programs (sqlite3 in rollback and WAL mode, git) on a",
        "volume mounted through FUSE over a recording; for every crash state the",
        "program's own checker (PRAGMA integrity_check, git fsck) runs on the",
        "recovered files, and every step it acknowledged must be there.",
        "Exit status: 0 no failures, 1 failures, 2 usage.", ""})
final class CrashtestCommand implements Callable<Integer> {
    @Option(names = "--workloads", paramLabel = "N", defaultValue = "1000000000",
            description = "most workloads to run (default: until --minutes)")
    long workloads;

    @Option(names = "--states", paramLabel = "K", defaultValue = "6",
            description = "crash states per flush epoch beyond its prefix (default: ${DEFAULT-VALUE})")
    int perEpoch;

    @Option(names = "--seed", paramLabel = "S", defaultValue = "1", description = "picks the workloads (default: ${DEFAULT-VALUE})")
    long seed;

    @Option(names = "--minutes", paramLabel = "M", defaultValue = "1", description = "most minutes to run (default: ${DEFAULT-VALUE}; 0: no limit)")
    double minutes;

    @Option(names = "--threads", paramLabel = "T", description = "workloads run at once (default: available processors)")
    Integer threads;

    @Option(names = "--json", paramLabel = "FILE", description = "also write the summary and the failures as JSON to FILE")
    Path json;

    @Option(names = "--replay", paramLabel = "ID:STATE[:SHAPE]",
            description = "judge one crash state alone, as a failure printed it")
    String replay;

    @Option(names = "--save", paramLabel = "IMAGE",
            description = "with --replay: write the state's crashed image to IMAGE; with --kill: keep the volume in IMAGE")
    Path save;

    @Option(names = "--kill", description = "instead: SIGKILL a child JVM working on a volume file, over --rounds rounds, checking after each")
    boolean kill;

    @Option(names = "--rounds", paramLabel = "R", defaultValue = "20", description = "with --kill: children to kill (default: ${DEFAULT-VALUE})")
    int rounds;

    @Option(names = "--apps", paramLabel = "LIST", split = ",",
            description = "instead: application crash consistency for these programs: sqlite (both journal modes), sqlite-rollback, sqlite-wal, git")
    List<String> apps;

    @Option(names = "--transactions", paramLabel = "N", defaultValue = "10",
            description = "with --apps: sqlite transactions and git commits per program (default: ${DEFAULT-VALUE})")
    int transactions;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        int t = threads == null ? Runtime.getRuntime().availableProcessors() : threads;
        if (workloads < 1 || perEpoch < 0 || minutes < 0 || t < 1) {
            throw new ParameterException(spec.commandLine(), "--workloads and --threads must be at least 1, --states and --minutes not negative");
        }
        if (save != null && replay == null && !kill && apps == null) {
            throw new ParameterException(spec.commandLine(), "--save needs --replay, --kill or --apps: it saves the image of the state replayed,"
                    + " the volume killed, or (a directory) each failing application state's image");
        }
        if (apps != null && (kill || replay != null || transactions < 1 || !Apps.NAMES.containsAll(apps))) {
            throw new ParameterException(spec.commandLine(), "--apps takes a list of " + String.join(", ", Apps.NAMES)
                    + ", --transactions of at least 1, and no --kill or --replay");
        }
        if (kill && (replay != null || rounds < 1)) {
            throw new ParameterException(spec.commandLine(), "--kill needs --rounds of at least 1 and no --replay");
        }
        JsonOption target = new JsonOption();
        target.file = json;
        target.validate(spec);
        if (replay != null) {
            return replay(out);
        }
        if (kill) {
            return kill(out);
        }
        if (apps != null) {
            return apps(out);
        }
        Crashtest.Options o = new Crashtest.Options(seed, workloads, perEpoch, (long) (minutes * TimeUnit.MINUTES.toNanos(1)), t);
        out.printf("crashtest: seed %d, %d threads, %d states per epoch%n", seed, t, perEpoch);
        out.flush();
        Crashtest.Summary s = Crashtest.run(o, f -> {
            out.println(f);
            out.flush();
        }, new ProgressLine(spec.commandLine().getErr()));
        out.println("crashtest: " + s);
        if (json != null) {
            Files.writeString(json, s.json(o));
            out.println("results: " + json);
        }
        out.flush();
        return s.failures().isEmpty() ? 0 : 1;
    }

    private int apps(PrintWriter out) throws IOException {
        String missing = Apps.unavailable(apps);
        if (missing != null) {
            out.println("crashtest --apps: cannot run here: " + missing);
            out.flush();
            return 1;
        }
        Apps.Options o = new Apps.Options(apps, seed, transactions, perEpoch, save);
        out.printf("crashtest --apps %s: seed %d, %d transactions, %d states per epoch%n", String.join(",", apps), seed, transactions, perEpoch);
        out.flush();
        Path scratch = Files.createTempDirectory("ferrite-crashtest-apps");
        List<Apps.Result> results;
        try {
            results = Apps.run(o, scratch, f -> {
                out.println(f);
                out.flush();
            }, new ProgressLine(spec.commandLine().getErr()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        } finally {
            try (var all = Files.walk(scratch)) {
                for (Path p : all.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
        results.forEach(r -> out.println("crashtest --apps " + r));
        if (json != null) {
            Files.writeString(json, Apps.json(o, results));
            out.println("results: " + json);
        }
        out.flush();
        return results.stream().allMatch(r -> r.failures().isEmpty()) ? 0 : 1;
    }

    private int kill(PrintWriter out) throws IOException {
        Kills.Summary s;
        try {
            s = Kills.run(new Kills.Options(seed, rounds, save), out);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        out.println("crashtest --kill: " + s);
        out.flush();
        return s.failure() == null ? 0 : 1;
    }

    private int replay(PrintWriter out) throws IOException {
        String[] parts = replay.split(":");
        long id;
        int state;
        try {
            if (parts.length < 2 || parts.length > 3) {
                throw new NumberFormatException();
            }
            id = Long.parseLong(parts[0]);
            state = Integer.parseInt(parts[1]);
        } catch (NumberFormatException e) {
            throw new ParameterException(spec.commandLine(), "--replay " + replay + ": expected ID:STATE or ID:STATE:SHAPE, as a failure prints it");
        }
        Crashtest.Failure f = Crashtest.replay(id, state, parts.length == 3 ? parts[2] : null, perEpoch, save);
        if (save != null) {
            out.println("saved the crashed image of workload " + id + ", state " + state + " to " + save);
        }
        out.println(f == null ? "workload " + id + ", state " + state + ": passed" : f.toString());
        out.flush();
        return f == null ? 0 : 1;
    }
}
