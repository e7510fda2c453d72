package dev.ferrite.io.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A count that many threads add to on every operation (the buffer cache's hits, the table commits
 * applying on the fast path), each on cache lines of its own while no two of
 * them have thread ids equal modulo the stripe count (threads made one after another, as a pool's
 * workers are, have consecutive ids), summed when read. A {@link java.util.concurrent.atomic.LongAdder}
 * keeps at most as many cells as CPUs and picks one by a per-thread hash, so on a 2-vCPU machine two
 * workers and the journal's threads share its two cells and contend: the buffer cache's hit count, taken
 * at every step of every descent, was 12–18% of a two-thread 16 KiB delete's samples (docs/benchmarks.md,
 * 2026-12-06). The stripe is the thread id's low bits, not {@link ThreadSlots}' number: a thread-local
 * look-up, a dozen a delete, cost as much as the contention saved.
 */
public final class StripedCounter {
    private static final int STRIPES = 16;
    /** Longs from one stripe to the next: 128 bytes, so adjacent-line prefetch pairs no two stripes. */
    private static final int STRIDE = 16;
    private static final VarHandle COUNT = MethodHandles.arrayElementVarHandle(long[].class);

    /** Stripe {@code s} at {@code (s + 1) * STRIDE}: none beside the array's header. */
    private final long[] counts = new long[(STRIPES + 1) * STRIDE];

    public void increment() {
        add(1);
    }

    public void add(long x) {
        COUNT.getAndAdd(counts, (((int) Thread.currentThread().threadId() & (STRIPES - 1)) + 1) * STRIDE, x);
    }

    /** The sum of every stripe: exact once the adders have stopped, else somewhere between. */
    public long sum() {
        long s = 0;
        for (int i = STRIDE; i < counts.length; i += STRIDE) {
            s += (long) COUNT.getVolatile(counts, i);
        }
        return s;
    }
}
