package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.api.Test;

class StallsTest {
    private static final long THRESHOLD = TimeUnit.MILLISECONDS.toNanos(5);
    private static final long OP = TimeUnit.MILLISECONDS.toNanos(40);

    /**
     * Runs {@code body} as one timed operation on a worker thread named like the benches' workers, after
     * 1000 empty ones. An empty one is slow only when a loaded machine takes the CPU from the thread
     * meanwhile; those are counted here and expected in the split beside the body's.
     */
    private static Stalls.Split oneOperation(Runnable body) throws InterruptedException {
        Stalls stalls = Stalls.watch(THRESHOLD, "stalls-test-");
        Latencies latencies = new Latencies(stalls);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        int[] slowEmpty = new int[1];
        Thread t = new Thread(() -> {
            try {
                long now = System.nanoTime();
                for (int i = 0; i < 1000; i++) { // fast operations: counted, never kept
                    long end = System.nanoTime();
                    latencies.record(now, end);
                    slowEmpty[0] += end - now >= THRESHOLD ? 1 : 0;
                    now = end;
                }
                body.run();
                latencies.record(now, System.nanoTime());
            } catch (Throwable e) {
                failed.set(e);
            }
        }, "stalls-test-0");
        t.start();
        t.join();
        Stalls.Split split = stalls.split();
        if (failed.get() != null) {
            throw new AssertionError(failed.get());
        }
        assertEquals(1001, latencies.histogram.getTotalCount());
        assertEquals(1 + slowEmpty[0], split.count(), split.toString());
        assertTrue(split.wall() >= OP, split.toString());
        return split;
    }

    @Test
    void aParkedOperationIsSplitAsWaitingWhereItParked() throws InterruptedException {
        Stalls.Split s = oneOperation(StallsTest::park);
        assertTrue(s.waited() >= OP * 3 / 4, "the operation parked 40 ms: " + s);
        assertTrue(s.where().getOrDefault("StallsTest.park", 0L) >= OP * 3 / 4, "waited in StallsTest.park: " + s);
        assertTrue(s.cpu() < OP / 4, s.toString());
        // parked, not queued: on a loaded machine the wake-up may wait for a CPU, but not for the whole park
        assertTrue(s.queued() < s.waited(), "a parked thread is not queued for a CPU: " + s);
    }

    @Test
    void aSpinningOperationIsSplitAsCpuOrRunnableNeverAsWaiting() throws InterruptedException {
        Stalls.Split s = oneOperation(StallsTest::spin);
        assertEquals(0, s.waited(), s.toString());
        assertTrue(s.cpu() > 0, s.toString());
        // sampled every millisecond while it runs 40 ms on a CPU
        assertTrue(s.running().getOrDefault("StallsTest.spin", 0L) > 0, "the samples name where it ran: " + s);
        String line = s.line(1001, THRESHOLD); // among the three largest shares: the harness's own clock read may take a sample too
        assertTrue(line.matches(".*on CPU \\d+% \\(of [\\d,]+ samples?: [^)]*StallsTest\\.spin \\d+%.*"), line);
        assertEquals(s.wall(), s.stopped() + s.cpu() + Math.max(0, s.queued()) + s.rest(), s.toString());
    }

    @Test
    void anOperationAmongMoreSpinningThreadsThanCpusIsSplitAsQueued() throws InterruptedException {
        assumeTrue(Files.isReadable(Path.of("/proc/thread-self/schedstat")), "no schedstat: the kernel does not say");
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> spinners = new ArrayList<>();
        int n = 2 * Runtime.getRuntime().availableProcessors();
        CountDownLatch spinning = new CountDownLatch(n);
        for (int i = 0; i < n; i++) {
            spinners.add(Thread.ofPlatform().start(() -> {
                spinning.countDown();
                while (!stop.get()) {
                    Thread.onSpinWait();
                }
            }));
        }
        Stalls.Split s;
        try {
            // every spinner running before the operation starts: one still starting left it a CPU (a flake: 12% queued)
            assertTrue(spinning.await(10, TimeUnit.SECONDS), "spinners did not start");
            s = oneOperation(StallsTest::spin);
        } finally {
            stop.set(true);
            for (Thread t : spinners) {
                t.join();
            }
        }
        // the worker had about one CPU in three of its 40 ms: the rest of it it was runnable, queued
        assertTrue(s.queued() >= OP / 8, "a spinning operation sharing the CPUs with more spinners waits queued: " + s);
        assertTrue(s.line(1001, THRESHOLD).contains("runnable but queued for a CPU"), s.line(1001, THRESHOLD));
        assertEquals(s.wall(), s.stopped() + s.cpu() + s.queued() + s.rest(), s.toString());
    }

    @Test
    void aCollectionInsideAnOperationIsSplitAsAStop() throws InterruptedException {
        Stalls.Split s = oneOperation(() -> {
            System.gc();
            park();
        });
        assertTrue(s.gc() > 0 && s.stopped() >= s.gc(), "a full collection ran inside the operation: " + s);
        assertTrue(s.line(1001, THRESHOLD).startsWith(s.count() + " of 1,001 operations took 5.0 ms or more"), s.line(1001, THRESHOLD));
    }

    /**
     * Spins until the thread has run for {@link #OP} on a CPU, not for OP of wall time: on a loaded machine a
     * thread spinning 40 ms of wall time was queued for 93 of 96 ms and ran between the sampler's ticks, so
     * no sample named where it ran. It reads its CPU clock once a millisecond only: a spin on that clock
     * (a call into the VM) left 3 runs in 10 with no sample the profiler could attribute.
     */
    private static void spin() {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long end = mx.getCurrentThreadCpuTime() + OP;
        do {
            for (long until = System.nanoTime() + 1_000_000; System.nanoTime() < until; ) {
                Thread.onSpinWait();
            }
        } while (mx.getCurrentThreadCpuTime() < end);
    }

    private static void park() {
        long end = System.nanoTime() + OP;
        for (long left; (left = end - System.nanoTime()) > 0; ) {
            LockSupport.parkNanos(left);
        }
    }
}
