package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;

/**
 * One phase's worker threads: started together, watched by the calling thread (progress line, time
 * limit), joined. What the kv and meta workloads share; each brings its own per-thread body.
 */
final class Workers {
    private Workers() {
    }

    /** One worker's work, given its index. */
    interface Body {
        void run(int id) throws Exception;
    }

    /**
     * Runs {@code body} on {@code threads} threads named {@code name}-0, -1, ... until all return. Sets
     * {@code stop} when the timer runs out or a worker fails (bodies poll it to end early), and interrupts
     * the others after a failure, in case they wait on the one that failed.
     *
     * @return the first failure, or null
     */
    static Throwable run(int threads, String name, PhaseTimer timer, LongSupplier done, AtomicBoolean stop, Body body) {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch finished = new CountDownLatch(threads);
        List<Thread> running = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            int id = i;
            Thread t = new Thread(() -> {
                try {
                    body.run(id);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                    stop.set(true);
                } finally {
                    finished.countDown();
                }
            }, name + "-" + i);
            running.add(t);
            t.start();
        }
        try {
            while (!finished.await(20, TimeUnit.MILLISECONDS)) {
                if (!timer.running(done.getAsLong(), System.nanoTime())) {
                    stop.set(true);
                }
                if (failure.get() != null) {
                    running.forEach(Thread::interrupt);
                }
            }
            for (Thread t : running) {
                t.join();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stop.set(true);
            throw new IllegalStateException("interrupted while " + name + " ran", e);
        }
        return failure.get();
    }
}
