package dev.ferrite.perf;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeDump;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.perf.bench.Storage;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "format", header = "Formats a device or file as an empty Ferrite volume.",
        description = {
        "Formats DEVICE as an empty Ferrite volume (superblock and mirror, log,",
        "allocation groups, root directory) and prints the superblock. DEVICE is a",
        "file, of which the first --size bytes are used (a missing or shorter file",
        "is created or extended), or a block device, with --force.", ""})
final class FormatCommand implements Callable<Integer> {
    @Parameters(paramLabel = "DEVICE", description = "file or block device")
    Path device;

    @Option(names = "--size", paramLabel = "SIZE", converter = ByteSize.Converter.class,
            description = "bytes of a file device to use (a missing or shorter file is created or extended);"
                    + " K/M/G/T suffixes; default: the whole file")
    Long size;

    @Option(names = "--ags", paramLabel = "N", defaultValue = "0",
            description = "allocation groups (default: max(4, 2 x CPUs), fewer on a small device)")
    int ags;

    @Option(names = "--log", paramLabel = "SIZE", converter = ByteSize.Converter.class,
            description = "log size (default: 1/32 of the device, 4 MiB to 1 GiB)")
    Long log;

    @Option(names = "--force", description = "allow DEVICE to be a block device, whose contents are destroyed")
    boolean force;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        boolean block = Files.exists(device) && Storage.of(device).isBlockDevice();
        if (block && !force) {
            throw new ParameterException(spec.commandLine(), device + " is a block device; add --force to destroy its contents");
        }
        if (block && size != null) {
            throw new ParameterException(spec.commandLine(), "--size applies to files; a block device has its own size");
        }
        if (!block && size == null && !Files.exists(device)) {
            throw new ParameterException(spec.commandLine(), device + " does not exist; give --size to create it");
        }
        if (ags < 0) {
            throw new ParameterException(spec.commandLine(), "--ags " + ags + " is negative");
        }
        DeviceOptions options = size == null ? DeviceOptions.defaults() : DeviceOptions.defaults().withSize(size);
        VolumeOptions v = VolumeOptions.defaults().withAgCount(ags);
        try (BlockDevice dev = VolumeDevices.open(device, options)) {
            if (log != null) {
                v = v.withLogBlocks(Math.toIntExact(log / dev.blockSize()));
            }
            Volume.format(dev, v);
            PrintWriter out = spec.commandLine().getOut();
            out.println("formatted " + device);
            out.print(VolumeDump.superblock(dev));
            out.flush();
        }
        return 0;
    }
}
