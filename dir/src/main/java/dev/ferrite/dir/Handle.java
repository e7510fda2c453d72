package dev.ferrite.dir;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * An open inode. While any handle is open the inode outlives its last link: unlinked, it waits on its
 * group's orphan list and is freed when the last handle closes (or at the next mount after a crash).
 * Thread-safe; operations on a closed handle fail with EBADF.
 */
public final class Handle implements AutoCloseable {
    private final Orphans orphans;
    final Inode inode;
    /** The {@code open} flags: access mode, {@link Namespace#O_APPEND}, {@link Namespace#O_DIRECT}. */
    private final int flags;
    /** Set once, by the first close (a field, not an AtomicBoolean: a create makes a handle, and this saves its object). */
    private volatile boolean closed;
    private static final VarHandle CLOSED;

    static {
        try {
            CLOSED = MethodHandles.lookup().findVarHandle(Handle.class, "closed", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    Handle(Orphans orphans, Inode inode, int flags) {
        this.orphans = orphans;
        this.inode = inode;
        this.flags = flags;
    }

    /** The flags it was opened with ({@link Namespace#O_RDWR} for the opens that take none). */
    public int flags() {
        return flags;
    }

    /** The inode number. */
    public long ino() {
        return inode.ino;
    }

    public boolean isOpen() {
        return !closed;
    }

    /** Whether this is a handle of the namespace whose handles {@code o} keeps. */
    boolean of(Orphans o) {
        return orphans == o;
    }

    /** The inode, or EBADF if this handle is closed. */
    Inode requireOpen() {
        if (closed) {
            throw new NamespaceException(dev.ferrite.io.Errno.EBADF, "handle on inode " + inode.ino + " is closed");
        }
        return inode;
    }

    /** The inode, or EBADF if this handle is closed or open for writing only. */
    Inode requireReadable() {
        Inode i = requireOpen();
        if ((flags & Namespace.O_ACCMODE) == Namespace.O_WRONLY) {
            throw new NamespaceException(dev.ferrite.io.Errno.EBADF, "handle on inode " + inode.ino + " is open for writing only");
        }
        return i;
    }

    /** The inode, or EBADF if this handle is closed or open for reading only. */
    Inode requireWritable() {
        Inode i = requireOpen();
        if (!isWritable()) {
            throw new NamespaceException(dev.ferrite.io.Errno.EBADF, "handle on inode " + inode.ino + " is open for reading only");
        }
        return i;
    }

    boolean isWritable() {
        return (flags & Namespace.O_ACCMODE) != Namespace.O_RDONLY;
    }

    boolean isAppend() {
        return (flags & Namespace.O_APPEND) != 0;
    }

    boolean isDirect() {
        return (flags & Namespace.O_DIRECT) != 0;
    }

    /**
     * Lets go of the inode; idempotent. The last close of an inode whose last link is gone frees it (its
     * cached pages dropped unwritten), in transactions of its own; if that fails the inode stays an
     * orphan, freed at the next mount. The last close of a file does no I/O for its dirty cached pages:
     * the page cache's write-back thread writes them back a short delay later (volume sync and unmount at
     * once), then frees what writes preallocated past the end if no handle is open by then; a failure of
     * that write-back is reported, once, by the file's next fsync, fdatasync or last close. The last close
     * throws, once, a write-back error no fsync reported yet. The last close of a file with nothing
     * cached dirty frees its speculative blocks at once; if that fails they are freed at its first open
     * after the next mount. An operation on this handle already in flight either ends before any of that
     * starts or fails with EBADF.
     *
     * @throws dev.ferrite.journal.VolumeShutdownException if the journal shut down before the orphan was freed or the file
     *                                                     trimmed, or the volume was closed before the handle (the
     *                                                     handle is closed all the same)
     * @throws dev.ferrite.io.DeviceException if the device fails a read while freeing it
     */
    @Override
    public void close() {
        if (CLOSED.compareAndSet(this, false, true)) {
            orphans.closeHandle(inode);
        }
    }

    @Override
    public String toString() {
        return "Handle[" + inode.ino + (closed ? ", closed]" : "]");
    }
}
