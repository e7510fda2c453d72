package dev.ferrite.perf.bench;

import java.util.Locale;

/**
 * How the metadata workloads name what they touch, on every target alike. {@link #HANDLE}: each session
 * opens the root and each directory once and names files relative to them (Ferrite's {@code Handle}
 * calls; on the host {@code openat}, {@code fstatat}, {@code unlinkat}, {@code getdents64} on directory
 * descriptors), as {@code fts} or a file server does. {@link #PATH}: every call names the full path from
 * the root, walked anew each time (Ferrite's path calls; on the host {@code java.nio.file}).
 */
public enum MetaApi {
    HANDLE, PATH;

    public String label() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** {@code handle} or {@code path}, any case. */
    public static MetaApi parse(String s) {
        for (MetaApi a : values()) {
            if (a.label().equalsIgnoreCase(s.strip())) {
                return a;
            }
        }
        throw new IllegalArgumentException("--api " + s + ": give handle or path");
    }

    /**
     * The name a target's results carry: the target's own for {@link #HANDLE}, the default; with
     * {@code " (path)"} after it for {@link #PATH}, so that the two never pass for each other in a results
     * file (a {@code /} suffix would read as part of a {@code posix:DIR} target's directory).
     */
    public String targetLabel(String target) {
        return this == HANDLE ? target : target + " (" + label() + ")";
    }
}
