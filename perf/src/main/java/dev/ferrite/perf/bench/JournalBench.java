package dev.ferrite.perf.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

import org.HdrHistogram.Histogram;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.internal.SharedFlush;
import dev.ferrite.journal.internal.Journal;
import dev.ferrite.journal.JournalOptions;
import dev.ferrite.journal.JournalStats;
import dev.ferrite.journal.internal.LogGeometry;
import dev.ferrite.journal.internal.ReplayItem;
import dev.ferrite.journal.internal.Replayer;
import dev.ferrite.journal.internal.Reservation;
import dev.ferrite.journal.internal.Transaction;
import dev.ferrite.journal.testkit.TestItem;

/**
 * The journal on a real device (O_DIRECT), each phase beside what the device does without it in the same
 * run:
 * <ul>
 *   <li>{@code forced-commit} at each thread count: every thread commits a one-item transaction and
 *       forces it, over and over; the rate is durable commits per second, the latency begin-to-durable.
 *       Baseline ({@code device}): the same threads each writing a 4 KiB block and then waiting for an
 *       fdatasync begun after the write, which the waiters share (leader and followers, as a database's
 *       write-ahead log groups its commits): what the device can do for concurrent durable commits. The
 *       two alternate in rounds of about a second, as the log-write sides do (below); before, every device
 *       phase ran first and the journal's some tens of seconds later, so that a drifting host made either
 *       side look better;</li>
 *   <li>{@code log-write}: one thread commits large transactions (32 whole blocks logged each, a word
 *       changed in every sector) without forcing; background checkpoints carry them to the log; the rate
 *       is the payload (the bytes the transactions logged) per second, record overhead not counted.
 *       Baseline: 1 MiB sequential O_DIRECT writes over the same region. The two alternate in rounds of
 *       about a second, each side's rate its total over its rounds, so that a host whose speed drifts
 *       during the run (shared machines do) weighs on both alike. Each journal round first logs untimed
 *       for a quarter of its length, so that what is timed is the steady state (checkpoints and the
 *       AIL's write-back under way), not a start from an empty log; after it the journal is drained,
 *       untimed, so that its write-back does not run into the device's round. A second baseline
 *       ({@code device-flushed}) writes the same way with an fdatasync each time it has written as much as
 *       the journal's checkpoints hold on average in the run so far: the flush per checkpoint that the log
 *       pays so that recovery can trust every checkpoint before the last one it finds (XFS, too, flushes
 *       before each checkpoint's commit record). On a disk whose flush writes back what its cache took in,
 *       that flush and not the log's CPU sets the log's rate (docs/journal.md, "Log bandwidth"); this
 *       baseline shows how far the same flushes take the device alone.</li>
 * </ul>
 * The device holds a home region for the items ({@value #HOME_BLOCKS} blocks) followed by the log, written
 * over once before anything is measured (a new file's first writes allocate its blocks). Both sides are
 * warmed up alike before their timed phases: each forced-commit side runs untimed for up to a second
 * with the most threads, and the log-write sides for a round each.
 */
public final class JournalBench {
    public static final String WORKLOAD = "journal";
    public static final String FORCED_COMMIT = "forced-commit";
    public static final String LOG_WRITE = "log-write";
    public static final String BASELINE = "device";
    /** The log-write baseline with a flush per checkpoint's worth of writes. */
    public static final String FLUSHED = "device-flushed";
    static final int HOME_BLOCKS = 16_384;
    static final int BIG_TX_ITEMS = 32;
    /**
     * Items the large transactions cycle through: more than a default push threshold (32 MiB) of them, so
     * each checkpoint carries new items rather than relogs of a few (which delayed logging would fold
     * into almost nothing).
     */
    static final int BIG_TX_POOL = 12_288;
    static final long WARM_UP_NANOS = 1_000_000_000L;
    private static final int BS = DeviceOptions.DEFAULT_BLOCK_SIZE;
    private static final String FERRITE = "ferrite";
    private static final int SEQ_BYTES = 1 << 20;

