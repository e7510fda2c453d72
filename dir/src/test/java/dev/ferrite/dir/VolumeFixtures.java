package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Collectors;

import dev.ferrite.btree.internal.BTreeNodeFormat;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** The volume dir's tests start from, and the consistency checks they end with. */
final class VolumeFixtures {
    static final int BLOCKS = 8192;
    static final VolumeOptions OPTIONS = VolumeOptions.defaults().withAgCount(4).withCacheBytes(8L << 20);

    private VolumeFixtures() {
    }

    /** A freshly formatted memory volume of {@link #BLOCKS} blocks, formatted with {@link #OPTIONS}. */
    static MemoryDevice formatted() {
        MemoryDevice dev = MemoryDevice.create(BLOCKS, 4096);
        Volume.format(dev, OPTIONS);
        return dev;
    }

    /**
     * A freshly formatted volume as code from before wide B-tree cells formats it: without
     * {@link SuperblockFormat#INCOMPAT_WIDE_CELLS}, so its trees' values are 960 bytes at most, whatever the key.
     */
    static MemoryDevice formattedNarrow() {
        MemoryDevice dev = formatted();
        setIncompat(dev, incompat(dev) & ~SuperblockFormat.INCOMPAT_WIDE_CELLS);
        return dev;
    }

    /** Hands each B-tree leaf on {@code dev} (unmounted) to {@code leaf}, read raw into one buffer. */
    static void forEachLeaf(BlockDevice dev, Consumer<MemorySegment> leaf) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            for (long block = 0; block < dev.blockCount(); block++) {
                dev.read(block, b);
                if (b.get(ValueLayout.JAVA_INT_UNALIGNED, 0) == BTreeNodeFormat.MAGIC && b.get(ValueLayout.JAVA_BYTE, LEAF_LEVEL) == 0) {
                    leaf.accept(b);
                }
            }
        }
    }

    /** Where a B-tree node keeps its level, as BTreeNodeFormat lays it out. */
    private static final int LEAF_LEVEL = 32;

    /** The volume's checker finds nothing. */
    static void assertSound(Volume v) {
        List<CheckProblem> problems = v.check();
        assertTrue(problems.isEmpty(), describe(problems));
    }

    /** The problems a check found, one a line. */
    static String describe(List<CheckProblem> problems) {
        return problems.stream().map(CheckProblem::toString).collect(Collectors.joining("\n"));
    }

    /** The incompatible features in the primary superblock on {@code dev}. */
    static long incompat(BlockDevice dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            dev.read(SuperblockFormat.PRIMARY, b);
            return SuperblockFormat.read(b).incompat();
        }
    }

    /** Rewrites both superblock copies on {@code dev}, unmounted, with incompatible features {@code bits}. */
    static void setIncompat(BlockDevice dev, long bits) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            dev.read(SuperblockFormat.PRIMARY, b);
            SuperblockFormat.Fields f = SuperblockFormat.read(b).withIncompat(bits);
            for (long copy : new long[] {SuperblockFormat.PRIMARY, SuperblockFormat.MIRROR}) {
                SuperblockFormat.write(b, copy, f);
                dev.write(copy, b);
            }
        }
    }

    /** The namespace's checker finds nothing. */
    static void assertChecked(Namespace ns) {
        CheckReport report = ns.check();
        assertTrue(report.clean(), report.toString());
    }

    /** Frees {@code len} blocks from device block {@code block} that a test took behind the allocator's back, refilling the free list as needed. */
    static void giveBack(Volume v, long block, int len) {
        AllocationGroup ag = v.group(v.geometry().agOfBlock(block));
        for (;;) {
            if (ag.space.needsRefill()) {
                ag.space.refillFreeList();
            }
            try (Txn txn = Txn.begin(v.cache(), ag.runsItems())) {
                if (ag.space.releaseBlocks(txn, block, len) == AllocOutcome.DONE) {
                    txn.commit();
                    return;
                }
            }
        }
    }
}
