package dev.ferrite.perf;

import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class VolumeCommandsTest extends CommandTest {
    @TempDir
    Path dir;

    @Test
    void formatCheckAndDumpAFreshVolume() {
        Path img = dir.resolve("v.img");
        assertEquals(0, run("format", img.toString(), "--size", "64M", "--ags", "2"), err.toString());
        assertTrue(out.toString().contains("2 allocation groups"), out.toString());
        assertEquals(0, run("check", img.toString()), out + " " + err);
        assertTrue(out.toString().contains(": clean"), out.toString());
        assertEquals(0, run("dump", img.toString(), "--path", "/"), err.toString());
        assertTrue(out.toString().contains("type directory"), out.toString());
        assertEquals(0, run("dump", img.toString(), "--block", "0"), err.toString());
        assertTrue(out.toString().contains("'FSB1'") && out.toString().contains("crc32c valid"), out.toString());
    }

    @Test
    void checkReplaysACrashLeftLogInMemoryAndChangesNothing() throws Exception {
        Path img = dir.resolve("v.img");
        assertEquals(0, run("format", img.toString(), "--size", "64M"), err.toString());
        Path crashed = dir.resolve("crashed.img");
        try (BlockDevice dev = VolumeDevices.open(img, DeviceOptions.defaults());
             Volume v = Volume.open(dev, VolumeOptions.defaults())) {
            Namespace ns = v.namespace();
            ns.mkdir("/a", 0755);
            for (int i = 0; i < 50; i++) {
                ns.create("/a/f" + i, 0644, true);
            }
            ns.sync();
            Files.copy(img, crashed); // as if the power went now: logged, not all written home, not clean
        }
        byte[] before = Files.readAllBytes(crashed);
        assertEquals(0, run("check", crashed.toString()), out + " " + err);
        assertTrue(out.toString().contains("in memory only"), out.toString());
        assertArrayEquals(before, Files.readAllBytes(crashed), "check changed the device");
        assertEquals(0, run("dump", crashed.toString(), "--path", "/a"), err.toString());
        assertTrue(out.toString().contains("directory of 50 entries"), out.toString());
        assertArrayEquals(before, Files.readAllBytes(crashed), "dump changed the device");
    }

    @Test
    void checkReportsADamagedBlockByNumber() throws Exception {
        Path img = dir.resolve("v.img");
        assertEquals(0, run("format", img.toString(), "--size", "64M"), err.toString());
        assertEquals(0, run("dump", img.toString(), "--path", "/"), err.toString());
        Matcher m = Pattern.compile("block (\\d+), slot").matcher(out.toString());
        assertTrue(m.find(), out.toString());
        long block = Long.parseLong(m.group(1));
        try (RandomAccessFile f = new RandomAccessFile(img.toFile(), "rw")) {
            f.seek(block * 4096 + 100);
            int b = f.read();
            f.seek(block * 4096 + 100);
            f.write(b ^ 0x40);
        }
        assertEquals(1, run("check", img.toString()), out + " " + err);
        assertTrue(out.toString().contains(Long.toString(block)), out.toString());
        assertEquals(0, run("dump", img.toString(), "--block", Long.toString(block)), err.toString());
        assertTrue(out.toString().contains("crc32c INVALID"), out.toString());
    }

    @Test
    void refusesABlockDeviceWithoutForceAndAMissingFileWithoutSize() {
        assertEquals(2, run("format", dir.resolve("missing.img").toString()));
        assertTrue(err.toString().contains("give --size"), err.toString());
    }
}
