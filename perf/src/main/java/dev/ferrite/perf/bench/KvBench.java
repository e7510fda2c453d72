package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;
import java.util.function.Supplier;

import org.HdrHistogram.Histogram;

/**
 * A key-value workload run the same way on each {@link KvTarget} in one run, each on a fresh store in a
 * directory of its own. The stores are open side by side and each phase runs on every target in turn
 * before the next phase starts (see {@link #runTogether}). The phases, in their order, by {@link Family}:
 * <ol>
 *   <li>{@code insert} (always: it loads the keys the others use): put keys {@code 0..N-1} ({@link
 *       KvKeys}: 16-40 bytes, in hashed order) with their values, then make them durable;</li>
 *   <li>{@code get} (basic): get every key and check its value;</li>
 *   <li>{@code scan} (basic): scan the whole key range forward, reading every value, pass after pass until
 *       a given time has gone by (one pass over a million keys takes a tenth of a second: too short to
 *       time against thread start-up and a noisy host); the warm-up makes one pass;</li>
 *   <li>{@code batch1}, {@code batch100}, {@code batch1000} (batch): N puts in all of keys drawn uniformly
 *       from the N loaded, each a new version of its value ({@link KvKeys#value(long, long, byte[])}), in
 *       batches of 1, 100 or 1,000 each followed by a commit, then made durable; a batch is one atomic
 *       transaction where the store has one over several keys ({@link KvStore#batchSession()}), else its
 *       puts commit one by one;</li>
 *   <li>{@code ycsb-a}, {@code -b}, {@code -c}, {@code -e} (ycsb): YCSB's core workloads A (50% reads, 50%
 *       updates), B (95/5), C (reads only) and E (95% scans of 1 to 100 entries, the length uniform, 5%
 *       inserts of new keys), keys drawn by {@link Zipfian} (scrambled, theta 0.99) over the N loaded, an
 *       update writing a new version of the value, for a given time each; every update and insert commits
 *       by itself; the writing mixes end durable. E also stops once its inserts have doubled the keys;</li>
 *   <li>{@code delete} (basic): delete every key (E's inserts too), then make that durable.</li>
 * </ol>
 * With T threads, thread t takes the t-th T-th of the indexes for inserts, gets and deletes, and the
 * t-th T-th of the key range for the scan. A phase's rate is its operations (scan: entries; batch: puts)
 * over its wall time, which includes the closing sync. Latencies are per operation: one sample per put,
 * delete, get, YCSB read, update, insert or short scan, except that a write batch of the basic phases
 * ({@link KvStore#writeBatch()} writes and their commit) contributes its time divided by its size once
 * per write in it, a scan the time of each {@value #SCAN_CHUNK} entries divided by {@value #SCAN_CHUNK},
 * and a batch phase one sample per batch (its puts and its commit).
 *
 * <p>Each thread count and value size starts from fresh stores; values other than the default
 * {@value KvKeys#VALUE} bytes name their phases ({@code insert-1KiB}), and shrink the key count to keep
 * at most {@link #VALUE_BUDGET} of values in a store ({@link #notes()}). A short
 * warm-up on each target at each value size comes before that size's first phases and is not reported, so that no target
 * pays for the JIT in its numbers: once (as many times as make {@link #MIN_WARM_UP_OPS} operations where the
 * value size leaves fewer keys), then again with a tenth of the keys on fresh stores, then
 * with a quarter at the run's highest thread count while the JIT is busy (so that the paths only
 * threads side by side take, a lock waited for or a restart, are compiled before a measured phase meets
 * them), then a wait for it to settle ({@link JitSettle#warmUp}). Right before each target's measured
 * insert the harness touches and frees twice the phase's value bytes of memory ({@link HostMemory#warm},
 * untimed), so that the fresh memory every store fills comes host-backed, not by chance.
 *
 * <p>A scan reads every byte of every value ({@link KvStore.Scan#fold}), so that a store that hands out
 * a view of its values (LMDB) does the same work as one that copies them out.
 *
 * <p>Checks, untimed: every get (YCSB reads too) finds its value; the scans return every key once and
 * every value (an XOR of the values' index words); every value read has the run's length; after the
 * deletes a scan finds nothing left; the store's own checker runs after the inserts and the deletes.
 */
