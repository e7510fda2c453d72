package dev.ferrite.dir;

import java.util.Arrays;
import java.util.Map;
import java.util.Queue;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentSkipListMap;

import dev.ferrite.io.internal.StripedCounter;

/**
 * What snapshots need to see the tables as they were: while any snapshot is open, every table commit
 * gets a version and, before each key it changes becomes visible, records the key's prior value under
 * that version (an in-memory undo chain per key, newest first). A snapshot taken at version S reads a key
 * from its tree and then from its chain: the oldest entry newer than S holds the value the key had at S;
 * with none, the tree's value is the one. Entries no open snapshot needs are pruned.
 *
 * <p>Changes to one key apply one at a time, each taking its version once it holds the key (a single
 * write its key's stripe, a write transaction the stripes of all its keys or its tables exclusively:
 * {@code Tables#single}, {@code Tables#apply}), so a key's
 * chain is in version order; writes to other keys of the table apply beside it. With no
 * snapshot open, commits take the fast path (no version, nothing recorded, a count in the thread's stripe): a snapshot that
 * opens sets {@link #undoing} first and waits for the fast commits still applying to finish, so that no
 * commit it cannot see is half applied without a record, then for the versioned ones up to its version
 * ({@link #open}). Nothing here is on disk: a crash ends every
 * snapshot, and the log is never pinned by one. Memory: the prior value and ~100 bytes per key changed
 * while a snapshot is open, until the oldest snapshot older than the change closes.
 */
final class TableVersions {
    /** A key's value before the commit of {@code version}; {@code before} null if the key was absent. */
    static final class Undo {
        final long version;
        final byte[] before;
        /** The entry of the previous change of the key, or null once no snapshot can need it. */
        volatile Undo older;

        Undo(long version, byte[] before, Undo older) {
            this.version = version;
            this.before = before;
            this.older = older;
        }
    }

    /** An entry recorded, for pruning in (roughly) version order. */
    private record Recorded(long version, ConcurrentSkipListMap<byte[], Undo> chains, byte[] key, Undo entry) {
    }

    /** Guards version assignment, {@link #inflight}, {@link #live} and {@link #undoing}'s transitions. */
    private final Object lock = new Object();
    private long clock;
    /** Versions of the commits applying now. */
    private final TreeSet<Long> inflight = new TreeSet<>();
    /** Open snapshots' versions with their counts. */
    private final TreeMap<Long, Integer> live = new TreeMap<>();
    /** Snapshots between turning recording on and taking their version (guarded by {@link #lock}). */
    private int opening;
    /** Some snapshot is open (or opening): commits take versions and record prior values. */
    private volatile boolean undoing;
    /**
     * Commits applying on the fast path (no version), counted in the stripe of the thread that applies
     * them, which begins and ends each (so no stripe goes below 0, and a sum of 0 means none applying):
     * one counter for the volume had every single write's two updates move its cache line between the
     * cores writing.
     */
    private final StripedCounter fast = new StripedCounter();
    private final Map<Long, ConcurrentSkipListMap<byte[], Undo>> chains = new ConcurrentHashMap<>();
    private final Queue<Recorded> recorded = new ConcurrentLinkedQueue<>();

    /**
     * Starts applying a commit, its keys held: 0 for the fast path, else the commit's version.
     * Pair with {@link #endApply}.
     */
    long beginApply() {
        if (!undoing) {
            fast.add(1);
            if (!undoing) { // Dekker with open: the count stored, then the flag loaded
                return 0;
            }
            fast.add(-1);
        }
        synchronized (lock) {
            long v = ++clock;
            inflight.add(v);
            return v;
        }
    }

    void endApply(long version) {
        if (version == 0) {
            fast.add(-1); // on the thread that began it: its stripe
            return;
        }
        synchronized (lock) {
            inflight.remove(version);
        }
        if (!undoing) {
            prune();
        }
    }

