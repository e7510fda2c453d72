package dev.ferrite.perf.bench;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * One operation count per worker thread, each on a cache line of its own so that counting costs a worker
 * no sharing; the phase's timer sums them for the progress line. Opaque access: the sum is a snapshot for
 * display, never a synchronization point.
 */
final class ThreadCounts {
    /** longs between two threads' counters: 128 bytes. */
    private static final int PAD = 16;

    private final AtomicLongArray counts;
    private final int threads;

    ThreadCounts(int threads) {
        this.threads = threads;
        this.counts = new AtomicLongArray(threads * PAD);
    }

    /** Thread {@code id} has done {@code ops} operations so far. */
    void set(int id, long ops) {
        counts.setOpaque(id * PAD, ops);
    }

    long total() {
        long sum = 0;
        for (int i = 0; i < threads; i++) {
            sum += counts.getOpaque(i * PAD);
        }
        return sum;
    }
}