    private final Path path;
    private final long size;
    private final int logBlocks;
    private final double seconds;
    private final List<Integer> threads;
    /** Length of the phase about to run: the warm-up's, then {@code seconds}. */
    private long phaseNanos;
    /** Position in the item pool and the value last written, carried from one log-write round to the next. */
    private int nextItem;
    private long value;
    /** The journal's counters over each Ferrite phase ({@link Contention#journal}), a line each. */
    private final List<String> contention = new ArrayList<>();
    /** Checkpoints the log-write rounds (the warm-up's too) wrote, and their bytes: what {@link #FLUSHED} flushes after. */
    private long checkpoints;
    private long checkpointBytes;

    /**
     * @param path    file or block device; its contents are lost
     * @param size    bytes of it to use: the home region plus the log
     * @param seconds length of each phase
     * @param threads committing thread counts for the forced-commit phases
     */
    public JournalBench(Path path, long size, double seconds, List<Integer> threads) {
        long logBytes = size - (long) HOME_BLOCKS * BS;
        if (logBytes < 64L << 20) {
            throw new IllegalArgumentException("a device of " + size + " bytes leaves less than 64 MiB for the log"
                    + " after the " + HOME_BLOCKS * (long) BS / (1 << 20) + " MiB home region");
        }
        this.path = path;
        this.size = size;
        this.logBlocks = (int) Math.min(logBytes / BS, Integer.MAX_VALUE);
        this.seconds = seconds;
        this.threads = List.copyOf(threads);
        this.phaseNanos = Math.round(seconds * 1e9);
    }

    public List<Result> run(Progress progress) {
        List<Result> results = new ArrayList<>();
        LogGeometry geometry = new LogGeometry(HOME_BLOCKS, logBlocks);
        try (DirectDevice device = DirectDevice.open(path, DeviceOptions.defaults().withSize(size));
             Arena arena = Arena.ofShared()) {
            MemorySegment seqBuffer = filled(arena.allocate(SEQ_BYTES, BlockDevice.BUFFER_ALIGNMENT));
            layOut(device, geometry, seqBuffer, progress);
            int maxThreads = threads.stream().mapToInt(Integer::intValue).max().orElse(1);
            phaseNanos = Math.min(phaseNanos, WARM_UP_NANOS);
            groupCommits(device, maxThreads, arena, progress, "warm-up ");
            Journal.format(device, geometry);
            TestItem[] commitItems = new TestItem[maxThreads];
            for (int i = 0; i < maxThreads; i++) {
                commitItems[i] = new TestItem(1 + i, BS, arena);
            }
            TestItem[] pool = new TestItem[BIG_TX_POOL];
            for (int i = 0; i < pool.length; i++) {
                pool[i] = new TestItem(1 + maxThreads + i, BS, arena);
            }
            try (Journal journal = Journal.open(device, geometry, JournalOptions.defaults(), FRESH_LOG)) {
                // untimed, so that no phase pays for the JIT compiling the commit, format and write paths
                phaseNanos = Math.min(phaseNanos, WARM_UP_NANOS);
                forcedCommitLap(journal, maxThreads, commitItems, progress, "warm-up ");
                sequentialWrite(device, seqBuffer, new Tally(geometry), WARM_UP_NANOS, Long.MAX_VALUE, BASELINE, progress, "warm-up ");
                logWrite(journal, pool, new Tally(geometry), WARM_UP_NANOS, progress, "warm-up ", false);
                int rounds = (int) Math.max(1, Math.round(seconds));
                phaseNanos = Math.round(seconds * 1e9) / rounds;
                for (int t : threads) {
                    forcedCommitRounds(device, journal, t, commitItems, arena, rounds, progress, results);
                }
                phaseNanos = Math.round(seconds * 1e9);
                long slice = phaseNanos / rounds;
                Tally direct = new Tally(geometry);
                Tally logged = new Tally(geometry);
                Tally flushed = new Tally(geometry);
                long flushEvery = 0;
                for (int r = 1; r <= rounds; r++) {
                    String shown = rounds == 1 ? "" : "round " + r + "/" + rounds + " ";
                    sequentialWrite(device, seqBuffer, direct, slice, Long.MAX_VALUE, BASELINE, progress, shown);
                    logWrite(journal, pool, logged, slice, progress, shown, r == rounds);
                    flushEvery = meanCheckpointBytes();
                    sequentialWrite(device, seqBuffer, flushed, slice, flushEvery, FLUSHED, progress, shown);
                }
                results.add(direct.result(BASELINE));
                results.add(flushed.result(FLUSHED));
                results.add(logged.result(FERRITE));
                contention.add(String.format(Locale.ROOT, "%s (log-write's second baseline): 1 MiB writes with a flush after each %,.1f MiB,"
                        + " the journal's mean checkpoint in this run", FLUSHED, flushEvery / (double) (1 << 20)));
            }
        }
        return results;
    }

