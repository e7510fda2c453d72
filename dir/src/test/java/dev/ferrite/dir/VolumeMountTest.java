package dev.ferrite.dir;

import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferrite.io.MemoryDevice;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link Volume#mount} without a file system provider on the path (dir's tests have none): a clear refusal. */
class VolumeMountTest {
    @Test
    void withoutTheFuseModuleMountSaysWhatIsMissing(@TempDir Path mnt) {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class, () -> v.mount(mnt));
            assertTrue(e.getMessage().contains("ferrite-fuse") && e.getMessage().contains(mnt.toString()), e.getMessage());
        }
    }
}
