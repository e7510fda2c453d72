package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.RecordingDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeTest.OPTIONS;
import static dev.ferrite.dir.VolumeTest.assertSound;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A volume that was never unmounted: recovery replays the journal and the counters come back exact. */
class CrashTest {
    private static final long SEED = Long.getLong("ferrite.seed", 5);

    @Test
    void countersAreRebuiltFromTheGroupsAfterACrash() {
        Random rnd = new Random(SEED);
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeTest.formatted())) {
            List<Long> live = new ArrayList<>();
            VolumeStats atSync;
            MemoryDevice crashed;
            Volume v = Volume.open(rec, OPTIONS);
            try {
                for (int i = 0; i < 900; i++) {
                    if (live.isEmpty() || rnd.nextInt(4) > 0) {
                        int mode = rnd.nextInt(3) == 0 ? InodeFormat.S_IFDIR | 0700 : InodeFormat.S_IFREG | 0600;
                        live.add(v.allocInode(mode, 7, 7, 1, v.rootInode()));
                    } else {
                        v.freeInode(live.remove(rnd.nextInt(live.size())));
                    }
                }
                v.sync();
                atSync = v.statfs();
                // the crash: the device as it is now, without the unmount (the superblock still says mounted)
                crashed = rec.imageAt(rec.eventCount());
            } finally {
                v.close();
            }
            try (crashed; Volume after = Volume.open(crashed, OPTIONS)) {
                MountReport r = after.mountReport();
                assertFalse(r.wasClean(), r.toString());
                assertTrue(r.rebuiltCounters(), r.toString());
                assertTrue(r.replayedBlocks() > 0, r.toString());
                assertEquals(atSync, after.statfs(), "seed " + SEED);
                assertEquals(live.size() + 1, atSync.inodes() - atSync.freeInodes());
                for (long ino : live) {
                    assertEquals(7, after.stat(ino).uid(), "inode " + ino + ", seed " + SEED);
                }
                assertSound(after);
            }
        }
    }
}