    /** The journal's counters over each Ferrite phase that {@link #run} measured, a line each. */
    public List<String> contention() {
        return contention;
    }

    /** A freshly formatted log has nothing to replay; being asked to is a bug. */
    private static final Replayer FRESH_LOG = new Replayer() {
        @Override
        public boolean replay(ReplayItem item) {
            throw new IllegalStateException("benchmark log was just formatted, yet recovery found " + item);
        }

        @Override
        public void finish() {
        }
    };

    /** What one side of the log-write comparison did over its rounds. */
    private static final class Tally {
        final Histogram h = Result.newHistogram();
        final long first;
        final long end;
        long bytes;
        long nanos;
        /** Where the device side writes next: it goes round the log region. */
        long block;

        Tally(LogGeometry g) {
            first = g.start();
            end = g.start() + g.blocks() - SEQ_BYTES / BS;
            block = first;
        }

        Result result(String target) {
            return Result.of(WORKLOAD, LOG_WRITE, target, 1, bytes / (double) nanos * 1e3, "MB/s", h);
        }
    }

    /** Writes the whole log region once, untimed, so that no measured write allocates a new file's blocks. */
    private static void layOut(BlockDevice device, LogGeometry g, MemorySegment buf, Progress progress) {
        int step = SEQ_BYTES / BS;
        long end = g.start() + g.blocks();
        long count = 0;
        long start = System.nanoTime();
        for (long block = g.start(); block < end; block += step, count++) {
            if (block + step <= end) {
                device.write(block, buf);
            } else {
                device.write(block, buf.asSlice(0, (end - block) * BS));
            }
            if ((count & 255) == 0) {
                progress.update("lay out", BASELINE, count, System.nanoTime() - start + 1);
            }
        }
        device.flush();
        progress.done();
    }

    /**
     * 1 MiB writes round the log region for {@code nanos} as side {@code target}, with a flush after each
     * {@code flushEvery} bytes ({@link Long#MAX_VALUE}: none but the last, which is timed too).
     */
    private void sequentialWrite(BlockDevice device, MemorySegment buf, Tally tally, long nanos, long flushEvery, String target,
                                 Progress progress, String shown) {
        int step = SEQ_BYTES / BS;
        PhaseTimer timer = new PhaseTimer(shown + LOG_WRITE, target, nanos, progress);
        long now = timer.start();
        long start = now;
        long count = 0;
        long unflushed = 0;
        do {
            device.write(tally.block, buf);
            tally.block = tally.block + step > tally.end ? tally.first : tally.block + step;
            unflushed += SEQ_BYTES;
            if (unflushed >= flushEvery) {
                device.flush();
                unflushed = 0;
            }
            long t = System.nanoTime();
            tally.h.recordValue(t - now);
            now = t;
            count++;
        } while (timer.running(count, now));
        device.flush();
        long end = System.nanoTime();
        timer.finish(end);
        tally.bytes += count * SEQ_BYTES;
        tally.nanos += end - start;
    }

    /** The journal's mean checkpoint in the log-write rounds so far, in whole {@link #SEQ_BYTES} writes (at least one). */
    private long meanCheckpointBytes() {
        return flushInterval(checkpoints, checkpointBytes);
    }

    /** {@code bytes} over {@code checkpoints}, rounded to whole 1 MiB writes, at least one. */
    static long flushInterval(long checkpoints, long bytes) {
        long mean = checkpoints == 0 ? SEQ_BYTES : bytes / checkpoints;
        return Math.max(1, Math.round(mean / (double) SEQ_BYTES)) * SEQ_BYTES;
    }

