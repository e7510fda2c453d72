package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.FerriteException;

/**
 * The one file or block device a benchmark run carves its storage from when the user names one
 * ({@code --device}): every loop device the run makes (a kernel file system's, Ferrite's raw device, the
 * directory the key-value stores share) then covers a region of it instead of a RAM-backed image. Regions
 * start on 1 MiB boundaries, are taken first fit and given back when their loop device goes, so the
 * targets of one comparison sit side by side on the device and the next workload reuses the space.
 *
 * <p>Process-wide, as loop devices are: a benchmark command installs it for its run with {@link #use}.
 */
public final class DeviceRegions {
    private static final long ALIGN = 1L << 20;
    private static volatile DeviceRegions current;

    private final Path device;
    private final long size;
    /** Regions given out: start to length. */
    private final TreeMap<Long, Long> taken = new TreeMap<>();

    DeviceRegions(Path device, long size) {
        this.device = device;
        this.size = size & -ALIGN;
    }

    /** A region of the device: where it starts and how long it is, in bytes. */
    public record Region(long offset, long length) {
    }

    /** Makes {@code device} the source of every loop device until the returned scope closes. */
    public static Scope use(Path device) {
        if (current != null) {
            throw new IllegalStateException("already carving regions of " + current.device);
        }
        DeviceRegions regions = new DeviceRegions(device, sizeOf(device));
        if (LoopDevice.available(LoopDevice.Kind.RAW)) {
            LoopDevice.releaseOver(device); // a killed run's regions
        }
        current = regions;
        return () -> current = null;
    }

    /** Ends {@link #use}. */
    public interface Scope extends AutoCloseable {
        @Override
        void close();
    }

    /** The device being carved, if a command installed one. */
    public static Optional<DeviceRegions> current() {
        return Optional.ofNullable(current);
    }

    public Path device() {
        return device;
    }

    /** The device's usable size (whole MiB). */
    public long size() {
        return size;
    }

    /** The largest region {@link #take} could give now. */
    public synchronized long largestFree() {
        long largest = 0, at = 0;
        for (Map.Entry<Long, Long> e : taken.entrySet()) {
            largest = Math.max(largest, e.getKey() - at);
            at = e.getKey() + e.getValue();
        }
        return Math.max(largest, size - at);
    }

    /** The first free region of {@code bytes} (rounded up to whole MiB). */
    public synchronized Region take(long bytes) {
        long length = (bytes + ALIGN - 1) & -ALIGN;
        long at = 0;
        for (Map.Entry<Long, Long> e : taken.entrySet()) {
            if (e.getKey() - at >= length) {
                break;
            }
            at = e.getKey() + e.getValue();
        }
        if (size - at < length) {
            throw new FerriteException("--device " + device + " (" + KvBench.size(size) + ") has no free region of "
                    + KvBench.size(length) + " left beside the " + taken.size() + " in use (largest free: "
                    + KvBench.size(largestFree()) + "); give a larger device or smaller sizes");
        }
        taken.put(at, length);
        return new Region(at, length);
    }

    /** Gives {@code region} back. */
    public synchronized void give(Region region) {
        Long length = taken.get(region.offset());
        if (length == null || length != region.length()) {
            throw new IllegalStateException(region + " of " + device + " is not taken");
        }
        taken.remove(region.offset());
    }

    /** Bytes of {@code device}: a block device's size, or a regular file's length. */
    static long sizeOf(Path device) {
        try (BlockDevice d = DirectDevice.open(device, DeviceOptions.defaults().withReadOnly(true))) {
            return d.size();
        }
    }
}
