package dev.ferrite.perf.bench;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import javax.management.NotificationEmitter;
import javax.management.openmbean.CompositeData;

import com.sun.management.GarbageCollectionNotificationInfo;

/**
 * The collector's pauses over a phase, from the JVM's collector beans: how many, and the longest. The
 * beans of concurrent cycles (ZGC's and Shenandoah's "... Cycles") are left out, as their time is not
 * a pause; G1's "G1 Concurrent GC" counts only its remark and cleanup pauses, so it counts, but its
 * notifications time the whole cycle and so do not set the longest pause. The beans give whole
 * milliseconds: a pause under one reads as 0. Phases are measured one at a time (the longest pause is
 * kept for the JVM, reset by {@link #start}).
 */
final class GcMeter {
    /** Pauses over a phase; {@code longestMillis} is -1 where no notification said how long one took. */
    record Pauses(long count, long totalMillis, long longestMillis) {
    }

    private static final List<GarbageCollectorMXBean> PAUSING = ManagementFactory.getGarbageCollectorMXBeans().stream()
            .filter(b -> !b.getName().endsWith("Cycles"))
            .toList();
    private static final AtomicLong LONGEST = new AtomicLong(-1);

    static {
        for (GarbageCollectorMXBean b : PAUSING) {
            if (b instanceof NotificationEmitter e && !b.getName().equals("G1 Concurrent GC")) {
                e.addNotificationListener((n, handback) -> {
                    if (GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION.equals(n.getType())) {
                        long ms = GarbageCollectionNotificationInfo.from((CompositeData) n.getUserData()).getGcInfo().getDuration();
                        LONGEST.accumulateAndGet(ms, Math::max);
                    }
                }, null, null);
            }
        }
    }

    private final long count0, millis0;

    private GcMeter() {
        long c = 0, t = 0;
        for (GarbageCollectorMXBean b : PAUSING) {
            c += Math.max(0, b.getCollectionCount());
            t += Math.max(0, b.getCollectionTime());
        }
        count0 = c;
        millis0 = t;
    }

    /** Starts measuring a phase. */
    static GcMeter start() {
        LONGEST.set(-1);
        return new GcMeter();
    }

    /** The pauses since {@link #start}. */
    Pauses pauses() {
        GcMeter now = new GcMeter();
        long count = now.count0 - count0;
        return new Pauses(count, now.millis0 - millis0, count == 0 ? 0 : LONGEST.get());
    }
}
