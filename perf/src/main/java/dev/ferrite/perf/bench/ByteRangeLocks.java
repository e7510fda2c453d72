package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * SMB byte-range locks of a dbench replay, held in this process (Ferrite has no lock calls; dbench's
 * fileio backend takes fcntl locks for LockX): exclusive locks on {@code [offset, offset + length)} of an
 * inode, each owned by an open file. A lock that overlaps another owner's waits for it, as dbench's
 * {@code F_SETLKW} does; unlocking needs the exact range an owner locked ({@link NtStatus#RANGE_NOT_LOCKED}
 * otherwise, as an SMB server answers); closing a file drops its owner's locks. Zero-length ranges
 * conflict with nothing.
 */
final class ByteRangeLocks {
    private record Lock(Object owner, long offset, long length) {
        boolean overlaps(long o, long len) {
            return length > 0 && len > 0 && offset < o + len && o < offset + length;
        }
    }

    /** One inode's locks; its monitor guards them, and a waiter waits on it. */
    private static final class FileLocks {
        final List<Lock> held = new ArrayList<>(2);
        /** Emptied and removed from the table: a locker that finds it takes a new one. */
        boolean dead;
    }

    private final ConcurrentHashMap<Long, FileLocks> files = new ConcurrentHashMap<>();

    /** Locks the range for {@code owner}, waiting while another owner holds an overlapping one. */
    void lock(Object owner, long ino, long offset, long length) throws InterruptedException {
        while (true) {
            FileLocks f = files.computeIfAbsent(ino, k -> new FileLocks());
            synchronized (f) {
                if (f.dead) {
                    continue;
                }
                while (conflicts(f, owner, offset, length)) {
                    f.wait();
                }
                if (!f.dead) {
                    f.held.add(new Lock(owner, offset, length));
                    return;
                }
            }
        }
    }

    /** Drops {@code owner}'s lock of exactly this range: OK, or RANGE_NOT_LOCKED if it holds none. */
    NtStatus unlock(Object owner, long ino, long offset, long length) {
        FileLocks f = files.get(ino);
        if (f == null) {
            return NtStatus.RANGE_NOT_LOCKED;
        }
        synchronized (f) {
            boolean removed = f.held.remove(new Lock(owner, offset, length));
            released(ino, f);
            return removed ? NtStatus.OK : NtStatus.RANGE_NOT_LOCKED;
        }
    }

    /** Drops every lock {@code owner} holds on the inode: its file was closed. */
    void closed(Object owner, long ino) {
        FileLocks f = files.get(ino);
        if (f == null) {
            return;
        }
        synchronized (f) {
            f.held.removeIf(l -> l.owner == owner);
            released(ino, f);
        }
    }

    /** Inodes with locks or waiters' entries in the table. */
    int size() {
        return files.size();
    }

    private void released(long ino, FileLocks f) {
        f.notifyAll();
        if (f.held.isEmpty()) {
            f.dead = true;
            files.remove(ino, f);
        }
    }

    private static boolean conflicts(FileLocks f, Object owner, long offset, long length) {
        for (Lock l : f.held) {
            if (l.owner != owner && l.overlaps(offset, length)) {
                return true;
            }
        }
        return false;
    }
}
