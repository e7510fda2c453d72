package dev.ferrite.dir;

import java.io.IOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;

import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Random namespace operations applied both to a Ferrite volume and to a directory of the host's file
 * system (through java.nio.file): each must succeed on both or fail on both with the same errno, and the
 * trees must end up equal (names, types, symlink targets, link counts).
 */
class PosixDifferentialTest {
    private static final String[] NAMES = {"a", "b", "c", "dd"};
    private static final int OPS = Integer.getInteger("ferrite.differential.ops", 4000);

    @TempDir
    Path host;

    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3})
    void ferriteAgreesWithTheHost(long defaultSeed) throws IOException {
        long seed = Long.getLong("ferrite.seed", defaultSeed);
        Random rnd = new Random(seed);
        try (MemoryDevice dev = VolumeTest.formatted(); Volume v = Volume.open(dev, VolumeTest.OPTIONS)) {
            Namespace ns = v.namespace();
            for (int i = 0; i < OPS; i++) {
                String p = randomPath(rnd), q = randomPath(rnd);
                int op = rnd.nextInt(10);
                String what = switch (op) {
                    case 0, 1 -> "mkdir " + p;
                    case 2, 3 -> "create " + p;
                    case 4, 5 -> "delete " + p;
                    case 6, 7 -> "rename " + p + " " + q;
                    case 8 -> "link " + p + " " + q;
                    default -> "symlink " + target(rnd) + " " + q;
                };
                int theirs = onHost(what);
                int ours = onFerrite(ns, what);
                assertEquals(Errno.name(theirs), Errno.name(ours), "op " + i + " '" + what.replaceAll("\\S{40,}",
                        "<long target>") + "', seed " + seed);
            }
            assertEquals(hostTree(), ferriteTree(ns, "/"), "final tree, seed " + seed);
            NamespaceTest.assertChecked(ns);
        }
    }

    /**
     * A symlink target: mostly a name, sometimes a long path (past the inode's inline area, at Ferrite's
     * longest on 4 KiB blocks, or past PATH_MAX, which both refuse).
     */
    private static String target(Random rnd) {
        int n = switch (rnd.nextInt(8)) {
            case 0 -> 409;
            case 1 -> 4060;
            case 2 -> 4096;
            default -> 0;
        };
        if (n == 0) {
            return NAMES[rnd.nextInt(NAMES.length)];
        }
        return "./".repeat((n - 1) / 2) + (n % 2 == 0 ? "." : "") + NAMES[rnd.nextInt(3)];
    }

    private static String randomPath(Random rnd) {
        StringBuilder sb = new StringBuilder();
        int depth = 1 + rnd.nextInt(3);
        for (int d = 0; d < depth; d++) {
            sb.append('/').append(NAMES[rnd.nextInt(NAMES.length)]);
        }
        return sb.toString();
    }

    private Path h(String p) {
        return host.resolve(p.substring(1));
    }

    /** 0 or the errno the host reported. */
    private int onHost(String what) {
        String[] w = what.split(" ");
        try {
            switch (w[0]) {
                case "mkdir" -> Files.createDirectory(h(w[1]));
                case "create" -> Files.createFile(h(w[1]));
                case "delete" -> Files.delete(h(w[1]));
                case "rename" -> Files.move(h(w[1]), h(w[2]), StandardCopyOption.ATOMIC_MOVE);
                case "link" -> Files.createLink(h(w[2]), h(w[1]));
                default -> Files.createSymbolicLink(h(w[2]), Path.of(w[1]));
            }
            return 0;
        } catch (NoSuchFileException e) {
            return Errno.ENOENT;
        } catch (FileAlreadyExistsException e) {
            return Errno.EEXIST;
        } catch (DirectoryNotEmptyException e) {
            return Errno.ENOTEMPTY;
        } catch (NotDirectoryException e) {
            return Errno.ENOTDIR;
        } catch (FileSystemException e) {
            String r = String.valueOf(e.getReason());
            if (r.startsWith("Too many levels of symbolic links")) {
                return Errno.ELOOP;
            }
            return switch (r) {
                case "Not a directory" -> Errno.ENOTDIR;
                case "Is a directory" -> Errno.EISDIR;
                case "Invalid argument" -> Errno.EINVAL;
                case "Directory not empty" -> Errno.ENOTEMPTY;
                case "Operation not permitted" -> Errno.EPERM;
                case "File name too long" -> Errno.ENAMETOOLONG;
                default -> throw new AssertionError("host said " + r + " to " + what, e);
            };
        } catch (IOException e) {
            throw new AssertionError("host failed " + what, e);
        }
    }

    private static int onFerrite(Namespace ns, String what) {
        String[] w = what.split(" ");
        try {
            switch (w[0]) {
                case "mkdir" -> ns.mkdir(w[1], 0755);
                case "create" -> ns.create(w[1], 0644, true);
                case "delete" -> {
                    if (ns.lstat(w[1]).isDirectory()) {
                        ns.rmdir(w[1]);
                    } else {
                        ns.unlink(w[1]);
                    }
                }
                case "rename" -> ns.rename(w[1], w[2]);
                case "link" -> ns.link(w[1], w[2]);
                default -> ns.symlink(w[1], w[2]);
            }
            return 0;
        } catch (NamespaceException e) {
            return e.errno();
        }
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
