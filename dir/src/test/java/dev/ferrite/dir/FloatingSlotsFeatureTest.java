package dev.ferrite.dir;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.io.internal.OnDisk.U16;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The superblock's floating-slots feature: the format sets it, and then B-tree leaves float their slot
 * arrays; a volume formatted without it (by code from before floating leaves) keeps every leaf's slots
 * right after the header through mounts, creates, splits and deletes, and keeps the feature clear, so
 * that such code can still read it.
 */
class FloatingSlotsFeatureTest {
    /** Where a leaf keeps its slot base (0: right after the header), as BTreeNodeFormat lays it out. */
    private static final int BASE = 56;

    @Test
    void aFormattedVolumeFloatsItsLeaves() {
        try (MemoryDevice dev = VolumeFixtures.formatted()) {
            assertEquals(SuperblockFormat.INCOMPAT_FLOATING_SLOTS, floating(dev), "set by the format");
            churn(dev);
            assertEquals(SuperblockFormat.INCOMPAT_FLOATING_SLOTS, floating(dev), "kept");
            assertTrue(floatingLeaves(dev) > 0, "no leaf floats");
        }
    }

    @Test
    void aVolumeFormattedWithoutItKeepsEveryLeafsSlotsAfterTheHeader() {
        try (MemoryDevice dev = VolumeFixtures.formatted()) {
            VolumeFixtures.setIncompat(dev, 0); // as code from before floating leaves formats it
            churn(dev);
            assertEquals(0, floating(dev), "a mount sets no feature");
            assertEquals(0, floatingLeaves(dev), "leaves that float");
        }
    }

    /** Creates and removes enough files in one directory that its tree's leaves split, compact and merge. */
    private static void churn(MemoryDevice dev) {
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            for (int i = 0; i < 3000; i++) {
                v.namespace().create("/f" + (i * 7919 % 3000), 0644, true);
            }
            for (int i = 0; i < 3000; i += 3) {
                v.namespace().unlink("/f" + i);
            }
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            for (int i = 1; i < 3000; i += 3) {
                assertTrue(v.namespace().lstat("/f" + i).isRegularFile(), "/f" + i);
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** B-tree leaves on the device whose slot base is set. */
    private static int floatingLeaves(MemoryDevice dev) {
        int[] found = {0};
        VolumeFixtures.forEachLeaf(dev, b -> found[0] += b.get(U16, BASE) != 0 ? 1 : 0);
        return found[0];
    }

    private static long floating(BlockDevice dev) {
        return VolumeFixtures.incompat(dev) & SuperblockFormat.INCOMPAT_FLOATING_SLOTS;
    }
}
