package dev.ferrite.dir;

import java.util.concurrent.locks.LockSupport;

/**
 * Deletes doomed table blobs off the committing thread: a thread ({@code ferrite-blob-reaper}, started by
 * the first commit that dooms one) that runs {@link TableBlobs}' deletion each time it is woken (a commit
 * doomed blobs, a snapshot closed) and parks between. Freeing a blob's extents and inode takes several
 * namespace transactions; a commit that dooms one now only queues its id (XFS frees unlinked inodes in the
 * background since Linux 5.19 for the same reason). A wake-up while it runs sets {@link #wanted}, so the
 * thread makes another pass before it parks: the park permit alone would not do, as a park inside the
 * deletion (a lock's, a journal wait's) takes it, and the thread then parked with blobs queued until the
 * next wake-up (a test holding the reaper in its hook waited 30 s for a pass that never came).
 */
final class BlobReaper {
    private final Runnable reap;
    /** Set once, under this monitor; read without it on the commit path. */
    private volatile Thread thread;
    private volatile boolean stopping;
    /** A wake-up came since the current pass began: another pass before parking. */
    private volatile boolean wanted;

    BlobReaper(Runnable reap) {
        this.reap = reap;
    }

    /** There may be blobs to delete: starts the thread the first time, else unparks it. */
    void wake() {
        wanted = true; // before the unpark: a thread that finds it clear after its pass has seen the work
        Thread t = thread;
        if (t != null) {
            LockSupport.unpark(t);
            return;
        }
        synchronized (this) {
            if (thread == null && !stopping) {
                thread = t = new Thread(this::run, "ferrite-blob-reaper");
                t.setDaemon(true);
                t.start();
            } else if (thread != null) {
                LockSupport.unpark(thread);
            }
        }
    }

    private void run() {
        while (!stopping) {
            wanted = false; // before the pass: what was queued before a wake-up that clears it is seen by it
            reap.run();
            while (!stopping && !wanted) {
                LockSupport.park(this);
            }
        }
    }

    /** Whether the reaper is stopping: its deletion gives up between blobs. */
    boolean stopping() {
        return stopping;
    }

    /** Stops the thread and waits for it (unmount, before the journal closes). */
    void stop() {
        Thread t;
        synchronized (this) {
            stopping = true;
            t = thread;
        }
        Threads.unparkAndJoin(t);
    }
}
