package dev.ferrite.dir;

import java.util.List;
import java.util.TreeMap;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The groups' part of the volume check reports each problem with its kind and the block and inode it names. */
class GroupCheckTest {
    @Test
    void blocksNobodyAccountsForAreLostFreeSpaceAtTheirFirstBlock() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            long first = VolumeAllocations.allocBlocks(v, 1, 3);
            TreeMap<Long, Integer> allocated = new TreeMap<>();
            allocated.put(first, 3);
            assertEquals(List.of(), v.checkGroups(allocated), "the caller owns them");
            List<CheckProblem> problems = v.check();
            assertEquals(1, problems.size(), problems.toString());
            CheckProblem p = problems.getFirst();
            assertEquals(CheckProblem.Kind.FREE_SPACE, p.kind(), p.toString());
            assertEquals(first, p.block().orElseThrow(), p.toString());
            assertTrue(p.detail().contains("lost"), p.toString());
        }
    }

    @Test
    void aFreeBlockClaimedByTheCallerIsUsedTwice() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            long free = VolumeAllocations.allocBlocks(v, 2, 1);
            VolumeAllocations.freeBlocks(v, free, 1);
            TreeMap<Long, Integer> allocated = new TreeMap<>();
            allocated.put(free, 1);
            List<CheckProblem> problems = v.checkGroups(allocated);
            assertEquals(1, problems.size(), problems.toString());
            assertEquals(CheckProblem.Kind.FREE_SPACE, problems.getFirst().kind());
            assertEquals(free, problems.getFirst().block().orElseThrow());
        }
    }

    @Test
    void anInodeRecordFreedBehindTheInodeTreesBackNamesTheInodeAndItsBlock() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            long ino = VolumeAllocations.allocInode(v, InodeFormat.S_IFREG | 0644, 0, 0, 1, v.rootInode());
            try (Txn txn = Txn.begin(v.cache(), 1)) {
                Buffer b = v.inodeBuffer(ino);
                assertTrue(txn.lock(b));
                int rec = InodeFormat.recordOffset(v.geometry().blockSize(), Geometry.inodeSlot(ino));
                txn.log(b, rec, InodeFormat.clear(b.data(), rec, v.geometry().inodeSize()));
                txn.commit();
            }
            List<CheckProblem> problems = v.check();
            assertEquals(1, problems.size(), problems.toString());
            CheckProblem p = problems.getFirst();
            assertEquals(CheckProblem.Kind.INODE_ALLOCATION, p.kind(), p.toString());
            assertEquals(ino, p.inode().orElseThrow(), p.toString());
            assertEquals(v.geometry().inodeBlock(ino), p.block().orElseThrow(), p.toString());
        }
    }
}
