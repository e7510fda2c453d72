package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The superblock's floating-slots feature: a format leaves it clear (its leaves keep their slots after the
 * header), the first mount sets it before it writes anything, and no unmount clears it, so that code whose
 * leaves cannot float refuses every volume this code has written to.
 */
class FloatingSlotsFeatureTest {
    @Test
    void theFirstMountSetsItForGood() {
        try (MemoryDevice dev = VolumeFixtures.formatted()) {
            assertEquals(0, floating(dev), "formatted");
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
                assertEquals(SuperblockFormat.INCOMPAT_FLOATING_SLOTS, floating(dev), "set by the mount");
                for (int i = 0; i < 2000; i++) {
                    v.namespace().create("/f" + (i * 7919 % 2000), 0644, true); // leaves split and float
                }
            }
            assertEquals(SuperblockFormat.INCOMPAT_FLOATING_SLOTS, floating(dev), "kept by the clean unmount");
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
                for (int i = 0; i < 2000; i++) {
                    assertTrue(v.namespace().lstat("/f" + i).isRegularFile(), "/f" + i);
                }
                VolumeFixtures.assertChecked(v.namespace());
            }
        }
    }

    private static long floating(BlockDevice dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            dev.read(SuperblockFormat.PRIMARY, b);
            return SuperblockFormat.read(b).incompat() & SuperblockFormat.INCOMPAT_FLOATING_SLOTS;
        }
    }
}
