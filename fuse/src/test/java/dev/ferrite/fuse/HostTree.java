package dev.ferrite.fuse;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.stream.Stream;

/** Trees of files for the programs the mount runs: a generated one, and a listing of any for comparing two. */
final class HostTree {
    private HostTree() {
    }

    /**
     * Writes under {@code root} a tree from {@code seed}: nested directories, files of 0 to 300 KB (some sparse,
     * some empty), symlinks (some dangling), hard links and various modes.
     */
    static void generate(Path root, long seed, int files) throws IOException {
        Random r = new Random(seed);
        List<Path> dirs = new java.util.ArrayList<>(List.of(root));
        List<Path> made = new java.util.ArrayList<>();
        for (int i = 0; i < files; i++) {
            Path dir = dirs.get(r.nextInt(dirs.size()));
            switch (r.nextInt(10)) {
                case 0 -> dirs.add(Files.createDirectory(dir.resolve("d" + i)));
                case 1 -> Files.createSymbolicLink(dir.resolve("l" + i), Path.of(r.nextBoolean() && !made.isEmpty()
                        ? root.relativize(made.get(r.nextInt(made.size()))).toString() : "missing-" + i));
                case 2 -> {
                    if (!made.isEmpty()) {
                        Files.createLink(dir.resolve("h" + i), made.get(r.nextInt(made.size())));
                    }
                }
                default -> {
                    byte[] data = new byte[r.nextInt(4) == 0 ? 0 : r.nextInt(300_000)];
                    r.nextBytes(data);
                    Path f = Files.write(dir.resolve("f" + i + (r.nextBoolean() ? ".txt" : "")), data);
                    if (r.nextInt(8) == 0) { // a hole, then a tail
                        try (var ch = java.nio.channels.FileChannel.open(f, java.nio.file.StandardOpenOption.WRITE)) {
                            ch.write(java.nio.ByteBuffer.wrap(new byte[]{1, 2, 3}), 1 << 20);
                        }
                    }
                    Files.setPosixFilePermissions(f, PosixFilePermissions.fromString(r.nextBoolean() ? "rw-r--r--" : "rwxr-x---"));
                    made.add(f);
                }
            }
        }
    }

    /**
     * Every entry under {@code root} (relative path → type, permissions, size, content digest, symlink target,
     * modification second of files and symlinks, and which other paths share its inode).
     */
    static SortedMap<String, String> listing(Path root) throws IOException {
        SortedMap<String, String> out = new TreeMap<>();
        Map<Object, String> firstByInode = new HashMap<>();
        try (Stream<Path> all = Files.walk(root)) {
            for (Path p : (Iterable<Path>) all.sorted()::iterator) {
                String rel = root.relativize(p).toString();
                PosixFileAttributes a = Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
                String what;
                if (a.isSymbolicLink()) {
                    what = "link -> " + Files.readSymbolicLink(p) + " @" + a.lastModifiedTime().toMillis() / 1000;
                } else if (a.isDirectory()) {
                    what = "dir " + PosixFilePermissions.toString(a.permissions());
                } else {
                    String first = firstByInode.putIfAbsent(a.fileKey(), rel);
                    what = "file " + PosixFilePermissions.toString(a.permissions()) + " " + a.size() + " " + digest(p)
                            + " @" + a.lastModifiedTime().toMillis() / 1000 + (first != null ? " same as " + first : "");
                }
                out.put(rel, what);
            }
        }
        return out;
    }

    /** Fails naming the first entries (up to 10) where the trees under {@code expected} and {@code actual} differ. */
    static void assertSame(Path expected, Path actual, String what) throws IOException {
        SortedMap<String, String> e = listing(expected), a = listing(actual);
        List<String> diffs = new java.util.ArrayList<>();
        java.util.SortedSet<String> keys = new java.util.TreeSet<>(e.keySet());
        keys.addAll(a.keySet());
        for (String k : keys) {
            if (!java.util.Objects.equals(e.get(k), a.get(k)) && diffs.size() < 10) {
                diffs.add(k + ": expected [" + e.get(k) + "] but was [" + a.get(k) + "]");
            }
        }
        org.junit.jupiter.api.Assertions.assertTrue(diffs.isEmpty(), () -> what + ": " + actual + " differs from " + expected
                + " (" + e.size() + " entries):\n  " + String.join("\n  ", diffs));
    }

    private static String digest(Path p) throws IOException {
        try (InputStream in = Files.newInputStream(p)) {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[65536];
            for (int n; (n = in.read(buf)) > 0; ) {
                md.update(buf, 0, n);
            }
            return HexFormat.of().formatHex(md.digest(), 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A fresh directory on tmpfs (/dev/shm) where there is one, else under {@code scratch}: where the programs' reference runs go. */
    static Path reference(Path scratch, String name) throws IOException {
        Path shm = Path.of("/dev/shm");
        return Files.isDirectory(shm) && Files.isWritable(shm) ? Files.createTempDirectory(shm, "ferrite-" + name)
                : Files.createDirectories(scratch.resolve("ref-" + name));
    }

    /** Deletes {@code root} and everything under it. */
    static void delete(Path root) throws IOException {
        if (!Files.exists(root, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (Stream<Path> all = Files.walk(root)) {
            for (Path p : (Iterable<Path>) all.sorted(java.util.Comparator.reverseOrder())::iterator) {
                Files.delete(p);
            }
        }
    }
}
