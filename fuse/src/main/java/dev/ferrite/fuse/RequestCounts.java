package dev.ferrite.fuse;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * How many requests a mount served, per libfuse low-level operation (one per kernel request: a FORGET_MULTI
 * counts once however many inodes it names): striped counters (no lock, no allocation), as libfuse's worker
 * threads serve requests at once.
 */
final class RequestCounts {
    enum Op {
        LOOKUP, FORGET, GETATTR, SETATTR, READLINK, MKNOD, MKDIR, UNLINK, RMDIR, SYMLINK, RENAME, LINK, OPEN, READ, WRITE,
        RELEASE, FSYNC, OPENDIR, READDIR, RELEASEDIR, FSYNCDIR, STATFS, CREATE, FORGET_MULTI, FALLOCATE, READDIRPLUS, LSEEK;

        final String label = name().toLowerCase(java.util.Locale.ROOT);
    }

    private final LongAdder[] counts = new LongAdder[Op.values().length];

    RequestCounts() {
        for (int i = 0; i < counts.length; i++) {
            counts[i] = new LongAdder();
        }
    }

    void count(Op op) {
        counts[op.ordinal()].increment();
    }

    /** The operations served at least once, in {@link Op}'s order, with how many times. */
    Map<String, Long> snapshot() {
        Map<String, Long> m = new LinkedHashMap<>();
        for (Op op : Op.values()) {
            long n = counts[op.ordinal()].sum();
            if (n != 0) {
                m.put(op.label, n);
            }
        }
        return Collections.unmodifiableMap(m);
    }
}
