package dev.ferrite.perf;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import dev.ferrite.perf.bench.LoopDevice;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@code bench randwrite --cloned} gives every side the same work: Ferrite's file and XFS's are both cloned
 * before the phase, and the targets that cannot clone are skipped rather than measured doing plain overwrites.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class ClonedRandWriteTest extends CommandTest {
    @TempDir
    Path dir;

    @Test
    void xfsClonesItsFileTooAndTargetsWithoutClonesAreSkipped() {
        assumeTrue(LoopDevice.available(LoopDevice.Kind.XFS) && LoopDevice.available(LoopDevice.Kind.EXT4),
                "skipped: it needs root, losetup, mkfs.xfs and mkfs.ext4");
        assertEquals(0, run("bench", "randwrite", "--cloned", "--targets", "ferrite,xfs,ext4", "--file-size", "16M",
                "--seconds", "0.2", "--qd", "1", "--dir", dir.toString()), err.toString());
        String printed = out.toString();
        assertTrue(printed.contains("ext4: skipped, no reflink clones to copy on write"), printed);
        assertTrue(printed.contains("the file cloned first by cp --reflink=always"), printed);
        assertTrue(printed.matches("(?s).*\ncloned-qd1 +ferrite +[\\d,.]+ IOPS .* [\\d,.]+ IOPS .*"), printed);
        assertTrue(printed.matches("(?s).*ferrite cloned-qd1: clone of the 16 MiB file .*"), printed);
    }
}
