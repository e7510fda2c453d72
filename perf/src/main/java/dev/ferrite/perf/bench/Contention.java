package dev.ferrite.perf.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

import dev.ferrite.btree.CacheStats;
import dev.ferrite.btree.LatchStats;
import dev.ferrite.dir.InodeCacheStats;
import dev.ferrite.dir.StripeStats;
import dev.ferrite.dir.ValueWriteStats;
import dev.ferrite.dir.Volume;
import dev.ferrite.journal.JournalStats;

/**
 * Where Ferrite's threads waited and what they paid over one phase, from the journal's, the buffer
 * cache's, the B-trees', the key and name stripes' and the inode cache's counters: the harness's stand-in for the kernel's lockstat.
 * Printed after each Ferrite phase of {@code kv}, {@code meta}, {@code randwrite}, {@code dbench} and (the
 * journal's part alone) {@code journal}, per
 * operation where that reads better; on a FUSE mount also the requests the mount served per operation.
 */
public final class Contention {
    /**
     * The counters at one moment.
     *
     * @param values   the device writes of the tables' values kept in extents
     * @param fuse     the requests a FUSE mount of the volume served, per operation; empty when not mounted
     * @param cpuNanos CPU time this JVM's threads have used (collector and compilers included), -1 if the
     *                 platform does not say
     * @param jitNanos the part of it the JIT compilers' threads used, -1 if unknown
     * @param minorFaults page faults this JVM's threads have taken that needed no I/O ({@link #processMinorFaults()}), -1 if unknown
     */
    public record Snapshot(JournalStats journal, CacheStats cache, LatchStats latches, InodeCacheStats inodes,
                           StripeStats stripes, ValueWriteStats values, Map<String, Long> fuse, long cpuNanos, long jitNanos,
                           long minorFaults) {
        /** {@code volume}'s counters now. */
        public static Snapshot of(Volume volume) {
            return of(volume, Map.of());
        }

        /** {@code volume}'s counters now, with the requests its mount served ({@link dev.ferrite.dir.FileSystemMount#requestCounts}). */
        public static Snapshot of(Volume volume, Map<String, Long> fuse) {
            return new Snapshot(volume.journalStats(), volume.cacheStats(), volume.latchStats(), volume.inodeCacheStats(),
                    volume.stripeStats(), volume.valueWriteStats(), Map.copyOf(fuse), processCpuNanos(), compilerCpuNanos(),
                    processMinorFaults());
        }
    }

    private Contention() {
    }

    /** What happened between {@code a} and {@code b}, over {@code ops} operations, on one line. */
    public static String between(Snapshot a, Snapshot b, long ops) {
        CacheStats c0 = a.cache(), c1 = b.cache();
        StripeStats s0 = a.stripes(), s1 = b.stripes();
        LatchStats latches = b.latches().since(a.latches());
        long n = Math.max(1, ops);
        return journal(a.journal(), b.journal(), ops) + String.format(Locale.ROOT,
                "; cache misses %.3f/op, evictions %,d, write-backs %,d, dirty waits %,d; "
                        + "B-tree restarts %s, lost locks %s, waits %s; key-stripe waits %,d (%.1f ms), name-stripe waits %,d (%.1f ms); "
                        + "inode-cache misses %.3f/op, evictions %,d",
                (c1.misses() - c0.misses()) / (double) n,
                c1.leafEvictions() - c0.leafEvictions() + c1.interiorEvictions() - c0.interiorEvictions(),
                c1.writeBacks() - c0.writeBacks(), c1.dirtyWaits() - c0.dirtyWaits(),
                byLevel(latches.restarts(), latches.headerIndex()), byLevel(latches.lockFailures(), latches.headerIndex()),
                byLevel(latches.waits(), latches.headerIndex(), latches.otherWaits()),
                s1.keyWaits() - s0.keyWaits(), (s1.keyWaitNanos() - s0.keyWaitNanos()) / 1e6,
                s1.nameWaits() - s0.nameWaits(), (s1.nameWaitNanos() - s0.nameWaitNanos()) / 1e6,
                (b.inodes().misses() - a.inodes().misses()) / (double) n, b.inodes().evictions() - a.inodes().evictions())
                + values(a.values(), b.values()) + cpu(a.cpuNanos(), b.cpuNanos(), a.jitNanos(), b.jitNanos(), n) + faults(a.minorFaults(), b.minorFaults(), n)
                + requests(a.fuse(), b.fuse(), n);
    }

    /**
     * "; minor faults 0.52/op": pages this JVM took from the kernel per operation (fresh heap, fresh cache
     * frames; a huge page populated counts one), "" if unknown. On a virtual machine each 4 KiB page's first
     * touch costs 6-15 µs, so a phase that touches memory never used before pays for it in its JVM CPU.
     */
    static String faults(long before, long after, long ops) {
        return before < 0 || after < 0 ? "" : String.format(Locale.ROOT, "; minor faults %.2f/op", (after - before) / (double) ops);
    }

