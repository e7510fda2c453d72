package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.LongAdder;

/**
 * Locks on table keys by hash, one byte per stripe: what orders changes to one key among single writes
 * and write transactions applying side by side ({@code Tables#single}, {@code Tables#commit}), so that
 * the prior values snapshots read are recorded in version order and a transaction's undo never replaces
 * another commit's value. A transaction holds the stripes of all its keys, taken in ascending stripe
 * order (so two cannot deadlock; it waits for a held one holding none, {@link #lockAll}), until its
 * journal group ends; a single write holds its key's for its change. Not re-entrant: a thread holds at
 * most one set at a time. An instance of its own orders the creates and unlinks of one name in a
 * directory ({@code Creator#lockStripe}), one stripe each.
 *
 * <p>Each stripe's byte is 0 (free), 1 (held) or 2 (held, and a thread may be waiting): a waiter sets 2
 * under its room's monitor before it waits there, and the holder that finds 2 when it lets go notifies the room,
 * taking the monitor after the waiter's {@code wait} released it, so no wake-up is lost. Many stripes
 * share a room; a waiter woken for another stripe looks again and waits on. Taking and letting go of a
 * free stripe is a compare-and-set and an exchange, and a waiter parks rather than polls. The waits that
 * parked are counted, with their time ({@link #waits}, {@link #waitNanos}): the benchmarks' contention lines.
 */
final class KeyStripes {
    /**
     * A table key's stripes ({@link #of}): a power of two, many, so that transactions of a hundred random
     * keys rarely share one they do not share a key of: two such share one 0.95% of the time, where on the
     * 262,144 stripes before they shared 3.7% and on 65,536 14% (docs/tables.md). A byte each: 1 MiB of
     * heap per volume, as the 262,144 words were.
     */
    static final int KEY_STRIPES = 1 << 20;
    /** Monitors waiters park on, by stripe: a power of two, at most 64 ({@link #unlockFirst} keeps a bit each). */
    private static final int ROOMS = 64;
    /** Spins on a held stripe before a waiter parks: a single write's hold is a few microseconds. */
    private static final int SPINS = 64;
    /** Waits holding nothing a transaction makes before it waits holding the stripes it took ({@link #lockAll}). */
    private static final int RESTARTS = 4;
    /** A key's words as {@link #of} hashes them, in a segment and in an array: the same order, so the same stripe. */
    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle ARRAY_WORD = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle STATE = MethodHandles.arrayElementVarHandle(byte[].class);
    private static final byte FREE = 0, HELD = 1, WAITED = 2;

    /** Each stripe's state, read and changed through {@link #STATE} (volatile and atomic). */
    private final byte[] states;
    private final Object[] rooms = new Object[ROOMS];
    private final LongAdder waits = new LongAdder();
    private final LongAdder waitNanos = new LongAdder();

    /** {@code stripes} of them, a power of two: {@link #KEY_STRIPES} for table keys. */
    KeyStripes(int stripes) {
        states = new byte[stripes];
        for (int i = 0; i < ROOMS; i++) {
            rooms[i] = new Object();
        }
    }

    /**
     * The stripe of {@code key} of table {@code ino}. The key is hashed eight bytes at a time (little-endian
     * words, the tail as a word of its own): a byte at a time, each step a multiply waiting on the last, it
     * was a chain of 16–40 dependent multiplies for the bench's keys, 18 ns a key where this takes 9 (1.5%
     * of a 1-thread single 64 B put's samples). The length goes into the seed, so that keys differing only
     * by trailing zeros differ.
     */
    static int of(long ino, MemorySegment key) {
        long n = key.byteSize();
        long h = seed(ino, n);
        long i = 0;
        for (; i + Long.BYTES <= n; i += Long.BYTES) {
            h = mix(h, key.get(WORD, i));
        }
        if (i < n) {
            long tail = 0;
            for (int shift = 0; i < n; i++, shift += 8) {
                tail |= (key.get(ValueLayout.JAVA_BYTE, i) & 0xFFL) << shift;
            }
            h = mix(h, tail);
        }
        return stripe(h);
    }

    /** {@link #of(long, MemorySegment)} of a key in an array (a transaction's), wrapping nothing: the same stripe. */
    static int of(long ino, byte[] key) {
        int n = key.length;
        long h = seed(ino, n);
        int i = 0;
        for (; i + Long.BYTES <= n; i += Long.BYTES) {
            h = mix(h, (long) ARRAY_WORD.get(key, i));
        }
        if (i < n) {
            long tail = 0;
            for (int shift = 0; i < n; i++, shift += 8) {
                tail |= (key[i] & 0xFFL) << shift;
            }
            h = mix(h, tail);
        }
        return stripe(h);
    }

