package dev.ferrite.dir;

import java.util.concurrent.locks.LockSupport;

/** What the volume's parked background threads ({@link AsyncCommits}, {@link ParkedThread}) share when they stop. */
final class Threads {
    private Threads() {
    }

    /**
     * Wakes {@code t} (null: never started), which has seen its stop flag set, from its park and waits for it
     * to end; an interrupt ends the wait early and is kept.
     */
    static void unparkAndJoin(Thread t) {
        if (t == null) {
            return;
        }
        LockSupport.unpark(t);
        try {
            t.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