    /**
     * Minor page faults this JVM's threads have taken so far (field 10 of {@code /proc/self/stat}, those of
     * threads that ended included), -1 where that cannot be read.
     */
    static long processMinorFaults() {
        try {
            String stat = Files.readString(Path.of("/proc/self/stat"));
            return Long.parseLong(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[7]);
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /**
     * "; table values written 16,384 (in the background 12,160, by puts at the budget 0) in 310 writes of
     * 256.0 MiB at 2,310 MB/s, 52 blocks copied": who wrote the values kept in extents, in how many device
     * writes, how fast the device took them while they were being written, and what was copied into the
     * staging buffer for them (see {@link ValueWriteStats}); "" in a phase that wrote none.
     */
    static String values(ValueWriteStats a, ValueWriteStats b) {
        long written = b.written() - a.written();
        if (written == 0) {
            return "";
        }
        long bytes = b.bytes() - a.bytes(), nanos = b.writeNanos() - a.writeNanos();
        return String.format(Locale.ROOT, "; table values written %,d (in the background %,d, by puts at the budget %,d) in %,d writes of %.1f MiB%s, %,d blocks copied",
                written, b.inBackground() - a.inBackground(), b.atBudget() - a.atBudget(), b.writes() - a.writes(), bytes / (double) (1 << 20),
                nanos > 0 ? String.format(Locale.ROOT, " at %,d MB/s", Math.round(bytes * 1e3 / nanos)) : "", b.blocksCopied() - a.blocksCopied());
    }

    /**
     * "; JVM CPU 12.3 µs/op": CPU time this JVM used per operation, the engine's background threads, the
     * collector and the JIT compilers included (a short phase early in a run pays for much of the
     * compiling); "" if unknown. Unlike busy CPUs over rate it does not count other processes, so it
     * compares builds on a shared machine (cache and memory-bus contention still inflate it a little); it
     * does not count the kernel's threads working for the JVM (a loop device's workers), and the other
     * targets of the run may have threads of their own in this JVM.
     */
    static String cpu(long before, long after, long ops) {
        return cpu(before, after, -1, -1, ops);
    }

    /**
     * {@link #cpu(long, long, long)} with the compilers' part in parentheses where known, "; JVM CPU 12.3
     * µs/op (JIT 2.1)": in phases of seconds the JIT still compiles what only the measured run's size
     * heats, on the CPU the engine's background threads would otherwise have, and the kernel file systems
     * and native stores beside it pay nothing of the kind.
     */
    static String cpu(long before, long after, long jitBefore, long jitAfter, long ops) {
        if (before < 0 || after < 0) {
            return "";
        }
        String jit = jitBefore < 0 || jitAfter < 0 ? "" : String.format(Locale.ROOT, " (JIT %.1f)", (jitAfter - jitBefore) / 1e3 / ops);
        return String.format(Locale.ROOT, "; JVM CPU %.1f µs/op%s", (after - before) / 1e3 / ops, jit);
    }

    /**
     * "; workers on a CPU 1.40 µs/op, queued for one 3.10, blocked 0.20; sync 2.1 ms": where the phase's
     * worker threads' time went, summed over them from each one's schedstat ({@link SchedClock}) across its
     * operations and divided by the phase's, then the closing sync's wall time; "" if the kernel keeps no
     * schedstats. A phase's rate is its wall time, and on a shared machine that is the workers' CPU plus
     * their time runnable without a CPU (other processes, the JIT's compiler threads, the engine's
     * background threads) plus their time blocked (parked, in I/O): what the JVM's CPU alone cannot tell.
     *
     * @param onCpu  the workers' nanoseconds on a CPU, -1 if unknown
     * @param queued their nanoseconds runnable in a run queue
     * @param wall   their nanoseconds from first operation to last, summed over the workers
     */
    static String workers(long onCpu, long queued, long wall, long syncNanos, long ops) {
        if (onCpu < 0) {
            return "";
        }
        long n = Math.max(1, ops);
        return String.format(Locale.ROOT, "; workers on a CPU %.2f µs/op, queued for one %.2f, blocked %.2f; sync %.1f ms",
                onCpu / 1e3 / n, queued / 1e3 / n, Math.max(0, wall - onCpu - queued) / 1e3 / n, syncNanos / 1e6);
    }

    /**
     * CPU time this JVM's JIT compiler threads have used so far, in nanoseconds, found by the names HotSpot
     * gives them ("C1 CompilerThread...", "C2 CompilerThread..."; see {@link #threadCpuNanos}); -1 where that
     * cannot be read.
     */
    static long compilerCpuNanos() {
        return threadCpuNanos("C1 CompilerThre", "C2 CompilerThre");
    }

    /**
     * CPU time so far, in nanoseconds, of this JVM's live threads whose name starts with one of
     * {@code prefixes} (each cut to the 15 characters of {@code comm}): the first field of each one's
     * {@code /proc/self/task/TID/schedstat}, as {@link SchedClock} reads its own thread's; -1 where that
     * cannot be read. A thread that ended meanwhile is not counted.
     */
    static long threadCpuNanos(String... prefixes) {
        long nanos = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path t : tasks) {
                try {
                    String name = Files.readString(t.resolve("comm"));
                    for (String p : prefixes) {
                        if (name.startsWith(p.length() > 15 ? p.substring(0, 15) : p)) {
                            String stat = Files.readString(t.resolve("schedstat"));
                            nanos += Long.parseLong(stat.substring(0, stat.indexOf(' ')));
                            break;
                        }
                    }
                } catch (IOException e) {
                    // the thread ended meanwhile
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return nanos;
    }

    /** CPU time this JVM has used so far, -1 if the platform does not say. */
    static long processCpuNanos() {
        return ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os
                ? os.getProcessCpuTime() : -1;
    }

    /** The journal's part of {@link #between}: what it logged, waited on and wrote home over {@code ops} operations. */
    public static String journal(JournalStats j0, JournalStats j1, long ops) {
        long n = Math.max(1, ops);
        long checkpoints = j1.checkpoints() - j0.checkpoints();
        long grantWaits = j1.reserveWaits() - j0.reserveWaits() + j1.writeWaits() - j0.writeWaits();
        long grantNanos = j1.reserveWaitNanos() - j0.reserveWaitNanos() + j1.writeWaitNanos() - j0.writeWaitNanos();
        return String.format(Locale.ROOT,
                "log %,.0f B/op in %,d checkpoints (%,.1f items each), %,.3f transactions/op, %,d forces, %,d log flushes (a checkpoint's write %,.0f µs, "
                        + "its flushes %,.0f µs); grant-head CAS retries %,d, "
                        + "waits %,d (%,.1f ms), CIL throttles %,d (%,.1f ms); AIL pusher wake-ups %,d, written home %,d (%,d early)",
                (j1.checkpointBytes() - j0.checkpointBytes()) / (double) n, checkpoints,
                checkpoints == 0 ? 0.0 : (j1.checkpointItems() - j0.checkpointItems()) / (double) checkpoints,
                (j1.commits() - j0.commits()) / (double) n,
                j1.forces() - j0.forces(), j1.logFlushes() - j0.logFlushes(),
                (j1.logWriteNanos() - j0.logWriteNanos()) / 1e3 / Math.max(1, checkpoints),
                (j1.logFlushNanos() - j0.logFlushNanos()) / 1e3 / Math.max(1, checkpoints), j1.grantCasRetries() - j0.grantCasRetries(), grantWaits, grantNanos / 1e6, j1.commitThrottles() - j0.commitThrottles(),
                (j1.commitThrottleNanos() - j0.commitThrottleNanos()) / 1e6, j1.ailPusherWakeups() - j0.ailPusherWakeups(),
                j1.ailWrittenBack() - j0.ailWrittenBack(), j1.ailWrittenEarly() - j0.ailWrittenEarly());
    }

    /** "; FUSE requests/op: getattr 3.00, create 1.00": the requests served between the two, most first; "" if none. */
    static String requests(Map<String, Long> a, Map<String, Long> b, long ops) {
        StringBuilder sb = new StringBuilder();
        b.entrySet().stream()
                .map(e -> Map.entry(e.getKey(), e.getValue() - a.getOrDefault(e.getKey(), 0L)))
                .filter(e -> e.getValue() > 0)
                .sorted(Map.Entry.<String, Long>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey()))
                .forEach(e -> sb.append(sb.isEmpty() ? "" : ", ").append(e.getKey())
                        .append(String.format(Locale.ROOT, " %.2f", e.getValue() / (double) ops)));
        return sb.isEmpty() ? "" : "; FUSE requests/op: " + sb;
    }

    /**
     * "0", or the total and where it fell: "12 (leaf 9, L1 2, header 1)", levels counted up from the
     * leaves, {@code header} the trees' headers, {@code other} every other block (group headers, inode chunks, ...).
     */
    static String byLevel(long[] counts, int headerIndex) {
        return byLevel(counts, headerIndex, Map.of());
    }

    /**
     * {@link #byLevel(long[], int)}, with the other blocks' count split by their kind, most first:
     * "other 3 [FINO 2, FAGI 1]" (an inode block's and a group's inode header's magic).
     */
    static String byLevel(long[] counts, int headerIndex, Map<String, Long> other) {
        long total = 0;
        StringBuilder where = new StringBuilder();
        for (int i = 0; i < counts.length; i++) {
            if (counts[i] == 0) {
                continue;
            }
            total += counts[i];
            where.append(where.isEmpty() ? "" : ", ")
                    .append(i == 0 ? "leaf" : i < headerIndex ? "L" + i : i == headerIndex ? "header" : "other")
                    .append(' ').append(String.format(Locale.ROOT, "%,d", counts[i]));
            if (i == counts.length - 1 && !other.isEmpty()) {
                where.append(other.entrySet().stream()
                        .sorted(Map.Entry.<String, Long>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey()))
                        .map(e -> e.getKey() + String.format(Locale.ROOT, " %,d", e.getValue()))
                        .collect(Collectors.joining(", ", " [", "]")));
            }
        }
        return total == 0 ? "0" : String.format(Locale.ROOT, "%,d (%s)", total, where);
    }
}
