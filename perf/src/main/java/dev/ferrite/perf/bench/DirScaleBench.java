package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.HdrHistogram.Histogram;

/**
 * How the create rate holds up as one directory grows: a single thread creates empty files with hashed
 * names ({@link MetaBench#name}) in one directory, from empty up to {@code max} entries, and the rate is
 * measured in windows: the window of size {@code P} is the last tenth before {@code P} entries, for
 * every power of ten {@code P >= 10,000} up to {@code max}, and {@code max} itself. A window times at
 * least {@value #MIN_WINDOW_CREATES} creates: where its tenth is fewer (the 10k window's thousand, a few
 * milliseconds, over which one run's first window was 2x another's), fresh directories beside the big
 * one are grown untimed to the window's start, the window's creates are timed in each of them and then
 * in the big one, and they are removed untimed before the big directory grows on. A directory whose
 * create cost grows with its size (a linear free-space scan, a hash chain) shows as a falling rate;
 * the report's last-over-first ratio is the figure of merit, and the first target's rate over each
 * other's at the same window compares them (over {@code memory}, the ceiling, its overhead). An
 * untimed warm-up on stores of their own comes first ({@value MetaBench#WARM_UP_FILES} creates, or
 * {@code max} if fewer, in one directory, and as many unlinks, then a tenth and quarters while the JIT
 * is busy, and a wait for it to settle: {@link JitSettle#warmUp}): a single pass had left C2 compiling
 * through the first window (56k creates/s in one run against 180–280k). Nothing is synced: the measure
 * is the directory structure, not the log. Each window of a target with counters gets a line
 * ({@link #contention}): the creating thread's time per create on a CPU, runnable without one (other
 * threads had the CPUs) and off them (blocked), and the engine's counters, so that a window's rate can
 * be told apart from the load on the machine.
 */
public final class DirScaleBench {
    public static final String WORKLOAD = "dirscale";
    public static final long MIN_MAX = 10_000;
    public static final long MAX_MAX = 100_000_000;
    /** Creates a window times at the least, in directories of the same size beside the big one where its tenth is fewer. */
    public static final long MIN_WINDOW_CREATES = 20_000;

    private final List<MetaBench.Target> targets;
    private final long max;
    private final long minWindow;
    private final Map<String, String> setups = new LinkedHashMap<>();
    private final List<String> contention = new ArrayList<>();
    private String jit = "";
    /** Creates and unlinks so far in the target's run, for the progress line. */
    private long ops;

    public DirScaleBench(List<MetaBench.Target> targets, long max) {
        this(targets, max, MIN_WINDOW_CREATES);
    }

    /** As {@link #DirScaleBench(List, long)}, each window timing at least {@code minWindow} creates (tests take fewer). */
    DirScaleBench(List<MetaBench.Target> targets, long max, long minWindow) {
        if (targets.isEmpty()) {
            throw new IllegalArgumentException("no targets to run");
        }
        if (max < MIN_MAX || max > MAX_MAX) {
            throw new IllegalArgumentException(max + " entries: give " + MIN_MAX + " to " + MAX_MAX);
        }
        this.targets = List.copyOf(targets);
        this.max = max;
        this.minWindow = minWindow;
    }

    /** The entry counts at which windows end: 10k, 100k, ... up to {@code max}, and {@code max}. */
    public static List<Long> windowEnds(long max) {
        List<Long> ends = new ArrayList<>();
        for (long p = MIN_MAX; p <= max; p *= 10) {
            ends.add(p);
        }
        if (ends.getLast() != max) {
            ends.add(max);
        }
        return ends;
    }

    /** The phase name of the window ending at {@code entries}: {@code create@10k}, {@code create@1M}, ... */
    public static String phase(long entries) {
        String n = entries % 1_000_000 == 0 ? entries / 1_000_000 + "M"
                : entries % 1_000 == 0 ? entries / 1_000 + "k" : Long.toString(entries);
        return "create@" + n;
    }