    private static long seed(long ino, long length) {
        return (ino * 0x9E3779B97F4A7C15L) ^ length;
    }

    private static long mix(long h, long word) {
        h = (h ^ word) * 0xFF51AFD7ED558CCDL;
        return h ^ h >>> 29;
    }

    /** The stripe of a hash: its bits folded (murmur3's finaliser), so that every bit of every word counts in the low ones. */
    private static int stripe(long h) {
        h = (h ^ h >>> 33) * 0xC4CEB9FE1A85EC53L;
        return (int) (h ^ h >>> 33) & (KEY_STRIPES - 1);
    }

    /** Takes stripe {@code s}, waiting while another thread holds it. */
    void lock(int s) {
        if (!tryLock(s)) {
            park(s, true);
        }
    }

    /** Takes stripe {@code s} if it is free now or within a few spins. */
    private boolean tryLock(int s) {
        if (STATE.compareAndSet(states, s, FREE, HELD)) {
            return true;
        }
        for (int spins = 0; spins < SPINS; spins++) {
            Thread.onSpinWait();
            if ((byte) STATE.getVolatile(states, s) == FREE && STATE.compareAndSet(states, s, FREE, HELD)) {
                return true;
            }
        }
        return false;
    }

    /** Waits on {@code s}'s room until {@code s} is free, then takes it if {@code take}; a wait that parked is counted. */
    private void park(int s, boolean take) {
        boolean interrupted = false;
        boolean parked = false;
        long since = 0;
        Object room = rooms[s & (ROOMS - 1)];
        synchronized (room) {
            for (;;) {
                byte w = (byte) STATE.getVolatile(states, s);
                if (w == FREE) {
                    if (!take || STATE.compareAndSet(states, s, FREE, WAITED)) { // others may wait behind this thread
                        break;
                    }
                } else if (w == WAITED || STATE.compareAndSet(states, s, HELD, WAITED)) {
                    if (!parked) {
                        parked = true;
                        since = System.nanoTime();
                    }
                    try {
                        room.wait();
                    } catch (InterruptedException e) {
                        interrupted = true; // a key's lock is not given up half way: the interrupt is kept
                    }
                }
            }
        }
        if (parked) {
            waits.increment();
            waitNanos.add(System.nanoTime() - since);
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Takings of a held stripe that parked, since this was made. */
    long waits() {
        return waits.sum();
    }

    /** Time those takings spent parked, in nanoseconds. */
    long waitNanos() {
        return waitNanos.sum();
    }

    /** Lets go of stripe {@code s}, which this thread holds, waking its waiters if any. */
    void unlock(int s) {
        if ((byte) STATE.getAndSet(states, s, FREE) == WAITED) {
            Object room = rooms[s & (ROOMS - 1)];
            synchronized (room) {
                room.notifyAll();
            }
        }
    }

    /**
     * Takes {@code stripes} (ascending, no repeats) in order. Finding one held, it lets go of those it took
     * and waits, holding none, until that one is free, then starts again: a transaction waiting for another
     * keeps no third one (nor a single write) off the keys it took before, as it did until the other's
     * group ended (transactions of random keys at 8 threads queued behind waiters). After
     * {@link #RESTARTS} such waits it waits holding what it took, as ascending order allows, so it cannot
     * be kept out for ever by commits that keep taking its first stripes.
     */
    void lockAll(int[] stripes) {
        int restarts = 0;
        for (int i = 0; i < stripes.length; ) {
            int s = stripes[i];
            if (tryLock(s)) {
                i++;
            } else if (i == 0 || restarts == RESTARTS) {
                park(s, true);
                i++;
            } else {
                unlockFirst(stripes, i);
                park(s, false);
                restarts++;
                i = 0;
            }
        }
    }

    /** Lets go of {@code stripes}, taken by {@link #lockAll}. */
    void unlockAll(int[] stripes) {
        unlockFirst(stripes, stripes.length);
    }

    /**
     * Lets go of the first {@code n} of {@code stripes}, every one before it wakes any waiter: a waiter woken
     * as its stripe is let go may take this thread's CPU (on 2 vCPUs beside 7 other writers it often does),
     * and while the stripes after it stayed held that stalled every waiter for them for a time slice.
     */
    private void unlockFirst(int[] stripes, int n) {
        long waited = 0; // the rooms to wake, a bit each
        for (int i = n - 1; i >= 0; i--) {
            int s = stripes[i];
            if ((byte) STATE.getAndSet(states, s, FREE) == WAITED) {
                waited |= 1L << (s & (ROOMS - 1));
            }
        }
        for (; waited != 0; waited &= waited - 1) {
            Object room = rooms[Long.numberOfTrailingZeros(waited)];
            synchronized (room) {
                room.notifyAll();
            }
        }
    }
}
