package dev.ferrite.fuse;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * Objects by a number handed to the kernel (a node id, an open directory's {@code fuse_file_info.fh}): a slot
 * index. Looking one up is one acquire read of an array slot, no lock, no allocation; adding and removing take
 * this table's lock to hand out and take back a slot.
 */
final class SlotTable<T> {
    /** Grown (copied) under this object's lock; a reader that finds nothing in a stale copy looks again in the current one. */
    private volatile AtomicReferenceArray<T> slots = new AtomicReferenceArray<>(64);
    /** Slots released, reused first. Guarded by this. */
    private int[] free = new int[64];
    private int freeCount;
    /** Slots ever handed out. Guarded by this. */
    private int used;

    /** Keeps {@code t}; returns its number. */
    synchronized int add(T t) {
        int slot;
        if (freeCount > 0) {
            slot = free[--freeCount];
        } else {
            if (used == slots.length()) {
                AtomicReferenceArray<T> grown = new AtomicReferenceArray<>(used * 2);
                for (int i = 0; i < used; i++) {
                    grown.setPlain(i, slots.getPlain(i));
                }
                slots = grown;
            }
            slot = used++;
        }
        slots.setRelease(slot, t);
        return slot;
    }

    /** Puts {@code t} in slot {@code n}, which {@link #add} handed out (a holder of its own number added as null first). */
    synchronized void set(long n, T t) {
        slots.setRelease((int) n, t);
    }

    /** What number {@code n} holds, or null. */
    T get(long n) {
        AtomicReferenceArray<T> s = slots;
        T t = n >= 0 && n < s.length() ? s.getAcquire((int) n) : null;
        if (t == null && s != slots) {
            return get(n);
        }
        return t;
    }

    /** Forgets number {@code n} and returns what it held, or null if nothing. */
    synchronized T remove(long n) {
        T t = n >= 0 && n < used ? slots.getPlain((int) n) : null;
        if (t != null) {
            slots.setRelease((int) n, null);
            if (freeCount == free.length) {
                free = Arrays.copyOf(free, free.length * 2);
            }
            free[freeCount++] = (int) n;
        }
        return t;
    }

    /** Forgets everything and returns it. */
    synchronized List<T> removeAll() {
        List<T> all = new ArrayList<>();
        AtomicReferenceArray<T> s = slots;
        for (int i = 0; i < used; i++) {
            T t = s.getAndSet(i, null);
            if (t != null) {
                all.add(t);
            }
        }
        used = 0;
        freeCount = 0;
        return all;
    }
}
