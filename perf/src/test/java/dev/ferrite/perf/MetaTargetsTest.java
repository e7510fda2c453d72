package dev.ferrite.perf;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.ferrite.perf.bench.LoopDevice;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The metadata workloads' default targets: the kernel file systems this process can make, else a real host directory. */
class MetaTargetsTest {
    @Test
    void theDefaultsAreFerriteTheKernelFileSystemsThisProcessCanMakeAndTheCeiling() {
        List<String> expected = new ArrayList<>(List.of("ferrite"));
        for (LoopDevice.Kind kind : List.of(LoopDevice.Kind.XFS, LoopDevice.Kind.EXT4, LoopDevice.Kind.BTRFS)) {
            if (LoopDevice.available(kind)) {
                expected.add(kind.label());
            }
        }
        if (expected.size() == 1) { // no root or no tools: the host's temporary directory, not the run's tmpfs
            expected.add("posix:" + System.getProperty("java.io.tmpdir"));
        }
        expected.add("memory");
        assertEquals(expected, MetaTargets.defaults());
    }
}
