package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.stream.Collectors;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** The volume dir's tests start from, and the consistency checks they end with. */
final class VolumeFixtures {
    static final int BLOCKS = 8192;
    static final VolumeOptions OPTIONS = VolumeOptions.defaults().withAgCount(4).withCacheBytes(8L << 20);

    private VolumeFixtures() {
    }

    /** A freshly formatted memory volume of {@link #BLOCKS} blocks, formatted with {@link #OPTIONS}. */
    static MemoryDevice formatted() {
        MemoryDevice dev = MemoryDevice.create(BLOCKS, 4096);
        Volume.format(dev, OPTIONS);
        return dev;
    }

    /** The volume's checker finds nothing. */
    static void assertSound(Volume v) {
        List<CheckProblem> problems = v.check();
        assertTrue(problems.isEmpty(), describe(problems));
    }

    /** The problems a check found, one a line. */
    static String describe(List<CheckProblem> problems) {
        return problems.stream().map(CheckProblem::toString).collect(Collectors.joining("\n"));
    }

    /** The incompatible features in the primary superblock on {@code dev}. */
    static long incompat(BlockDevice dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            dev.read(SuperblockFormat.PRIMARY, b);
            return SuperblockFormat.read(b).incompat();
        }
    }

    /** Rewrites both superblock copies on {@code dev}, unmounted, with incompatible features {@code bits}. */
    static void setIncompat(BlockDevice dev, long bits) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            dev.read(SuperblockFormat.PRIMARY, b);
            SuperblockFormat.Fields f = SuperblockFormat.read(b).withIncompat(bits);
            for (long copy : new long[] {SuperblockFormat.PRIMARY, SuperblockFormat.MIRROR}) {
                SuperblockFormat.write(b, copy, f);
                dev.write(copy, b);
            }
        }
    }

    /** The namespace's checker finds nothing. */
    static void assertChecked(Namespace ns) {
        CheckReport report = ns.check();
        assertTrue(report.clean(), report.toString());
    }
}
