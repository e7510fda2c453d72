package dev.ferrite.dir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;

import dev.ferrite.dir.testkit.HostFs;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random namespace operations applied both to a Ferrite volume and to a directory of the host's file
 * system (through its system calls, paths passed as they are): each must give the same answer on both
 * (the same errno, or the same type and link count for a stat, the same target for a readlink), and the
 * trees must end up equal (names, types, symlink targets, link counts). Paths have trailing slashes,
 * {@code .} and {@code ..} components and over-long names at every position; symlinks point at names,
 * at {@code .}, {@code ..}, paths through other symlinks and with trailing slashes, so they appear as
 * path prefixes and as final components to directories, files, nothing and each other.
 *
 * <p>The one deliberate difference: a {@code ..} above Ferrite's root is EINVAL, where the host would
 * leave its directory. Such an operation is not sent to the host (it changes nothing on Ferrite).
 */
@ExtendWith(TestSeed.class)
class PosixDifferentialTest {
    private static final String LONG = "x".repeat(DirEntryFormat.MAX_NAME + 1);
    private static final String LONGEST = "y".repeat(DirEntryFormat.MAX_NAME);
    private static final String[] NAMES = {"a", "b", "c", "dd"};
    private static final int OPS = Integer.getInteger("ferrite.differential.ops", 3000);

