package dev.ferrite.perf.bench;

import java.nio.file.Path;

import dev.ferrite.io.FerriteException;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Carving a device into regions: whole MiB, first fit, given back and reused, a clear refusal when full. */
class DeviceRegionsTest {
    private static final long MIB = 1 << 20;

    @Test
    void regionsAreWholeMibFirstFitAndReusedOnceGivenBack() {
        DeviceRegions r = new DeviceRegions(Path.of("/dev/test"), 10 * MIB + 12345);
        assertEquals(10 * MIB, r.size(), "a partial MiB at the end is not used");
        DeviceRegions.Region a = r.take(3 * MIB - 1);
        DeviceRegions.Region b = r.take(2 * MIB);
        DeviceRegions.Region c = r.take(MIB + 1);
        assertEquals(new DeviceRegions.Region(0, 3 * MIB), a);
        assertEquals(new DeviceRegions.Region(3 * MIB, 2 * MIB), b);
        assertEquals(new DeviceRegions.Region(5 * MIB, 2 * MIB), c);
        assertEquals(3 * MIB, r.largestFree());
        r.give(b);
        assertEquals(new DeviceRegions.Region(3 * MIB, MIB), r.take(MIB), "the first hole that fits");
        assertEquals(new DeviceRegions.Region(7 * MIB, 3 * MIB), r.take(2 * MIB + 1), "the hole left is too small");
        r.give(a);
        assertEquals(3 * MIB, r.largestFree());
    }

    @Test
    void aRegionThatDoesNotFitIsRefusedNamingTheDeviceAndWhatIsFree() {
        DeviceRegions r = new DeviceRegions(Path.of("/dev/test"), 8 * MIB);
        r.take(5 * MIB);
        FerriteException e = assertThrows(FerriteException.class, () -> r.take(4 * MIB));
        assertTrue(e.getMessage().contains("--device /dev/test (8 MiB) has no free region of 4 MiB"), e.getMessage());
        assertTrue(e.getMessage().contains("largest free: 3 MiB"), e.getMessage());
        assertEquals(3 * MIB, r.take(3 * MIB).length(), "the refusal took nothing");
    }

    @Test
    void onlyATakenRegionCanBeGivenBack() {
        DeviceRegions r = new DeviceRegions(Path.of("/dev/test"), 8 * MIB);
        DeviceRegions.Region a = r.take(MIB);
        r.give(a);
        assertThrows(IllegalStateException.class, () -> r.give(a));
        assertThrows(IllegalStateException.class, () -> r.give(new DeviceRegions.Region(0, 2 * MIB)));
    }
}
