package dev.ferrite.dir.testkit;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;

import dev.ferrite.io.Errno;

/**
 * The differential tests' random namespace operations, and the answers of the host's system calls to them
 * ({@link HostFs}, paths passed as they are) under a directory standing for the root. An operation is a line
 * of words, its paths absolute from the root: {@code "mkdir /a/b"}, {@code "renameat /a b /c d"}, {@code
 * "rename2 /a /b 2"} (renameat2 with RENAME_EXCHANGE). Paths have trailing slashes, {@code .} and {@code ..}
 * components and over-long names at every position; symlinks point at names, at {@code .}, {@code ..}, paths
 * through other symlinks and with trailing slashes, so they appear as path prefixes and as final components to
 * directories, files, nothing and each other. An answer is "ok", an errno's name, a stat's type and link count
 * ("dir 2", "file 1", "link") or a readlink's "target T".
 */
public final class PosixOps {
    /** NAME_MAX. */
    private static final int MAX_NAME = 255;
    private static final String LONG = "x".repeat(MAX_NAME + 1);
    private static final String LONGEST = "y".repeat(MAX_NAME);
    private static final String[] NAMES = {"a", "b", "c", "dd"};

    private final Path root;
    private final String prefix;

    /** The operations under {@code root}, a directory standing for the root of their paths. */
    public PosixOps(Path root) {
        this.root = root;
        this.prefix = root.toString();
    }

    public static String randomOp(Random rnd) {
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

    /** {@code what} for a failure message: over-long names shortened. */
    public static String shown(String what) {
        return what.replaceAll("\\S{40,}", "<long>");
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
     * other names, with a trailing slash, or long (past an inode's inline area, at Ferrite's longest on
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
                case 2 -> d == 0 ? "." : ".."; // ".." from the root leaves it at once
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
        return prefix + p;
    }

    /** The host's answer to {@code what} under the root. */
    public String apply(String what) {
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
            default -> applyAt(w);
        };
    }

    private String applyAt(String[] w) {
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

    /**
     * Whether a path of {@code what}, resolved as far as it goes under the root as the operation resolves it
     * (its final symlink followed by stat and a non-exclusive open only), leaves the root with a {@code ..}:
     * openat2's RESOLVE_BENEATH says EXDEV. Above the root is not the tree under test.
     */
    public boolean leavesRoot(String what) {
        int fd = HostFs.openPath(prefix);
        if (fd < 0) {
            throw new IllegalStateException("cannot open " + root + ": " + Errno.name(-fd));
        }
        try {
            String[] w = what.split(" ");
            boolean follow = w[0].equals("stat") || w[0].equals("open");
            for (String p : paths(w)) {
                if (HostFs.beneath(fd, p.replaceFirst("^/+", ""), follow) == Errno.EXDEV) {
                    return true;
                }
            }
            return false;
        } finally {
            HostFs.close(fd);
        }
    }

    /** The paths {@code w} resolves: a handle form's directory and name as one path; not a symlink's target. */
    private static List<String> paths(String[] w) {
        return switch (w[0]) {
            case "rename", "rename2", "link" -> List.of(w[1], w[2]);
            case "symlink" -> List.of(w[2]);
            case "lstatat", "mkdirat", "createat", "unlinkat", "rmdirat" -> List.of(w[1] + "/" + w[2]);
            case "renameat", "renameat2" -> List.of(w[1] + "/" + w[2], w[3] + "/" + w[4]);
            default -> List.of(w[1]);
        };
    }

    /** The tree under the root: each path ("/a/b") to "dir", "file N" (N its link count) or "link T" (T its target). */
    public Map<String, String> tree() throws IOException {
        Map<String, String> out = new TreeMap<>();
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p : (Iterable<Path>) s::iterator) {
                if (p.equals(root)) {
                    continue;
                }
                String name = "/" + root.relativize(p).toString();
                BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
                out.put(name, a.isSymbolicLink() ? "link " + Files.readSymbolicLink(p)
                        : a.isDirectory() ? "dir" : "file " + Files.getAttribute(p, "unix:nlink", LinkOption.NOFOLLOW_LINKS));
            }
        }
        return out;
    }

    /** Deletes {@code p} and everything under it. */
    public static void deleteTree(Path p) throws IOException {
        if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
            try (Stream<Path> s = Files.list(p)) {
                for (Path c : (Iterable<Path>) s::iterator) {
                    deleteTree(c);
                }
            }
        }
        Files.delete(p);
    }
}
