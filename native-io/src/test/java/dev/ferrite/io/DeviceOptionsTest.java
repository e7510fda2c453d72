package dev.ferrite.io;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DeviceOptionsTest {
    @Test
    void defaults() {
        DeviceOptions d = DeviceOptions.defaults();
        assertEquals(4096, d.blockSize());
        assertEquals(0, d.size());
        assertFalse(d.readOnly());
        assertEquals(64, d.ioDepth());
        assertEquals(IoEngineKind.AUTO, d.engine());
    }

    @Test
    void withersChangeOneFieldOnly() {
        DeviceOptions d = DeviceOptions.defaults();
        assertEquals(new DeviceOptions(8192, 0, false, 64, IoEngineKind.AUTO), d.withBlockSize(8192));
        assertEquals(new DeviceOptions(4096, 1 << 20, false, 64, IoEngineKind.AUTO), d.withSize(1 << 20));
        assertEquals(new DeviceOptions(4096, 0, true, 64, IoEngineKind.AUTO), d.withReadOnly(true));
        assertEquals(new DeviceOptions(4096, 0, false, 1, IoEngineKind.AUTO), d.withIoDepth(1));
        assertEquals(new DeviceOptions(4096, 0, false, 64, IoEngineKind.THREADS), d.withEngine(IoEngineKind.THREADS));
    }

    @Test
    void blockSizesArePowersOfTwoFrom512To65536() {
        for (int ok = 512; ok <= 65536; ok <<= 1) {
            assertEquals(ok, DeviceOptions.defaults().withBlockSize(ok).blockSize());
        }
        for (int bad : new int[] {0, -4096, 1, 256, 511, 1000, 3072, 4097, 131072, Integer.MIN_VALUE}) {
            var e = assertThrows(InvalidArgumentException.class, () -> DeviceOptions.defaults().withBlockSize(bad));
            assertTrue(e.getMessage().startsWith("block size " + bad + " is not a power of two from 512 to 65536"), e.getMessage());
        }
    }

    @Test
    void negativeSizeIsRejected() {
        var e = assertThrows(InvalidArgumentException.class, () -> DeviceOptions.defaults().withSize(-1));
        assertTrue(e.getMessage().contains("device size -1 is negative"), e.getMessage());
    }

    @Test
    void ioDepthIsFrom1To4096() {
        assertEquals(4096, DeviceOptions.defaults().withIoDepth(4096).ioDepth());
        for (int bad : new int[] {0, -1, 4097}) {
            var e = assertThrows(InvalidArgumentException.class, () -> DeviceOptions.defaults().withIoDepth(bad));
            assertTrue(e.getMessage().contains("I/O depth " + bad + " is outside 1..4096"), e.getMessage());
        }
    }

    @Test
    void engineIsRequired() {
        var e = assertThrows(InvalidArgumentException.class, () -> DeviceOptions.defaults().withEngine(null));
        assertTrue(e.getMessage().contains("engine"), e.getMessage());
    }
}
