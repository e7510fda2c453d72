package dev.ferrite.dir;

import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What a small directory's tree holds at rest (issue 16): a tree of one node, a root leaf, keeps
 * {@link DirContents#LEAF}'s reserve, not the 20 blocks a larger tree's writers share; a tree emptied
 * again goes back to it. Before, a directory of 30 entries took 20 blocks (the header, the root and 18,
 * refilled to 20 at the first change after 30), and a directory of 3,000 entries emptied kept its header,
 * its root and 20 more.
 */
class TreeReserveMarksTest {
    /** A tree of one node: its header, its root and the reserve refilled up to {@link DirContents#LEAF}'s fill. */
    private static final long LEAF_BLOCKS = 2 + DirContents.LEAF.fill();

    private static Volume open(MemoryDevice dev) {
        Volume.format(dev, VolumeFixtures.OPTIONS);
        return Volume.open(dev, VolumeFixtures.OPTIONS);
    }

    private static int height(Volume v, String dir) {
        Inode d = v.inodeCache().acquire(v.namespace().lookup(dir));
        try {
            return v.namespace().dirs.treeOrNull(d).height();
        } finally {
            v.inodeCache().release(d);
        }
    }

    @Test
    void aDirectoryOfThirtyEntriesTakesItsHeaderItsRootAndAFewBlocks() {
        try (MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096); Volume v = open(dev)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            for (int i = 0; i < 30; i++) {
                ns.create("/d/file-" + i, 0644, true);
            }
            assertEquals(1, height(v, "/d"), "30 entries fit in one leaf");
            long blocks = ns.stat("/d").blocks();
            assertTrue(blocks <= LEAF_BLOCKS, "a directory of 30 entries takes " + blocks + " blocks");
            VolumeFixtures.assertChecked(ns);
        }
    }

    /**
     * A directory grown to a tree of more levels and emptied, a root leaf again, spills its reserve down
     * to the leaf's marks (at the unlinks after the last merge), and grows from there again.
     */
    @Test
    void aDirectoryUnlinkedBackToOneLeafSpillsDownToItsMarks() {
        try (MemoryDevice dev = MemoryDevice.create(VolumeFixtures.BLOCKS, 4096); Volume v = open(dev)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            int n = 3_000;
            for (int i = 0; i < n; i++) {
                ns.create("/d/file-" + i, 0644, true);
            }
            assertTrue(height(v, "/d") >= 2);
            for (int i = 0; i < n; i++) {
                ns.unlink("/d/file-" + i);
            }
            assertEquals(1, height(v, "/d"));
            long blocks = ns.stat("/d").blocks();
            assertTrue(blocks <= LEAF_BLOCKS, "a directory emptied takes " + blocks + " blocks");
            for (int i = 0; i < 300; i++) {
                ns.create("/d/file-" + i, 0644, true);
            }
            assertEquals(300, ns.stat("/d").size());
            VolumeFixtures.assertChecked(ns);
        }
    }
}
