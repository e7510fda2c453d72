package dev.ferrite.perf.jmh;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import dev.ferrite.io.sys.Posix;

/**
 * What a C library call through {@link Posix} costs beside the system call itself: {@code lseek} of a
 * file in {@code /dev/shm} (the cheapest system call a device makes), and {@code pwrite} of 4 KiB to it
 * (the page cache, no device); {@code errno}, reading the last call's errno, which finds this thread's
 * capture buffer as every call does and makes no system call. Run with {@code -t 2} to see two threads'
 * calls interleave.
 */
@State(Scope.Benchmark)
public class DowncallBench extends JmhDefaults {
    private Path path;
    private int fd;
    private Arena arena;
    private MemorySegment buf;

    @Setup(Level.Trial)
    public void setup() throws IOException {
        Path shm = Path.of("/dev/shm");
        path = Files.isDirectory(shm) ? Files.createTempFile(shm, "downcall", ".bin") : Files.createTempFile("downcall", ".bin");
        arena = Arena.ofShared();
        buf = arena.allocate(4096, 4096);
        fd = Posix.open(arena.allocateFrom(path.toString()), Posix.O_RDWR | Posix.O_CLOEXEC, 0);
        if (fd < 0) {
            throw new IOException("open " + path + ": " + Posix.strerror(Posix.errno()));
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        Posix.close(fd);
        arena.close();
        Files.delete(path);
    }

    @Benchmark
    public int errno() {
        return Posix.errno();
    }

    @Benchmark
    public long lseek() {
        return Posix.lseek(fd, 0, Posix.SEEK_SET);
    }

    @Benchmark
    public long pwrite() {
        return Posix.pwrite(fd, buf, 4096, 0);
    }
}
