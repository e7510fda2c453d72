package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiConsumer;
import java.util.function.Function;

import org.HdrHistogram.Histogram;

/**
 * The fs_mark-style metadata workload, run the same way on each target in one run:
 * <ol>
 *   <li>{@code create}: every thread creates its share of N empty files with hashed names (16 hex
 *       digits), in a directory of its own ({@link Layout#PRIVATE}) or all in one ({@link Layout#SHARED});
 *       the phase ends with a sync;</li>
 *   <li>(untimed) the store's caches are dropped, as by a remount;</li>
 *   <li>{@code walk}: every directory is read and every entry stat'ed. Private: each thread walks its
 *       own directory. Shared: one thread reads the directory and hands out the names in chunks, all
 *       threads stat them;</li>
 *   <li>{@code unlink}: every thread removes the files it created; the phase ends with a sync.</li>
 * </ol>
 * An untimed warm-up (as many files as the run, at most {@value #WARM_UP_FILES}, the first layout and
 * thread count measured) runs on each target first, then again with a tenth of those on fresh stores in
 * each other layout and thread count measured, then with a quarter on the {@link Target#jitted} ones in
 * each in turn while the JIT is busy, and the run waits for it to settle ({@link JitSettle#warmUp}). Rates are operations (walk: entries) over the phase's wall time including its sync; latencies are per
 * operation (walk: per entry, the listing's time spread over its entries). Checks, untimed: the walk
 * sees every file once and nothing else, every stat finds a zero-length file, the directories are
 * empty after the unlinks, and the store's own checker runs after the creates and the unlinks.
 */
public final class MetaBench {
    public static final String WORKLOAD = "meta";
    public static final String CREATE = "create";
    public static final String WALK = "walk";
    public static final String UNLINK = "unlink";
    public static final String UNIT = "ops/s";
    public static final long MAX_FILES = 1L << 31;
    public static final int MAX_THREADS = 64;
    private static final int CHUNK = 512;
    /**
     * Untimed warm-up files per target (as many as the run's, at most this many), so no target pays
     * for the JIT: a directory's tree splits a leaf every ~45 creates, and HotSpot fully compiles a method
     * only after some 5,000 calls.
     */
    static final long WARM_UP_FILES = 300_000;
    private static final HexFormat HEX = HexFormat.of();

    /** Where the threads' files go. */
    public enum Layout {
        PRIVATE, SHARED;

        public String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /**
     * A store to run on, and the name its results carry; {@code jitted} for Ferrite and the ceiling, whose
     * work is Java code this JVM compiles, and which the warm-up repeats on while the JIT is busy
     * ({@link JitSettle#warmUp}); not for the kernel file systems, nor Ferrite through FUSE, whose warm-up
     * pass is mostly making a loop device and a file system or mount on it.
     */
    public record Target(String label, Function<Long, MetaStore> open, boolean jitted) {
    }

    private final List<Target> targets;
    private final long files;
    private final List<Integer> threads;
    private final List<Layout> layouts;
    private final List<String> notes = new ArrayList<>();
    private String jit = "";
    /** Warm-up passes run so far: which layouts and thread counts the next one runs ({@link #warmUpShapes}). */
    private int warmUpPasses;
    /** What Ferrite's threads waited on in each measured phase ({@link Contention}). */
    private final List<String> contention = new ArrayList<>();
    /** What each measured phase's slow operations spent their time on, when watched ({@link Stalls}). */
    private final List<String> stalls = new ArrayList<>();
    private long stallNanos;

    public MetaBench(List<Target> targets, long files, List<Integer> threads, List<Layout> layouts) {
        if (targets.isEmpty() || threads.isEmpty() || layouts.isEmpty()) {
            throw new IllegalArgumentException("no targets, thread counts or layouts to run");
        }
        if (files < 1 || files > MAX_FILES) {
            throw new IllegalArgumentException(files + " files: give 1 to " + MAX_FILES);
        }
        for (int t : threads) {
            if (t < 1 || t > MAX_THREADS || t > files) {
                throw new IllegalArgumentException(t + " threads: give 1 to " + MAX_THREADS + ", and no more than files");
            }
        }
        this.targets = List.copyOf(targets);
        this.files = files;
        this.threads = List.copyOf(threads);
        this.layouts = List.copyOf(layouts);
    }

