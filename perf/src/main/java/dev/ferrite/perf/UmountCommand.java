package dev.ferrite.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

import dev.ferrite.fuse.FuseFileSystemProvider;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

@Command(name = "umount", header = "Unmounts a volume mounted through FUSE.",
        description = {
        "Unmounts the Ferrite volume mounted at MOUNTPOINT (fusermount3 -u) and waits",
        "until its server has closed the volume, so that the device can be used at once.",
        "Fails, changing nothing, while a program still uses the mount (EBUSY).", ""})
final class UmountCommand implements Callable<Integer> {
    /** How long to wait for fusermount3 and then for the server to let go of the device. */
    private static final long SECONDS = 60;

    @Parameters(paramLabel = "MOUNTPOINT", description = "where the volume is mounted")
    Path mountPoint;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException, InterruptedException {
        Path at = mountPoint.toAbsolutePath().normalize();
        String source = FuseFileSystemProvider.source(at);
        if (source == null) {
            throw new IllegalStateException(at + " is not a mount point");
        }
        Path output = Files.createTempFile("ferrite-umount", ".out");
        try {
            Process p = new ProcessBuilder("fusermount3", "-u", at.toString()).redirectErrorStream(true)
                    .redirectOutput(output.toFile()).start();
            if (!p.waitFor(SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException("fusermount3 -u " + at + " did not end within " + SECONDS + " s");
            }
            if (p.exitValue() != 0) {
                throw new IllegalStateException("fusermount3 -u " + at + ": " + Files.readString(output).strip());
            }
        } finally {
            Files.deleteIfExists(output);
        }
        Path device = Path.of(source);
        if (Files.exists(device)) {
            awaitReleased(device);
        }
        PrintWriter out = spec.commandLine().getOut();
        out.println(at + " unmounted; " + source + " closed");
        out.flush();
        return 0;
    }

    /** Waits until the server has closed the volume: its exclusive lock on the device is free. */
    private static void awaitReleased(Path device) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(SECONDS);
        while (true) {
            try (BlockDevice d = VolumeDevices.open(device, DeviceOptions.defaults().withReadOnly(true))) {
                if (d.tryLockExclusive()) {
                    return;
                }
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("unmounted, but the server still holds " + device + " after " + SECONDS + " s");
            }
            TimeUnit.MILLISECONDS.sleep(50);
        }
    }
}
