package dev.ferrite.perf.crash;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import dev.ferrite.io.testkit.RecordingDevice.CrashState;
import dev.ferrite.perf.bench.Progress;
import dev.ferrite.perf.bench.ResultJson;

/**
 * {@code ferrite crashtest}: generates workloads ({@link Workload}), records each on a
 * {@code RecordingDevice} ({@link Recording}), and judges every crash state of it ({@link CrashStates},
 * {@link Oracle}), on several threads, each running whole workloads. Workload {@code w} of a run with seed
 * {@code S} alternates between the ACE enumeration (starting at a point {@code S} picks) and random
 * workloads; a failure names the workload's id and the state's index, which {@link #replay} repeats.
 */
public final class Crashtest {
    private Crashtest() {
    }

    /**
     * @param seed      picks the workloads
     * @param workloads most workloads to run
     * @param perEpoch  crash states per flush epoch beyond its prefix
     * @param nanos     most time to run, or 0 for no limit
     * @param threads   workloads run at once
     */
    public record Options(long seed, long workloads, int perEpoch, long nanos, int threads) {
    }

    /**
     * One crash state that failed: the workload's id and ops, the recording's {@link Recording#fingerprint}
     * (the shape replay looks for), the state's index and contents, and what was wrong.
     */
    public record Failure(long workload, String ops, String recording, int state, String crash, String finding) {
        /** The argument of {@code --replay} that repeats this state alone. */
        public String replayArgument() {
            return workload + ":" + state + (recording.isEmpty() ? "" : ":" + recording);
        }

        @Override
        public String toString() {
            return "FAILED workload " + workload + ", state " + state + " " + crash + "\n  ops: " + ops.replace("\n", "\n       ")
                    + "\n  " + finding.replace("\n", "\n  ") + "\n  replay: ./ferrite crashtest --replay " + replayArgument();
        }
    }

    public record Summary(long workloads, long states, long skipped, double seconds, List<Failure> failures) {
        public double statesPerSecond() {
            return seconds > 0 ? states / seconds : 0;
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%,d workloads, %,d crash states in %.1f s (%,.1f states/s), %d failures",
                    workloads, states, seconds, statesPerSecond(), failures.size());
        }