    /** File {@code i}'s name: a bijective hash of the index, so names are unique and arrive in no order. */
    static String name(long i) {
        return HEX.toHexDigits(KvKeys.mix(i));
    }

    /** Runs every layout at every thread count on every target, in that nesting; returns the results. */
    public List<Result> run(Progress progress) {
        long warmUp = Math.min(files, WARM_UP_FILES);
        if (warmUp > 0) {
            jit = JitSettle.warmUp(progress, warmUp, n -> warmUp(n, false, progress), n -> warmUp(n, true, progress));
        }
        List<Result> results = new ArrayList<>();
        for (Layout layout : layouts) {
            for (int t : threads) {
                for (Target target : targets) {
                    try (MetaStore store = target.open().apply(files)) {
                        results.addAll(new Run(store, target.label(), files, layout, t, false, progress).phases());
                    }
                }
            }
        }
        return results;
    }

    /**
     * An untimed run of {@code n} files on every target, or only the {@link Target#jitted} ones, in the
     * layouts and thread counts {@link #warmUpShapes} names for this pass.
     */
    private void warmUp(long n, boolean jittedOnly, Progress progress) {
        for (int[] shape : warmUpShapes(warmUpPasses++)) {
            Layout layout = layouts.get(shape[0]);
            int t = (int) Math.min(threads.get(shape[1]), n);
            for (Target target : targets) {
                if (target.jitted() || !jittedOnly) {
                    try (MetaStore store = target.open().apply(n)) {
                        new Run(store, target.label(), n, layout, t, true, progress).phases();
                    }
                }
            }
        }
    }

    /**
     * The (layout, thread count) index pairs warm-up pass {@code pass} runs: the first measured for the
     * first pass, every other for the second (all, if there is one), then one at a time in turn. A warm-up
     * of one thread in private directories alone left the paths 16 threads in one directory take (waits,
     * retries, the first contended counter) out of the compiled code: the first measured phase of that
     * shape threw the compiled creates and unlinks out and compiled them again, and C2 took a third of
     * the JVM's CPU in it, against a fifth in the one-thread phase (issue 21).
     */
    private List<int[]> warmUpShapes(int pass) {
        List<int[]> all = new ArrayList<>();
        for (int l = 0; l < layouts.size(); l++) {
            for (int t = 0; t < threads.size(); t++) {
                all.add(new int[] {l, t});
            }
        }
        return switch (pass) {
            case 0 -> all.subList(0, 1);
            case 1 -> all.size() == 1 ? all : all.subList(1, all.size());
            default -> List.of(all.get((pass - 2) % all.size()));
        };
    }

    /** What the wait for the JIT after the warm-up saw ({@link JitSettle}), or empty. */
    public String jit() {
        return jit;
    }

    /** How each target was set up and how its caches were dropped, one line each, in run order. */
    public List<String> notes() {
        return List.copyOf(notes);
    }

    /** Ferrite's counters over each measured phase, a line each ({@link Contention}). */
    public List<String> contention() {
        return List.copyOf(contention);
    }

    /** Watches every measured phase's operations of {@code nanos} or more ({@link Stalls}); 0 for none. */
    public void watchStalls(long nanos) {
        stallNanos = nanos;
    }

    /** What the slow operations of each measured phase spent their time on, a line each, if watched. */
    public List<String> stalls() {
        return List.copyOf(stalls);
    }

    private final class Run {
        private final MetaStore store;
        private final String target;
        private final long files;
        private final Layout layout;
        private final int threads;
        private final boolean warmUp;
        private final Progress progress;

