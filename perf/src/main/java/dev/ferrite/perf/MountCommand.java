package dev.ferrite.perf;

import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

import dev.ferrite.dir.FileSystemMount;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.fuse.FuseFileSystemProvider;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.Errno;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "mount", header = "Mounts a volume through FUSE.",
        description = {
        "Mounts the Ferrite volume on DEVICE at directory MOUNTPOINT through FUSE, so",
        "that any program can use it (recovering the volume first if it was not",
        "unmounted cleanly). Without --foreground the server runs in the background",
        "(its output in --log) and the command returns once the mount is visible.",
        "Unmount with './ferrite umount MOUNTPOINT', 'fusermount3 -u MOUNTPOINT' or",
        "umount, or by SIGINT/SIGTERM to the server: each closes the volume cleanly.",
        "A device already mounted (or open in another ferrite command) is refused.",
        "Needs /dev/fuse and libfuse3 (apt-get install fuse3). See docs/mount.md.", ""})
final class MountCommand implements Callable<Integer> {
    /** How long the background start waits for the mount to appear. */
    private static final long START_SECONDS = 120;

    @Parameters(index = "0", paramLabel = "DEVICE", description = "file or block device holding a volume")
    Path device;

    @Parameters(index = "1", paramLabel = "MOUNTPOINT", description = "an existing directory")
    Path mountPoint;

    @Option(names = "--cache", paramLabel = "SIZE", converter = ByteSize.Converter.class,
            description = "the buffer cache budget; K/M/G suffixes (default: 1/16 of the device, 16 MiB to 1 GiB)")
    Long cache;

    @Option(names = "--foreground", description = "serve in this process until unmounted (Ctrl-C unmounts)")
    boolean foreground;

    @Option(names = "--read-only", description = "mount read-only: every change is refused with EROFS (the volume is"
            + " still recovered and cleanly closed)")
    boolean readOnly;

    @Option(names = "--log", paramLabel = "FILE", description = "where the background server writes (default:"
            + " /tmp/ferrite-mount-<MOUNTPOINT with / as _>.log)")
    Path log;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException, InterruptedException {
        Path at = mountPoint.toAbsolutePath().normalize();
        if (!Files.isDirectory(at)) {
            throw new ParameterException(spec.commandLine(), "MOUNTPOINT " + at + " is not a directory");
        }
        if (cache != null && (cache < 1 << 20 || cache > 1L << 40)) {
            throw new ParameterException(spec.commandLine(), "--cache " + ByteSize.format(cache) + ": give 1 MiB to 1 TiB");
        }
        if (FuseFileSystemProvider.isMounted(at)) {
            throw new IllegalStateException(at + " is a mount point already (of " + FuseFileSystemProvider.source(at) + ")");
        }
        return foreground ? serve(at) : start(at);
    }

    /** Serves until unmounted: by umount from outside, or by SIGINT/SIGTERM (a shutdown hook unmounts). */
    private int serve(Path at) throws InterruptedException {
        PrintWriter out = spec.commandLine().getOut();
        Server server = new Server(VolumeDevices.open(device, DeviceOptions.defaults()), out, at + " unmounted; " + device + " closed cleanly");
        try {
            VolumeOptions options = cache != null ? VolumeOptions.defaults().withCacheBytes(cache) : VolumeOptions.defaults();
            server.volume = Volume.open(server.device, options);
        } catch (DeviceException e) {
            server.close();
            if (e.errno() == Errno.EBUSY) {
                throw new IllegalStateException(device + " is in use: mounted already, or open in another ferrite command", e);
            }
            throw e;
        } catch (RuntimeException e) {
            server.close();
            throw e;
        }
        for (String note : server.volume.mountReport().notes()) {
            out.println(device + ": " + note);
        }
        try {
            server.mount = server.volume.mount(at, readOnly);
        } catch (RuntimeException e) {
            server.close();
            throw e;
        }
        Runtime.getRuntime().addShutdownHook(new Thread(server::close, "ferrite-unmount"));
        out.println(device + " mounted on " + at + (readOnly ? " read-only" : "") + " (pid " + ProcessHandle.current().pid() + ")");
        out.flush();
        server.mount.awaitUnmount();
        server.close();
        return 0;
    }

    /**
     * The mount, its volume and device, closed in that order once; the mount's request counts written to {@code out}
     * then, and {@code closedLine} once the volume has closed. That line comes before the device lets go of its lock,
     * so whoever waits for the lock (as {@code ferrite umount} does) finds it in the log.
     */
    private static final class Server {
        final BlockDevice device;
        private final PrintWriter out;
        private final String closedLine;
        Volume volume;
        FileSystemMount mount;
        private boolean closed;

        Server(BlockDevice device, PrintWriter out, String closedLine) {
            this.device = device;
            this.out = out;
            this.closedLine = closedLine;
        }

        synchronized void close() {
            if (closed) {
                return;
            }
            closed = true;
            try {
                if (mount != null) {
                    mount.close();
                    // here rather than after awaitUnmount: a SIGTERM unmounts through the shutdown hook alone
                    out.println("FUSE requests served: " + mount.requestCounts());
                    out.flush();
                }
            } finally {
                try {
                    if (volume != null) {
                        volume.close();
                        if (mount != null) {
                            out.println(closedLine);
                            out.flush();
                        }
                    }
                } finally {
                    device.close();
                }
            }
        }
    }

    /** Starts this command with --foreground as a background process and waits until its mount shows, or it fails. */
    private int start(Path at) throws IOException, InterruptedException {
        Path logFile = (log != null ? log : Path.of("/tmp", "ferrite-mount-" + at.toString().replace('/', '_') + ".log")).toAbsolutePath();
        List<String> command = new ArrayList<>();
        if (Files.isExecutable(Path.of("/usr/bin/setsid"))) {
            command.add("/usr/bin/setsid"); // its own session: the terminal's hangup or Ctrl-C does not reach it
        }
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), Main.class.getName(), "mount",
                device.toAbsolutePath().toString(), at.toString(), "--foreground"));
        if (cache != null) {
            command.addAll(List.of("--cache", Long.toString(cache)));
        }
        if (readOnly) {
            command.add("--read-only");
        }
        Files.writeString(logFile, "");
        Process server = new ProcessBuilder(command).redirectInput(new File("/dev/null")).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile())).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(START_SECONDS);
        while (!FuseFileSystemProvider.isMounted(at)) {
            if (server.waitFor(50, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("the mount server exited with status " + server.exitValue() + ": "
                        + Files.readString(logFile).strip());
            }
            if (System.nanoTime() > deadline) {
                server.destroy();
                throw new IllegalStateException("no mount on " + at + " after " + START_SECONDS + " s; the server was stopped (" + logFile + ")");
            }
        }
        PrintWriter out = spec.commandLine().getOut();
        out.println(device + " mounted on " + at + (readOnly ? " read-only" : "") + " (server pid " + server.pid() + ", log " + logFile + ")");
        out.flush();
        return 0;
    }
}
