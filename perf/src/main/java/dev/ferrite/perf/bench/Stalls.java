package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;

import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordedThread;
import jdk.jfr.consumer.RecordingStream;

/**
 * What a phase's slow operations spent their time on. Each operation that took at least the threshold is
 * split into:
 * <ul>
 *   <li><b>stopped</b>: every thread was held at a safepoint (JFR's GC pause and VM operation events),
 *       with the collector's pauses counted apart;</li>
 *   <li><b>waiting</b>: its own thread was parked, sleeping, or waiting for or on a monitor (JFR's events
 *       of 0.1 ms or more), by the first engine frame under the wait;</li>
 *   <li><b>on CPU</b>: its thread's CPU time, read once per operation, and where that time went: JFR's
 *       CPU-time samples of the thread inside the operation, one a millisecond of its CPU time, by the
 *       first engine frame on the stack;</li>
 *   <li><b>queued</b>: runnable but not running, in a run queue while other threads had the CPUs (Linux's
 *       schedstat, read with the CPU time; where the kernel keeps none, this is part of the rest);</li>
 *   <li><b>the rest</b>: inside a system call (I/O, a page fault, a lock in the kernel) or a wait shorter
 *       than JFR's threshold.</li>
 * </ul>
 * On a machine with fewer CPUs than busy threads, a tail made of queued time is the scheduler's.
 * Off unless asked for ({@code --stalls}): reading the clocks costs a system call per operation, and the
 * recording's events cost a stack trace each.
 */
final class Stalls {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    private static final Duration SHORTEST = Duration.ofNanos(100_000);
    private static final String[] WAITS = {"jdk.ThreadPark", "jdk.ThreadSleep", "jdk.JavaMonitorEnter", "jdk.JavaMonitorWait"};
    private static final String GC_PAUSE = "jdk.GCPhasePause";
    private static final String VM_OPERATION = "jdk.ExecuteVMOperation";
    /** Sampled by CPU time, in Java code or native, so samples fall in proportion to time on a CPU (JDK 25, experimental). */
    private static final String SAMPLE = "jdk.CPUTimeSample";
    /** Slow operations kept per thread; past it they are only counted. */
    static final int KEPT = 10_000;

    private final long threshold;
    private final String threadPrefix;
    private final RecordingStream stream;
    /** Epoch nanoseconds minus {@link System#nanoTime()}: where JFR's instants meet the workers' clock. */
    private final long epochOffset;
    private final ConcurrentLinkedQueue<Span> stops = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<Span> gcPauses = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<Wait> waits = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<Sample> samples = new ConcurrentLinkedQueue<>();
    private final List<Log> logs = new CopyOnWriteArrayList<>();

    /** A stretch of time in epoch nanoseconds. */
    private record Span(long start, long end) {
    }

    /** A thread's wait: where (the first engine frame under it) and when. */
    private record Wait(long thread, String where, Span span) {
    }

    /** A thread found on a CPU: where (the first engine frame) and when, in epoch nanoseconds. */
    private record Sample(long thread, String where, long at) {
    }

    private Stalls(long thresholdNanos, String threadPrefix) {
        this.threshold = thresholdNanos;
        this.threadPrefix = threadPrefix;
        this.stream = new RecordingStream();
        stream.enable(GC_PAUSE);
        stream.enable(VM_OPERATION).withThreshold(SHORTEST);
        stream.onEvent(GC_PAUSE, e -> {
            Span s = span(e);
            gcPauses.add(s);
            stops.add(s);
        });
        stream.onEvent(VM_OPERATION, e -> {
            if (e.getBoolean("safepoint")) {
                stops.add(span(e));
            }
        });
        for (String w : WAITS) {
            stream.enable(w).withThreshold(SHORTEST).withStackTrace();
            stream.onEvent(w, this::waited);
        }
        stream.enable(SAMPLE).with("throttle", "1ms").withStackTrace();
        stream.onEvent(SAMPLE, this::sampled);
        stream.startAsync();
        this.epochOffset = epochNanos(Instant.now()) - System.nanoTime();
    }

    /** Watches the operations of the threads named {@code threadPrefix}... that take {@code thresholdNanos} or more. */
    static Stalls watch(long thresholdNanos, String threadPrefix) {
        if (thresholdNanos <= 0) {
            throw new IllegalArgumentException("stall threshold " + thresholdNanos + " ns");
        }
        return new Stalls(thresholdNanos, threadPrefix);
    }

    /** A log for one worker thread; it belongs to the thread that first records in it. */
    Log log() {
        Log l = new Log();
        logs.add(l);
        return l;
    }

    /**
     * One worker's slow operations: start and end by {@link System#nanoTime()}, and its CPU time and run-queue
     * time over each (the latter -1 without schedstat).
     */
    final class Log {
        private final long[] starts = new long[KEPT], ends = new long[KEPT], cpus = new long[KEPT], queues = new long[KEPT];
        private int kept;
        private long dropped;
        private long thread = -1;
        private SchedClock sched;
        private long lastCpu, lastQueued;

