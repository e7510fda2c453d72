package dev.ferrite.dir;

import java.util.concurrent.atomic.AtomicInteger;

import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;

/**
 * Inodes and blocks allocated straight from a volume's groups, outside any directory: what allocation
 * tests stage and what they play owners of blocks with (the namespace allocates its own).
 */
final class VolumeAllocations {
    /** Spreads directories and parentless inodes over the groups, as the namespace's rotor spreads directories. */
    private static final AtomicInteger ROTOR = new AtomicInteger();

    private VolumeAllocations() {
    }

    /**
     * Allocates an inode: a directory (or with no parent) in the group the rotor picks next, anything else
     * in its parent's group, trying the following groups when that one is full.
     *
     * @param parent the parent directory's inode, or 0
     * @throws NoSpaceException if no group has a free inode or room for a chunk (nothing changed)
     */
    static long allocInode(Volume v, int mode, int uid, int gid, int nlink, long parent) {
        int n = v.geometry().agCount();
        int first = (mode & InodeFormat.S_IFMT) == InodeFormat.S_IFDIR || parent == 0
                ? Math.floorMod(ROTOR.getAndIncrement(), n) : v.geometry().agOfInode(parent);
        return v.allocInode(first, mode, uid, gid, nlink);
    }

    /**
     * Frees inode {@code ino}: its slot becomes free (its generation kept, bumped at the next allocation).
     *
     * @throws InvalidArgumentException if {@code ino} is not an allocated inode (nothing changed)
     */
    static void freeInode(Volume v, long ino) {
        v.requireOpen();
        v.requireValidInode(ino);
        Geometry geometry = v.geometry();
        AllocationGroup ag = v.group(geometry.agOfInode(ino));
        for (int refills = 0; ; refills++) {
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
            try (Txn txn = Txn.begin(v.cache(), ag.freeInodeItems())) {
                if (ag.freeInode(txn, geometry.agInode(ino)) == AllocOutcome.DONE) {
                    txn.commit();
                    ag.reclaimEmptyChunks();
                    return;
                }
            }
            if (refills == 4) {
                throw new NoSpaceException("allocation group " + ag.agno + " cannot refill the free list of its inode trees");
            }
        }
    }

    /**
     * Allocates {@code len} contiguous blocks, in group {@code preferredAg} if it has them, else in the
     * following groups.
     *
     * @return the first device block
     * @throws NoSpaceException if no group has {@code len} contiguous free blocks (nothing changed)
     */
    static long allocBlocks(Volume v, int preferredAg, int len) {
        v.requireOpen();
        Geometry geometry = v.geometry();
        if (len < 1 || len > geometry.agBlocks()) {
            throw new InvalidArgumentException("cannot allocate " + len + " contiguous blocks: groups have " + geometry.agBlocks());
        }
        int n = geometry.agCount();
        for (int k = 0; k < n; k++) {
            AllocationGroup ag = v.group(Math.floorMod(preferredAg + k, n));
            for (int refills = 0, busy = 0; refills < 4; refills++) {
                if (ag.needsRefill()) {
                    ag.refillFreeList();
                }
                AllocOutcome r;
                try (Txn txn = Txn.begin(v.cache(), ag.blockItems())) {
                    r = ag.allocBlocks(txn, len);
                    if (r == AllocOutcome.DONE) {
                        long first = ag.allocatedBlock(txn);
                        txn.commit();
                        return first;
                    }
                }
                if (r == AllocOutcome.NO_SPACE) {
                    break;
                }
                if (r == AllocOutcome.BUSY && busy < AllocationGroup.BUSY_RETRIES) {
                    ag.awaitBusy(busy++);
                    refills--;
                }
            }
        }
        throw new NoSpaceException("no allocation group has " + len + " contiguous free blocks");
    }

    /**
     * Frees blocks {@code [block, block + len)}, which must lie in one group and be allocated.
     *
     * @throws InvalidArgumentException if they lie outside one group's space (nothing changed)
     */
    static void freeBlocks(Volume v, long block, int len) {
        v.requireOpen();
        Geometry geometry = v.geometry();
        int agno = block < geometry.dataStart() ? -1 : geometry.agOfBlock(block);
        if (agno < 0 || len < 1 || block + len > geometry.agStart(agno) + geometry.agLength(agno)) {
            throw new InvalidArgumentException("blocks [" + block + ", +" + len + ") do not lie inside one allocation group");
        }
        AllocationGroup ag = v.group(agno);
        for (int refills = 0; ; refills++) {
            if (ag.needsRefill()) {
                ag.refillFreeList();
            }
            try (Txn txn = Txn.begin(v.cache(), ag.blockItems())) {
                if (ag.releaseBlocks(txn, block, len) == AllocOutcome.DONE) {
                    txn.commit();
                    return;
                }
            }
            if (refills == 4) {
                throw new NoSpaceException("allocation group " + agno + " cannot refill the free list of its free-space trees");
            }
        }
    }
}
