package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.ferrite.io.FerriteException;

/**
 * A loop device over a RAM-backed image file, or over a region of the device the user named
 * ({@link DeviceRegions}, with direct I/O so that the page cache is not used twice), optionally formatted
 * and mounted with a kernel file system: the same kind of device for every target of a comparison, made
 * by the benchmark and removed by {@link #close()} in reverse order. Needs root and util-linux ({@code losetup}), and
 * {@code mkfs.xfs}/{@code mkfs.ext4}/{@code mkfs.btrfs} for those file systems. A
 * shutdown hook releases the device if the JVM exits before {@link #close()} (Ctrl-C).
 */
public final class LoopDevice implements AutoCloseable {
    /** What goes on the device. */
    public enum Kind {
        /** Nothing: the block device itself. */
        RAW(null),
        XFS("mkfs.xfs"),
        EXT4("mkfs.ext4"),
        BTRFS("mkfs.btrfs");

        final String mkfs;

        Kind(String mkfs) {
            this.mkfs = mkfs;
        }

        public String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /**
     * Images and mount points are named after the process that made them ({@code ferrite-loop-PID-*.img},
     * {@code ferrite-mnt-PID-*}), so that a later run can tell the leftovers of a killed one (whose exit
     * hook never ran) from the devices of a run still going.
     */
    static final String PREFIX = "ferrite-loop-", MOUNT_PREFIX = "ferrite-mnt-";
    private static final long PID = ProcessHandle.current().pid();
    private static final Pattern LEFTOVER = Pattern.compile("ferrite-(?:loop|mnt)-(\\d+)-.*");
    /** Directories whose leftovers this process has released already. */
    private static final Set<Path> LEFTOVERS_CHECKED = ConcurrentHashMap.newKeySet();

    /** The RAM-backed image, or null over a region. */
    private final Path image;
    /** The region of the named device, or null over an image. */
    private final DeviceRegions.Region region;
    private final DeviceRegions regions;
    private final Path device;
    private final Path mountPoint;
    private volatile boolean mounted;
    /**
     * Set by the first {@link #close()} or {@link #releaseAtExit()}: the device is let go once only, since
     * once detached its number may be another process's device (a second detach would detach that one).
     */
    private final AtomicBoolean released = new AtomicBoolean();
    /** Releases the device if the JVM exits before {@link #close()} (Ctrl-C, SIGTERM). */
    private final Thread exitHook;

    private LoopDevice(Path image, DeviceRegions regions, DeviceRegions.Region region, Path device, Path mountPoint) {
        this.image = image;
        this.regions = regions;
        this.region = region;
        this.device = device;
        this.mountPoint = mountPoint;
        this.exitHook = new Thread(this::releaseAtExit, "ferrite-loop-release");
        Runtime.getRuntime().addShutdownHook(exitHook);
    }

    /** Bytes of a loop device for {@code data} bytes of files: room beside them for a file system's metadata and log. */
    public static long bytesFor(long data) {
        return data + Math.max(data / 4, 256L << 20);
    }

    /** Why this process cannot make loop devices of {@code kind}, for a skipped target's note; empty if it can. */
    public static Optional<String> unavailable(Kind kind) {
        return available(kind) ? Optional.empty() : Optional.of("making a " + kind.label() + " loop device needs root, losetup"
                + (kind.mkfs == null ? "" : " and " + kind.mkfs));
    }

    /** Whether this process can make loop devices of {@code kind}: root, losetup and the mkfs it needs. */
    public static boolean available(Kind kind) {
        return isRoot() && onPath("losetup") && (kind.mkfs == null || onPath(kind.mkfs));
    }

    /**
     * A new loop device of {@code bytes} over an image in {@code dir} (over a region of the device
     * {@link DeviceRegions#current()} names, if any), with {@code kind} made on it and mounted on a fresh
     * directory in {@code dir} (the file systems with their defaults, as mkfs makes them).
     */
    public static LoopDevice create(Path dir, long bytes, Kind kind) {
        return create(dir, bytes, kind, List.of());
    }

