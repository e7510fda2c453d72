package dev.ferrite.dir;

import java.util.concurrent.locks.LockSupport;

/**
 * A background thread of the volume's that parks between its work ({@link AsyncCommits}, {@link
 * ParkedThread}): started by its first use, a daemon, stopped at unmount. Its body runs until {@link
 * #stopping}; {@link #stop} sets that, unparks it and waits for it to end.
 */
final class VolumeThread {
    private final String name;
    private final Runnable body;
    /** Set once, under this monitor; read without it on the paths that wake the thread. */
    private volatile Thread thread;
    private volatile boolean stopping;

    VolumeThread(String name, Runnable body) {
        this.name = name;
        this.body = body;
    }

    /** The thread, started now if this is its first use; null if it was stopped before it ever ran. */
    Thread started() {
        Thread t = thread;
        if (t != null) {
            return t;
        }
        synchronized (this) {
            if (thread == null && !stopping) {
                t = new Thread(body, name);
                t.setDaemon(true);
                thread = t;
                t.start();
            }
            return thread;
        }
    }

    /** Whether {@link #stop} was called: the body returns at its next check. */
    boolean stopping() {
        return stopping;
    }

    /** Stops the thread and waits for it to end (unmount, before the journal closes); an interrupt ends the wait early and is kept. */
    void stop() {
        Thread t;
        synchronized (this) {
            stopping = true;
            t = thread;
        }
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