public final class KvBench {
    public static final String WORKLOAD = "kv";
    public static final String INSERT = "insert";
    public static final String GET = "get";
    public static final String SCAN = "scan";
    public static final String DELETE = "delete";
    /** The basic phases (64-byte values), the default run's. */
    public static final List<String> PHASES = List.of(INSERT, GET, SCAN, DELETE);
    public static final String UNIT = "ops/s";
    public static final long MAX_KEYS = 1L << 32;
    public static final int MAX_THREADS = 256;
    public static final int MAX_VALUE_BYTES = 1 << 20;
    /**
     * Value bytes a store holds at most at one value size: larger values get fewer keys (1 MiB: 256, so
     * that every thread count still has a key per thread).
     */
    public static final long VALUE_BUDGET = 256L << 20;
    static final int SCAN_CHUNK = 1024;
    /** Longest YCSB E scan, in entries; each scan's length is uniform in 1 to this. */
    static final int SHORT_SCAN_MAX = 100;
    /**
     * Warm-up keys per target: as many as the run's, at most this many. A split comes every ~27 inserts,
     * and HotSpot compiles a method fully only after some 5,000 calls: with 100,000 keys Ferrite's leaf
     * split still ran unoptimized through the first third of a million-key insert phase. Three tenths of
     * a 200,000-key run never filled a checkpoint or a quarter of the log, and the measured phases threw
     * out and recompiled the log's commit path, which they took at once (docs/benchmarks.md, warm-up).
     */
    static final long WARM_UP_KEYS = 300_000;
    /**
     * Operations of each phase the warm-up runs at least before its tenth and quarters (in full passes, on
     * fresh stores each), unless the run has fewer warm-up keys: a value size whose budget leaves fewer keys
     * (1 MiB: 256) took one pass, and the code only its values take (a blob's create, rename and delete)
     * was still far from compiled in the measured phases: a 1 MiB delete's CPU fell from 336 to 30-45 us
     * over 14 rounds of 256 in a harness, and the bench's delete-1MiB ran at its first rounds' cost.
     */
    static final long MIN_WARM_UP_OPS = 4_096;
    private static final long NO_LIMIT = Long.MAX_VALUE / 4;

    /** The groups of phases {@code --phases} chooses from; {@code insert} runs with any. */
    public enum Family {
        BASIC, BATCH, YCSB
    }

    /**
     * What a run does beyond the thread counts and key count.
     *
     * @param families    the phase families to run
     * @param valueSizes  value lengths in bytes, {@value KvKeys#VALUE_MIN} to {@value #MAX_VALUE_BYTES}, each
     *                    run on fresh stores; the first also for the warm-up
     * @param ycsbSeconds how long each YCSB mix runs
     */
    public record Plan(Set<Family> families, List<Integer> valueSizes, double ycsbSeconds) {
        /** The default run: the basic phases with 64-byte values. */
        public static final Plan BASIC = new Plan(EnumSet.of(Family.BASIC), List.of(KvKeys.VALUE), 0);

        public Plan {
            families = families.isEmpty() ? Set.of() : Collections.unmodifiableSet(EnumSet.copyOf(families));
            valueSizes = List.copyOf(valueSizes);
            if (families.isEmpty() || valueSizes.isEmpty()) {
                throw new IllegalArgumentException("no phase families or no value sizes to run");
            }
            for (int v : valueSizes) {
                if (v < KvKeys.VALUE_MIN || v > MAX_VALUE_BYTES) {
                    throw new IllegalArgumentException("value size " + v + ": give " + KvKeys.VALUE_MIN + " to " + MAX_VALUE_BYTES);
                }
            }
            if (new HashSet<>(valueSizes).size() != valueSizes.size()) {
                throw new IllegalArgumentException("value sizes " + valueSizes + " name one twice");
            }
            if (families.contains(Family.YCSB) && !(ycsbSeconds > 0)) {
                throw new IllegalArgumentException("YCSB mixes need a time to run, not " + ycsbSeconds + " s");
            }
        }
    }

    /** Every phase in run order: the family that runs it (null: always), its batch size or read share. */
    private enum Step {
        INSERT(KvBench.INSERT, null), GET(KvBench.GET, Family.BASIC), SCAN(KvBench.SCAN, Family.BASIC),
        BATCH1("batch1", Family.BATCH, 1, 0), BATCH100("batch100", Family.BATCH, 100, 0),
        BATCH1000("batch1000", Family.BATCH, 1000, 0),
        YCSB_A("ycsb-a", Family.YCSB, 0, 0.5), YCSB_B("ycsb-b", Family.YCSB, 0, 0.95),
        YCSB_C("ycsb-c", Family.YCSB, 0, 1), YCSB_E("ycsb-e", Family.YCSB, 0, 0.95),
        DELETE(KvBench.DELETE, Family.BASIC);

        final String label;
        final Family family;
        final int batch;
        /** YCSB: the share of reads (E: of short scans); the rest updates (E: inserts). */
        final double reads;

        Step(String label, Family family) {
            this(label, family, 0, 0);
        }

        Step(String label, Family family, int batch, double reads) {
            this.label = label;
            this.family = family;
            this.batch = batch;
            this.reads = reads;
        }

