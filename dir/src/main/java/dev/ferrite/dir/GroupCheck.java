package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Optional;
import java.util.OptionalLong;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.btree.internal.TreeCheck;
import dev.ferrite.btree.internal.TreeWalk;
import dev.ferrite.io.CorruptionException;

import static dev.ferrite.dir.AgHeaderFormat.AGF_BLOCK;
import static dev.ferrite.dir.AgHeaderFormat.AGI_BLOCK;
import static dev.ferrite.dir.AgHeaderFormat.FREE_BLOCKS;
import static dev.ferrite.dir.AgHeaderFormat.FREE_INODES;
import static dev.ferrite.dir.AgHeaderFormat.INODES;
import static dev.ferrite.dir.AgHeaderFormat.u64;
import static dev.ferrite.dir.AllocationGroup.INODE_BLOCK;
import static dev.ferrite.dir.AllocationGroup.MAX_HEIGHT;
import static dev.ferrite.dir.CheckProblem.Kind.BTREE;
import static dev.ferrite.dir.CheckProblem.Kind.FREE_SPACE;
import static dev.ferrite.dir.CheckProblem.Kind.GROUP_HEADER;
import static dev.ferrite.dir.CheckProblem.Kind.INODE_ALLOCATION;
import static dev.ferrite.dir.FreeSpace.extent;
import static dev.ferrite.dir.FreeSpace.extentLength;
import static dev.ferrite.dir.FreeSpace.extentStart;
import static dev.ferrite.dir.Geometry.CHUNK_BLOCKS;
import static dev.ferrite.dir.Geometry.CHUNK_INODES;

/**
 * The volume check's part for the allocation groups: each group's headers, its four to six trees (an orphan and a refcount tree once needed), that
 * every block of it is exactly one of header, tree node, free-list entry, pending free, free or inode chunk (or
 * allocated to something the caller names), that the two free-space trees hold the same extents, that the
 * two inode trees agree and match the inode records, and the header counts; then the volume's counters
 * against the groups'. Reads only, taking no lock: run it while nothing changes the volume.
 */
final class GroupCheck {
    private enum Use { HEADER, TREE_NODE, FREE_LIST, FREE, INODES, ALLOCATED, PENDING_FREE }

    private final AllocationGroup ag;
    private final BufferCache cache;
    private final List<CheckProblem> problems;
    private final String where;
    private final Use[] use;
    private final BitSet seen;

    private GroupCheck(AllocationGroup ag, List<CheckProblem> problems) {
        this.ag = ag;
        this.cache = ag.cache;
        this.problems = problems;
        this.where = "group " + ag.agno;
        this.use = new Use[ag.length];
        this.seen = new BitSet(ag.length);
    }

    /**
     * Every problem in {@code groups}, plus counters in {@code stats} that disagree with them; empty for
     * sound groups.
     *
     * @param allocated extents (device block to length) allocated to what the groups do not describe
     *                  themselves (file data, directory blocks)
     */
    static List<CheckProblem> check(AllocationGroup[] groups, VolumeStats stats, NavigableMap<Long, Integer> allocated) {
        List<CheckProblem> problems = new ArrayList<>();
        long freeBlocks = 0, freeInodes = 0, inodeCount = 0, reserved = 0;
        for (AllocationGroup ag : groups) {
            new GroupCheck(ag, problems).run(allocated);
            freeBlocks += ag.freeBlockCount() + ag.space.pendingBlocks(); // the counters count pending frees free
            freeInodes += ag.freeInodes();
            inodeCount += ag.inodes();
            reserved += ag.refcounts.reserve();
        }
        reserved = Math.min(freeBlocks, reserved);
        if (stats.freeBlocks() + stats.reservedBlocks() != freeBlocks || stats.reservedBlocks() != reserved
                || stats.freeInodes() != freeInodes || stats.inodes() != inodeCount) {
            problems.add(CheckProblem.of(GROUP_HEADER, "counters say " + stats.freeBlocks() + " free blocks and " + stats.reservedBlocks()
                    + " reserved, " + stats.inodes() + " inodes, " + stats.freeInodes() + " free; the groups say "
                    + (freeBlocks - reserved) + " and " + reserved + ", " + inodeCount + ", " + freeInodes));
        }
        return problems;
    }