    /** Records {@code key}'s value before the change of {@code version} (0: nothing to record) to table {@code ino}. */
    void record(long version, long ino, byte[] key, byte[] before) {
        ConcurrentSkipListMap<byte[], Undo> map = chains(ino);
        Undo[] made = new Undo[1];
        map.compute(key, (k, older) -> made[0] = new Undo(version, before, older));
        recorded.add(new Recorded(version, map, key, made[0]));
    }

    /**
     * Opens a snapshot: its version, every commit up to which is wholly applied and none after it visible.
     * It is the clock once the fast commits have finished, and it waits for the commits that took a
     * version up to it and are still applying: a version below one of them would leave out commits that
     * ended before the snapshot opened (and with them every fast commit after them, which it would show).
     * Counted as live from taking the version, so that no prune drops a record it needs meanwhile.
     */
    long open() {
        synchronized (lock) {
            opening++; // counted as open from now: a close meanwhile must not turn recording off
            undoing = true; // Dekker with beginApply: the flag stored, then the count loaded
        }
        // fast commits never wait for a snapshot: they finish. Each counted itself before it loaded the flag,
        // and no stripe goes below 0, so a sum of 0 leaves none applying but those that see the flag and leave
        for (int spins = 0; fast.sum() != 0; spins++) {
            Inode.backoff(spins);
        }
        long s;
        synchronized (lock) {
            s = clock;
            live.merge(s, 1, Integer::sum);
            opening--;
        }
        for (int spins = 0; ; spins++) {
            synchronized (lock) {
                if (inflight.isEmpty() || inflight.first() > s) {
                    return s;
                }
            }
            Inode.backoff(spins);
        }
    }

    /** True while some snapshot is open. */
    boolean anyOpen() {
        return undoing;
    }

    /** Closes a snapshot of version {@code s}; the last one out turns recording off. */
    void close(long s) {
        synchronized (lock) {
            Integer n = live.get(s);
            if (n == null) {
                return;
            }
            if (n == 1) {
                live.remove(s);
            } else {
                live.put(s, n - 1);
            }
            if (live.isEmpty() && opening == 0) {
                undoing = false;
            }
        }
        prune();
    }

    /**
     * The chain entry that says what {@code key} of table {@code ino} held at snapshot {@code s}: the
     * oldest entry newer than {@code s}, or null if the tree's value (read before this call) is the one.
     */
    Undo at(long ino, byte[] key, long s) {
        ConcurrentSkipListMap<byte[], Undo> map = chains.get(ino);
        if (map == null) {
            return null;
        }
        Undo found = null;
        for (Undo u = map.get(key); u != null && u.version > s; u = u.older) {
            found = u;
        }
        return found;
    }

    /** Table {@code ino}'s chains (keys changed while snapshots were open), a live view. */
    ConcurrentSkipListMap<byte[], Undo> chains(long ino) {
        return chains.computeIfAbsent(ino, i -> new ConcurrentSkipListMap<>(Arrays::compareUnsigned));
    }

    /** Drops entries no open snapshot can need: every one at or below the oldest open snapshot. */
    private void prune() {
        long horizon;
        synchronized (lock) { // with none open, a snapshot opened later sees every version up to now
            horizon = live.isEmpty() ? clock : live.firstKey();
            if (!inflight.isEmpty()) {
                horizon = Math.min(horizon, inflight.first() - 1);
            }
        }
        for (Recorded r; (r = recorded.peek()) != null && r.version() <= horizon; ) {
            if (recorded.remove(r)) { // else another pruner took it
                drop(r);
            }
        }
    }

    /** Unlinks a record no snapshot needs, with every older one of its key. */
    private static void drop(Recorded r) {
        r.chains().computeIfPresent(r.key(), (k, head) -> {
            if (head == r.entry()) {
                return null;
            }
            for (Undo u = head; u != null; u = u.older) {
                if (u.older == r.entry()) {
                    u.older = null;
                    break;
                }
            }
            return head;
        });
    }

    /** Entries held now (tests and stats). */
    int entries() {
        return recorded.size();
    }
}
