package dev.ferrite.perf;

import java.nio.file.Path;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.MappedDevice;

/** Opens the device a volume command names: O_DIRECT where the filesystem allows it, else mapped (tmpfs). */
final class VolumeDevices {
    private VolumeDevices() {
    }

    static BlockDevice open(Path path, DeviceOptions options) {
        try {
            return DirectDevice.open(path, options);
        } catch (DeviceException e) {
            if (e.errno() != Errno.EINVAL) {
                throw e;
            }
            return MappedDevice.open(path, options);
        }
    }
}