    public List<Result> run(Progress progress) {
        long warmUp = Math.min(max, MetaBench.WARM_UP_FILES);
        jit = JitSettle.warmUp(progress, warmUp, n -> warmUp(n, false), n -> warmUp(n, true));
        List<Result> results = new ArrayList<>();
        List<Long> ends = windowEnds(max);
        for (MetaBench.Target target : targets) {
            try (MetaStore store = target.open().apply(max);
                 MetaStore.Session s = store.session();
                 SchedClock clock = SchedClock.ofCurrentThread()) {
                setups.put(target.label(), store.describe());
                s.mkdir("big");
                PhaseTimer timer = new PhaseTimer("dirscale", target.label(), Long.MAX_VALUE / 4, progress);
                ops = 0;
                long i = 0;
                for (long end : ends) {
                    long windowStart = end - end / 10;
                    for (; i < windowStart; i++) {
                        create(s, "big", i, timer);
                    }
                    List<String> copies = copies(end, minWindow);
                    for (String copy : copies) { // untimed, as the big directory's growth to here was
                        s.mkdir(copy);
                        for (long j = 0; j < windowStart; j++) {
                            create(s, copy, j, timer);
                        }
                    }
                    Histogram h = Result.newHistogram();
                    CpuMeter.Sample cpu = CpuMeter.sample();
                    GcMeter gc = GcMeter.start();
                    Contention.Snapshot before = store.counters();
                    ThreadTimes thread = ThreadTimes.of(clock);
                    long start = System.nanoTime(), now = start;
                    for (String copy : copies) {
                        now = timeWindow(s, copy, windowStart, end, h, now, timer);
                    }
                    now = timeWindow(s, "big", windowStart, end, h, now, timer);
                    i = end;
                    if (before != null) {
                        contention.add(target.label() + " " + phase(end) + ": " + thread.since(clock, now - start, h.getTotalCount())
                                + Contention.between(before, store.counters(), h.getTotalCount()));
                    }
                    results.add(Result.of(WORKLOAD, phase(end), target.label(), 1,
                            h.getTotalCount() * 1e9 / (now - start), MetaBench.UNIT, h).withCpus(CpuMeter.busyCpusSince(cpu)).withGc(gc.pauses()));
                    for (String copy : copies) { // untimed, so that later windows see one big directory only
                        for (long j = 0; j < end; j++) {
                            s.unlink(copy, MetaBench.name(j));
                            ops++;
                        }
                        s.rmdir(copy);
                    }
                }
                timer.finish(System.nanoTime());
                long listed = s.list("big", n -> { });
                if (listed != max) {
                    throw new IllegalStateException(target.label() + ": the directory holds " + listed
                            + " entries after " + max + " creates");
                }
            }
        }
        return results;
    }

    /**
     * The directories besides the big one whose creates the window ending at {@code end} also times, so
     * that it times at least {@code minWindow}: none once its tenth is that many; for the default
     * {@value #MIN_WINDOW_CREATES}, 19 for the 10k window's thousand.
     */
    static List<String> copies(long end, long minWindow) {
        long window = end / 10;
        int n = (int) Math.max(0, (minWindow + window - 1) / window - 1);
        List<String> names = new ArrayList<>();
        for (int c = 1; c <= n; c++) {
            names.add("copy" + c);
        }
        return names;
    }

    private void create(MetaStore.Session s, String dir, long i, PhaseTimer timer) {
        s.create(dir, MetaBench.name(i));
        if ((++ops & 1023) == 0) {
            timer.running(ops, System.nanoTime());
        }
    }

    /** Creates entries {@code [from, to)} of {@code dir}, each timed into {@code h} from {@code now}; returns the clock after the last. */
    private long timeWindow(MetaStore.Session s, String dir, long from, long to, Histogram h, long now, PhaseTimer timer) {
        for (long j = from; j < to; j++) {
            s.create(dir, MetaBench.name(j));
            long t = System.nanoTime();
            h.recordValue(t - now);
            now = t;
            if ((++ops & 1023) == 0) {
                timer.running(ops, t);
            }
        }
        return now;
    }

