package dev.ferrite.perf;

import java.nio.file.Path;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;

import picocli.CommandLine.Parameters;

/** DEVICE, the volume a command looks at without changing it (check, dump), and how it is opened (a picocli mixin). */
final class VolumeDeviceParameter {
    @Parameters(paramLabel = "DEVICE", description = "file or block device holding a volume")
    Path path;

    /** DEVICE opened read-only: these commands never write to a volume. */
    BlockDevice openReadOnly() {
        return VolumeDevices.open(path, DeviceOptions.defaults().withReadOnly(true));
    }

    /** DEVICE as given, for messages. */
    @Override
    public String toString() {
        return path.toString();
    }
}
