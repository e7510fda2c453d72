package dev.ferrite.dir;

import java.util.concurrent.locks.LockSupport;

/**
 * A background thread of the volume's that runs its task each time it is woken and parks between: started
 * by the first wake-up, stopped at unmount. The blob reaper ({@code ferrite-blob-reaper}) deletes doomed
 * table blobs off the committing thread: freeing a blob's extents and inode takes several namespace
 * transactions, and a commit that dooms one only queues its id (XFS frees unlinked inodes in the
 * background since Linux 5.19 for the same reason). The value write-back ({@code ferrite-value-writeback})
 * writes table values left to the log once enough are pending ({@link TableExtentWriteBack}). A wake-up
 * while the task runs sets {@link #wanted}, so the thread makes another pass before it parks: the park
 * permit alone would not do, as a park inside the task (a lock's, a journal wait's) takes it, and the
 * thread then parked with work queued until the next wake-up (a test holding the reaper in its hook waited
 * 30 s for a pass that never came).
 */
final class ParkedThread {
    private final Runnable task;
    private final VolumeThread thread;
    /** A wake-up came since the current pass began: another pass before parking. */
    private volatile boolean wanted;

    ParkedThread(String name, Runnable task) {
        this.task = task;
        this.thread = new VolumeThread(name, this::run);
    }

    /** There may be work: starts the thread the first time, else unparks it. */
    void wake() {
        wanted = true; // before the unpark: a thread that finds it clear after its pass has seen the work
        Thread t = thread.started();
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    private void run() {
        while (!thread.stopping()) {
            wanted = false; // before the pass: what was queued before a wake-up that clears it is seen by it
            task.run();
            while (!thread.stopping() && !wanted) {
                LockSupport.park(this);
            }
        }
    }

    /** Whether the thread is stopping: its task gives up between its steps (the reaper's between blobs). */
    boolean stopping() {
        return thread.stopping();
    }

    /** Stops the thread and waits for it (unmount, before the journal closes). */
    void stop() {
        thread.stop();
    }
}