        /** An operation from {@code start} to {@code end}: reads the thread's clocks, keeps it if slow. */
        void record(long start, long end) {
            boolean first = thread < 0;
            if (first) {
                thread = Thread.currentThread().threadId();
                sched = SchedClock.ofCurrentThread();
            }
            long cpu, queued;
            if (sched != null) {
                try {
                    sched.read();
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
                cpu = sched.onCpu;
                queued = sched.queued;
            } else {
                cpu = THREADS.getCurrentThreadCpuTime();
                queued = -1;
            }
            if (first) { // the first operation's start was not read: its CPU time is bounded by its length, its queued time unknown (none)
                lastCpu = cpu - Math.min(cpu, end - start);
                lastQueued = queued;
            }
            if (end - start >= threshold) {
                if (kept < KEPT) {
                    starts[kept] = start;
                    ends[kept] = end;
                    cpus[kept] = cpu - lastCpu;
                    queues[kept++] = queued < 0 ? -1 : queued - lastQueued;
                } else {
                    dropped++;
                }
            }
            lastCpu = cpu;
            lastQueued = queued;
        }

        /** Closes the thread's schedstat file, once its operations are done. */
        void closeClock() {
            if (sched != null) {
                sched.close();
            }
        }
    }

    /**
     * What the slow operations spent their time on, in nanoseconds summed over them.
     *
     * @param count   slow operations
     * @param dropped of those, how many past {@link #KEPT} of a thread were counted and not split
     * @param wall    their length
     * @param longest the longest
     * @param stopped time every thread was held at a safepoint
     * @param gc      of that, the collector's pauses
     * @param waited  time their own thread waited, outside safepoints
     * @param cpu     their thread's CPU time
     * @param queued  their thread's time runnable in a run queue; -1 where the kernel does not say
     * @param where   waits by the frame waited in
     * @param running CPU-time samples inside them, outside safepoints, by the first engine frame
     */
    record Split(long count, long dropped, long wall, long longest, long stopped, long gc, long waited, long cpu,
                 long queued, Map<String, Long> where, Map<String, Long> running) {
        /** The time not otherwise accounted for: in a system call or a short wait (and queued, where that is unknown). */
        long rest() {
            return wall - stopped - waited - cpu - Math.max(0, queued);
        }

        /** One line saying it, for a phase of {@code ops} operations watched at {@code threshold} nanoseconds. */
        String line(long ops, long threshold) {
            if (count + dropped == 0) {
                return String.format(Locale.ROOT, "no operation took %s or more", millis(threshold));
            }
            String places = top(where, wall);
            long samples = running.values().stream().mapToLong(Long::longValue).sum();
            String hot = samples == 0 ? "" : " (of " + String.format(Locale.ROOT, "%,d", samples) + " samples: " + top(running, samples) + ")";
            return String.format(Locale.ROOT, "%,d of %,d operations took %s or more (longest %s%s); of their %s: stopped %s"
                            + " (GC pauses %s), waiting %s%s, on CPU %s%s, %s",
                    count + dropped, ops, millis(threshold), millis(longest),
                    dropped == 0 ? "" : String.format(Locale.ROOT, "; %,d past the first %,d of a thread not split below", dropped, KEPT),
                    millis(wall), percent(stopped, wall), percent(gc, wall), percent(waited, wall),
                    places.isEmpty() ? "" : " (" + places + ")", percent(cpu, wall), hot,
                    queued < 0 ? "runnable or in the kernel " + percent(rest(), wall)
                            : "runnable but queued for a CPU " + percent(queued, wall) + ", in the kernel " + percent(rest(), wall));
        }

        /** The three largest parts of {@code whole}, largest first, each with its share. */
        private static String top(Map<String, Long> parts, long whole) {
            return parts.entrySet().stream()
                    .sorted(Map.Entry.<String, Long>comparingByValue(Comparator.reverseOrder()))
                    .limit(3)
                    .map(e -> e.getKey() + " " + percent(e.getValue(), whole))
                    .collect(Collectors.joining(", "));
        }
    }

    /** Stops watching and says what the slow operations of a phase of {@code ops} operations spent their time on. */
    String summary(long ops) {
        return split().line(ops, threshold);
    }