        Run(MetaStore store, String target, long files, Layout layout, int threads, boolean warmUp, Progress progress) {
            this.store = store;
            this.target = target;
            this.files = files;
            this.layout = layout;
            this.threads = threads;
            this.warmUp = warmUp;
            this.progress = progress;
        }

        String dir(int id) {
            return layout == Layout.SHARED ? "shared" : "d" + id;
        }

        long start(int id) {
            return KvKeys.sliceStart(files, id, threads);
        }

        List<Result> phases() {
            try (MetaStore.Session s = store.session()) {
                for (int id = 0; id < (layout == Layout.SHARED ? 1 : threads); id++) {
                    s.mkdir(dir(id));
                }
            }
            List<Result> results = new ArrayList<>();
            results.add(phase(CREATE, true, this::create));
            store.check();
            String cold = store.coldCache();
            String note = target + " " + layout.label() + " x" + threads + ": " + store.describe() + "; walk: " + cold;
            if (!warmUp && !notes.contains(note)) {
                notes.add(note);
            }
            results.add(phase(WALK, false, layout == Layout.SHARED && threads > 1 ? sharedWalk() : this::walk));
            results.add(phase(UNLINK, true, this::unlink));
            try (MetaStore.Session s = store.session()) {
                for (int id = 0; id < (layout == Layout.SHARED ? 1 : threads); id++) {
                    long left = s.list(dir(id), n -> { });
                    if (left != 0) {
                        throw new IllegalStateException(target + ": " + left + " entries left in " + dir(id) + " after the unlinks");
                    }
                    s.rmdir(dir(id));
                }
            }
            store.check();
            return results;
        }

        private void create(int id, MetaStore.Session s, Latencies h, Phase p) {
            eachName(id, h, p, (dir, name) -> s.create(dir, name));
        }

        private void unlink(int id, MetaStore.Session s, Latencies h, Phase p) {
            eachName(id, h, p, (dir, name) -> s.unlink(dir, name));
        }

        /** Applies {@code op} to each of thread {@code id}'s names in its directory, timing each call. */
        private void eachName(int id, Latencies h, Phase p, BiConsumer<String, String> op) {
            String dir = dir(id);
            long lo = start(id), hi = start(id + 1);
            long now = System.nanoTime();
            for (long i = lo; i < hi; i++) {
                op.accept(dir, name(i));
                long t = System.nanoTime();
                h.record(now, t);
                now = t;
                p.done.set(id, i + 1 - lo);
            }
        }

        /** Each thread lists its own directory and stats every entry as it comes. */
        private void walk(int id, MetaStore.Session s, Latencies h, Phase p) {
            String dir = dir(id);
            long expect = layout == Layout.SHARED ? files : start(id + 1) - start(id);
            long[] seen = {0, System.nanoTime()};
            long listed = s.list(dir, name -> {
                statOne(s, dir, name);
                long t = System.nanoTime();
                h.record(seen[1], t);
                seen[1] = t;
                p.done.set(id, ++seen[0]);
            });
            verifyWalk(dir, listed, seen[0], expect);
        }

        /** Thread 0 lists the one directory into a queue in chunks; every other thread stats from it. */
        private Worker sharedWalk() {
            BlockingQueue<String[]> queue = new ArrayBlockingQueue<>(1024);
            String[] end = new String[0];
            long[] listed = new long[1];
            return (id, s, h, p) -> {
                String dir = dir(0);
                long done = 0;
                long now = System.nanoTime();
                if (id == 0) {
                    String[][] chunk = {new String[CHUNK]};
                    int[] fill = {0};
                    listed[0] = s.list(dir, name -> {
                        chunk[0][fill[0]++] = name;
                        if (fill[0] == CHUNK) {
                            put(queue, chunk[0]);
                            chunk[0] = new String[CHUNK];
                            fill[0] = 0;
                        }
                    });
                    if (fill[0] > 0) {
                        String[] last = new String[fill[0]];
                        System.arraycopy(chunk[0], 0, last, 0, fill[0]);
                        put(queue, last);
                    }
                    for (int i = 1; i < threads; i++) {
                        put(queue, end);
                    }
                    p.listed = listed[0];
                    return;
                }
                while (true) {
                    String[] names = take(queue);
                    if (names == end) {
                        break;
                    }
                    for (String name : names) {
                        statOne(s, dir, name);
                        long t = System.nanoTime();
                        h.record(now, t);
                        now = t;
                        p.done.set(id, ++done);
                    }
                }
            };
        }

