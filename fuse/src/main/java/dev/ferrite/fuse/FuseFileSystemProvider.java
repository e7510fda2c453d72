package dev.ferrite.fuse;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.cryptomator.jfuse.api.Fuse;
import org.cryptomator.jfuse.api.FuseBuilder;
import org.cryptomator.jfuse.api.FuseMountFailedException;

import dev.ferrite.dir.FileSystemMount;
import dev.ferrite.dir.FileSystemProvider;
import dev.ferrite.dir.Volume;
import dev.ferrite.io.InvalidArgumentException;

/**
 * Mounts a volume through libfuse3 (jfuse's binding): {@link Volume#mount} finds this provider. The mount
 * options are fixed here and documented in docs/mount.md: the kernel checks permissions
 * ({@code default_permissions}), inode numbers are the volume's ({@code use_ino}, {@code readdir_ino}),
 * entries and attributes are cached 1 s as libfuse's defaults (the volume may also change through the Java
 * API; {@value #CACHE_TIMEOUT} sets another time), and requests are served by libfuse's thread pool, each
 * worker reading its own cloned {@code /dev/fuse} descriptor ({@code clone_fd}).
 */
public final class FuseFileSystemProvider implements FileSystemProvider {
    /** How often {@link FileSystemMount#awaitUnmount} looks whether the mount went from outside (umount, fusermount3 -u). */
    private static final long WATCH_MILLIS = 200;
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
     * by one thread with {@code oneThread} (libfuse's single-threaded loop: requests served one at a time, in the
     * order the kernel queued them).
     */
    FileSystemMount mount(Volume volume, String source, Path mountPoint, boolean readOnly, double cacheSeconds, boolean oneThread) {
        if (!JfuseNative.supported()) {
            throw new UnsupportedOperationException("mounting needs Linux on x86-64 (this is " + System.getProperty("os.name")
                    + " on " + System.getProperty("os.arch") + ")");
        }
        Path at = mountPoint.toAbsolutePath().normalize();
        if (!Files.isDirectory(at)) {
            throw new InvalidArgumentException("mount point " + at + " is not a directory");
        }
        FuseBuilder builder = Fuse.builder();
        String library = libfuse();
        builder.setLibraryPath(library);
        FerriteFileSystem fs = new FerriteFileSystem(volume, builder.errno(), new JfuseNative(library));
        Fuse fuse = builder.build(fs);
        Arena arena = Arena.ofShared();
        try {
            JfuseNative.bindMissing(fuse, fs, arena);
            String timeout = java.math.BigDecimal.valueOf(cacheSeconds).toPlainString();
            List<String> options = new ArrayList<>(List.of("default_permissions", "clone_fd",
                    "entry_timeout=" + timeout, "attr_timeout=" + timeout, "subtype=ferrite",
                    "fsname=" + source.replace("\\", "\\\\").replace(",", "\\,")));
            if (readOnly) {
                options.add("ro");
            }
            if ("root".equals(System.getProperty("user.name"))) {
                options.add("allow_other"); // a file system for every user, as the kernel's own
            }
            List<String> args = new ArrayList<>(List.of("-o", String.join(",", options)));
            if (oneThread) {
                args.add("-s");
            }
            fuse.mount("ferrite", at, args.toArray(String[]::new));
        } catch (FuseMountFailedException | RuntimeException e) {
            closeQuietly(fuse);
            arena.close();
            throw new UncheckedIOException(new IOException("cannot mount " + at + ": " + e.getMessage(), e));
        }
        return new Mounted(at, fuse, fs, arena);
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

    private static void closeQuietly(Fuse fuse) {
        try {
            fuse.close();
        } catch (TimeoutException | RuntimeException e) {
            System.getLogger(FuseFileSystemProvider.class.getName()).log(System.Logger.Level.WARNING, "closing FUSE: " + e, e);
        }
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

    private static final class Mounted implements FileSystemMount {
        private final Path at;
        private final Fuse fuse;
        private final FerriteFileSystem fs;
        private final Arena arena;
        private final CountDownLatch unmounted = new CountDownLatch(1);
        private boolean closed;

        Mounted(Path at, Fuse fuse, FerriteFileSystem fs, Arena arena) {
            this.at = at;
            this.fuse = fuse;
            this.fs = fs;
            this.arena = arena;
        }

        @Override
        public Path mountPoint() {
            return at;
        }

        @Override
        public Map<String, Long> requestCounts() {
            return fs.requestCounts();
        }

        @Override
        public void awaitUnmount() throws InterruptedException {
            while (!unmounted.await(WATCH_MILLIS, TimeUnit.MILLISECONDS)) {
                if (!isMounted(at)) {
                    close();
                }
            }
        }

        @Override
        public void close() {
            synchronized (this) {
                if (closed) {
                    return;
                }
                closed = true;
            }
            try {
                closeQuietly(fuse); // unmounts if still mounted, waits for libfuse's loop to end
                fs.closeAll();
            } finally {
                arena.close();
                unmounted.countDown();
            }
        }

        @Override
        public String toString() {
            return "ferrite on " + at;
        }
    }
}
