package dev.ferrite.dir;

import java.util.List;
import java.util.stream.Collectors;

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

    /** The namespace's checker finds nothing. */
    static void assertChecked(Namespace ns) {
        CheckReport report = ns.check();
        assertTrue(report.clean(), report.toString());
    }
}
