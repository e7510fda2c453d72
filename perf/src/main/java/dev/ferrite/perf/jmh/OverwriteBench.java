package dev.ferrite.perf.jmh;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import dev.ferrite.dir.FileExtent;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;

/**
 * What Ferrite adds to a 4 KiB direct overwrite, the path of {@code bench randwrite}: a file of
 * {@code fileMiB} written in 1 MiB pieces and fsync'd (as the harness fills it), then {@code overwrite}
 * writes an aligned block at a random block of it through {@link Namespace#write}, and {@code device}
 * the same block straight to the RAM device where the file maps it, the copy alone. Their
 * difference is the engine's cost per write: the I/O lock, the mapping lookup, the page-cache check, the
 * modification time. One thread; run with {@code -prof gc} for the bytes allocated per write.
 */
@State(Scope.Benchmark)
public class OverwriteBench extends JmhDefaults {
    private static final int BLOCK = 4096;
    private static final int FILL = 1 << 20;
    private static final int OFFSETS = 1 << 16;

    @Param("1024")
    public int fileMiB;

    private MemoryDevice device;
    private Volume volume;
    private Namespace ns;
    private Handle file;
    private Arena arena;
    private MemorySegment buf;
    /** Random block numbers of the file, and the device blocks it maps them to. */
    private final long[] blocks = new long[OFFSETS], deviceBlocks = new long[OFFSETS];
    private int next;

    @Setup(Level.Trial)
    public void setup() {
        long bytes = (long) fileMiB << 20;
        device = MemoryDevice.create(bytes / BLOCK + bytes / BLOCK / 4 + 16_384, BLOCK); // room for the metadata and log
        VolumeOptions options = VolumeOptions.defaults();
        Volume.format(device, options);
        volume = Volume.open(device, options);
        ns = volume.namespace();
        arena = Arena.ofShared();
        MemorySegment chunk = arena.allocate(FILL, BlockDevice.BUFFER_ALIGNMENT);
        chunk.fill((byte) 'f');
        buf = arena.allocate(BLOCK, BlockDevice.BUFFER_ALIGNMENT);
        buf.fill((byte) 'o');
        try (Handle root = ns.openRoot()) {
            file = ns.create(root, "data", 0644, true);
        }
        for (long off = 0; off < bytes; off += FILL) {
            ns.write(file, off, chunk);
        }
        ns.fsync(file);
        SplittableRandom random = new SplittableRandom(42);
        for (int k = 0; k < OFFSETS; k++) {
            blocks[k] = random.nextLong(bytes / BLOCK);
            FileExtent x = ns.extents(file, blocks[k] * BLOCK, BLOCK).getFirst();
            deviceBlocks[k] = (x.deviceOffset() + blocks[k] * BLOCK - x.offset()) / BLOCK;
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        file.close();
        volume.close();
        device.close();
        arena.close();
    }

    @Benchmark
    public void overwrite() {
        ns.write(file, blocks[next++ & (OFFSETS - 1)] * BLOCK, buf);
    }

    @Benchmark
    public void device() {
        device.write(deviceBlocks[next++ & (OFFSETS - 1)], buf);
    }
}
