package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.perf.bench.DbenchBench.Target;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DbenchBenchTest {
    @Test
    void aKernelTargetWithoutDbenchIsSkippedWithANote(@TempDir Path dir) throws IOException {
        Path loadfile = Files.writeString(dir.resolve("load.txt"), DbenchLoadfileTest.sample());
        DbenchBench bench = new DbenchBench(dir, DbenchLoadfile.read(loadfile), loadfile, List.of(1), 1,
                List.of(Target.XFS), null, VolumeOptions.defaults(), 0);
        assertEquals(List.of(), bench.run(Progress.NONE));
        assertEquals(List.of("xfs: skipped, dbench is not on the PATH (Debian/Ubuntu: apt-get install dbench)"), bench.notes());
        assertEquals(1L << 30, bench.deviceBytes());
        assertEquals(0, bench.warmupSeconds());
    }

    /** Needs root and losetup: the replay on a volume on a RAM loop device, made and removed. */
    @Test
    void ferriteRunsOnALoopDeviceItMakesAndRemoves(@TempDir Path dir) throws IOException {
        assumeTrue(LoopDevice.available(LoopDevice.Kind.RAW), "needs root and losetup");
        Path loadfile = Files.writeString(dir.resolve("load.txt"), DbenchLoadfileTest.sample());
        DbenchBench bench = new DbenchBench(dir, DbenchLoadfile.read(loadfile), loadfile, List.of(2), 1,
                List.of(Target.FERRITE), null, VolumeOptions.defaults(), 0);
        List<DbenchResult> results = bench.run(Progress.NONE);
        assertEquals(List.of(), bench.notes());
        assertEquals(1, results.size());
        DbenchResult r = results.getFirst();
        assertEquals("ferrite", r.target());
        assertEquals(2, r.clients());
        assertEquals(0, r.mismatches(), () -> "mismatches: " + r.mismatchSamples());
        assertTrue(r.mbPerSec() > 0);
        assertTrue(bench.configurations().getFirst().startsWith("ferrite volume with VolumeOptions.defaults()"),
                bench.configurations().toString());
        try (var files = Files.list(dir)) {
            assertEquals(List.of(loadfile), files.toList(), "the image is gone");
        }
    }
}
