package dev.ferrite.fuse;

import org.junit.jupiter.api.Test;

import dev.ferrite.io.InvalidArgumentException;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** The mount's options that need no mount to check. */
class FuseFileSystemProviderTest {

    @Test
    void cacheTimeoutIsANumberOfSeconds() {
        assertEquals(0, FuseFileSystemProvider.cacheSeconds("0"));
        assertEquals(0.25, FuseFileSystemProvider.cacheSeconds("0.25"));
        for (String bad : new String[] {"-1", "soon", "NaN", "Infinity", ""}) {
            assertThrows(InvalidArgumentException.class, () -> FuseFileSystemProvider.cacheSeconds(bad), bad);
        }
    }
}