        /** The summary and every failure as a JSON document. */
        public String json(Options o) {
            StringBuilder s = new StringBuilder("{\n");
            s.append("  \"seed\": ").append(o.seed()).append(",\n");
            s.append("  \"states_per_epoch\": ").append(o.perEpoch()).append(",\n");
            s.append("  \"threads\": ").append(o.threads()).append(",\n");
            s.append("  \"workloads\": ").append(workloads).append(",\n");
            s.append("  \"states\": ").append(states).append(",\n");
            s.append("  \"seconds\": ").append(String.format(Locale.ROOT, "%.3f", seconds)).append(",\n");
            s.append("  \"states_per_second\": ").append(String.format(Locale.ROOT, "%.3f", statesPerSecond())).append(",\n");
            s.append("  \"failures\": [");
            for (int i = 0; i < failures.size(); i++) {
                Failure f = failures.get(i);
                s.append(i == 0 ? "\n" : ",\n").append("    {\"workload\": ").append(f.workload()).append(", \"state\": ").append(f.state());
                s.append(", \"replay\": ");
                ResultJson.quote(s, f.replayArgument());
                s.append(", \"ops\": ");
                ResultJson.quote(s, f.ops());
                s.append(", \"crash\": ");
                ResultJson.quote(s, f.crash());
                s.append(", \"finding\": ");
                ResultJson.quote(s, f.finding());
                s.append('}');
            }
            return s.append(failures.isEmpty() ? "]\n}\n" : "\n  ]\n}\n").toString();
        }
    }

    /** The id of workload {@code w} of a run seeded {@code seed}: even ones enumerated, odd ones random. */
    static long workloadId(long seed, long w) {
        if (w % 2 == 0) {
            return Math.floorMod(seed * 7919 + w / 2, Workload.EXHAUSTIVE);
        }
        long z = seed * 0x9E3779B97F4A7C15L + w;
        z = (z ^ z >>> 30) * 0xBF58476D1CE4E5B9L;
        z = (z ^ z >>> 27) * 0x94D049BB133111EBL;
        return Workload.EXHAUSTIVE + Math.floorMod(z ^ z >>> 31, Long.MAX_VALUE - Workload.EXHAUSTIVE);
    }

    /** Runs workloads until {@code o.workloads()} or the time limit, reporting each failure as found. */
    public static Summary run(Options o, Consumer<Failure> onFailure, Progress progress) {
        long start = System.nanoTime();
        AtomicLong next = new AtomicLong(), done = new AtomicLong(), states = new AtomicLong(), skipped = new AtomicLong();
        List<Failure> failures = Collections.synchronizedList(new ArrayList<>());
        Consumer<Failure> report = f -> {
            failures.add(f);
            synchronized (onFailure) {
                onFailure.accept(f);
            }
        };
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < o.threads(); t++) {
            workers.add(Thread.ofPlatform().name("crashtest-" + t).start(() -> {
                try (CrashStates.Images images = new CrashStates.Images()) {
                    for (long w; (w = next.getAndIncrement()) < o.workloads() && !expired(o, start); ) {
                        Workload workload = Workload.of(workloadId(o.seed(), w));
                        if (workload == null) {
                            skipped.incrementAndGet();
                            continue;
                        }
                        runWorkload(workload, o.perEpoch(), images, states, report, () -> expired(o, start));
                        done.incrementAndGet();
                    }
                }
            }));
        }
        for (Thread t : workers) {
            try {
                while (t.isAlive()) {
                    t.join(1000);
                    progress.update("crashtest", done.get() + " workloads, " + failures.size() + " failures", states.get(),
                            "states", System.nanoTime() - start);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
        }
        progress.done();
        List<Failure> sorted = new ArrayList<>(failures);
        sorted.sort(Comparator.comparingLong(Failure::workload).thenComparingInt(Failure::state));
        return new Summary(done.get(), states.get(), skipped.get(), (System.nanoTime() - start) / 1e9, List.copyOf(sorted));
    }

    private static boolean expired(Options o, long start) {
        return o.nanos() > 0 && System.nanoTime() - start > o.nanos();
    }

    /**
     * Repeats state {@code state} of workload {@code id} alone; with {@code recording} (a fingerprint)
     * records again, up to 50 times, until the recording has that shape. With {@code save}, writes the
     * state's crashed image there (before recovery) for {@code ferrite check} and {@code dump}.
     *
     * @return what the oracle found, or null if the state passed
     */
    public static Failure replay(long id, int state, String recording, int perEpoch, Path save) throws IOException {
        Workload workload = Workload.of(id);
        if (workload == null) {
            throw new IllegalArgumentException("workload " + id + " is an invalid enumerated sequence: there is nothing to replay");
        }
        Recording r = Recording.record(workload);
        for (int tries = 1; recording != null && !recording.equals(r.fingerprint()) && tries < 50; tries++) {
            r = Recording.record(workload);
        }
        if (recording != null && !recording.equals(r.fingerprint())) {
            throw new IllegalStateException("workload " + id + " recorded 50 times, never in the shape " + recording
                    + " (background write-back timing differs): the last was " + r.fingerprint());
        }
        List<CrashState> states = CrashStates.of(r, perEpoch);
        if (state < 0 || state >= states.size()) {
            throw new IllegalArgumentException("workload " + id + " has states 0.." + (states.size() - 1) + ", not " + state);
        }
        CrashState s = states.get(state);
        Oracle oracle = new Oracle(r);
        try (CrashStates.Images images = new CrashStates.Images()) {
            images.start(r);
            ImageDevice image = images.image(s);
            if (save != null) {
                save(image.contents(), save);
            }
            String finding = oracle.judge(image, images.again, s);
            return finding == null ? null
                    : new Failure(id, workload.toString(), r.fingerprint(), state, s.toString(), finding);
        } finally {
            oracle.close();
        }
    }

    /** Writes the device's blocks to a new file {@code to} (replacing one there). */
    static void save(MemorySegment image, Path to) throws IOException {
        try (FileChannel out = FileChannel.open(to, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer bb = image.asByteBuffer();
            while (bb.hasRemaining()) {
                out.write(bb);
            }
        }
    }

    /**
     * Records {@code workload} and judges its states on the worker's {@code images}, counting each in
     * {@code states} and reporting failures; stops early once {@code stop} says so.
     */
    static void runWorkload(Workload workload, int perEpoch, CrashStates.Images images, AtomicLong states,
                            Consumer<Failure> report, java.util.function.BooleanSupplier stop) {
        Recording r;
        try {
            r = Recording.record(workload);
        } catch (RuntimeException e) {
            report.accept(new Failure(workload.id(), workload.toString(), "", -1, "(while recording)", e.toString()));
            return;
        }
        List<CrashState> list = CrashStates.of(r, perEpoch);
        Integer[] order = new Integer[list.size()];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        java.util.Arrays.sort(order, Comparator.comparingInt(i -> list.get(i).prefix()));
        Oracle oracle = new Oracle(r);
        images.start(r);
        try {
            for (int i : order) {
                if (stop.getAsBoolean()) {
                    return;
                }
                CrashState s = list.get(i);
                String finding;
                try {
                    finding = oracle.judge(images.image(s), images.again, s);
                } catch (RuntimeException e) {
                    finding = "the crash test itself failed: " + e;
                }
                states.incrementAndGet();
                if (finding != null) {
                    report.accept(new Failure(workload.id(), workload.toString(), r.fingerprint(), i, s.toString(), finding));
                }
            }
        } finally {
            oracle.close();
        }
    }
}
