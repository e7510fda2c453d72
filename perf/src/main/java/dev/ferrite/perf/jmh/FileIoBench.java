package dev.ferrite.perf.jmh;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;

/**
 * File data through a {@link Handle} in a RAM volume, one thread, on a 1 MiB file written and synced at
 * setup: {@code bufferedRead} and {@code bufferedWrite} of 4 KiB at a block offset from a heap buffer
 * (the data page cache: a cached page, so no device I/O after the first call); {@code directRead} and
 * {@code directWrite} of an aligned 4 KiB block (in place over a written extent); {@code bufferedWriteFsync}, a
 * buffered write then fsync (its page written back in place, a journal force); {@code bufferedAppend}, a
 * 4 KiB append to a second file cut back to empty every {@value #FILE_BLOCKS} appends (each a new page past
 * the end: the lookup of its block and the space reservation, and a share of the truncate that drops the
 * pages); {@code openClose} of the file by name in an open directory. Run with {@code -prof gc} for the
 * bytes allocated per call.
 */
@State(Scope.Benchmark)
public class FileIoBench extends JmhDefaults {
    private static final int BLOCK = 4096;
    private static final int FILE_BLOCKS = 256;

    private MemoryDevice device;
    private Volume volume;
    private Namespace ns;
    private Handle dir, file, log;
    private Arena arena;
    private MemorySegment heap, aligned;
    private int next, appended;

    @Setup(Level.Trial)
    public void setup() {
        device = MemoryDevice.create(32_768, BLOCK);
        VolumeOptions options = VolumeOptions.defaults().withLogBlocks(2048);
        Volume.format(device, options);
        volume = Volume.open(device, options);
        ns = volume.namespace();
        arena = Arena.ofShared();
        aligned = arena.allocate(BLOCK, BlockDevice.BUFFER_ALIGNMENT);
        aligned.fill((byte) 'a');
        heap = MemorySegment.ofArray(new byte[BLOCK]);
        try (Handle root = ns.openRoot()) {
            dir = ns.mkdir(root, "d", 0755);
        }
        file = ns.create(dir, "data", 0644, true);
        for (int b = 0; b < FILE_BLOCKS; b++) {
            ns.write(file, (long) b * BLOCK, aligned);
        }
        ns.fsync(file);
        log = ns.create(dir, "log", 0644, true);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        file.close();
        log.close();
        dir.close();
        volume.close();
        device.close();
        arena.close();
    }

    /** The next of 16 blocks: all cached after the first round. */
    private long offset() {
        return (long) (next++ & 15) * BLOCK;
    }

    @Benchmark
    public int bufferedRead() {
        return ns.read(file, offset(), heap);
    }

    @Benchmark
    public void bufferedWrite() {
        ns.write(file, offset(), heap);
    }

    @Benchmark
    public int directRead() {
        return ns.read(file, offset() + 64 * BLOCK, aligned);
    }

    @Benchmark
    public void directWrite() {
        ns.write(file, offset() + 64 * BLOCK, aligned);
    }

    @Benchmark
    public void bufferedWriteFsync() {
        ns.write(file, offset(), heap);
        ns.fsync(file);
    }

    @Benchmark
    public void bufferedAppend() {
        if (appended == FILE_BLOCKS) {
            ns.truncate(log, 0);
            appended = 0;
        }
        ns.append(log, heap);
        appended++;
    }

    @Benchmark
    public void openClose() {
        ns.open(dir, "data").close();
    }
}
