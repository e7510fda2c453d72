package dev.ferrite.perf.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.junit.jupiter.api.Test;

import dev.ferrite.btree.CacheStats;
import dev.ferrite.btree.LatchStats;
import dev.ferrite.dir.InodeCacheStats;
import dev.ferrite.dir.StripeStats;
import dev.ferrite.dir.ValueWriteStats;
import dev.ferrite.journal.JournalStats;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The contention line: differences of the volume's counters over a phase, per operation where it says so. */
class ContentionTest {
    private static JournalStats journal(long bytes, long checkpoints, long items, long forces, long casRetries, long waits,
                                        long waitNanos, long throttles, long throttleNanos, long wakeups, long written, long early) {
        // each checkpoint took 1 ms to write and 3 ms to flush
        return new JournalStats(0, forces, checkpoints, bytes, items, checkpoints + forces, checkpoints * 1_000_000, checkpoints * 3_000_000, waits, waitNanos, waits, waitNanos, casRetries, 0, 0, 0, 0,
                wakeups, written, early, 0, 0, 0, 0, throttles, throttleNanos, 0);
    }

    /** Three levels, then the header's entry and the other blocks'. */
    private static LatchStats latches(long[] restarts, long[] lockFailures, long[] waits) {
        return new LatchStats(restarts, lockFailures, waits);
    }

    /** As {@link #latches(long[], long[], long[])}, with the other blocks' waits by kind. */
    private static LatchStats latches(long[] restarts, long[] lockFailures, long[] waits, Map<String, Long> other) {
        return new LatchStats(restarts, lockFailures, waits, new java.util.TreeMap<>(other));
    }

    private static CacheStats cache(long misses, long evictions, long writeBacks, long dirtyWaits) {
        return new CacheStats(100, 50, 0, misses, 0, evictions, evictions, writeBacks, dirtyWaits);
    }

    @Test
    void aPhaseIsTheDifferenceOfTwoSnapshots() {
        Contention.Snapshot a = new Contention.Snapshot(journal(1000, 2, 20, 1, 5, 1, 1_000_000, 0, 0, 3, 10, 1), cache(5, 1, 2, 0),
                latches(new long[] {1, 0, 0, 0, 0}, new long[] {0, 0, 0, 0, 0}, new long[] {2, 2, 0, 0, 1}, Map.of("FAGI", 1L)),
                new InodeCacheStats(1000, 10, 7, 0), new StripeStats(4, 1_000_000, 1, 0), new ValueWriteStats(10, 2, 1, 5, 8, 40_960, 1_000_000), Map.of(),
                5_000_000, 1_000_000, 40);
        Contention.Snapshot b = new Contention.Snapshot(journal(41_000, 6, 420, 3, 12, 2, 3_000_000, 2, 4_500_000, 5, 30, 4),
                cache(105, 3, 9, 1),
                latches(new long[] {1_501, 2, 0, 1, 0}, new long[] {0, 0, 0, 0, 0}, new long[] {5, 2, 0, 0, 4}, Map.of("FAGI", 1L, "FINO", 2L, "FAGF", 1L)),
                new InodeCacheStats(1000, 1000, 57, 40), new StripeStats(9, 3_500_000, 1, 0), new ValueWriteStats(1_210, 802, 1, 45, 1_008, 5_283_840, 3_500_000),
                Map.of(), 6_250_000, 1_200_000, 92);
        assertEquals("log 400 B/op in 4 checkpoints (100.0 items each), 0.000 transactions/op, 2 forces, 6 log flushes (a checkpoint's write 1,000 µs, its flushes 3,000 µs); grant-head CAS retries 7, waits 2 (4.0 ms), "
                + "CIL throttles 2 (4.5 ms); AIL pusher wake-ups 2, written home 20 (3 early); "
                + "cache misses 1.000/op, evictions 4, write-backs 7, dirty waits 1; "
                + "B-tree restarts 1,503 (leaf 1,500, L1 2, header 1), lost locks 0, waits 6 (leaf 3, other 3 [FINO 2, FAGF 1]); "
                + "key-stripe waits 5 (2.5 ms), name-stripe waits 0 (0.0 ms); inode-cache misses 0.500/op, evictions 40; "
                + "table values written 1,200 (in the background 800, by puts at the budget 0) in 40 writes of 5.0 MiB at 2,097 MB/s, 1,000 blocks copied; "
                + "JVM CPU 12.5 µs/op (JIT 2.0); minor faults 0.52/op", Contention.between(a, b, 100));
    }

    @Test
    void aPhaseThatWroteNoTableValueSaysNothingOfThem() {
        ValueWriteStats v = new ValueWriteStats(7, 3, 1, 4, 2, 28_672, 9_000);
        assertEquals("", Contention.values(v, v));
    }

    @Test
    void writesTooQuickForTheClockGiveNoRate() {
        assertEquals("; table values written 1 (in the background 0, by puts at the budget 0) in 1 writes of 0.0 MiB, 0 blocks copied",
                Contention.values(new ValueWriteStats(0, 0, 0, 0, 0, 0, 0), new ValueWriteStats(1, 0, 0, 1, 0, 4_096, 0)));
    }

