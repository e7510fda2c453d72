package dev.ferrite.fuse;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * How many upcalls a mount served, per libfuse operation: striped counters (no lock, no allocation), as libfuse's
 * worker threads serve requests at once. libfuse's high-level API answers the kernel's LOOKUP with getattr by path,
 * and SETATTR with chmod, chown, truncate and utimens, so those names count those kernel requests too.
 */
final class RequestCounts {
    enum Op {
        GETATTR, READLINK, MKNOD, MKDIR, UNLINK, RMDIR, SYMLINK, RENAME, LINK, CHMOD, CHOWN, TRUNCATE, UTIMENS, OPEN,
        READ, WRITE, STATFS, RELEASE, FSYNC, OPENDIR, READDIR, RELEASEDIR, FSYNCDIR, CREATE, FALLOCATE, LSEEK;

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
