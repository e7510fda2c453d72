package dev.ferrite.fuse;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.NamespaceException;
import dev.ferrite.io.Errno;

/**
 * The handles of open files and directories by the number the kernel keeps for them ({@code fuse_file_info.fh}):
 * a slot index. Looking one up is one acquire read of an array slot, no lock, no allocation; open and release take
 * this table's lock to hand out and take back a slot.
 */
final class OpenFiles {
    /** Grown (copied) under this object's lock; a reader that finds nothing in a stale copy looks again in the current one. */
    private volatile AtomicReferenceArray<Handle> slots = new AtomicReferenceArray<>(64);
    /** Slots released, reused first. Guarded by this. */
    private int[] free = new int[64];
    private int freeCount;
    /** Slots ever handed out. Guarded by this. */
    private int used;

    /** Keeps {@code h}; returns its number. */
    synchronized long add(Handle h) {
        int slot;
        if (freeCount > 0) {
            slot = free[--freeCount];
        } else {
            if (used == slots.length()) {
                AtomicReferenceArray<Handle> grown = new AtomicReferenceArray<>(used * 2);
                for (int i = 0; i < used; i++) {
                    grown.setPlain(i, slots.getPlain(i));
                }
                slots = grown;
            }
            slot = used++;
        }
        slots.setRelease(slot, h);
        return slot;
    }

    /** The handle numbered {@code fh}: EBADF if there is none. */
    Handle get(long fh) {
        AtomicReferenceArray<Handle> s = slots;
        Handle h = fh >= 0 && fh < s.length() ? s.getAcquire((int) fh) : null;
        if (h == null && s != slots) {
            return get(fh);
        }
        if (h == null) {
            throw new NamespaceException(Errno.EBADF, "no open file numbered " + fh);
        }
        return h;
    }

    /** Forgets handle {@code fh} and returns it (the caller closes it): EBADF if there is none. */
    synchronized Handle remove(long fh) {
        Handle h = get(fh);
        slots.setRelease((int) fh, null);
        if (freeCount == free.length) {
            free = Arrays.copyOf(free, free.length * 2);
        }
        free[freeCount++] = (int) fh;
        return h;
    }

    /** Forgets every handle and returns them, for an unmount that closes what the kernel left open. */
    synchronized List<Handle> removeAll() {
        List<Handle> all = new ArrayList<>();
        AtomicReferenceArray<Handle> s = slots;
        for (int i = 0; i < used; i++) {
            Handle h = s.getAndSet(i, null);
            if (h != null) {
                all.add(h);
            }
        }
        used = 0;
        freeCount = 0;
        return all;
    }
}