    /**
     * Untimed: {@code n} creates in one directory on a store of its own for every target, or only the
     * {@link MetaBench.Target#jitted} ones, and as many unlinks: without them the first short window's
     * directories, removed after it, brought the unlink path to C2 during the next window (JIT 10 µs a
     * create there against 1 in the others).
     */
    private void warmUp(long n, boolean jittedOnly) {
        for (MetaBench.Target target : targets) {
            if (target.jitted() || !jittedOnly) {
                try (MetaStore store = target.open().apply(n);
                     MetaStore.Session s = store.session()) {
                    s.mkdir("warm");
                    for (long i = 0; i < n; i++) {
                        s.create("warm", MetaBench.name(i));
                    }
                    for (long i = 0; i < n; i++) { // as a short window's directories beside the big one go
                        s.unlink("warm", MetaBench.name(i));
                    }
                    s.rmdir("warm");
                }
            }
        }
    }

    /** What the wait for the JIT after the warm-up saw ({@link JitSettle}), or empty. */
    public String jit() {
        return jit;
    }

    /**
     * Ferrite's counters over each window, a line each ({@link Contention}), after the creating thread's
     * time per create: on a CPU, runnable without one, and off the CPUs (blocked); the three add up to the
     * window's time. On a shared machine the first is what compares windows and builds.
     */
    public List<String> contention() {
        return List.copyOf(contention);
    }

    /** The creating thread's scheduler clocks at a window's start, where the kernel keeps them. */
    private record ThreadTimes(long onCpu, long queued) {
        static ThreadTimes of(SchedClock clock) {
            if (clock == null) {
                return new ThreadTimes(-1, -1);
            }
            read(clock);
            return new ThreadTimes(clock.onCpu, clock.queued);
        }

        /** "creating thread 4.1 µs/op on a CPU, 0.2 runnable, 0.0 off; " over {@code ops} creates in {@code nanos}, or "". */
        String since(SchedClock clock, long nanos, long ops) {
            if (clock == null) {
                return "";
            }
            read(clock);
            long cpu = clock.onCpu - onCpu, waiting = clock.queued - queued;
            return String.format(Locale.ROOT, "creating thread %.1f µs/op on a CPU, %.1f runnable, %.1f off; ",
                    cpu / 1e3 / ops, waiting / 1e3 / ops, Math.max(0, nanos - cpu - waiting) / 1e3 / ops);
        }

        private static void read(SchedClock clock) {
            try {
                clock.read();
            } catch (IOException e) {
                throw new UncheckedIOException("reading the creating thread's scheduler clocks", e);
            }
        }
    }

    /** How each target's measured store was set up, by label in run order. */
    public Map<String, String> setups() {
        return Collections.unmodifiableMap(setups);
    }

    /**
     * One row per target and window: the rate, its ratio to the target's first window and, in the first
     * target's rows, a column per other target with the first's rate over that one's at the same window
     * ({@code vs memory}: Ferrite's share of the ceiling), as {@link ResultTable}'s ratios read.
     */
    public static String table(List<Result> results, List<String> targets) {
        String first = targets.getFirst();
        List<String> others = targets.subList(1, targets.size());
        List<String[]> rows = new ArrayList<>();
        List<String> head = new ArrayList<>(List.of("target", "window", "creates/s", "vs first window"));
        others.forEach(o -> head.add("vs " + o));
        rows.add(head.toArray(String[]::new));
        for (String t : targets) {
            List<Result> mine = results.stream().filter(r -> r.target().equals(t)).toList();
            for (Result r : mine) {
                List<String> row = new ArrayList<>(List.of(t, r.phase(), String.format(Locale.ROOT, "%,.0f", r.rate()),
                        ratio(r.rate(), mine.getFirst().rate())));
                for (String o : others) {
                    row.add(!t.equals(first) ? "" : results.stream()
                            .filter(x -> x.target().equals(o) && x.phase().equals(r.phase()))
                            .findFirst().map(x -> ratio(r.rate(), x.rate())).orElse("-"));
                }
                rows.add(row.toArray(String[]::new));
            }
        }
        return ResultTable.format(rows, 2);
    }

    private static String ratio(double a, double b) {
        return String.format(Locale.ROOT, "%.2f", a / b);
    }
}
