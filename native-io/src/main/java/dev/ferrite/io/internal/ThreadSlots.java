package dev.ferrite.io.internal;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * A number for each thread, handed out in turn at the thread's first call, for picking its stripe of
 * counts that every operation updates (the CIL's commit stripes):
 * threads that start working one after another, as a pool's workers do, take consecutive numbers and so
 * different stripes while there are stripes for them all. A hash of the thread id put ids two apart on
 * one of the CIL's four stripes more often than not (docs/benchmarks.md, 2026-12-06).
 */
public final class ThreadSlots {
    private static final AtomicInteger NEXT = new AtomicInteger();
    private static final ThreadLocal<int[]> SLOT = ThreadLocal.withInitial(() -> new int[] {NEXT.getAndIncrement()});

    private ThreadSlots() {
    }

    /** The current thread's number; its low bits pick a stripe among a power of two. */
    public static int current() {
        return SLOT.get()[0];
    }
}