    /**
     * Forced commits at {@code n} threads, device and journal alternating in {@code rounds} laps each (the
     * side that starts alternating too), so that a host whose speed drifts during the run weighs on both
     * alike; each side's rate is its commits over its laps' time, its CPU the process's over its laps.
     */
    private void forcedCommitRounds(BlockDevice device, Journal journal, int n, TestItem[] items, Arena arena, int rounds,
                                    Progress progress, List<Result> results) {
        Lap direct = null;
        Lap logged = null;
        long directCpu = 0;
        long loggedCpu = 0;
        JournalStats before = journal.stats();
        for (int r = 1; r <= rounds; r++) {
            String shown = rounds == 1 ? "" : "round " + r + "/" + rounds + " ";
            for (int side = 0; side < 2; side++) {
                long cpu = Contention.processCpuNanos();
                if ((side + r) % 2 == 1) {
                    direct = groupCommitLap(device, n, arena, progress, shown).plus(direct);
                    directCpu += Contention.processCpuNanos() - cpu;
                } else {
                    logged = forcedCommitLap(journal, n, items, progress, shown).plus(logged);
                    loggedCpu += Contention.processCpuNanos() - cpu;
                }
            }
        }
        results.add(direct.result(BASELINE, n));
        results.add(logged.result(FERRITE, n));
        JournalStats after = journal.stats();
        // AIL hand-offs through the ring: each wakes its consumer thread, a cost of the commits beside the
        // committer's; a forcer that inserts its own checkpoint makes none
        contention.add(FORCED_COMMIT + " x" + n + ": " + Contention.journal(before, after, logged.ops())
                + String.format(Locale.ROOT, ", AIL hand-offs %,d, checkpoints forcers inserted themselves %,d; JVM CPU %.1f µs/op (device %.1f µs/op)",
                after.ailInsertBatches() - before.ailInsertBatches(), after.ailForcerInserts() - before.ailForcerInserts(),
                loggedCpu / 1e3 / Math.max(1, logged.ops()),
                directCpu / 1e3 / Math.max(1, direct.ops())));
    }

    Result groupCommits(BlockDevice device, int n, Arena arena, Progress progress, String shown) {
        return groupCommitLap(device, n, arena, progress, shown).result(BASELINE, n);
    }

