package dev.ferrite.perf.crash;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.Stream;

import dev.ferrite.dir.CheckReport;
import dev.ferrite.dir.DirEntry;
import dev.ferrite.dir.FileSystemMount;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Volume;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.RecordingDevice.CrashState;
import dev.ferrite.io.testkit.RecordingDevice.Event;
import dev.ferrite.perf.bench.Progress;
import dev.ferrite.perf.bench.ResultJson;

/**
 * Application-level crash consistency, after ALICE: a real program ({@code sqlite3}, {@code git}) works on a
 * volume served through FUSE ({@link Volume#mount}) over a {@link RecordingDevice}, acknowledging each step
 * only once the program returned; then for every crash state of the recording ({@link CrashStates}) the
 * volume is recovered, checked, its application directory copied out through the namespace API, and the
 * program's own checker run on the copy: the application's invariants hold and every step it acknowledged
 * durable is there.
 */
public final class Apps {
    private Apps() {
    }

    /** Where every application works on the volume; made in the base image. */
    static final String DIR = "app";

    /** The application workloads {@code --apps} names: {@code sqlite} is both journal modes. */
    public static final List<String> NAMES = List.of("sqlite", "sqlite-rollback", "sqlite-wal", "git");

    /** A program's workload on the mount, and its checker. */
    interface App {
        String name();

        /**
         * How many acknowledgements later a step is durable: sqlite in rollback mode with synchronous=FULL does
         * not sync the directory after deleting a transaction's journal (the commit point), which only the next
         * transaction's journal creation (its directory synced) makes durable.
         */
        int lag();

        /** Runs the workload in {@code dir} on the mount; {@code ack} after each step returned, step 0 the setup. */
        void run(Path dir, Volume volume, Runnable ack) throws IOException, InterruptedException;

        /**
         * What is wrong with the application's files copied to {@code dir} (absent if the volume had none),
         * given that steps {@code 0..durable-1} were acknowledged durable; null if nothing.
         */
        String check(Path dir, int durable) throws IOException, InterruptedException;
    }

    /**
     * @param apps     the {@link #NAMES} to run
     * @param seed     varies the programs' data and picks the random crash states
     * @param steps    sqlite transactions, git commits
     * @param perEpoch crash states per flush epoch beyond its prefix
     * @param save     a directory for each failing state's crashed image, or null
     */
    public record Options(List<String> apps, long seed, int steps, int perEpoch, Path save) {
    }

    /** One crash state whose application check failed. */
    public record Failure(String app, long seed, int state, String crash, String finding) {
        @Override
        public String toString() {
            return "FAILED app " + app + " (seed " + seed + "), state " + state + " " + crash + "\n  " + finding.replace("\n", "\n  ");
        }
    }

