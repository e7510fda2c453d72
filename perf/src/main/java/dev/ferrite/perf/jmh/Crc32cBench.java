package dev.ferrite.perf.jmh;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.internal.Crc32c;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.zip.CRC32C;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * CRC32C over a block, as every metadata write-back and read verification does. {@code heapArray} is the
 * JDK intrinsic on a {@code byte[]}: the floor the segment forms are measured against. {@code computeSkipping}
 * and the in-place pair are the two ways to checksum a block whose checksum field lies inside it. Buffers come from
 * a shared arena, like {@link dev.ferrite.io.internal.BufferPool}'s.
 */
@State(Scope.Thread)
public class Crc32cBench extends JmhDefaults {
    /** Where a block header would keep its checksum. */
    private static final int FIELD_OFFSET = 28;

    @Param({"4096", "65536"})
    int size;

    private Arena arena;
    private MemorySegment segment;
    private byte[] array;

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofShared();
        segment = arena.allocate(size, BlockDevice.BUFFER_ALIGNMENT);
        array = new byte[size];
        new SplittableRandom(42).nextBytes(array);
        MemorySegment.copy(MemorySegment.ofArray(array), 0, segment, 0, size);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public int compute() {
        return Crc32c.compute(segment);
    }

    @Benchmark
    public int computeSkipping() {
        return Crc32c.computeSkipping(segment, FIELD_OFFSET);
    }

    /** Stamping a block the caller owns: zero the field, one pass, store. */
    @Benchmark
    public int stampInPlace() {
        return Crc32c.stampInPlace(segment, FIELD_OFFSET);
    }

    /** Verifying a block the caller owns: the stamp above, checked and put back. */
    @Benchmark
    public boolean verifyInPlace() {
        return Crc32c.verifyInPlace(segment, FIELD_OFFSET);
    }

    @Benchmark
    public int heapArray() {
        CRC32C crc = new CRC32C();
        crc.update(array, 0, size);
        return (int) crc.getValue();
    }
}
