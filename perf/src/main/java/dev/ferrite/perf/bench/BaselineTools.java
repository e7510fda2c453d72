package dev.ferrite.perf.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * What the default suite's baselines need that this machine lacks: a fresh machine runs Ferrite's side of
 * every step without them, and the suite says at its start which comparisons it leaves out and which
 * packages bring them, rather than leaving a reader to wonder where XFS went.
 */
public final class BaselineTools {
    /** A missing program (or file) and the Debian/Ubuntu package that installs it. */
    public record Missing(String tool, String pkg) {
    }

    /** Where Debian's and Ubuntu's dbench package puts the loadfile the dbench step replays (also {@code bench dbench}'s default). */
    public static final String DBENCH_CLIENT_TXT = "/usr/share/dbench/client.txt";
    public static final Path DBENCH_LOADFILE = Path.of(DBENCH_CLIENT_TXT);

    private BaselineTools() {
    }

    /** What this machine lacks, fio left out with {@code noFio}; empty when every baseline can run. */
    public static List<Missing> missing(boolean noFio) {
        return missing(noFio, LoopDevice::onPath, Files::isReadable);
    }

    static List<Missing> missing(boolean noFio, Predicate<String> onPath, Predicate<Path> readable) {
        List<Missing> missing = new ArrayList<>();
        if (!noFio && !onPath.test("fio")) {
            missing.add(new Missing("fio", "fio"));
        }
        if (!onPath.test("losetup")) {
            missing.add(new Missing("losetup", "util-linux"));
        }
        for (String[] mkfs : new String[][] {{"mkfs.xfs", "xfsprogs"}, {"mkfs.ext4", "e2fsprogs"}, {"mkfs.btrfs", "btrfs-progs"}}) {
            if (!onPath.test(mkfs[0])) {
                missing.add(new Missing(mkfs[0], mkfs[1]));
            }
        }
        if (!onPath.test("dbench") || !readable.test(DBENCH_LOADFILE)) {
            missing.add(new Missing("dbench", "dbench"));
        }
        return missing;
    }

    /**
     * The suite's note on its baselines: what is missing and the install command, then, if not root, that
     * the kernel file systems need loop devices; empty if nothing is in the way.
     */
    public static List<String> note(List<Missing> missing, boolean root) {
        List<String> lines = new ArrayList<>();
        if (!missing.isEmpty()) {
            lines.add("baselines: this machine lacks " + String.join(", ", missing.stream().map(Missing::tool).toList())
                    + "; the comparisons that need them are left out (Debian/Ubuntu: apt-get install "
                    + String.join(" ", missing.stream().map(Missing::pkg).distinct().toList()) + ")");
        }
        if (!root) {
            lines.add("baselines: not root, so no loop devices: XFS, ext4 and btrfs are left out, and the directory"
                    + " workloads compare with the temporary directory's file system instead");
        }
        return lines;
    }

    /** Whether this process runs as root (loop devices need it). */
    public static boolean root() {
        return LoopDevice.isRoot();
    }
}