    /**
     * The device's forced commits: each thread writes its own 4 KiB block (beyond the journal items' homes)
     * and then waits for an fdatasync begun after its write, shared by the waiters.
     */
    private Lap groupCommitLap(BlockDevice device, int n, Arena arena, Progress progress, String shown) {
        MemorySegment buf = filled(arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT));
        SharedFlush flushes = new SharedFlush(device::flush);
        long last = Math.min(device.blockCount(), HOME_BLOCKS) - 1; // counted down from the home region's end
        return parallel(shown + FORCED_COMMIT, BASELINE, n, progress, (id, h, stop, ops) -> {
            long now = System.nanoTime();
            while (!stop.get()) {
                device.write(last - id, buf);
                flushes.flush();
                long t = System.nanoTime();
                h.recordValue(t - now);
                ops.increment();
                now = t;
            }
        });
    }

    private Lap forcedCommitLap(Journal journal, int n, TestItem[] items, Progress progress, String shown) {
        return parallel(shown + FORCED_COMMIT, FERRITE, n, progress, (id, h, stop, ops) -> {
            TestItem item = items[id];
            long value = 0;
            long now = System.nanoTime();
            while (!stop.get()) {
                Transaction tx = journal.begin(Reservation.items(1));
                long seq;
                item.lock.lock();
                try {
                    item.image().set(ValueLayout.JAVA_LONG, TestItem.DATA_OFF, ++value);
                    tx.log(item, TestItem.DATA_OFF, Long.BYTES);
                    seq = tx.commit();
                } finally {
                    item.lock.unlock();
                }
                journal.force(seq);
                long t = System.nanoTime();
                h.recordValue(t - now);
                ops.increment();
                now = t;
            }
        });
    }

    /** One round of large transactions; {@code counted}: the journal's counters over its timed part go in {@link #contention()}. */
    private void logWrite(Journal journal, TestItem[] pool, Tally tally, long nanos, Progress progress, String shown,
                          boolean counted) {
        long leadIn = System.nanoTime() + nanos / 4;
        while (System.nanoTime() - leadIn < 0) { // untimed: into the steady state
            logOne(journal, pool);
        }
        Histogram h = tally.h;
        JournalStats before = journal.stats();
        long[] threadCpu = counted ? logWriteThreadCpu() : null;
        long cpu = Contention.processCpuNanos();
        PhaseTimer timer = new PhaseTimer(shown + LOG_WRITE, FERRITE, nanos, progress);
        long now = timer.start();
        long count = 0;
        long start = now;
        do {
            logOne(journal, pool);
            long t = System.nanoTime();
            h.recordValue(t - now);
            now = t;
            count++;
        } while (timer.running(count, now));
        journal.forceAll();
        long elapsed = System.nanoTime() - start;
        timer.finish(System.nanoTime());
        long payload = count * BIG_TX_ITEMS * (long) (BS - TestItem.DATA_OFF);
        tally.bytes += payload;
        tally.nanos += elapsed;
        JournalStats after = journal.stats();
        checkpoints += after.checkpoints() - before.checkpoints();
        checkpointBytes += after.checkpointBytes() - before.checkpointBytes();
        if (counted) {
            long cpuAfter = Contention.processCpuNanos();
            contention.add(LOG_WRITE + " (its last round, " + BIG_TX_ITEMS + "-block transactions): "
                    + Contention.journal(before, after, count) + Contention.cpu(cpu, cpuAfter, count)
                    + perMiB(threadCpu, logWriteThreadCpu(), payload) + logBusy(before, after, elapsed));
        }
        journal.quiesce(); // untimed: the device's round starts with nothing of the journal's in flight
    }

    /**
     * "; log device busy 93% of the round (writes 27%, flushes 66%)": the share of the round the log writer
     * spent in its writes and flushes, which one after another are what the device allows a log that flushes
     * each checkpoint before the next (issue 21): near 100%, the journal runs at that rate, and the gap to the
     * unflushed baseline is the flushes'. A write or flush under way as the round starts counts whole, so a
     * busy device may show a few percent over 100.
     */
    private static String logBusy(JournalStats before, JournalStats after, long nanos) {
        double writes = (after.logWriteNanos() - before.logWriteNanos()) * 100.0 / nanos;
        double flushes = (after.logFlushNanos() - before.logFlushNanos()) * 100.0 / nanos;
        return String.format(Locale.ROOT, "; log device busy %.0f%% of the round (writes %.0f%%, flushes %.0f%%)",
                writes + flushes, writes, flushes);
    }

    /** The log-write threads whose CPU {@link #perMiB} reports, in its order. */
    private static final String[] LOG_WRITE_THREADS = {"ferrite-cil-push", "ferrite-log-io", "ferrite-ail"};

    /**
     * CPU time so far of the committing (this) thread, then of each of {@link #LOG_WRITE_THREADS} (the AIL's
     * two threads together); -1 where unknown.
     */
    private static long[] logWriteThreadCpu() {
        var mx = ManagementFactory.getThreadMXBean();
        long[] t = new long[1 + LOG_WRITE_THREADS.length];
        t[0] = mx.isCurrentThreadCpuTimeSupported() ? mx.getCurrentThreadCpuTime() : -1;
        for (int i = 0; i < LOG_WRITE_THREADS.length; i++) {
            t[1 + i] = Contention.threadCpuNanos(LOG_WRITE_THREADS[i]);
        }
        return t;
    }

    /**
     * "; thread CPU per MiB logged: committer 0.31, ferrite-cil-push 0.22, ...ms": what each stage of the log
     * write costs per MiB of payload, a figure that, unlike the rate, a loaded host hardly moves (issue 21:
     * the committer's copy into the shadow, the push thread's copy into the record and its checksum).
     */
    private static String perMiB(long[] before, long[] after, long payloadBytes) {
        StringBuilder b = new StringBuilder("; thread CPU per MiB logged:");
        double mib = payloadBytes / (double) (1 << 20);
        for (int i = 0; i < before.length; i++) {
            String name = i == 0 ? "committer" : LOG_WRITE_THREADS[i - 1] + (i == LOG_WRITE_THREADS.length ? "*" : "");
            b.append(i == 0 ? " " : ", ").append(name).append(' ');
            b.append(before[i] < 0 || after[i] < 0 ? "?" : String.format(Locale.ROOT, "%.3f", (after[i] - before[i]) / 1e6 / mib));
        }
        return b.append(" ms").toString();
    }

    /** One large transaction: {@value #BIG_TX_ITEMS} items from the pool, each logged whole, not forced. */
    private void logOne(Journal journal, TestItem[] pool) {
        Transaction tx = journal.begin(Reservation.items(BIG_TX_ITEMS));
        long seq;
        TestItem[] batch = new TestItem[BIG_TX_ITEMS];
        for (int i = 0; i < BIG_TX_ITEMS; i++) {
            batch[i] = pool[nextItem];
            nextItem = nextItem + 1 == pool.length ? 0 : nextItem + 1;
            batch[i].lock.lock();
        }
        try {
            value++;
            for (TestItem it : batch) {
                // a change in every 512-byte sector, the whole block logged: what the journal moves is
                // the point here, not what the caller spends rewriting its blocks
                for (int off = TestItem.DATA_OFF; off < BS; off += 512) {
                    it.image().set(ValueLayout.JAVA_LONG_UNALIGNED, off, value);
                }
                tx.log(it, TestItem.DATA_OFF, BS - TestItem.DATA_OFF);
            }
            seq = tx.commit();
        } finally {
            for (TestItem it : batch) {
                it.lock.unlock();
            }
        }
        journal.throttle(seq);
    }

    interface Worker {
        void run(int id, Histogram h, java.util.concurrent.atomic.AtomicBoolean stop, LongAdder ops) throws Exception;
    }

    /** One side's forced commits over one or more laps: latencies merged, operations and wall time summed. */
    private record Lap(Histogram h, long ops, long nanos) {
        /** This lap and {@code earlier} (null: none) together. */
        Lap plus(Lap earlier) {
            if (earlier == null) {
                return this;
            }
            Histogram all = Result.newHistogram();
            all.add(earlier.h);
            all.add(h);
            return new Lap(all, earlier.ops + ops, earlier.nanos + nanos);
        }

        Result result(String target, int threads) {
            return Result.of(WORKLOAD, FORCED_COMMIT, target, threads, ops * 1e9 / nanos, "commits/s", h);
        }
    }

    /** Runs {@code n} copies of {@code worker} for one lap; latencies merged. */
    private Lap parallel(String phase, String target, int n, Progress progress, Worker worker) {
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        LongAdder ops = new LongAdder();
        Histogram[] hs = new Histogram[n];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> ts = new ArrayList<>();
        PhaseTimer timer = new PhaseTimer(phase + " x" + n, target, nanos(), progress);
        for (int i = 0; i < n; i++) {
            int id = i;
            hs[i] = Result.newHistogram();
            Thread t = new Thread(() -> {
                try {
                    worker.run(id, hs[id], stop, ops);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                    stop.set(true);
                }
            }, "bench-" + phase + "-" + i);
            ts.add(t);
            t.start();
        }
        long start = timer.start();
        try {
            while (timer.running(ops.sum(), System.nanoTime()) && !stop.get()) {
                Thread.sleep(20);
            }
            stop.set(true);
            for (Thread t : ts) {
                t.join();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        long elapsed = timer.finish(System.nanoTime());
        if (failure.get() != null) {
            throw new IllegalStateException(phase + " with " + n + " threads failed: " + failure.get(), failure.get());
        }
        Histogram all = Result.newHistogram();
        for (Histogram h : hs) {
            all.add(h);
        }
        return new Lap(all, all.getTotalCount(), elapsed);
    }

    private long nanos() {
        return phaseNanos;
    }

    private static MemorySegment filled(MemorySegment s) {
        for (long off = 0; off < s.byteSize(); off += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, off, off * 0x9E3779B97F4A7C15L);
        }
        return s;
    }
}