    @Test
    void cpuTimeIsLeftOutWhereThePlatformDoesNotSayIt() {
        assertEquals("", Contention.cpu(-1, -1, 10));
        assertEquals("; JVM CPU 0.5 µs/op", Contention.cpu(1_000, 6_000, 10));
        assertEquals("; JVM CPU 0.5 µs/op (JIT 0.2)", Contention.cpu(1_000, 6_000, 0, 2_000, 10));
        assertTrue(Contention.processCpuNanos() > 0, "HotSpot on Linux reports its process CPU time");
        assertTrue(Contention.compilerCpuNanos() > 0, "HotSpot on Linux names its compiler threads in /proc/self/task, and they have compiled this test");
    }

    /**
     * A phase's wall time split over its workers: on a CPU, runnable without one, the rest blocked (never
     * negative: the clocks are read at slightly different moments), and the closing sync; nothing where
     * the kernel keeps no schedstats.
     */
    @Test
    void workersTimeIsSplitIntoCpuQueueAndBlocked() {
        assertEquals("", Contention.workers(-1, 0, 5_000, 1_000_000, 10));
        assertEquals("; workers on a CPU 1.50 µs/op, queued for one 3.00, blocked 0.50; sync 2.5 ms",
                Contention.workers(15_000, 30_000, 50_000, 2_500_000, 10));
        assertEquals("; workers on a CPU 1.50 µs/op, queued for one 3.00, blocked 0.00; sync 0.0 ms",
                Contention.workers(15_000, 30_000, 44_000, 0, 10));
    }

    @Test
    void minorFaultsAreCountedAndLeftOutWhereUnknown() {
        assertEquals("", Contention.faults(-1, 10, 10));
        assertEquals("; minor faults 0.25/op", Contention.faults(10, 15, 20));
        long before = Contention.processMinorFaults();
        assertTrue(before > 0, "Linux counts a JVM's minor faults in /proc/self/stat");
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment m = arena.allocate(64L << 20, 4096); // malloc'd, zeroed: every page touched
            m.set(java.lang.foreign.ValueLayout.JAVA_BYTE, m.byteSize() - 1, (byte) 1);
        }
        assertTrue(Contention.processMinorFaults() - before >= 64, "64 MiB of fresh memory touched takes at least one fault per huge page");
    }

    @Test
    void aNamedThreadsCpuTimeIsFoundByItsNameCutAsTheKernelCutsIt() throws InterruptedException {
        CountDownLatch busy = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            // its own CPU clock, not the wall's: on a loaded machine 30 ms of wall time may hold far less CPU
            // (capped at 10 s of wall time, so that a JVM with thread CPU time turned off fails the asserts, not hangs)
            ThreadMXBean threads = ManagementFactory.getThreadMXBean();
            long until = threads.getCurrentThreadCpuTime() + 30_000_000L, deadline = System.nanoTime() + 10_000_000_000L;
            long x = 0;
            while (threads.getCurrentThreadCpuTime() < until && System.nanoTime() - deadline < 0) {
                for (int i = 0; i < 10_000; i++) {
                    x += x * 31 + 7; // burns CPU
                }
            }
            busy.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (x == 42) {
                System.out.print(""); // keeps x alive
            }
        }, "contention-test-spinner"); // 23 characters; comm holds the first 15
        t.start();
        try {
            busy.await();
            assertTrue(Contention.threadCpuNanos("contention-test-spinner") >= 10_000_000L,
                    "the spinner burnt about 30 ms of CPU under its full name");
            assertTrue(Contention.threadCpuNanos("contention-tes") >= 10_000_000L, "a prefix finds it too");
            assertEquals(0, Contention.threadCpuNanos("no-such-thread"));
        } finally {
            release.countDown();
            t.join();
        }
    }

    @Test
    void theJournalsPartStandsAlone() {
        JournalStats a = journal(1000, 2, 20, 1, 5, 1, 1_000_000, 0, 0, 3, 10, 1);
        JournalStats b = journal(9000, 4, 60, 1, 5, 1, 1_000_000, 0, 0, 4, 12, 1);
        assertEquals("log 2,000 B/op in 2 checkpoints (20.0 items each), 0.000 transactions/op, 0 forces, 2 log flushes (a checkpoint's write 1,000 µs, its flushes 3,000 µs); grant-head CAS retries 0, "
                + "waits 0 (0.0 ms), CIL throttles 0 (0.0 ms); AIL pusher wake-ups 1, written home 2 (0 early)",
                Contention.journal(a, b, 4));
    }

    @Test
    void aMountsRequestsArePerOperationMostFirst() {
        Map<String, Long> before = Map.of("getattr", 10L, "create", 5L, "write", 1L);
        Map<String, Long> after = Map.of("getattr", 310L, "create", 105L, "write", 1L, "release", 100L, "lookup", 50L);
        assertEquals("; FUSE requests/op: getattr 3.00, create 1.00, release 1.00, lookup 0.50",
                Contention.requests(before, after, 100));
        assertEquals("", Contention.requests(Map.of(), Map.of(), 100), "no mount, nothing said");
    }
}