    private void run(NavigableMap<Long, Integer> allocated) {
        FreeSpace space = ag.space;
        InodeAllocator inodes = ag.inodes;
        Map<String, BTree> trees = new LinkedHashMap<>();
        trees.put("by-start free-space tree", space.bno);
        trees.put("by-length free-space tree", space.cnt);
        trees.put("inode tree", inodes.ino);
        trees.put("free-inode tree", inodes.fino);
        if (ag.orphans != null) {
            trees.put("orphan tree", ag.orphans);
        }
        if (ag.refcounts.tree != null) {
            trees.put(Refcounts.TREE, ag.refcounts.tree);
        }
        mark(AGF_BLOCK, 1, Use.HEADER, where);
        mark(AGI_BLOCK, 1, Use.HEADER, where);
        for (Map.Entry<String, BTree> t : trees.entrySet()) {
            TreeCheck c = t.getValue().check();
            long header = t.getValue().headerBlock();
            for (TreeCheck.Problem p : c.problems()) {
                problems.add(CheckProblem.atBlock(BTREE, p.block(), where + " " + t.getKey() + " (header block " + header
                        + "): " + p.detail()));
            }
            if (c.height() >= MAX_HEIGHT) {
                problems.add(CheckProblem.atBlock(BTREE, header, where + " " + t.getKey() + ": height " + c.height()
                        + " reaches the limit " + MAX_HEIGHT));
            }
            long[] blocks = {0};
            TreeWalk.blocks(t.getValue(), block -> {
                blocks[0]++;
                mark((int) (block - ag.start), 1, Use.TREE_NODE, where + " " + t.getKey());
            });
            if (t.getValue() == ag.refcounts.tree && blocks[0] != ag.refcounts.blocksCounted()) {
                problems.add(CheckProblem.atBlock(BTREE, header, where + " " + t.getKey() + " takes " + blocks[0]
                        + " blocks, but its reservation counts " + ag.refcounts.blocksCounted()));
            }
        }
        if (ag.refcounts.tree == null && ag.refcounts.blocksCounted() != 0) {
            problems.add(CheckProblem.of(GROUP_HEADER, where + " has no refcount tree, but its reservation counts "
                    + ag.refcounts.blocksCounted() + " blocks of one"));
        }
        for (FreeList l : new FreeList[] {ag.agfl, ag.agil}) {
            for (int i = 0; i < l.count(); i++) {
                mark(l.entry(i), 1, Use.FREE_LIST, where + " free list");
            }
        }
        // extents on the pending-free list: owned by the list, allocated in the trees, overlapping no owner
        for (int i = 0; i < space.pendingCount(); i++) {
            long e = space.pendingEntry(i);
            mark(extentStart(e), extentLength(e), Use.PENDING_FREE, where + " pending-free list");
        }
        long free = 0;
        long agf = ag.agf.block();
        Map<Long, Boolean> byStart = new HashMap<>();
        for (Cursor c = space.bno.cursor(null, false); c.next(); ) {
            byte[] key = c.key(), value = c.value();
            if (!sized(key, value, AgTreeFormat.KEY32, AgTreeFormat.LENGTH_VALUE, FREE_SPACE, "by-start free-space tree", space.bno)) {
                continue;
            }
            int s = AgTreeFormat.key32(MemorySegment.ofArray(key));
            int len = AgTreeFormat.length(MemorySegment.ofArray(value));
            mark(s, len, Use.FREE, where + " free extent");
            free += len;
            byStart.put(extent(s, len), Boolean.TRUE);
        }
        for (Cursor c = space.cnt.cursor(null, false); c.next(); ) {
            byte[] key = c.key();
            if (!sized(key, c.value(), AgTreeFormat.CNT_KEY, 0, FREE_SPACE, "by-length free-space tree", space.cnt)) {
                continue;
            }
            MemorySegment k = MemorySegment.ofArray(key);
            if (byStart.remove(extent(AgTreeFormat.cntStart(k), AgTreeFormat.cntLength(k))) == null) {
                problems.add(CheckProblem.atBlock(FREE_SPACE, agf, where + ": extent [" + AgTreeFormat.cntStart(k) + ", +"
                        + AgTreeFormat.cntLength(k) + ") is in the by-length tree only"));
            }
        }
        for (long e : byStart.keySet()) {
            problems.add(CheckProblem.atBlock(FREE_SPACE, agf, where + ": extent [" + extentStart(e) + ", +" + extentLength(e)
                    + ") is in the by-start tree only"));
        }
        if (free != u64(ag.agf.data(), FREE_BLOCKS)) {
            problems.add(CheckProblem.atBlock(GROUP_HEADER, agf, where + ": the free-space trees hold " + free
                    + " blocks, the header counts " + u64(ag.agf.data(), FREE_BLOCKS)));
        }
        checkInodes(inodes);
        for (Map.Entry<Long, Integer> e : allocated.subMap(ag.start, ag.start + ag.length).entrySet()) {
            mark((int) (e.getKey() - ag.start), e.getValue(), Use.ALLOCATED, where + " allocated extent");
        }
        for (int b = seen.nextClearBit(0); b < ag.length; b = seen.nextClearBit(b)) {
            int end = Math.min(ag.length, seen.nextSetBit(b) < 0 ? ag.length : seen.nextSetBit(b));
            problems.add(CheckProblem.atBlock(FREE_SPACE, ag.start + b, where + ": blocks [" + b + ", " + end
                    + ") are neither free nor in use (lost)"));
            b = end;
        }
    }