        private void statOne(MetaStore.Session s, String dir, String name) {
            long size = s.stat(dir, name);
            if (size != 0) {
                throw new IllegalStateException(target + ": " + dir + "/" + name + " has " + size + " bytes, expected an empty file");
            }
        }

        private void verifyWalk(String dir, long listed, long statted, long expect) {
            if (listed != expect || statted != expect) {
                throw new IllegalStateException(target + ": the walk of " + dir + " listed " + listed + " and stat'ed "
                        + statted + " entries, expected " + expect);
            }
        }

        private Result phase(String phase, boolean sync, Worker worker) {
            Phase p = new Phase(threads);
            Latencies[] hs = new Latencies[threads];
            String shown = (warmUp ? "warm-up " : "") + phase + " " + layout.label() + (threads == 1 ? "" : " x" + threads);
            PhaseTimer timer = new PhaseTimer(shown, target, Long.MAX_VALUE / 4, progress);
            String workers = "meta-" + target + "-" + phase;
            Stalls watch = stallNanos > 0 && !warmUp ? Stalls.watch(stallNanos, workers + "-") : null;
            for (int i = 0; i < threads; i++) {
                hs[i] = new Latencies(watch);
            }
            CpuMeter.Sample cpu = CpuMeter.sample();
            GcMeter gc = GcMeter.start();
            Contention.Snapshot before = store.counters();
            Throwable failure = Workers.run(threads, workers, timer, p.done::total, new AtomicBoolean(),
                    id -> {
                        try (MetaStore.Session s = store.session()) {
                            worker.run(id, s, hs[id], p);
                        }
                    });
            if (failure != null) {
                timer.finish(System.nanoTime());
                if (watch != null) {
                    watch.close();
                }
                throw new IllegalStateException(phase + " (" + layout.label() + ") on " + target + " with " + threads
                        + " threads failed: " + failure, failure);
            }
            if (sync) {
                store.sync();
            }
            long elapsed = timer.finish(System.nanoTime());
            Histogram all = Result.newHistogram();
            for (Latencies h : hs) {
                all.add(h.histogram);
            }
            if (phase.equals(WALK) && layout == Layout.SHARED && threads > 1) {
                verifyWalk(dir(0), p.listed, all.getTotalCount(), files);
            }
            if (before != null && !warmUp) {
                contention.add(target + " " + shown + ": " + Contention.between(before, store.counters(), all.getTotalCount()));
            }
            if (watch != null) {
                stalls.add(target + " " + shown + ": " + watch.summary(all.getTotalCount()));
            }
            return Result.of(WORKLOAD, phase + "-" + layout.label(), target, threads,
                    all.getTotalCount() * 1e9 / elapsed, UNIT, all).withCpus(CpuMeter.busyCpusSince(cpu)).withGc(gc.pauses());
        }
    }

    private static void put(BlockingQueue<String[]> queue, String[] chunk) {
        try {
            queue.put(chunk);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while handing out names", e);
        }
    }

    private static String[] take(BlockingQueue<String[]> queue) {
        try {
            return queue.take();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for names", e);
        }
    }

    private interface Worker {
        void run(int id, MetaStore.Session session, Latencies latencies, Phase phase);
    }

    private static final class Phase {
        final ThreadCounts done;
        /** Entries the shared walk's lister read: written by it before its thread ends, read after the join. */
        long listed;

        Phase(int threads) {
            this.done = new ThreadCounts(threads);
        }
    }
}