    /**
     * {@link #create(Path, long, Kind)} with {@code mkfsOptions} given to mkfs before the device (room for
     * more inodes than its defaults make, say).
     */
    public static LoopDevice create(Path dir, long bytes, Kind kind, List<String> mkfsOptions) {
        if (LEFTOVERS_CHECKED.add(dir.toAbsolutePath().normalize())) {
            releaseLeftovers(dir);
        }
        Path image = null;
        DeviceRegions regions = DeviceRegions.current().orElse(null);
        DeviceRegions.Region region = null;
        LoopDevice made = null;
        try {
            Path device;
            if (regions != null) {
                region = regions.take(bytes);
                device = Path.of(run("losetup", "--find", "--show", "--direct-io=on", "--offset", Long.toString(region.offset()),
                        "--sizelimit", Long.toString(region.length()), regions.device().toString()).strip());
            } else {
                image = Files.createTempFile(dir, PREFIX + PID + "-", ".img");
                try (FileChannel ch = FileChannel.open(image, StandardOpenOption.WRITE)) {
                    ch.write(ByteBuffer.allocate(1), bytes - 1); // sparse: tmpfs gives pages as they are written
                }
                device = Path.of(run("losetup", "--find", "--show", image.toString()).strip());
            }
            Path mount = kind.mkfs == null ? null : Files.createTempDirectory(dir, MOUNT_PREFIX + PID + "-");
            made = new LoopDevice(image, regions, region, device, mount);
            if (kind.mkfs != null) {
                List<String> mkfs = new ArrayList<>(List.of(kind.mkfs, "-q", kind == Kind.EXT4 ? "-F" : "-f"));
                mkfs.addAll(mkfsOptions);
                mkfs.add(device.toString());
                run(mkfs);
                run("mount", device.toString(), mount.toString());
                made.mounted = true;
            }
            return made;
        } catch (IOException e) {
            closeQuietly(made, image, regions, region);
            throw new UncheckedIOException("cannot make a loop device in " + dir + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly(made, image, regions, region);
            throw e;
        }
    }

    /** The block device, e.g. {@code /dev/loop3}. */
    public Path device() {
        return device;
    }

    /** What the device is made over, for a target's description: "an image in DIR" or "a region of DEV from byte N". */
    public String backing() {
        return image != null ? "an image in " + image.getParent()
                : String.format(Locale.ROOT, "a region of %s from byte %,d (direct I/O)", regions.device(), region.offset());
    }

    /** Where the file system is mounted; null for {@link Kind#RAW}. */
    public Path mountPoint() {
        return mountPoint;
    }

    /**
     * The options the file system is mounted with, as {@code /proc/self/mounts} gives them (e.g.
     * {@code rw,relatime,attr2,inode64,...}); null for {@link Kind#RAW} or if the kernel does not say.
     */
    public String mountOptions() {
        if (!mounted) {
            return null;
        }
        try (var lines = Files.lines(Path.of("/proc/self/mounts"))) {
            String mp = mountPoint.toString();
            return lines.map(l -> l.split(" ")).filter(f -> f.length >= 4 && f[1].equals(mp)).map(f -> f[3])
                    .reduce((a, b) -> b).orElse(null);
        } catch (IOException | UncheckedIOException e) {
            return null;
        }
    }

    /**
     * What the exit hook does when the JVM goes before {@link #close()}: a lazy unmount (a process still
     * writing there, being killed by its own hook meanwhile, must not keep the mount), a detach that
     * completes when the device is let go, and the image deleted. Failures are ignored: nothing can report
     * them at exit.
     */
    void releaseAtExit() {
        if (!released.compareAndSet(false, true)) {
            return;
        }
        if (mounted) {
            attempt(new ArrayList<>(), () -> run("umount", "-l", mountPoint.toString()));
        }
        attempt(new ArrayList<>(), () -> run("losetup", "-d", device.toString()));
        attempt(new ArrayList<>(), () -> {
            if (mountPoint != null) {
                Files.deleteIfExists(mountPoint);
            }
            return image != null && Files.deleteIfExists(image);
        });
    }

    /** Unmounts, detaches and deletes the image; each step is tried even if one before it failed. */
    @Override
    public void close() {
        try {
            Runtime.getRuntime().removeShutdownHook(exitHook);
        } catch (IllegalStateException shuttingDown) {
            return; // the hook releases the device
        }
        if (!released.compareAndSet(false, true)) {
            return;
        }
        List<String> failures = new ArrayList<>();
        if (mounted) {
            attempt(failures, () -> run("umount", mountPoint.toString()));
        }
        attempt(failures, () -> run("losetup", "-d", device.toString()));
        attempt(failures, () -> {
            if (mountPoint != null) {
                Files.deleteIfExists(mountPoint);
            }
            if (image != null) {
                Files.deleteIfExists(image);
            }
            return null;
        });
        if (failures.isEmpty() && region != null) {
            regions.give(region); // a device still attached keeps its region: nothing else may write there
        }
        if (!failures.isEmpty()) {
            throw new FerriteException("cleaning up loop device " + device + " over " + backing() + ": " + String.join("; ", failures));
        }
    }

    private interface Step {
        Object run() throws IOException;
    }

    private static void attempt(List<String> failures, Step step) {
        try {
            step.run();
        } catch (IOException | RuntimeException e) {
            failures.add(e.getMessage());
        }
    }

    private static void closeQuietly(LoopDevice made, Path image, DeviceRegions regions, DeviceRegions.Region region) {
        try {
            if (made != null) {
                made.close();
            } else if (image != null) {
                Files.deleteIfExists(image);
            } else if (region != null) {
                regions.give(region); // losetup failed: nothing was attached
            }
        } catch (IOException | RuntimeException ignored) {
            // the failure being reported matters more than this one
        }
    }

    /**
     * Releases what runs killed before their exit hook could left in {@code dir}: loop devices over their
     * images unmounted (lazily) and detached, the images and mount points deleted. Only the leftovers of
     * processes no longer alive are touched. Returns how many devices it detached; failures are ignored
     * (the run goes on with fresh devices).
     */
    static int releaseLeftovers(Path dir) {
        Path base = dir.toAbsolutePath().normalize();
        int released = release(backing -> base.equals(backing.getParent()) && isLeftover(backing.getFileName().toString()));
        try (var entries = Files.list(base)) {
            for (Path p : entries.filter(p -> isLeftover(p.getFileName().toString())).toList()) {
                attempt(new ArrayList<>(), () -> Files.deleteIfExists(p)); // a mount point is empty once unmounted
            }
        } catch (IOException | UncheckedIOException e) {
            // nothing to clean here
        }
        return released;
    }

    /**
     * Releases every loop device over {@code device} (unmounted lazily, detached): what a killed run that
     * carved it into regions left. A run on a device destroys its contents, so nothing else may be using
     * it. Returns how many it detached.
     */
    static int releaseOver(Path device) {
        Path dev = device.toAbsolutePath().normalize();
        return release(dev::equals);
    }

    /** Unmounts (lazily) and detaches the loop devices whose backing file {@code which} accepts; returns how many. */
    private static int release(Predicate<Path> which) {
        int released = 0;
        String list;
        try {
            list = run("losetup", "--list", "--noheadings", "--raw", "--output", "NAME,BACK-FILE");
        } catch (RuntimeException e) {
            list = "";
        }
        List<String> mounts;
        try {
            mounts = Files.readAllLines(Path.of("/proc/self/mounts"));
        } catch (IOException e) {
            mounts = List.of();
        }
        for (String line : list.lines().toList()) {
            int space = line.indexOf(' ');
            if (space < 0) {
                continue;
            }
            String name = line.substring(0, space);
            Path backing = Path.of(line.substring(space + 1).replace("\\x20", " ").replaceFirst(" \\(deleted\\)$", ""));
            if (!which.test(backing)) {
                continue;
            }
            for (String m : mounts) {
                String[] f = m.split(" ");
                if (f.length > 1 && f[0].equals(name)) {
                    attempt(new ArrayList<>(), () -> run("umount", "-l", f[1]));
                }
            }
            List<String> failures = new ArrayList<>();
            attempt(failures, () -> run("losetup", "-d", name));
            if (failures.isEmpty()) {
                released++;
            }
        }
        return released;
    }

    /** A name of ours whose process is gone. */
    private static boolean isLeftover(String fileName) {
        Matcher m = LEFTOVER.matcher(fileName);
        return m.matches() && ProcessHandle.of(Long.parseLong(m.group(1))).map(h -> !h.isAlive()).orElse(true);
    }

    /** The effective uid is 0: /proc/self belongs to it. */
    static boolean isRoot() {
        try {
            return Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        }
    }

    /** On the PATH, or in the sbin directories a non-login root shell may leave out of it. */
    static boolean onPath(String tool) {
        String path = System.getenv().getOrDefault("PATH", "") + ":/usr/sbin:/sbin";
        for (String dir : path.split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, tool))) {
                return true;
            }
        }
        return false;
    }

    /** Runs {@code command}, returns what it printed; fails naming the command if it fails or hangs. */
    static String run(String... command) {
        return run(List.of(command));
    }

    private static String run(List<String> command) {
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new FerriteException(String.join(" ", command) + " did not finish in 120 s");
            }
            if (p.exitValue() != 0) {
                throw new FerriteException(String.join(" ", command) + " failed (exit " + p.exitValue() + "): " + out.strip());
            }
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + command.getFirst() + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new FerriteException("interrupted while running " + command.getFirst(), e);
        }
    }
}
