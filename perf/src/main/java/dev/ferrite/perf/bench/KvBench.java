package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

import org.HdrHistogram.Histogram;

/**
 * A key-value workload run the same way on each {@link KvTarget} in one run, each on a fresh store in a
 * directory of its own. The stores are open side by side and each phase runs on every target in turn
 * before the next phase starts (see {@link #runTogether}):
 * <ol>
 *   <li>{@code insert}: put keys {@code 0..N-1} ({@link KvKeys}: 16-40 bytes, in hashed order) with 64-byte
 *       values, then make them durable;</li>
 *   <li>{@code get}: get every key and check its value;</li>
 *   <li>{@code scan}: scan the whole key range forward, reading every value, pass after pass until a
 *       given time has gone by (one pass over a million keys takes a tenth of a second: too short to
 *       time against thread start-up and a noisy host); the warm-up makes one pass;</li>
 *   <li>{@code delete}: delete every key, then make that durable.</li>
 * </ol>
 * With T threads, thread t takes the t-th T-th of the indexes for inserts, gets and deletes, and the
 * t-th T-th of the key range for the scan. A phase's rate is its operations (scan: entries) over its
 * wall time, which includes the closing sync. Latencies are per operation: one sample per put, delete or
 * get, except that a write batch ({@link KvStore#writeBatch()} writes and their commit) contributes its
 * time divided by its size once per write in it, and a scan the time of each {@value #SCAN_CHUNK}
 * entries divided by {@value #SCAN_CHUNK}. Each thread count starts from a fresh store. A short warm-up
 * on each target comes first and is not reported, so that no target pays for the JIT in its numbers.
 *
 * <p>Checks, untimed: every get finds its value; the scans return every key once and every value (an
 * XOR of the values' index words); after the deletes a scan finds nothing left; the store's own checker
 * runs after the inserts and the deletes.
 */
public final class KvBench {
    public static final String WORKLOAD = "kv";
    public static final String INSERT = "insert";
    public static final String GET = "get";
    public static final String SCAN = "scan";
    public static final String DELETE = "delete";
    public static final List<String> PHASES = List.of(INSERT, GET, SCAN, DELETE);
    public static final String UNIT = "ops/s";
    public static final long MAX_KEYS = 1L << 32;
    public static final int MAX_THREADS = 256;
    static final int SCAN_CHUNK = 1024;
    /**
     * Warm-up keys per target: three tenths of the run's, at most this many. A split comes every ~27
     * inserts, and HotSpot compiles a method fully only after some 5,000 calls: with 100,000 keys Ferrite's
     * leaf split still ran unoptimized through the first third of a million-key insert phase.
     */
    static final long WARM_UP_KEYS = 300_000;
    private static final long NO_LIMIT = Long.MAX_VALUE / 4;

    private final Path dir;
    private final List<KvTarget> targets;
    private final long keys;
    private final List<Integer> threads;
    private final long cacheBytes;
    private final long limitNanos;
    private final long scanNanos;
    private final Map<KvTarget, String> setups = new LinkedHashMap<>();
    /** What Ferrite's threads waited on in each measured phase ({@link Contention}). */
    private final List<String> contention = new ArrayList<>();

    /**
     * @param dir          where the stores' files go (a directory per store, deleted after it)
     * @param targets      stores to run, in this order at each thread count
     * @param keys         keys to insert
     * @param threads      thread counts to run every phase at
     * @param cacheBytes   cache budget of the stores that take one: Ferrite, RocksDB, Xodus, MVStore
     * @param secondsLimit longest a phase may run, or 0 for no limit; a phase cut short leaves the later
     *                     ones to the keys the inserts got to
     * @param scanSeconds  how long the scan phase goes on starting new passes; 0 for one pass
     */
    public KvBench(Path dir, List<KvTarget> targets, long keys, List<Integer> threads, long cacheBytes, double secondsLimit,
                   double scanSeconds) {
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
    }