        /** Whether it changes the store: then a sync ends it. */
        boolean writes() {
            return this != GET && this != SCAN && this != YCSB_C;
        }
    }

    private final Path dir;
    private final List<KvTarget> targets;
    private final long keys;
    private final List<Integer> threads;
    private final long cacheBytes;
    private final long limitNanos;
    private final long scanNanos;
    private final Plan plan;
    private final long ycsbNanos;
    private final List<Step> steps;
    private final Map<KvTarget, String> setups = new LinkedHashMap<>();
    /** What Ferrite's threads waited on in each measured phase ({@link Contention}). */
    private final List<String> contention = new ArrayList<>();
    /** What each measured phase's slow operations spent their time on, when watched ({@link Stalls}). */
    private final List<String> stalls = new ArrayList<>();
    private long stallNanos;
    private final List<Skipped> skipped = new ArrayList<>();
    private final Set<String> notes = new LinkedHashSet<>();
    private String jit = "";
    /** Runs before each measured load with the fresh memory it may take ({@link HostMemory#warm}; tests record it). */
    LongConsumer beforeLoad = HostMemory::warm;

    /**
     * @param dir          where the stores' files go (a directory per store, deleted after it)
     * @param targets      stores to run, in this order at each thread count
     * @param keys         keys to insert (fewer for large values: {@link #VALUE_BUDGET})
     * @param threads      thread counts to run every phase at
     * @param cacheBytes   cache budget of the stores that take one: Ferrite, RocksDB, Xodus, MVStore
     * @param secondsLimit longest a phase may run, or 0 for no limit; a phase cut short leaves the later
     *                     ones to the keys the inserts got to (the batch and YCSB phases skip then)
     * @param scanSeconds  how long the get and scan phases go on starting new passes; 0 for one pass
     * @param plan         the phase families, value sizes and YCSB time
     */
    public KvBench(Path dir, List<KvTarget> targets, long keys, List<Integer> threads, long cacheBytes, double secondsLimit,
                   double scanSeconds, Plan plan) {
        if (targets.isEmpty() || threads.isEmpty()) {
            throw new IllegalArgumentException("no targets or no thread counts to run");
        }
        if (keys < 1 || keys > MAX_KEYS) {
            throw new IllegalArgumentException(keys + " keys: give 1 to " + MAX_KEYS);
        }
        for (int t : threads) {
            if (t < 1 || t > MAX_THREADS || t > keys) {
                throw new IllegalArgumentException(t + " threads: give 1 to " + MAX_THREADS + ", and no more than keys");
            }
        }
        if (!(secondsLimit >= 0)) {
            throw new IllegalArgumentException("phase time limit " + secondsLimit + " s is negative");
        }
        if (!(scanSeconds >= 0)) {
            throw new IllegalArgumentException("scan time " + scanSeconds + " s is negative");
        }
        this.dir = dir;
        this.targets = List.copyOf(targets);
        this.keys = keys;
        this.threads = List.copyOf(threads);
        this.cacheBytes = cacheBytes;
        this.limitNanos = secondsLimit == 0 ? NO_LIMIT : Math.round(secondsLimit * 1e9);
        this.scanNanos = Math.round(scanSeconds * 1e9);
        this.plan = plan;
        this.ycsbNanos = Math.round(plan.ycsbSeconds() * 1e9);
        this.steps = steps(plan);
    }

    /** The phase names a run of {@code plan} reports at each value size, in run order (default size's names). */
    public static List<String> phases(Plan plan) {
        return steps(plan).stream().map(s -> s.label).toList();
    }

    private static List<Step> steps(Plan plan) {
        return Arrays.stream(Step.values()).filter(s -> s.family == null || plan.families().contains(s.family)).toList();
    }

    /** {@code keys}, or fewer so that their values of {@code valueBytes} fit {@link #VALUE_BUDGET}. */
    public static long keysFor(long keys, int valueBytes) {
        return Math.min(keys, VALUE_BUDGET / valueBytes);
    }

    /** A phase's name at a value size: suffixed ({@code insert-16KiB}) unless the size is the default. */
    static String phaseName(String phase, int valueBytes) {
        return valueBytes == KvKeys.VALUE ? phase : phase + "-" + sizeLabel(valueBytes);
    }

    /** {@code 64B}, {@code 1KiB}, {@code 16KiB}, {@code 1MiB}, {@code 1000B}. */
    static String sizeLabel(int bytes) {
        return bytes % (1 << 20) == 0 ? (bytes >> 20) + "MiB" : bytes % 1024 == 0 ? (bytes >> 10) + "KiB" : bytes + "B";
    }

