package dev.ferrite.perf.bench;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;

import javax.management.JMException;
import javax.management.ObjectName;

/**
 * The untimed warm-up before a workload's measured phases, and the wait for the JIT to catch up with it.
 * The warm-up runs twice, the second time briefly on fresh stores and threads: the optimizing compiler
 * leaves out branches its profile never saw taken, and a new store or thread takes some at once (a cold
 * cache's first miss, a thread's first use of its buffers), which threw the big compiled B-tree methods
 * out and had them compiled again during the first measured phase (3.3 s of compile time in a 4 s insert
 * phase of a 1M-key {@code bench kv}, one of 2 vCPUs). Then brief passes repeat while the compiler is
 * still busy during one: code that runs once per many operations (a leaf split every ~40 inserts) had
 * not reached C2's thresholds after the first passes, ran as profiled C1 code through the measured phase
 * and was compiled in it (C2 then took about a third of a 300k-key insert phase's JVM CPU). Last, the
 * run waits for the compiles under way. Native targets compile nothing and lose nothing by the repeats.
 */
final class JitSettle {
    /** How often the compiler's total time is read; settled is a step with under 5% of one CPU compiling. */
    private static final long STEP_MILLIS = 500;
    /** The longest wait: a compiler still busy after this is left to it. */
    private static final long MAX_MILLIS = 30_000;
    /** A repeat pass counts as settled when the JIT's threads used under this share of the JVM's CPU through it. */
    private static final double QUIET_SHARE = 0.10;
    /** The repeats stop after this many times the first pass's time at most, or {@link #MAX_MILLIS}. */
    private static final int MAX_REPEAT_FACTOR = 2;

    /**
     * Compile tasks under way or queued that still count as settled: the harness's own threads keep a
     * few small ones coming.
     */
    private static final int QUIET_QUEUE = 2;

    private JitSettle() {
    }

    /**
     * Compile tasks under way or queued, by HotSpot's {@code Compiler.queue} diagnostic command (one line
     * each), or 0 where that is not there: the compile time alone looks quiet while one long compile
     * runs, and a backlog on a loaded machine held small methods at the first tiers for tens of seconds.
     */
    static int queued() {
        try {
            Object text = ManagementFactory.getPlatformMBeanServer().invoke(new ObjectName("com.sun.management:type=DiagnosticCommand"),
                    "compilerQueue", new Object[] {null}, new String[] {String[].class.getName()});
            int tasks = 0;
            for (String line : text.toString().split("\n")) {
                String l = line.strip();
                if (!l.isEmpty() && !l.endsWith(":") && !l.equals("Empty")) {
                    tasks++;
                }
            }
            return tasks;
        } catch (JMException | RuntimeException e) {
            return 0;
        }
    }

    /** {@link #warmUp(Progress, long, int, LongConsumer, LongConsumer)} with one full pass. */
    static String warmUp(Progress progress, long n, LongConsumer pass, LongConsumer repeat) {
        return warmUp(progress, n, 1, pass, repeat);
    }

    /**
     * Warms up by {@code pass}: {@code passes} times with {@code n} operations, then with a tenth of them;
     * then by {@code repeat} with a quarter of them while the JIT's threads used more than a tenth of the
     * JVM's CPU through the last one, for at most {@link #MAX_REPEAT_FACTOR} times the first pass's time
     * (and {@link #MAX_MILLIS}); then {@link #await}s the compiles under way. Returns a note of both.
     */
    static String warmUp(Progress progress, long n, int passes, LongConsumer pass, LongConsumer repeat) {
        long start = System.nanoTime();
        pass.accept(n);
        long first = System.nanoTime() - start;
        for (int i = 1; i < passes; i++) {
            pass.accept(n);
        }
        pass.accept(Math.max(1, n / 10));
        int repeats = whileBusy(() -> repeat.accept(Math.max(1, n / 4)), first);
        String settle = await(progress, System.nanoTime() - start);
        return String.format(Locale.ROOT, "warm-up of %s%,d operations, a tenth and %d quarter%s more on fresh stores while the JIT was busy; ",
                passes == 1 ? "" : passes + " passes of ", n, repeats, repeats == 1 ? "" : "s") + settle;
    }

    /**
     * Runs {@code repeat} again while the JIT's threads used more than a tenth of the JVM's CPU through the
     * last run, for at most {@link #MAX_REPEAT_FACTOR} times {@code firstNanos} (the first warm-up pass's
     * time) and {@link #MAX_MILLIS}; returns how many times it ran (none where the JVM does not count
     * compile time).
     */
    static int whileBusy(Runnable repeat, long firstNanos) {
        int repeats = 0;
        if (Contention.compilerCpuNanos() >= 0 && Contention.processCpuNanos() >= 0) {
            long limit = Math.min(TimeUnit.MILLISECONDS.toNanos(MAX_MILLIS), MAX_REPEAT_FACTOR * firstNanos);
            long repeatStart = System.nanoTime();
            boolean busy = true;
            while (busy && System.nanoTime() - repeatStart < limit) {
                long compiled = Contention.compilerCpuNanos(), used = Contention.processCpuNanos();
                repeat.run();
                repeats++;
                busy = Contention.compilerCpuNanos() - compiled > QUIET_SHARE * (Contention.processCpuNanos() - used);
            }
        }
        return repeats;
    }

    /**
     * Waits, showing it on {@code progress}, until a step passes with the compiler almost idle and its
     * queue (nearly) empty, or for at
     * most as long as the warm-up took ({@code warmUpNanos}; a small run's compiles weigh little), or 30
     * s; returns a note saying how long it took and how much was compiled, or an empty string where the
     * JVM does not count compile time.
     */
    static String await(Progress progress, long warmUpNanos) {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        if (jit == null || !jit.isCompilationTimeMonitoringSupported()) {
            return "";
        }
        long maxMillis = Math.min(MAX_MILLIS, TimeUnit.NANOSECONDS.toMillis(warmUpNanos));
        long step = Math.max(1, Math.min(STEP_MILLIS, maxMillis));
        long start = System.nanoTime();
        long first = jit.getTotalCompilationTime(), last = first;
        boolean settled = false;
        while (!settled && TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) < maxMillis) {
            try {
                Thread.sleep(step);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
            long now = jit.getTotalCompilationTime();
            settled = now - last < Math.max(1, step / 20) && queued() <= QUIET_QUEUE;
            last = now;
            progress.update("jit", "settling", last - first, "ms compiled", System.nanoTime() - start);
        }
        progress.done();
        return String.format(Locale.ROOT, "after the warm-up the JIT %s in %.1f s (%,d ms of compile time meanwhile)",
                settled ? "settled" : "was still compiling", (System.nanoTime() - start) / 1e9, last - first);
    }
}