    /** Stops watching and splits the slow operations' time. */
    Split split() {
        stream.stop();
        stream.close();
        List<Span> stops = merge(this.stops);
        List<Span> paused = merge(gcPauses);
        Map<Long, List<Wait>> byThread = waits.stream().collect(Collectors.groupingBy(Wait::thread));
        Map<Long, List<Sample>> samplesByThread = samples.stream().sorted(Comparator.comparingLong(Sample::at))
                .collect(Collectors.groupingBy(Sample::thread));
        long count = 0, dropped = 0, wall = 0, longest = 0, stopped = 0, gc = 0, cpu = 0, waited = 0, queued = 0;
        Map<String, Long> where = new HashMap<>(), running = new HashMap<>();
        for (Log l : logs) {
            l.closeClock();
            dropped += l.dropped;
            List<Wait> mine = byThread.getOrDefault(l.thread, List.of());
            List<Sample> sampled = samplesByThread.getOrDefault(l.thread, List.of());
            for (int i = 0; i < l.kept; i++) {
                Span op = new Span(l.starts[i] + epochOffset, l.ends[i] + epochOffset);
                long length = op.end - op.start;
                long s = overlap(op, stops);
                long w = 0;
                for (Wait x : mine) {
                    Span clipped = clip(x.span, op);
                    if (clipped != null) {
                        long t = (clipped.end - clipped.start) - overlap(clipped, stops);
                        where.merge(x.where, t, Long::sum);
                        w += t;
                    }
                }
                w = Math.min(w, length - s);
                for (int j = firstAtOrAfter(sampled, op.start); j < sampled.size() && sampled.get(j).at < op.end; j++) {
                    Sample x = sampled.get(j);
                    if (!inside(x.at, stops)) {
                        running.merge(x.where, 1L, Long::sum);
                    }
                }
                count++;
                wall += length;
                longest = Math.max(longest, length);
                stopped += s;
                gc += overlap(op, paused);
                waited += w;
                long c = Math.min(l.cpus[i], length - s - w);
                cpu += c;
                queued = queued < 0 || l.queues[i] < 0 ? -1 : queued + Math.min(l.queues[i], length - s - w - c);
            }
        }
        return new Split(count, dropped, wall, longest, stopped, gc, waited, cpu, queued, Map.copyOf(where), Map.copyOf(running));
    }

    /** Stops watching, with no summary (the phase failed). */
    void close() {
        stream.close();
        logs.forEach(Log::closeClock);
    }

    private void waited(RecordedEvent e) {
        RecordedThread t = e.getThread();
        if (t == null || t.getJavaName() == null || !t.getJavaName().startsWith(threadPrefix)) {
            return;
        }
        waits.add(new Wait(t.getJavaThreadId(), where(e), span(e)));
    }

    private void sampled(RecordedEvent e) {
        RecordedThread t = e.getThread();
        if (t == null || t.getJavaName() == null || !t.getJavaName().startsWith(threadPrefix)) {
            return;
        }
        samples.add(new Sample(t.getJavaThreadId(), where(e), epochNanos(e.getStartTime())));
    }

    /** The first frame of the engine's under a wait; else the first outside the JDK; else the wait's own. */
    static String where(RecordedEvent e) {
        String kind = e.getEventType().getName().substring("jdk.".length());
        RecordedStackTrace trace = e.getStackTrace();
        if (trace == null) {
            return kind;
        }
        String outside = null;
        for (RecordedFrame f : trace.getFrames()) {
            if (!f.isJavaFrame()) {
                continue;
            }
            String type = f.getMethod().getType().getName();
            if (type.startsWith("dev.ferrite.") && !type.startsWith("dev.ferrite.perf.")) {
                return name(f);
            }
            if (outside == null && !type.startsWith("java.") && !type.startsWith("jdk.") && !type.startsWith("sun.")) {
                outside = name(f);
            }
        }
        return outside != null ? outside : kind;
    }

    private static String name(RecordedFrame f) {
        String type = f.getMethod().getType().getName();
        return type.substring(type.lastIndexOf('.') + 1) + "." + f.getMethod().getName();
    }

    private Span span(RecordedEvent e) {
        long start = epochNanos(e.getStartTime());
        return new Span(start, start + e.getDuration().toNanos());
    }

    private static long epochNanos(Instant i) {
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    /** The spans sorted and joined where they touch or overlap. */
    static List<Span> merge(Iterable<Span> spans) {
        List<Span> sorted = new ArrayList<>();
        spans.forEach(sorted::add);
        sorted.sort(Comparator.comparingLong(Span::start));
        List<Span> merged = new ArrayList<>();
        for (Span s : sorted) {
            Span last = merged.isEmpty() ? null : merged.getLast();
            if (last != null && s.start <= last.end) {
                merged.set(merged.size() - 1, new Span(last.start, Math.max(last.end, s.end)));
            } else {
                merged.add(s);
            }
        }
        return merged;
    }

    /** The index of the first of {@code sorted} (by time) at or after {@code at}. */
    private static int firstAtOrAfter(List<Sample> sorted, long at) {
        int lo = 0, hi = sorted.size();
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (sorted.get(mid).at < at) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    private static boolean inside(long at, List<Span> spans) {
        for (Span s : spans) {
            if (s.start > at) {
                return false;
            }
            if (at < s.end) {
                return true;
            }
        }
        return false;
    }

    /** Nanoseconds of {@code op} inside the sorted, disjoint {@code spans}. */
    private static long overlap(Span op, List<Span> spans) {
        long sum = 0;
        for (Span s : spans) {
            if (s.start >= op.end) {
                break;
            }
            Span c = clip(s, op);
            if (c != null) {
                sum += c.end - c.start;
            }
        }
        return sum;
    }

    private static Span clip(Span s, Span to) {
        long start = Math.max(s.start, to.start), end = Math.min(s.end, to.end);
        return start < end ? new Span(start, end) : null;
    }

    private static String millis(long nanos) {
        return String.format(Locale.ROOT, "%.1f ms", nanos / 1e6);
    }

    private static String percent(long part, long whole) {
        return String.format(Locale.ROOT, "%.0f%%", 100.0 * part / whole);
    }
}