    /**
     * Runs every phase on every target at every thread count and value size, each size after its
     * warm-up; returns them ordered by thread count, value size, target, phase.
     */
    public List<Result> run(Progress progress) {
        List<Result> results = new ArrayList<>();
        Set<Integer> warm = new HashSet<>();
        for (int t : threads) {
            for (int size : plan.valueSizes()) {
                if (warm.add(size)) {
                    warmUp(size, progress);
                }
                long n = keysFor(keys, size);
                if (n < keys) {
                    notes.add(sizeLabel(size) + " values: " + String.format(Locale.ROOT, "%,d", n) + " keys, not "
                            + String.format(Locale.ROOT, "%,d", keys) + ", to keep at most " + size(VALUE_BUDGET)
                            + " of values in a store");
                }
                results.addAll(runTogether(n, t, size, false, progress));
            }
        }
        return results;
    }

    /**
     * The untimed warm-up at value size {@code size}, before the first phases at it: each size takes paths
     * of its own (a medium value's extent, a large one's blob), which the JIT would otherwise compile in
     * its first measured phases. Its note joins {@link #jit()}.
     */
    private void warmUp(int size, Progress progress) {
        long warm = Math.min(keys, WARM_UP_KEYS);
        long n = keysFor(warm, size);
        if (n > 0) {
            int most = Collections.max(threads);
            LongConsumer pass = k -> runTogether(k, 1, size, true, progress);
            LongConsumer together = k -> runTogether(k, most, size, true, progress);
            String note = (most > 1 ? "the quarters at " + most + " threads: " : "") // every store: the native ones' bindings are Java too
                    + JitSettle.warmUp(progress, n, warmUpPasses(warm, n), pass, together);
            jit = jit.isEmpty() ? note : jit + "; at " + sizeLabel(size) + " values, " + note;
        }
    }