    /** One application's run: its acknowledged steps, the recording's flushes, the states judged. */
    public record Result(String app, int acknowledged, int flushes, long states, double seconds, List<Failure> failures) {
        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%s: %d steps acknowledged, %d flushes, %,d crash states in %.1f s (%,.1f states/s), %d failures",
                    app, acknowledged, flushes, states, seconds, seconds > 0 ? states / seconds : 0, failures.size());
        }
    }

    /** The results as a JSON document. */
    public static String json(Options o, List<Result> results) {
        StringBuilder s = new StringBuilder("{\n  \"seed\": ").append(o.seed()).append(",\n  \"steps\": ").append(o.steps())
                .append(",\n  \"states_per_epoch\": ").append(o.perEpoch()).append(",\n  \"apps\": [");
        for (int i = 0; i < results.size(); i++) {
            Result r = results.get(i);
            s.append(i == 0 ? "\n" : ",\n").append("    {\"app\": ");
            ResultJson.quote(s, r.app());
            s.append(String.format(Locale.ROOT, ", \"acknowledged\": %d, \"flushes\": %d, \"states\": %d, \"seconds\": %.3f, \"failures\": [",
                    r.acknowledged(), r.flushes(), r.states(), r.seconds()));
            for (int f = 0; f < r.failures().size(); f++) {
                Failure x = r.failures().get(f);
                s.append(f == 0 ? "" : ", ").append("{\"state\": ").append(x.state()).append(", \"crash\": ");
                ResultJson.quote(s, x.crash());
                s.append(", \"finding\": ");
                ResultJson.quote(s, x.finding());
                s.append('}');
            }
            s.append("]}");
        }
        return s.append(results.isEmpty() ? "]\n}\n" : "\n  ]\n}\n").toString();
    }

    /** The applications {@code names} stands for, in order. */
    static List<App> apps(List<String> names, long seed, int steps) {
        List<App> apps = new ArrayList<>();
        for (String n : names) {
            switch (n) {
                case "sqlite" -> {
                    apps.add(new SqliteApp(false, seed, steps));
                    apps.add(new SqliteApp(true, seed, steps));
                }
                case "sqlite-rollback" -> apps.add(new SqliteApp(false, seed, steps));
                case "sqlite-wal" -> apps.add(new SqliteApp(true, seed, steps));
                case "git" -> apps.add(new GitApp(seed, steps));
                default -> throw new IllegalArgumentException("no application workload " + n + ": one of " + String.join(", ", NAMES));
            }
        }
        return apps;
    }

    /**
     * What keeps the applications from running here (FUSE, root, the programs), or null if nothing.
     */
    public static String unavailable(List<String> names) {
        if (!Files.exists(Path.of("/dev/fuse"))) {
            return "no /dev/fuse";
        }
        if (!"root".equals(System.getProperty("user.name"))) {
            return "mounting through FUSE needs root";
        }
        List<String> programs = new ArrayList<>(List.of("fusermount3", "stdbuf"));
        programs.addAll(names.stream().map(n -> n.startsWith("sqlite") ? "sqlite3" : n).toList());
        for (String p : programs) {
            if (Stream.of(System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")).noneMatch(d -> Files.isExecutable(Path.of(d, p)))) {
                return "no " + p + " on the PATH";
            }
        }
        return null;
    }

    /** Runs each application and judges its crash states, in {@code scratch}; reports failures as found. */
    public static List<Result> run(Options o, Path scratch, Consumer<Failure> onFailure, Progress progress)
            throws IOException, InterruptedException {
        List<Result> results = new ArrayList<>();
        for (App app : apps(o.apps(), o.seed(), o.steps())) {
            results.add(run(app, o, scratch, onFailure, progress));
        }
        progress.done();
        return results;
    }

    static Result run(App app, Options o, Path scratch, Consumer<Failure> onFailure, Progress progress)
            throws IOException, InterruptedException {
        long start = System.nanoTime();
        Run run = record(app, scratch);
        List<CrashState> states = CrashStates.of(run.events, run.flushes, o.seed(), o.perEpoch());
        Integer[] order = new Integer[states.size()];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        java.util.Arrays.sort(order, Comparator.comparingInt(i -> states.get(i).prefix()));
        List<Failure> failures = new ArrayList<>();
        Path work = scratch.resolve("state");
        long judged = 0;
        try (CrashStates.Images images = new CrashStates.Images()) {
            images.start(run.base, run.events);
            for (int i : order) {
                CrashState s = states.get(i);
                String finding = judge(app, images.image(s), run.durable(s.prefix()), work);
                judged++;
                progress.update("crashtest --apps", app.name(), judged, System.nanoTime() - start);
                if (finding != null) {
                    Failure f = new Failure(app.name(), o.seed(), i, s.toString(), finding);
                    failures.add(f);
                    onFailure.accept(f);
                    if (o.save() != null) {
                        Crashtest.save(images.image(s).contents(), Files.createDirectories(o.save()).resolve(app.name() + "-" + i + ".img"));
                    }
                }
            }
        } finally {
            run.base.close();
        }
        return new Result(app.name(), run.acks.length, run.flushes.length, judged, (System.nanoTime() - start) / 1e9, List.copyOf(failures));
    }

    /** A recorded application run over {@code base}: its events, where its flushes are, each step's acknowledgement event. */
    record Run(App app, MemoryDevice base, List<Event> events, int[] flushes, int[] acks) {
        /** How many steps a crash state with this prefix holds as durable. */
        int durable(int prefix) {
            int n = 0;
            while (n + app.lag() < acks.length && Recording.durableFrom(flushes, acks[n + app.lag()]) <= prefix) {
                n++;
            }
            return n;
        }
    }

    /** Formats a base image with the application's directory, then runs {@code app} mounted over a recording of a copy of it. */
    static Run record(App app, Path scratch) throws IOException, InterruptedException {
        MemoryDevice base = MemoryDevice.create("app-base", Recording.BLOCKS, Recording.BLOCK_SIZE);
        Volume.format(base, Recording.OPTIONS);
        try (Volume v = Volume.open(base, Recording.OPTIONS)) {
            v.namespace().mkdir("/" + DIR, 0755);
        }
        Path mnt = Files.createDirectories(scratch.resolve("mnt"));
        List<Integer> acks = new ArrayList<>();
        try (RecordingDevice rec = RecordingDevice.wrap(base.copy("recorded"))) {
            try (Volume v = Volume.open(rec, Recording.OPTIONS); FileSystemMount m = v.mount(mnt)) {
                app.run(mnt.resolve(DIR), v, () -> acks.add(rec.eventCount()));
            }
            int[] flushes = new int[rec.flushCount()];
            for (int k = 0; k < flushes.length; k++) {
                flushes[k] = rec.flushEvent(k);
            }
            return new Run(app, base, rec.events(), flushes, acks.stream().mapToInt(Integer::intValue).toArray());
        }
    }

    /** Recovers {@code image}, checks it, copies the application's files out to {@code work} and runs its checker there. */
    static String judge(App app, BlockDevice image, int durable, Path work) throws IOException, InterruptedException {
        deleteTree(work);
        Files.createDirectories(work);
        Path copy = work.resolve(DIR);
        try (Volume v = Volume.open(image, Recording.OPTIONS)) {
            Namespace ns = v.namespace();
            CheckReport report = ns.check();
            if (!report.clean()) {
                return "the check found problems: " + report;
            }
            if (ns.list("/").stream().anyMatch(e -> e.name().equals(DIR))) {
                copyOut(ns, "/" + DIR, copy);
            }
        } catch (RuntimeException e) {
            return "recovery, the check or reading the application's files failed: " + e;
        }
        return app.check(copy, durable);
    }

    /** Copies {@code from} on the volume, and everything under it, to {@code to}; an sqlite shared-memory file stays (it is rebuilt). */
    private static void copyOut(Namespace ns, String from, Path to) throws IOException {
        InodeStat st = ns.lstat(from);
        if (st.isDirectory()) {
            Files.createDirectories(to);
            for (DirEntry e : ns.list(from)) {
                if (!e.name().endsWith("-shm")) {
                    copyOut(ns, from + "/" + e.name(), to.resolve(e.name()));
                }
            }
        } else if (st.isSymlink()) {
            Files.createSymbolicLink(to, Path.of(ns.readlink(from)));
        } else if (st.isRegularFile()) {
            ByteBuffer buf = ByteBuffer.allocate(1 << 16);
            try (Handle h = ns.open(from, Namespace.O_RDONLY);
                 FileChannel out = FileChannel.open(to, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                for (long at = 0; ; ) {
                    buf.clear();
                    int n = ns.read(h, at, buf);
                    if (n <= 0) {
                        break;
                    }
                    at += n;
                    buf.flip();
                    while (buf.hasRemaining()) {
                        out.write(buf);
                    }
                }
            }
        }
    }

    private static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> all = Files.walk(p)) {
            for (Path q : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(q);
            }
        }
    }

    /** A program's exit status and output (stdout and stderr together). */
    record Exit(int status, String output) {
    }

    /** Runs {@code command} in {@code dir} with {@code env} added; killed and reported past {@code seconds}. */
    static Exit exec(Path dir, Map<String, String> env, int seconds, String... command) throws IOException, InterruptedException {
        Path out = Files.createTempFile("ferrite-app", ".out");
        try {
            ProcessBuilder pb = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).redirectOutput(out.toFile());
            pb.environment().putAll(env);
            Process p = pb.start();
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                throw new IllegalStateException(String.join(" ", command) + " in " + dir + " did not end within " + seconds + " s:\n"
                        + Files.readString(out));
            }
            return new Exit(p.exitValue(), Files.readString(out));
        } finally {
            Files.deleteIfExists(out);
        }
    }

    /** {@link #exec}, failing unless the program exits 0; returns its output. */
    static String execOk(Path dir, Map<String, String> env, int seconds, String... command) throws IOException, InterruptedException {
        Exit e = exec(dir, env, seconds, command);
        if (e.status() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " in " + dir + " exited " + e.status() + ":\n" + e.output());
        }
        return e.output();
    }
}
