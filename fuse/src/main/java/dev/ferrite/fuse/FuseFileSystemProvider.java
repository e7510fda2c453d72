package dev.ferrite.fuse;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import dev.ferrite.dir.FileSystemMount;
import dev.ferrite.dir.FileSystemProvider;
import dev.ferrite.dir.Volume;
import dev.ferrite.io.InvalidArgumentException;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * Mounts a volume through libfuse3's low-level API ({@link LowLevelServer}, bound through the FFM API by
 * {@link Libfuse}): {@link Volume#mount} finds this provider. The mount options are fixed here and documented in
 * docs/mount.md: the kernel checks permissions ({@code default_permissions}), entries and attributes are cached
 * 1 s (the volume may also change through the Java API; {@value #CACHE_TIMEOUT} sets another time), and requests
 * are served by libfuse's multithreaded loop, up to 4 workers each reading its own cloned {@code /dev/fuse}
 * descriptor ({@code clone_fd}).
 */
public final class FuseFileSystemProvider implements FileSystemProvider {
    /**
     * libfuse's workers at most (its default is 10). Waiting requests go to the worker that has waited longest, so
     * with 10 even one process's calls, one at a time, rotate over all of them. On a 2-vCPU VM dbench with one
     * client did better with 2 or 4 workers than with 10, with 8 clients about the same (docs/mount.md,
     * Performance); one worker is slower again, as FORGETs and RELEASEs, which the kernel sends without waiting,
     * queue the next call.
     */
    private static final int THREADS = 4;
    /** How long a close waits for libfuse's loop to end after unmounting. */
    private static final long LOOP_SECONDS = 10;
    private static final List<String> LIBRARY_DIRS = List.of("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
            "/usr/lib64", "/lib64", "/usr/local/lib", "/usr/lib");
    private static final Path MOUNTS = Path.of("/proc/self/mountinfo");
    /** The system property giving the seconds the kernel caches entries and attributes (1 if unset; 0 for none). */
    public static final String CACHE_TIMEOUT = "ferrite.fuse.cacheTimeout";

    @Override
    public FileSystemMount mount(Volume volume, String source, Path mountPoint, boolean readOnly) {
        return mount(volume, source, mountPoint, readOnly, cacheSeconds(System.getProperty(CACHE_TIMEOUT, "1")), false);
    }

    /** The seconds {@code value} of {@link #CACHE_TIMEOUT} gives: InvalidArgumentException unless a number from 0 to 1e9. */
    static double cacheSeconds(String value) {
        double seconds;
        try {
            seconds = Double.parseDouble(value);
        } catch (NumberFormatException e) {
            seconds = Double.NaN;
        }
        if (!(seconds >= 0 && seconds <= 1e9)) {
            throw new InvalidArgumentException("-D" + CACHE_TIMEOUT + "=" + value + " is not a number of seconds from 0 to 1e9");
        }
        return seconds;
    }

    /**
     * {@link #mount(Volume, String, Path, boolean)} with entries and attributes cached {@code cacheSeconds}, served
     * by one thread with {@code oneThread} (requests served one at a time, in the order the kernel queued them).
     */
    FileSystemMount mount(Volume volume, String source, Path mountPoint, boolean readOnly, double cacheSeconds, boolean oneThread) {
        if (!supported()) {
            throw new UnsupportedOperationException("mounting needs Linux on x86-64 (this is " + System.getProperty("os.name")
                    + " on " + System.getProperty("os.arch") + ")");
        }
        Path at = mountPoint.toAbsolutePath().normalize();
        if (!Files.isDirectory(at)) {
            throw new InvalidArgumentException("mount point " + at + " is not a directory");
        }
        Libfuse fuse = new Libfuse(libfuse());
        LowLevelServer server = new LowLevelServer(volume, fuse, cacheSeconds);
        Arena arena = Arena.ofShared();
        MemorySegment se = MemorySegment.NULL;
        try {
            List<String> options = new ArrayList<>(List.of("default_permissions", "subtype=ferrite",
                    "fsname=" + source.replace("\\", "\\\\").replace(",", "\\,")));
            if (readOnly) {
                options.add("ro");
            }
            if ("root".equals(System.getProperty("user.name"))) {
                options.add("allow_other"); // a file system for every user, as the kernel's own
            }
            List<String> argv = List.of("ferrite", "-o", String.join(",", options));
            MemorySegment strings = arena.allocate(ADDRESS, argv.size() + 1);
            for (int i = 0; i < argv.size(); i++) {
                strings.setAtIndex(ADDRESS, i, arena.allocateFrom(argv.get(i)));
            }
            MemorySegment args = arena.allocate(LowLevelFormat.ARGS);
            args.set(JAVA_INT, LowLevelFormat.ARGS_ARGC, argv.size());
            args.set(ADDRESS, LowLevelFormat.ARGS_ARGV, strings);
            se = fuse.sessionNew(args, server.operations(arena), MemorySegment.NULL);
            fuse.freeArgs(args);
            if (se.equals(MemorySegment.NULL)) {
                throw new IllegalStateException("libfuse refused the options " + argv);
            }
            if (fuse.sessionMount(se, arena.allocateFrom(at.toString())) != 0) {
                throw new IllegalStateException("the kernel refused the mount (libfuse wrote why on stderr)");
            }
        } catch (RuntimeException e) {
            if (!se.equals(MemorySegment.NULL)) {
                fuse.sessionDestroy(se);
            }
            arena.close();
            server.closeAll();
            throw new UncheckedIOException(new IOException("cannot mount " + at + ": " + e.getMessage(), e));
        }
        return new Mounted(at, fuse, se, server, arena, oneThread ? 1 : THREADS);
    }

    /** Whether this platform's structs are the ones {@link LowLevelFormat} lays out. */
    static boolean supported() {
        return System.getProperty("os.name").equals("Linux") && System.getProperty("os.arch").equals("amd64");
    }

    /** libfuse3's shared library: {@code -Dferrite.libfuse=PATH}, else the first found where distributions put it. */
    static String libfuse() {
        String given = System.getProperty("ferrite.libfuse");
        if (given != null) {
            return given;
        }
        for (String dir : LIBRARY_DIRS) {
            for (String name : List.of("libfuse3.so.3", "libfuse3.so")) {
                if (Files.exists(Path.of(dir, name))) {
                    return dir + "/" + name;
                }
            }
        }
        throw new UnsupportedOperationException("libfuse3 not found in " + LIBRARY_DIRS
                + ": install it (apt-get install fuse3) or give its path with -Dferrite.libfuse=PATH");
    }

    /** Whether the kernel shows a mount on {@code at} (an absolute, normalized path). */
    public static boolean isMounted(Path at) {
        return source(at) != null;
    }

    /** The source the mount table gives for the mount on {@code at} (for a Ferrite mount, its device), or null if none. */
    public static String source(Path at) {
        try {
            String want = escape(at.toString());
            for (String line : Files.readAllLines(MOUNTS)) {
                // mount ID, parent ID, major:minor, root, mount point, options, optional fields..., "-", type, source, options
                String[] f = line.split(" ");
                if (f.length > 4 && f[4].equals(want)) {
                    int dash = List.of(f).indexOf("-");
                    return dash > 0 && dash + 2 < f.length ? unescape(f[dash + 2]) : "";
                }
            }
            return null;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static String escape(String path) {
        return path.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012");
    }

    private static String unescape(String field) {
        return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\");
    }

    /** A mount being served: libfuse's loop runs in a thread of its own until the session exits or the mount goes. */
    static final class Mounted implements FileSystemMount {
        private static final System.Logger LOG = System.getLogger(Mounted.class.getName());
        private final Path at;
        private final Libfuse fuse;
        private final MemorySegment se;
        final LowLevelServer server;
        private final Arena arena;
        private final Thread loop;
        private final CountDownLatch unmounted = new CountDownLatch(1);
        private boolean closed;

        Mounted(Path at, Libfuse fuse, MemorySegment se, LowLevelServer server, Arena arena, int threads) {
            this.at = at;
            this.fuse = fuse;
            this.se = se;
            this.server = server;
            this.arena = arena;
            this.loop = Thread.ofPlatform().name("ferrite-fuse " + at).daemon().start(() -> {
                int rc = fuse.sessionLoop(se, threads);
                if (rc != 0) {
                    LOG.log(System.Logger.Level.WARNING, "libfuse's loop on " + at + " ended with " + rc);
                }
            });
        }

        @Override
        public Path mountPoint() {
            return at;
        }

        @Override
        public Map<String, Long> requestCounts() {
            return server.requestCounts();
        }

        /** The loop ends when the mount goes from outside (umount, fusermount3 -u: the kernel ends the connection). */
        @Override
        public void awaitUnmount() throws InterruptedException {
            loop.join();
            close();
            unmounted.await();
        }

        /**
         * Has libfuse's loop exit and unmount (lazily: the kernel ends the connection once nothing on the mount is in
         * use, which ends the workers' reads), waits for the loop, then closes every node's handle. If the loop is
         * still serving after {@value #LOOP_SECONDS} s (a program keeps something on the mount open), the session and
         * its upcalls are left alive rather than freed under the workers, and only the handles are closed.
         */
        @Override
        public void close() {
            synchronized (this) {
                if (closed) {
                    return;
                }
                closed = true;
            }
            boolean ended = false;
            try {
                fuse.sessionExit(se);
                fuse.sessionUnmount(se);
                ended = loop.join(Duration.ofSeconds(LOOP_SECONDS));
                if (!ended) {
                    LOG.log(System.Logger.Level.WARNING, "libfuse's loop on " + at + " still serving " + LOOP_SECONDS
                            + " s after the unmount: its session is left alive");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                if (ended) {
                    fuse.sessionDestroy(se);
                }
                server.closeAll();
                if (ended) {
                    arena.close();
                }
                unmounted.countDown();
            }
        }

        @Override
        public String toString() {
            return "ferrite on " + at;
        }
    }
}