    @TempDir
    Path tempDir;
    /** The host directory standing for the volume's root in this run. */
    private Path host;

    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3})
    void ferriteAgreesWithTheHost(long defaultSeed) throws IOException {
        host = tempDir;
        run(TestSeed.get(defaultSeed), OPS);
    }

    /** Many seeds, each against the temporary directory's file system and, where there is one, tmpfs. */
    @Test
    @Tag("stress")
    void ferriteAgreesWithTheHostOverManySeeds() throws IOException {
        Path shm = Path.of("/dev/shm");
        for (long seed = 100; seed < 160; seed++) {
            boolean tmpfs = seed % 2 == 1 && Files.isDirectory(shm) && Files.isWritable(shm);
            host = tmpfs ? Files.createTempDirectory(shm, "ferrite-differential") : Files.createDirectory(tempDir.resolve("s" + seed));
            try {
                run(seed, 10_000);
            } finally {
                deleteTree(host);
            }
        }
    }

    private void run(long seed, int ops) throws IOException {
        Random rnd = new Random(seed);
        int skipped = 0;
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            for (int i = 0; i < ops; i++) {
                String what = randomOp(rnd);
                String ours = onFerrite(ns, what);
                if (ours == null) {
                    skipped++;
                    continue;
                }
                String theirs = onHost(what);
                assertEquals(theirs, ours, "op " + i + " '" + what.replaceAll("\\S{40,}", "<long>") + "', seed " + seed);
            }
            assertTrue(skipped < ops / 4, skipped + " operations led above the root, seed " + seed);
            assertEquals(hostTree(), ferriteTree(ns, "/"), "final tree, seed " + seed);
            VolumeFixtures.assertChecked(ns);
        }
    }

    private static String randomOp(Random rnd) {
        String p = randomPath(rnd), q = randomPath(rnd);
        return switch (rnd.nextInt(22)) { // renameat2: flag 1 RENAME_NOREPLACE, 2 RENAME_EXCHANGE
            case 0, 1, 2 -> "mkdir " + p;
            case 3, 4 -> "create " + p;
            case 5 -> "open " + p;
            case 6 -> "unlink " + p;
            case 7 -> "rmdir " + p;
            case 8 -> "rename " + p + " " + q;
            case 9 -> "link " + p + " " + q;
            case 10, 11 -> "symlink " + target(rnd) + " " + q;
            case 12 -> "lstat " + p;
            case 13 -> "stat " + p;
            case 14 -> "readlink " + p;
            case 15 -> "lstatat " + p + " " + name(rnd);
            case 16 -> "mkdirat " + p + " " + name(rnd);
            case 17 -> "createat " + p + " " + name(rnd);
            case 18 -> (rnd.nextBoolean() ? "unlinkat " : "rmdirat ") + p + " " + name(rnd);
            case 19 -> "rename2 " + p + " " + q + " " + (1 + rnd.nextInt(2));
            case 20 -> "renameat2 " + p + " " + name(rnd) + " " + q + " " + name(rnd) + " " + (1 + rnd.nextInt(2));
            default -> "renameat " + p + " " + name(rnd) + " " + q + " " + name(rnd);
        };
    }

    /** A name for a handle form: mostly a short one, sometimes ".", "..", the longest or one too long. */
    private static String name(Random rnd) {
        return switch (rnd.nextInt(16)) {
            case 0 -> ".";
            case 1 -> "..";
            case 2 -> LONG;
            case 3 -> LONGEST;
            default -> NAMES[rnd.nextInt(NAMES.length)];
        };
    }

    /**
     * A symlink target, relative (the host's root is not the volume's): a name, ".", "..", a path through
     * other names, with a trailing slash, or long (past the inode's inline area, at Ferrite's longest on
     * 4 KiB blocks, or past PATH_MAX, which both refuse).
     */
    private static String target(Random rnd) {
        String n = NAMES[rnd.nextInt(NAMES.length)];
        return switch (rnd.nextInt(12)) {
            case 0 -> ".";
            case 1 -> "..";
            case 2 -> "../" + n;
            case 3 -> n + "/";
            case 4 -> n + "/" + NAMES[rnd.nextInt(NAMES.length)];
            case 5 -> longTarget(409, n);
            case 6 -> longTarget(4060, n);
            case 7 -> longTarget(4096, n);
            default -> n;
        };
    }

    private static String longTarget(int n, String name) {
        return "./".repeat((n - name.length()) / 2) + ((n - name.length()) % 2 == 1 ? "/" : "") + name;
    }

    /** One to three components, each sometimes ".", ".." or a name too long; sometimes a trailing slash. */
    private static String randomPath(Random rnd) {
        StringBuilder sb = new StringBuilder();
        int depth = 1 + rnd.nextInt(3);
        for (int d = 0; d < depth; d++) {
            sb.append('/').append(switch (rnd.nextInt(24)) {
                case 0, 1 -> ".";
                case 2 -> d == 0 ? "." : ".."; // ".." from the root is the documented difference
                case 3 -> LONG;
                default -> NAMES[rnd.nextInt(NAMES.length)];
            });
        }
        if (rnd.nextInt(6) == 0) {
            sb.append('/');
        }
        return sb.toString();
    }

    private String h(String p) {
        return host + p;
    }

    /** The host's answer: "ok", an errno's name, or what a stat or readlink gave. */
    private String onHost(String what) {
        String[] w = what.split(" ");
        return switch (w[0]) {
            case "mkdir" -> answer(HostFs.mkdir(h(w[1])));
            case "create" -> answer(HostFs.open(h(w[1]), HostFs.O_WRONLY | HostFs.O_CREAT | HostFs.O_EXCL));
            case "open" -> answer(HostFs.open(h(w[1]), HostFs.O_WRONLY | HostFs.O_CREAT));
            case "unlink" -> answer(HostFs.unlink(h(w[1])));
            case "rmdir" -> answer(HostFs.rmdir(h(w[1])));
            case "rename" -> answer(HostFs.rename(h(w[1]), h(w[2])));
            case "rename2" -> answer(HostFs.rename(h(w[1]), h(w[2]), Integer.parseInt(w[3])));
            case "link" -> answer(HostFs.link(h(w[1]), h(w[2])));
            case "symlink" -> answer(HostFs.symlink(w[1], h(w[2])));
            case "lstat" -> hostStat(HostFs.stat(HostFs.AT_FDCWD, h(w[1]), HostFs.AT_SYMLINK_NOFOLLOW));
            case "stat" -> hostStat(HostFs.stat(HostFs.AT_FDCWD, h(w[1]), 0));
            case "readlink" -> {
                String t = HostFs.readlink(h(w[1]));
                yield t.startsWith("errno ") ? hostStat(t) : "target " + t;
            }
            default -> onHostAt(w);
        };
    }

    private String onHostAt(String[] w) {
        int fd = HostFs.openPath(h(w[1]));
        if (fd < 0) {
            return Errno.name(-fd);
        }
        try {
            return switch (w[0]) {
                case "lstatat" -> hostStat(HostFs.stat(fd, w[2], HostFs.AT_SYMLINK_NOFOLLOW));
                case "mkdirat" -> answer(HostFs.mkdirat(fd, w[2]));
                case "createat" -> answer(HostFs.openat(fd, w[2], HostFs.O_WRONLY | HostFs.O_CREAT | HostFs.O_EXCL));
                case "unlinkat" -> answer(HostFs.unlinkat(fd, w[2], 0));
                case "rmdirat" -> answer(HostFs.unlinkat(fd, w[2], HostFs.AT_REMOVEDIR));
                default -> {
                    int to = HostFs.openPath(h(w[3]));
                    if (to < 0) {
                        yield Errno.name(-to);
                    }
                    try {
                        yield answer(w.length > 5 ? HostFs.renameat(fd, w[2], to, w[4], Integer.parseInt(w[5]))
                                : HostFs.renameat(fd, w[2], to, w[4]));
                    } finally {
                        HostFs.close(to);
                    }
                }
            };
        } finally {
            HostFs.close(fd);
        }
    }

    private static String answer(int errno) {
        return errno == 0 ? "ok" : Errno.name(errno);
    }

    private static String hostStat(String s) {
        return s.startsWith("errno ") ? Errno.name(Integer.parseInt(s.substring(6))) : s;
    }

    /** Ferrite's answer as {@link #onHost} gives it, or null for a '..' above the root. */
    private static String onFerrite(Namespace ns, String what) {
        String[] w = what.split(" ");
        try {
            switch (w[0]) {
                case "mkdir" -> ns.mkdir(w[1], 0755);
                case "create" -> ns.create(w[1], 0644, true);
                case "open" -> ns.create(w[1], 0644, false);
                case "unlink" -> ns.unlink(w[1]);
                case "rmdir" -> ns.rmdir(w[1]);
                case "rename" -> ns.rename(w[1], w[2]);
                case "rename2" -> ns.rename(w[1], w[2], mode(w[3]));
                case "link" -> ns.link(w[1], w[2]);
                case "symlink" -> ns.symlink(w[1], w[2]);
                case "lstat" -> {
                    return describe(ns.lstat(w[1]));
                }
                case "stat" -> {
                    return describe(ns.stat(w[1]));
                }
                case "readlink" -> {
                    return "target " + ns.readlink(w[1]);
                }
                default -> {
                    return onFerriteAt(ns, w);
                }
            }
            return "ok";
        } catch (NamespaceException e) {
            return aboveRoot(e) ? null : Errno.name(e.errno());
        }
    }

    private static String onFerriteAt(Namespace ns, String[] w) {
        try (Handle d = ns.open(w[1])) {
            switch (w[0]) {
                case "lstatat" -> {
                    return describe(ns.lstat(d, w[2]));
                }
                case "mkdirat" -> ns.mkdir(d, w[2], 0755).close();
                case "createat" -> ns.create(d, w[2], 0644, true).close();
                case "unlinkat" -> ns.unlink(d, w[2]);
                case "rmdirat" -> ns.rmdir(d, w[2]);
                default -> {
                    try (Handle to = ns.open(w[3])) {
                        ns.rename(d, w[2], to, w[4], w.length > 5 ? mode(w[5]) : RenameMode.REPLACE);
                    }
                }
            }
            return "ok";
        }
    }

    /** The mode of renameat2's flag {@code flag}. */
    private static RenameMode mode(String flag) {
        return flag.equals("1") ? RenameMode.NO_REPLACE : RenameMode.EXCHANGE;
    }

    private static boolean aboveRoot(NamespaceException e) {
        return e.errno() == Errno.EINVAL && e.getMessage().contains("above the root");
    }

    private static String describe(InodeStat s) {
        return s.isDirectory() ? "dir " + s.nlink() : s.isSymlink() ? "link" : "file " + s.nlink();
    }

    private static void deleteTree(Path p) throws IOException {
        if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
            try (Stream<Path> s = Files.list(p)) {
                for (Path c : (Iterable<Path>) s::iterator) {
                    deleteTree(c);
                }
            }
        }
        Files.delete(p);
    }

    private Map<String, String> hostTree() throws IOException {
        Map<String, String> out = new TreeMap<>();
        try (Stream<Path> s = Files.walk(host)) {
            for (Path p : (Iterable<Path>) s::iterator) {
                if (p.equals(host)) {
                    continue;
                }
                String name = "/" + host.relativize(p).toString();
                BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
                out.put(name, a.isSymbolicLink() ? "link " + Files.readSymbolicLink(p)
                        : a.isDirectory() ? "dir" : "file " + Files.getAttribute(p, "unix:nlink", LinkOption.NOFOLLOW_LINKS));
            }
        }
        return out;
    }

    static Map<String, String> ferriteTree(Namespace ns, String dir) {
        Map<String, String> out = new TreeMap<>();
        for (DirEntry e : ns.list(dir)) {
            String p = (dir.equals("/") ? "" : dir) + "/" + e.name();
            InodeStat s = ns.lstat(p);
            if (s.isSymlink()) {
                out.put(p, "link " + ns.readlink(p));
            } else if (s.isDirectory()) {
                out.put(p, "dir");
                out.putAll(ferriteTree(ns, p));
            } else {
                out.put(p, "file " + s.nlink());
            }
        }
        return out;
    }
}
