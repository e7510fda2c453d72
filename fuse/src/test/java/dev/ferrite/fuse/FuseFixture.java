package dev.ferrite.fuse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;

import dev.ferrite.dir.FileSystemMount;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A RAM volume mounted through FUSE for a test, and the programs it runs there. Tests skip (with the reason)
 * where FUSE cannot mount: no {@code /dev/fuse}, not root, no {@code fusermount3}. {@link #close()} always
 * unmounts, lazily as a last resort, so a failed test leaves no dead mount behind.
 */
final class FuseFixture implements AutoCloseable {
    final BlockDevice device;
    final Path mountPoint;
    /** Served without the kernel's entry and attribute cache, by one thread ({@link #uncached}). */
    private final boolean uncached;
    Volume volume;
    FileSystemMount mount;

    /** A fresh volume of {@code mib} MiB mounted on a new directory under {@code scratch}. */
    FuseFixture(Path scratch, int mib) throws IOException {
        this(scratch, mib, false);
    }

    /**
     * {@link #FuseFixture(Path, int)} served with entry and attribute timeouts 0 and by one thread, so that every
     * lookup and stat reaches the volume and requests are served in the order the kernel queued them.
     */
    static FuseFixture uncached(Path scratch, int mib) throws IOException {
        return new FuseFixture(scratch, mib, true);
    }

    private FuseFixture(Path scratch, int mib, boolean uncached) throws IOException {
        assumeFuse();
        this.uncached = uncached;
        device = MemoryDevice.create(mib * 256L, 4096);
        Volume.format(device, VolumeOptions.defaults());
        mountPoint = Files.createDirectories(scratch.resolve("mnt"));
        mount();
    }

    static void assumeFuse() {
        assumeTrue(Files.exists(Path.of("/dev/fuse")), "FUSE tests skipped: no /dev/fuse");
        assumeTrue("root".equals(System.getProperty("user.name")), "FUSE tests skipped: they mount, which needs root");
        assumeTrue(onPath("fusermount3"), "FUSE tests skipped: no fusermount3 (apt-get install fuse3)");
    }

    static boolean onPath(String program) {
        return Arrays.stream(System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":"))
                .anyMatch(d -> Files.isExecutable(Path.of(d, program)));
    }

    void mount() {
        volume = Volume.open(device, VolumeOptions.defaults());
        mount = uncached ? new FuseFileSystemProvider().mount(volume, device.name(), mountPoint, false, 0, true) : volume.mount(mountPoint);
    }

    /** Unmounts and closes the volume (the device stays for {@link #mount()}). */
    void unmount() {
        try {
            if (mount != null) {
                mount.close();
            }
        } finally {
            mount = null;
            if (volume != null) {
                volume.close();
                volume = null;
            }
        }
    }

    @Override
    public void close() throws Exception {
        try {
            unmount();
        } finally {
            try {
                if (FuseFileSystemProvider.isMounted(mountPoint)) {
                    run(mountPoint.getParent(), 20, "fusermount3", "-u", "-z", mountPoint.toString());
                }
            } finally {
                device.close();
            }
        }
    }

    /** Runs {@code command} in {@code dir}, failing the test if it does not end within {@code seconds} or exits non-zero; returns its output. */
    static String run(Path dir, int seconds, String... command) throws IOException, InterruptedException {
        Result r = exec(dir, seconds, command);
        assertTrue(r.exit == 0, () -> String.join(" ", command) + " in " + dir + " exited " + r.exit + ":\n" + r.output);
        return r.output;
    }

    record Result(int exit, String output) {
    }

    /** Runs {@code command}, stdout and stderr together; killed and failed past {@code seconds}. */
    static Result exec(Path dir, int seconds, String... command) throws IOException, InterruptedException {
        Path out = Files.createTempFile("fuse-test", ".out");
        try {
            Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true)
                    .redirectOutput(out.toFile()).start();
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                throw new AssertionError(String.join(" ", command) + " in " + dir + " did not end within " + seconds
                        + " s:\n" + Files.readString(out));
            }
            return new Result(p.exitValue(), Files.readString(out));
        } finally {
            Files.deleteIfExists(out);
        }
    }
}
