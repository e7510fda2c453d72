package dev.ferrite.io;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Root-only system set-up for tests that need a real kernel error or a real block device: commands,
 * small mounts, loop devices. Every helper is an {@link AutoCloseable} that undoes itself, so tests hold
 * them in try-with-resources and nothing is left mounted or attached when an assertion fails.
 */
final class SystemTools {
    private static final List<String> SBIN = List.of("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin");

    private SystemTools() {
    }

    static boolean isRoot() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("Uid:")) {
                    return line.split("\\s+")[2].equals("0"); // effective uid
                }
            }
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    static boolean hasTool(String name) {
        return SBIN.stream().anyMatch(dir -> Files.isExecutable(Path.of(dir, name)));
    }

    /** Skips the test unless running as root with every named tool installed. */
    static void assumeRootWith(String... tools) {
        assumeTrue(isRoot(), "needs root (mount, losetup, chattr, ...); running as uid other than 0");
        for (String tool : tools) {
            assumeTrue(hasTool(tool), "needs the '" + tool + "' command, which is not installed");
        }
    }

    record Result(int exit, String output) {
    }

    static Result tryRun(String... command) {
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return new Result(-1, String.join(" ", command) + ": timed out");
            }
            return new Result(p.exitValue(), out);
        } catch (IOException e) {
            return new Result(-1, e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Result(-1, e.toString());
        }
    }

    /** Runs a command and returns its output, failing the test if it exits non-zero. */
    static String run(String... command) {
        Result r = tryRun(command);
        if (r.exit() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " exited " + r.exit() + ": " + r.output());
        }
        return r.output();
    }

    /** A filesystem mounted on a fresh directory, unmounted (lazily if busy) on close. */
    static final class Mount implements AutoCloseable {
        final Path dir;

        private Mount(Path dir) {
            this.dir = dir;
        }

        /** A tmpfs of {@code size} (mount(8) syntax, e.g. "1m"): small enough to fill. */
        static Mount tmpfs(Path parent, String size) throws IOException {
            assumeRootWith("mount", "umount");
            Path dir = Files.createDirectory(parent.resolve("tmpfs-" + size));
            Result r = tryRun("mount", "-t", "tmpfs", "-o", "size=" + size + ",mode=0755", "ferrite-test", dir.toString());
            assumeTrue(r.exit() == 0, "cannot mount a tmpfs here: " + r.output());
            return new Mount(dir);
        }

        /**
         * A fresh ext4 filesystem of {@code megabytes} on a loop device over an image file in {@code parent}
         * (the loop device goes away with the unmount: mount -o loop sets autoclear).
         */
        static Mount ext4(Path parent, int megabytes) throws IOException {
            assumeRootWith("mount", "umount", "mkfs.ext4", "losetup");
            Path image = parent.resolve("ext4.img");
            try (var f = java.nio.channels.FileChannel.open(image, java.nio.file.StandardOpenOption.CREATE_NEW,
                    java.nio.file.StandardOpenOption.WRITE)) {
                f.write(java.nio.ByteBuffer.allocate(1), megabytes * (1L << 20) - 1);
            }
            run("mkfs.ext4", "-q", "-F", image.toString());
            Path dir = Files.createDirectory(parent.resolve("ext4"));
            Result r = tryRun("mount", "-o", "loop", image.toString(), dir.toString());
            assumeTrue(r.exit() == 0, "cannot loop-mount an ext4 image here: " + r.output());
            return new Mount(dir);
        }

        @Override
        public void close() {
            if (tryRun("umount", dir.toString()).exit() != 0) {
                run("umount", "-l", dir.toString());
            }
        }
    }

    /** A loop block device over a file, detached on close. */
    static final class Loop implements AutoCloseable {
        final Path device;

        private Loop(Path device) {
            this.device = device;
        }

        /** Attaches {@code backing}; {@code extra} are further losetup options (e.g. "--sector-size", "4096"). */
        static Loop attach(Path backing, String... extra) {
            assumeRootWith("losetup");
            String[] cmd = new String[3 + extra.length + 1];
            cmd[0] = "losetup";
            cmd[1] = "-f";
            cmd[2] = "--show";
            System.arraycopy(extra, 0, cmd, 3, extra.length);
            cmd[cmd.length - 1] = backing.toString();
            Result r = tryRun(cmd);
            assumeTrue(r.exit() == 0 && r.output().startsWith("/dev/loop"),
                    "cannot attach a loop device here (" + String.join(" ", cmd) + "): " + r.output());
            return new Loop(Path.of(r.output().lines().reduce((a, b) -> b).orElseThrow()));
        }

        @Override
        public void close() {
            run("losetup", "-d", device.toString());
        }
    }

    /** Sets the immutable attribute on a file, cleared on close (else @TempDir could not delete it). */
    static final class Immutable implements AutoCloseable {
        private final Path file;

        private Immutable(Path file) {
            this.file = file;
        }

        static Immutable set(Path file) {
            assumeRootWith("chattr");
            Result r = tryRun("chattr", "+i", file.toString());
            assumeTrue(r.exit() == 0, "chattr +i is refused here (filesystem or capability): " + r.output());
            return new Immutable(file);
        }

        @Override
        public void close() {
            run("chattr", "-i", file.toString());
        }
    }
}