    /**
     * Runs the warm-up, then every phase on every target at every thread count; returns them ordered by
     * thread count, target, phase.
     */
    public List<Result> run(Progress progress) {
        long warmUp = Math.min(keys * 3 / 10, WARM_UP_KEYS);
        if (warmUp > 0) {
            runTogether(warmUp, 1, true, progress);
        }
        List<Result> results = new ArrayList<>();
        for (int t : threads) {
            results.addAll(runTogether(keys, t, false, progress));
        }
        return results;
    }

    /** Ferrite's counters over each measured phase, a line each ({@link Contention}). */
    public List<String> contention() {
        return List.copyOf(contention);
    }

    /** How each target that ran was set up, in run order. */
    public Map<KvTarget, String> setups() {
        return Collections.unmodifiableMap(setups);
    }

    /**
     * Opens a fresh store of every target and runs each phase on every target in turn before the next
     * phase: the runs a ratio compares are then seconds apart, not the length of a whole workload, and a
     * shared host's drift in speed over tens of seconds weighs on both sides alike.
     */
    private List<Result> runTogether(long n, int threads, boolean warmUp, Progress progress) {
        List<AutoCloseable> open = new ArrayList<>();
        try {
            List<Run> runs = new ArrayList<>();
            for (KvTarget target : targets) {
                ScratchFile home = ScratchFile.directory(dir, target.label() + "-");
                open.add(home);
                KvStore store = target.open(home.path(), n, cacheBytes);
                open.add(store);
                if (!warmUp) {
                    setups.putIfAbsent(target, store.describe());
                }
                runs.add(new Run(store, target.label(), n, threads, warmUp, progress));
            }
            List<List<Result>> byTarget = new ArrayList<>();
            runs.forEach(r -> byTarget.add(new ArrayList<>()));
            for (String phase : PHASES) {
                for (int i = 0; i < runs.size(); i++) {
                    byTarget.get(i).add(runs.get(i).step(phase));
                }
            }
            List<Result> results = new ArrayList<>();
            byTarget.forEach(results::addAll);
            return results;
        } finally {
            closeAll(open);
        }
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

    /** The four phases on one fresh store at one thread count. */
    private final class Run {
        private final KvStore store;
        private final String target;
        private final long n;
        private final int threads;
        private final boolean warmUp;
        private final Progress progress;
        /** Keys each thread inserted, deleted, and entries it scanned (XOR of their words in scanXor). */
        private final long[] inserted, deleted, scanned, scanXor;
        /** The last phase stopped at the time limit. */
        private boolean cut;

        Run(KvStore store, String target, long n, int threads, boolean warmUp, Progress progress) {
            this.store = store;
            this.target = target;
            this.n = n;
            this.threads = threads;
            this.warmUp = warmUp;
            this.progress = progress;
            this.inserted = new long[threads];
            this.deleted = new long[threads];
            this.scanned = new long[threads];
            this.scanXor = new long[threads];
        }

        /** Runs one of {@link #PHASES}, in their order, with the checks that follow it. */
        Result step(String name) {
            return switch (name) {
                case INSERT -> {
                    Result r = phase(INSERT, true, this::insert);
                    store.check();
                    yield r;
                }
                case GET -> phase(GET, false, this::get);
                case SCAN -> {
                    Result r = phase(SCAN, false, this::scan);
                    verifyScan();
                    yield r;
                }
                case DELETE -> {
                    Result r = phase(DELETE, true, this::delete);
                    verifyDeleted();
                    store.check();
                    yield r;
                }
                default -> throw new IllegalArgumentException("no phase " + name);
            };
        }

        private long start(int id) {
            return KvKeys.sliceStart(n, id, threads);
        }

        private void insert(int id, KvStore.Session s, Histogram h, Phase p) {
            writes(id, s, h, p, inserted, true);
        }

        private void delete(int id, KvStore.Session s, Histogram h, Phase p) {
            writes(id, s, h, p, deleted, false);
        }

        /** Puts or deletes thread {@code id}'s keys, {@link KvStore#writeBatch()} per commit. */
        private void writes(int id, KvStore.Session s, Histogram h, Phase p, long[] count, boolean put) {
            byte[] key = new byte[KvKeys.KEY_MAX];
            byte[] value = new byte[KvKeys.VALUE];
            int batch = store.writeBatch();
            long lo = start(id);
            long hi = put ? start(id + 1) : lo + inserted[id];
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
                h.recordValueWithCount((t - now) / m, m);
                now = t;
                p.done.set(id, i - lo);
            }
            count[id] = i - lo;
        }

        private void get(int id, KvStore.Session s, Histogram h, Phase p) {
            byte[] key = new byte[KvKeys.KEY_MAX];
            byte[] value = new byte[KvKeys.VALUE];
            long lo = start(id);
            long hi = lo + inserted[id];
            long now = System.nanoTime();
            for (long i = lo; i < hi && !p.stop.get(); i++) {
                int length = s.get(key, KvKeys.key(i, key), value);
                if (length != KvKeys.VALUE || KvKeys.word(value) != i) {
                    throw new IllegalStateException(target + ": get of key #" + i + " found "
                            + (length < 0 ? "nothing" : length + " bytes starting " + Long.toHexString(KvKeys.word(value))));
                }
                long t = System.nanoTime();
                h.recordValue(t - now);
                now = t;
                p.done.set(id, i + 1 - lo);
            }
        }

        private void scan(int id, KvStore.Session s, Histogram h, Phase p) {
            long start = System.nanoTime();
            long total = 0;
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
                            if (length != KvKeys.VALUE) {
                                throw new IllegalStateException(target + ": scan found a value of " + length + " bytes");
                            }
                            xor ^= scan.word();
                        }
                        if (c > 0) {
                            long t = System.nanoTime();
                            h.recordValueWithCount((t - now) / c, c);
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
            long expect = 0;
            for (int id = 0; id < threads; id++) {
                expect += inserted[id] - deleted[id];
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

        /** Runs {@code worker} on every thread with a session each; syncs the store after them if asked. */
        private Result phase(String phase, boolean sync, Worker worker) {
            Phase p = new Phase(threads);
            Histogram[] hs = new Histogram[threads];
            String shown = (warmUp ? "warm-up " : "") + (threads == 1 ? phase : phase + " x" + threads);
            PhaseTimer timer = new PhaseTimer(shown, target, limitNanos, progress);
            for (int i = 0; i < threads; i++) {
                hs[i] = Result.newHistogram();
            }
            CpuMeter.Sample cpu = CpuMeter.sample();
            Contention.Snapshot before = store.counters();
            Throwable failure = Workers.run(threads, "kv-" + target + "-" + phase, timer, p.done::total, p.stop, id -> {
                try (KvStore.Session s = store.session()) {
                    worker.run(id, s, hs[id], p);
                }
            });
            if (failure != null) {
                timer.finish(System.nanoTime());
                throw new IllegalStateException(phase + " on " + target + " with " + threads + " threads failed: " + failure, failure);
            }
            if (sync) {
                store.sync();
            }
            long elapsed = timer.finish(System.nanoTime());
            cut = p.stop.get();
            Histogram all = Result.newHistogram();
            for (Histogram h : hs) {
                all.add(h);
            }
            if (before != null && !warmUp) {
                contention.add(target + " " + shown + ": " + Contention.between(before, store.counters(), all.getTotalCount()));
            }
            return Result.of(WORKLOAD, phase, target, threads, all.getTotalCount() * 1e9 / elapsed, UNIT, all)
                    .withCpus(CpuMeter.busyCpusSince(cpu));
        }
    }

    private interface Worker {
        void run(int id, KvStore.Session session, Histogram latencies, Phase phase);
    }

    /** What a phase's threads share: the stop flag and each thread's count of operations done. */
    private static final class Phase {
        final AtomicBoolean stop = new AtomicBoolean();
        final ThreadCounts done;

        Phase(int threads) {
            this.done = new ThreadCounts(threads);
        }
    }
}