    /**
     * Full warm-up passes of {@code n} keys (those of {@code warm} warm-up keys that fit the value budget)
     * that make {@link #MIN_WARM_UP_OPS} operations, or {@code warm} if fewer: the same for every store.
     */
    static int warmUpPasses(long warm, long n) {
        return (int) Math.max(1, (Math.min(warm, MIN_WARM_UP_OPS) + n - 1) / n);
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

    /** How each target was set up (a target that skipped every phase too), in run order. */
    public Map<KvTarget, String> setups() {
        return Collections.unmodifiableMap(setups);
    }

    /** The phases a target did not run, and why, in run order. */
    public List<Skipped> skipped() {
        return List.copyOf(skipped);
    }

    /** What the wait for the JIT after the warm-up saw ({@link JitSettle}), or empty. */
    public String jit() {
        return jit;
    }

    /**
     * What the table's reader must know beside the setups: key counts shrunk for large values, batches a
     * store rolled back and ran again ({@link KvStore#retries()}).
     */
    public List<String> notes() {
        return List.copyOf(notes);
    }

    /**
     * Opens a fresh store of every target and runs each phase on every target in turn before the next
     * phase: the runs a ratio compares are then seconds apart, not the length of a whole workload, and a
     * shared host's drift in speed over tens of seconds weighs on both sides alike. A target whose values
     * end below {@code valueBytes} skips them all.
     */
    private List<Result> runTogether(long n, int threads, int valueBytes, boolean warmUp, Progress progress) {
        List<AutoCloseable> open = new ArrayList<>();
        try {
            List<Run> runs = new ArrayList<>();
            // YCSB E inserts up to as many keys again
            long capacity = plan.families().contains(Family.YCSB) ? 2 * n : n;
            for (KvTarget target : targets) {
                ScratchFile home = ScratchFile.directory(dir, target.label() + "-");
                open.add(home);
                KvStore store = target.open(home.path(), capacity, valueBytes, cacheBytes);
                if (!warmUp) {
                    setups.putIfAbsent(target, store.describe());
                }
                open.add(store);
                runs.add(new Run(store, target.label(), n, threads, valueBytes, warmUp, progress));
            }
            List<List<Result>> byTarget = new ArrayList<>();
            runs.forEach(r -> byTarget.add(new ArrayList<>()));
            for (Step step : steps) {
                for (int i = 0; i < runs.size(); i++) {
                    Result r = runs.get(i).step(step);
                    if (r != null) {
                        byTarget.get(i).add(r);
                    }
                }
            }
            List<Result> results = new ArrayList<>();
            byTarget.forEach(results::addAll);
            return results;
        } finally {
            closeAll(open);
        }
    }

    private void skip(Step step, int valueBytes, String target, int threads, String why) {
        skipped.add(new Skipped(WORKLOAD, phaseName(step.label, valueBytes), target, threads, why));
    }

    /** Closes in reverse order (each store before its directory), every one even if some fail. */
    private static void closeAll(List<AutoCloseable> open) {
        RuntimeException failure = null;
        for (int i = open.size() - 1; i >= 0; i--) {
            try {
                open.get(i).close();
            } catch (Exception e) {
                if (failure == null) {
                    failure = e instanceof RuntimeException r ? r : new IllegalStateException(e);
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** {@code 1 GiB}, {@code 256 MiB}, {@code 1.5 MiB}: sizes in the stores' descriptions. */
    static String size(long bytes) {
        return bytes % (1 << 30) == 0 ? (bytes >> 30) + " GiB"
                : bytes % (1 << 20) == 0 ? (bytes >> 20) + " MiB"
                : String.format(Locale.ROOT, "%.1f MiB", bytes / 1048576.0);
    }

    /**
     * What a phase reads before its workers start: the CPU and GC meters, the store's counters and retries,
     * then the phase's timer, started last. Ferrite's counters read {@code /proc/self/task} (the JIT's
     * threads' CPU) and the process's faults: 0.8-3.5 ms, which the timer counted as the phase's own time
     * when it started first, a tenth to a half of a 256-operation phase of 1 MiB values (delete-1MiB lasted
     * 4-15 ms), against LMDB, which has no counters to read.
     */
    record Metered(CpuMeter.Sample cpu, GcMeter gc, Contention.Snapshot before, long retried, PhaseTimer timer) {
        static Metered start(KvStore store, Supplier<PhaseTimer> timer) {
            CpuMeter.Sample cpu = CpuMeter.sample();
            GcMeter gc = GcMeter.start();
            Contention.Snapshot before = store.counters();
            long retried = store.retries();
            return new Metered(cpu, gc, before, retried, timer.get());
        }
    }

    /** The phases on one fresh store at one thread count and value size. */
    private final class Run {
        private final KvStore store;
        private final String target;
        private final long n;
        private final int threads;
        private final int valueBytes;
        private final boolean warmUp;
        private final Progress progress;
        /** Keys each thread inserted, deleted, and entries it scanned (XOR of their words in scanXor). */
        private final long[] inserted, deleted, scanned, scanXor;
        /** Each thread's fold of the values it scanned, kept so that the reads cannot be skipped. */
        private final long[] scanFold;
        /** Of the keys YCSB E inserted (indexes from n up), those each thread deleted. */
        private final long[] deletedAdded;
        /** Indexes YCSB E handed out past n; those below 2n were put. */
        private final AtomicLong added = new AtomicLong();
        private final Zipfian zipfian;
        /** The last phase stopped at the time limit. */
        private boolean cut;
        /** The insert phase stopped at the time limit: not every key 0..n-1 is there. */
        private boolean loadCut;

        Run(KvStore store, String target, long n, int threads, int valueBytes, boolean warmUp, Progress progress) {
            this.store = store;
            this.target = target;
            this.n = n;
            this.threads = threads;
            this.valueBytes = valueBytes;
            this.warmUp = warmUp;
            this.progress = progress;
            this.inserted = new long[threads];
            this.deleted = new long[threads];
            this.scanned = new long[threads];
            this.scanXor = new long[threads];
            this.scanFold = new long[threads];
            this.deletedAdded = new long[threads];
            this.zipfian = new Zipfian(n);
        }

        /** Runs one step, in their order, with the checks that follow it; null if it was skipped. */
        Result step(Step step) {
            return switch (step) {
                case INSERT -> {
                    if (!warmUp) { // the load takes the most fresh memory of any phase: the same for every target
                        beforeLoad.accept(HostMemory.forValues(n * valueBytes));
                    }
                    Result r = phase(step, this::insert);
                    loadCut = cut;
                    store.check();
                    yield r;
                }
                case GET -> phase(step, this::get);
                case SCAN -> {
                    Result r = phase(step, this::scan);
                    verifyScan();
                    yield r;
                }
                case BATCH1, BATCH100, BATCH1000, YCSB_A, YCSB_B, YCSB_C, YCSB_E -> {
                    if (loadCut) {
                        if (!warmUp) {
                            skip(step, valueBytes, target, threads, "the load was cut short by the time limit");
                        }
                        yield null;
                    }
                    yield phase(step, step.batch > 0 ? (id, s, h, p) -> batch(step.batch, id, s, h, p)
                            : (id, s, h, p) -> ycsb(step, id, s, h, p));
                }
                case DELETE -> {
                    Result r = phase(step, this::delete);
                    verifyDeleted();
                    store.check();
                    yield r;
                }
            };
        }

        private long start(int id) {
            return KvKeys.sliceStart(n, id, threads);
        }

        /** The keys YCSB E inserted: indexes {@code n} up to this. */
        private long addedEnd() {
            return n + Math.min(added.get(), n);
        }

        private void insert(int id, KvStore.Session s, Latencies h, Phase p) {
            long lo = start(id);
            inserted[id] = writes(s, h, p, id, lo, start(id + 1), 0, true) - lo;
        }

        /** Thread {@code id}'s loaded keys, then its share of those YCSB E inserted. */
        private void delete(int id, KvStore.Session s, Latencies h, Phase p) {
            long lo = start(id);
            deleted[id] = writes(s, h, p, id, lo, lo + inserted[id], 0, false) - lo;
            long extra = addedEnd() - n;
            long from = n + KvKeys.sliceStart(extra, id, threads);
            deletedAdded[id] = writes(s, h, p, id, from, n + KvKeys.sliceStart(extra, id + 1, threads), deleted[id], false) - from;
        }

        /**
         * Puts or deletes keys {@code lo..hi-1}, {@link KvStore#writeBatch()} per commit, {@code before}
         * operations done already; returns the index reached (short of {@code hi} if stopped).
         */
        private long writes(KvStore.Session s, Latencies h, Phase p, int id, long lo, long hi, long before, boolean put) {
            byte[] key = new byte[KvKeys.KEY_MAX];
            byte[] value = KvKeys.newValue(valueBytes);
            int batch = store.writeBatch();
            long i = lo;
            long now = System.nanoTime();
            while (i < hi && !p.stop.get()) {
                int m = (int) Math.min(batch, hi - i);
                for (long end = i + m; i < end; i++) {
                    int kl = KvKeys.key(i, key);
                    if (put) {
                        KvKeys.value(i, value);
                        s.put(key, kl, value);
                    } else {
                        s.delete(key, kl);
                    }
                }
                s.commit();
                long t = System.nanoTime();
                h.record(now, t, m);
                now = t;
                p.done.set(id, before + i - lo);
            }
            return i;
        }

        /**
         * The thread's keys, each read and checked, pass after pass for {@link #scanNanos} as the scan's: one
         * pass of 100,000 keys lasts a tenth of a second, which a hiccup of a few milliseconds would move.
         */
        private void get(int id, KvStore.Session s, Latencies h, Phase p) {
            byte[] key = new byte[KvKeys.KEY_MAX];
            byte[] value = new byte[valueBytes];
            long lo = start(id);
            long hi = lo + inserted[id];
            long start = System.nanoTime(), now = start, done = 0;
            do {
                for (long i = lo; i < hi && !p.stop.get(); i++) {
                    checkGet(i, s.get(key, KvKeys.key(i, key), value), value);
                    long t = System.nanoTime();
                    h.record(now, t);
                    now = t;
                    p.done.set(id, ++done);
                }
            } while (!p.stop.get() && !warmUp && hi > lo && now - start < scanNanos);
        }

        private void checkGet(long i, int length, byte[] value) {
            if (length != valueBytes || KvKeys.word(value) != i) {
                throw new IllegalStateException(target + ": get of key #" + i + " found "
                        + (length < 0 ? "nothing" : length + " bytes starting " + Long.toHexString(KvKeys.word(value))));
            }
        }

        private void checkLength(int length) {
            if (length != valueBytes) {
                throw new IllegalStateException(target + ": scan found a value of " + length + " bytes, not " + valueBytes);
            }
        }

        /** The thread's share of n puts of keys drawn uniformly from the loaded, {@code size} per commit. */
        private void batch(int size, int id, KvStore.Session s, Latencies h, Phase p) {
            SplittableRandom random = new SplittableRandom(seed(id, size));
            byte[] key = new byte[KvKeys.KEY_MAX];
            byte[] value = KvKeys.newValue(valueBytes);
            long total = start(id + 1) - start(id);
            long done = 0;
            long now = System.nanoTime();
            while (done < total && !p.stop.get()) {
                int m = (int) Math.min(size, total - done);
                for (int j = 0; j < m; j++) {
                    putVersion(s, random.nextLong(n), random, key, value);
                }
                s.commit();
                long t = System.nanoTime();
                h.record(now, t);
                now = t;
                done += m;
                p.done.set(id, done);
            }
        }

        /**
         * One YCSB mix on this thread until its time is up (warm-up: its share of n operations): each
         * operation a read (E: a short scan) with the step's share, else an update (E: an insert of a new
         * key), keys chosen by the scrambled Zipfian; each a latency sample.
         */
        private void ycsb(Step mix, int id, KvStore.Session s, Latencies h, Phase p) {
            SplittableRandom random = new SplittableRandom(seed(id, mix.ordinal()));
            byte[] key = new byte[KvKeys.KEY_MAX];
            ExactKeys from = new ExactKeys();
            byte[] value = KvKeys.newValue(valueBytes);
            long ops = warmUp ? start(id + 1) - start(id) : Long.MAX_VALUE;
            boolean scans = mix == Step.YCSB_E;
            long now = System.nanoTime();
            for (long done = 0; done < ops && !p.stop.get(); ) {
                boolean read = mix.reads == 1 || random.nextDouble() < mix.reads;
                if (read && scans) {
                    shortScan(s, from.of(key, KvKeys.key(zipfian.next(random), key)), 1 + random.nextInt(SHORT_SCAN_MAX));
                } else if (read) {
                    long i = zipfian.next(random);
                    checkGet(i, s.get(key, KvKeys.key(i, key), value), value);
                } else {
                    long i;
                    if (scans) {
                        long a = added.getAndIncrement();
                        if (a >= n) {
                            return; // the keys have doubled: the store was sized for no more
                        }
                        i = n + a;
                    } else {
                        i = zipfian.next(random);
                    }
                    putVersion(s, i, random, key, value);
                    s.commit();
                }
                long t = System.nanoTime();
                h.record(now, t);
                now = t;
                p.done.set(id, ++done);
                if (!warmUp && t - p.start >= ycsbNanos) {
                    return;
                }
            }
        }

        /** Puts key {@code i} with a new version of its value (a random one), through the caller's buffers. */
        private static void putVersion(KvStore.Session s, long i, SplittableRandom random, byte[] key, byte[] value) {
            KvKeys.value(i, random.nextLong(), value);
            s.put(key, KvKeys.key(i, key), value);
        }

        /** Reads up to {@code length} entries from {@code from} on, checking each value's length. */
        private void shortScan(KvStore.Session s, byte[] from, int length) {
            try (KvStore.Scan scan = s.scan(from, null)) {
                for (int c = 0; c < length; c++) {
                    int l = scan.next();
                    if (l < 0) {
                        return;
                    }
                    checkLength(l);
                }
            }
        }

        private void scan(int id, KvStore.Session s, Latencies h, Phase p) {
            long start = System.nanoTime();
            long total = 0, folded = 0;
            for (int pass = 0; ; pass++) {
                long count = 0, xor = 0;
                try (KvStore.Scan scan = s.scan(KvKeys.boundary(id, threads), KvKeys.boundary(id + 1, threads))) {
                    long now = System.nanoTime();
                    for (boolean more = true; more && !p.stop.get(); ) {
                        int c = 0;
                        for (; c < SCAN_CHUNK; c++) {
                            int length = scan.next();
                            if (length < 0) {
                                more = false;
                                break;
                            }
                            checkLength(length);
                            xor ^= scan.word();
                            folded ^= scan.fold();
                        }
                        if (c > 0) {
                            long t = System.nanoTime();
                            h.record(now, t, c);
                            now = t;
                            count += c;
                            p.done.set(id, total + count);
                        }
                    }
                }
                if (pass == 0) {
                    scanned[id] = count;
                    scanXor[id] = xor;
                } else if (count != scanned[id] && !p.stop.get()) {
                    throw new IllegalStateException(target + ": scan pass " + pass + " returned " + count
                            + " entries, the first " + scanned[id]);
                }
                total += count;
                if (p.stop.get() || count == 0 || warmUp || System.nanoTime() - start >= scanNanos) {
                    scanFold[id] = folded;
                    return;
                }
            }
        }

        /** Every key inserted, each once: as many entries as inserts, and the XOR of their indexes. */
        private void verifyScan() {
            if (cut) {
                return;
            }
            long expectCount = 0, expectXor = 0, count = 0, xor = 0;
            for (int id = 0; id < threads; id++) {
                expectCount += inserted[id];
                for (long i = start(id), end = i + inserted[id]; i < end; i++) {
                    expectXor ^= i;
                }
                count += scanned[id];
                xor ^= scanXor[id];
            }
            if (count != expectCount || xor != expectXor) {
                throw new IllegalStateException(target + ": the scan returned " + count + " entries (XOR of indexes "
                        + Long.toHexString(xor) + "), expected " + expectCount + " (" + Long.toHexString(expectXor) + ")");
            }
        }

        /** What the deletes left: nothing, or what a cut-short delete phase did not get to. */
        private void verifyDeleted() {
            long expect = addedEnd() - n;
            for (int id = 0; id < threads; id++) {
                expect += inserted[id] - deleted[id] - deletedAdded[id];
            }
            long left = 0;
            try (KvStore.Session s = store.session(); KvStore.Scan scan = s.scan(null, null)) {
                while (scan.next() >= 0) {
                    left++;
                }
            }
            if (left != expect) {
                throw new IllegalStateException(target + ": " + left + " keys are left after the deletes, expected " + expect);
            }
        }

        /**
         * Runs {@code worker} on every thread with a session each (a batch phase: a {@link
         * KvStore#batchSession()} where the store has one); syncs the store after a writing step.
         */
        private Result phase(Step step, Worker worker) {
            String phase = phaseName(step.label, valueBytes);
            Phase p = new Phase(threads);
            Latencies[] hs = new Latencies[threads];
            String shown = (warmUp ? "warm-up " : "") + (threads == 1 ? phase : phase + " x" + threads);
            String workers = "kv-" + target + "-" + phase;
            Stalls watch = stallNanos > 0 && !warmUp ? Stalls.watch(stallNanos, workers + "-") : null;
            for (int i = 0; i < threads; i++) {
                hs[i] = new Latencies(watch);
            }
            Metered m = Metered.start(store, () -> new PhaseTimer(shown, target, limitNanos, progress));
            CpuMeter.Sample cpu = m.cpu();
            GcMeter gc = m.gc();
            Contention.Snapshot before = m.before();
            long retriedBefore = m.retried();
            PhaseTimer timer = m.timer();
            Throwable failure = Workers.run(threads, workers, timer, p.done::total, p.stop, id -> {
                KvStore.Session batching = step.batch > 0 ? store.batchSession() : null;
                try (KvStore.Session s = batching != null ? batching : store.session(); SchedClock clock = SchedClock.ofCurrentThread()) {
                    p.timed(id, clock, w -> worker.run(w, s, hs[w], p));
                }
            });
            if (failure != null) {
                timer.finish(System.nanoTime());
                if (watch != null) {
                    watch.close();
                }
                throw new IllegalStateException(phase + " on " + target + " with " + threads + " threads failed: " + failure, failure);
            }
            long synced = System.nanoTime();
            if (step.writes()) {
                store.sync();
            }
            long elapsed = timer.finish(System.nanoTime());
            long syncNanos = System.nanoTime() - synced;
            cut = p.stop.get();
            Histogram all = Result.newHistogram();
            for (Latencies h : hs) {
                all.add(h.histogram);
            }
            long ops = p.done.total();
            if (before != null && !warmUp) {
                contention.add(target + " " + shown + ": " + Contention.between(before, store.counters(), ops) + p.workers(syncNanos, ops));
            }
            if (watch != null) {
                stalls.add(target + " " + shown + ": " + watch.summary(ops));
            }
            long retried = store.retries() - retriedBefore;
            if (retried > 0 && !warmUp) {
                notes.add(String.format(Locale.ROOT, "%s %s: %,d batches lost a lock (timeout or deadlock), rolled back"
                        + " and run again: %.3f per batch committed", target, shown, retried, retried * (double) step.batch / ops));
            }
            return Result.of(WORKLOAD, phase, target, threads, ops * 1e9 / elapsed, UNIT, all)
                    .withCpus(CpuMeter.busyCpusSince(cpu)).withGc(gc.pauses());
        }
    }

    private interface Worker {
        void run(int id, KvStore.Session session, Latencies latencies, Phase phase);
    }

    /** A fixed random seed per thread and step: runs draw the same keys. */
    private static long seed(int id, int step) {
        return KvKeys.mix(((long) step << 32) | id);
    }

    /**
     * What a phase's threads share: the stop flag, each thread's count of operations done and when the
     * phase started.
     */
    private static final class Phase {
        final AtomicBoolean stop = new AtomicBoolean();
        final ThreadCounts done;
        final long start = System.nanoTime();
        /** Each worker's nanoseconds on a CPU (-1: no schedstat), runnable in a run queue, and in all, over its operations. */
        private final long[] onCpu, queued, wall;

        Phase(int threads) {
            this.done = new ThreadCounts(threads);
            this.onCpu = new long[threads];
            this.queued = new long[threads];
            this.wall = new long[threads];
        }

        /** A worker's operations, {@code work}, run on worker {@code id}'s thread, their time split by {@code clock} (null: none). */
        void timed(int id, SchedClock clock, Workers.Body work) throws Exception {
            long cpu = -1, waited = 0;
            if (clock != null) {
                clock.read();
                cpu = clock.onCpu;
                waited = clock.queued;
            }
            long began = System.nanoTime();
            work.run(id);
            wall[id] = System.nanoTime() - began;
            if (clock != null) {
                clock.read();
                onCpu[id] = clock.onCpu - cpu;
                queued[id] = clock.queued - waited;
            } else {
                onCpu[id] = -1;
            }
        }

        /** {@link Contention#workers} over every worker, with the closing sync's {@code syncNanos}. */
        String workers(long syncNanos, long ops) {
            long cpu = 0, waited = 0, all = 0;
            for (int i = 0; i < onCpu.length; i++) {
                if (onCpu[i] < 0) {
                    return "";
                }
                cpu += onCpu[i];
                waited += queued[i];
                all += wall[i];
            }
            return Contention.workers(cpu, waited, all, syncNanos, ops);
        }
    }
}
