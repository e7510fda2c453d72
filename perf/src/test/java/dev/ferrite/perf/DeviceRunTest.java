package dev.ferrite.perf;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import dev.ferrite.perf.bench.LoopDevice;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@code --device} on the multi-target workloads: every target runs on a loop device over a region of the
 * named device (a file here, as a block device would be), and nothing stays attached to it afterwards.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class DeviceRunTest extends CommandTest {
    @TempDir
    Path dir;
    Path device;

    @BeforeEach
    void makeDevice() throws IOException {
        device = dir.resolve("device.img");
        try (RandomAccessFile f = new RandomAccessFile(device.toFile(), "rw")) {
            f.setLength(3L << 30); // sparse
        }
    }

    private static void assumeLoopDevices() {
        assumeTrue(LoopDevice.available(LoopDevice.Kind.XFS), "--device test skipped: it needs root, losetup and mkfs.xfs");
    }

    @Test
    void metaRunsFerriteAndXfsOnRegionsOfTheDeviceAndLeavesNothingAttached() throws Exception {
        assumeLoopDevices();
        assertEquals(0, run("bench", "meta", "--device", device.toString(), "--dir", dir.toString(), "--files", "2000",
                "--threads", "1", "--targets", "ferrite,xfs"), err.toString());
        String printed = out.toString();
        assertTrue(printed.contains("device:  " + device), printed);
        String region = " a region of " + device + " from byte [\\d,]+ \\(direct I/O\\)";
        assertTrue(printed.matches("(?s).*\nferrite private x1: volume on /dev/loop\\d+ over" + region + ".*"), printed);
        assertTrue(printed.matches("(?s).*\nxfs private x1: xfs .* on /dev/loop\\d+, 512 MiB over" + region + ".*"), printed);
        assertNothingAttached();
        assertWritten();
    }

    @Test
    void kvStoresShareAnXfsMadeOnTheDevice() throws Exception {
        assumeLoopDevices();
        assertEquals(0, run("bench", "kv", "--device", device.toString(), "--dir", dir.toString(), "--keys", "2000",
                "--threads", "1", "--targets", "ferrite,lmdb", "--scan-seconds", "0"), err.toString());
        String printed = out.toString();
        assertTrue(printed.matches("(?s)dir: +\\S+ \\(xfs on /dev/loop\\d+, temporary; mkfs.xfs defaults, mounted .*, over a region of "
                + device + " from byte 0 \\(direct I/O\\)\\).*"), printed);
        assertNothingAttached();
        assertWritten();
    }

    @Test
    void aMissingDeviceIsRefusedBeforeAnythingRuns() {
        assertEquals(2, run("bench", "randwrite", "--device", dir.resolve("nothing").toString()));
        assertTrue(err.toString().contains("--device " + dir.resolve("nothing") + " does not exist"), err.toString());
    }

    private void assertNothingAttached() throws Exception {
        Process p = new ProcessBuilder("losetup", "--associated", device.toString()).redirectErrorStream(true).start();
        String attached = new String(p.getInputStream().readAllBytes());
        assertEquals(0, p.waitFor());
        assertEquals("", attached.strip(), "loop devices left over the device");
    }

    /** The first MiB of the device holds what the first target wrote there. */
    private void assertWritten() throws IOException {
        byte[] head = new byte[1 << 20];
        try (RandomAccessFile f = new RandomAccessFile(device.toFile(), "r")) {
            f.readFully(head);
        }
        boolean any = false;
        for (byte b : head) {
            any |= b != 0;
        }
        assertTrue(any, "nothing was written to the device's first region");
        assertTrue(Files.size(device) == 3L << 30, "the device keeps its size");
    }
}