    private void checkInodes(InodeAllocator inodes) {
        long count = 0, freeInodes = 0;
        long agi = ag.agi.block();
        Map<Integer, Long> withFree = new HashMap<>();
        for (Cursor c = inodes.fino.cursor(null, false); c.next(); ) {
            byte[] key = c.key(), value = c.value();
            if (!sized(key, value, AgTreeFormat.KEY32, AgTreeFormat.MASK_VALUE, INODE_ALLOCATION, "free-inode tree", inodes.fino)) {
                continue;
            }
            withFree.put(AgTreeFormat.key32(MemorySegment.ofArray(key)), AgTreeFormat.mask(MemorySegment.ofArray(value)));
        }
        for (Cursor c = inodes.ino.cursor(null, false); c.next(); ) {
            byte[] key = c.key(), value = c.value();
            if (!sized(key, value, AgTreeFormat.KEY32, AgTreeFormat.MASK_VALUE, INODE_ALLOCATION, "inode tree", inodes.ino)) {
                continue;
            }
            int first = AgTreeFormat.key32(MemorySegment.ofArray(key));
            long mask = AgTreeFormat.mask(MemorySegment.ofArray(value));
            mark(first >>> 3, CHUNK_BLOCKS, Use.INODES, where + " inode chunk");
            count += CHUNK_INODES;
            freeInodes += Long.bitCount(mask);
            Long f = withFree.remove(first);
            if (mask != 0 && (f == null || f != mask) || mask == 0 && f != null) {
                problems.add(CheckProblem.atBlock(INODE_ALLOCATION, agi, where + ": chunk at inode " + first + " has free mask "
                        + Long.toHexString(mask) + " but the free-inode tree says " + (f == null ? "nothing" : Long.toHexString(f))));
            }
            for (int i = 0; i < CHUNK_INODES && (first >>> 3) + CHUNK_BLOCKS <= ag.length; i++) {
                int agIno = first + i;
                Buffer b;
                try {
                    // the chunk is known here: a miss reads all of it at once
                    b = cache.get(ag.start + (agIno >>> 3), InodeFormat.MAGIC, ag.agno, INODE_BLOCK, ag.start + (first >>> 3), CHUNK_BLOCKS);
                } catch (CorruptionException e) {
                    problems.add(CheckProblem.atBlock(INODE_ALLOCATION, e.block(), where + ": " + e.getMessage()));
                    i += Geometry.INODES_PER_BLOCK - 1;
                    continue;
                }
                boolean inUse = InodeFormat.mode(b.data(), InodeFormat.recordOffset(cache.blockSize(), Geometry.inodeSlot(agIno))) != 0;
                if (inUse == ((mask & (1L << i)) != 0)) {
                    long ino = ag.geometry.inodeNumber(ag.agno, agIno);
                    problems.add(new CheckProblem(INODE_ALLOCATION, OptionalLong.of(b.block()), OptionalLong.of(ino), Optional.empty(),
                            where + ": inode " + ino + " is " + (inUse ? "in use" : "free") + " but the inode tree says "
                                    + (inUse ? "free" : "in use")));
                }
            }
        }
        for (int first : withFree.keySet()) {
            problems.add(CheckProblem.atBlock(INODE_ALLOCATION, agi, where + ": chunk at inode " + first + " is in the free-inode tree only"));
        }
        if (count != u64(ag.agi.data(), INODES) || freeInodes != u64(ag.agi.data(), FREE_INODES)) {
            problems.add(CheckProblem.atBlock(GROUP_HEADER, agi, where + ": the inode trees hold " + count + " inodes, " + freeInodes
                    + " free; the header counts " + u64(ag.agi.data(), INODES) + ", " + u64(ag.agi.data(), FREE_INODES)));
        }
    }

    /**
     * True if an entry of {@code tree} has the key and value sizes of its records ({@link AgTreeFormat});
     * else reports it, naming the tree's header block, for the caller to skip.
     */
    private boolean sized(byte[] key, byte[] value, int keyBytes, int valueBytes, CheckProblem.Kind kind, String tree, BTree t) {
        int k = key.length, v = value.length;
        if (k == keyBytes && v == valueBytes) {
            return true;
        }
        problems.add(CheckProblem.atBlock(kind, t.headerBlock(), where + " " + tree + ": an entry of a " + k + "-byte key and a "
                + v + "-byte value, where its records have " + keyBytes + " and " + valueBytes));
        return false;
    }

    /** Records group blocks {@code [from, from + n)} as {@code as}, reporting any already used or outside the group. */
    private void mark(int from, int n, Use as, String what) {
        if (from < 0 || n < 1 || from > ag.length - n) {
            problems.add(CheckProblem.of(FREE_SPACE, what + ": blocks [" + from + ", +" + n + ") lie outside the group's "
                    + ag.length + " blocks"));
            return;
        }
        for (int b = from; b < from + n; b++) {
            if (seen.get(b)) {
                problems.add(CheckProblem.atBlock(FREE_SPACE, ag.start + b, what + ": block " + b + " is also " + use[b]));
            } else {
                seen.set(b);
                use[b] = as;
            }
        }
    }
}
