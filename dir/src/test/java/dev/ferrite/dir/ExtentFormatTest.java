package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The inline extent list: its encoding, merging and splitting, capacity, and what decoding refuses. */
class ExtentFormatTest {
    private static final int BS = 4096;
    private static final Geometry G = Geometry.plan(MemoryDevice.create(VolumeFixtures.BLOCKS, BS), VolumeFixtures.OPTIONS);
    private static final int REC = InodeFormat.recordOffset(BS, 3);
    private static final long D = G.agStart(1) + 100; // a data block well inside group 1

    private static MemorySegment inodeBlock(Arena arena) {
        MemorySegment b = arena.allocate(BS);
        BlockHeaderFormat.init(b, InodeFormat.MAGIC, 4242, 0);
        return b;
    }

    @Test
    void capacityIsTheInlineAreaInSixteenByteExtents() {
        assertEquals(408, InodeFormat.inlineCapacity(BS));
        assertEquals(25, ExtentFormat.capacity(InodeFormat.inlineCapacity(BS)));
    }

    @Test
    void encodesAndDecodesEveryField() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = inodeBlock(arena);
            ExtentList x = new ExtentList(25);
            x.insert(0, D, 3, false);
            x.insert(10, D + 50, 100, true);
            int span = ExtentFormat.encode(b, REC, x);
            assertEquals(InodeFormat.INLINE + 2 * ExtentFormat.SIZE, span);
            assertEquals(InodeFormat.FORK_EXTENTS, InodeFormat.fork(b, REC));
            ExtentList y = ExtentFormat.decode(b, REC, G);
            assertEquals(x.toString(), y.toString());
            assertTrue(y.unwritten(1));
            assertFalse(y.unwritten(0));
            assertEquals(103, y.blocks());
            // shrinking zeroes what the list used before
            ExtentList one = new ExtentList(25);
            one.insert(5, D, 1, false);
            ExtentFormat.encode(b, REC, one);
            assertEquals(0L, b.get(dev.ferrite.io.internal.OnDisk.U64, REC + InodeFormat.INLINE + ExtentFormat.SIZE));
            assertEquals(InodeFormat.FORK_EXTENTS, InodeFormat.fork(b, REC));
            assertEquals(InodeFormat.INLINE + ExtentFormat.SIZE, ExtentFormat.encode(b, REC, new ExtentList(25)));
            assertEquals(InodeFormat.FORK_EMPTY, InodeFormat.fork(b, REC)); // no extents: an empty fork
            assertEquals(0, ExtentFormat.decode(b, REC, G).count());
        }
    }

    @Test
    void neighboursContiguousOnTheDeviceInOneStateMerge() {
        ExtentList x = new ExtentList(25);
        x.insert(0, D, 2, false);
        x.insert(2, D + 2, 2, false); // contiguous in file and device: merges
        assertEquals(1, x.count());
        x.insert(4, D + 4, 2, true); // unwritten beside written: stays apart
        assertEquals(2, x.count());
        x.insert(7, D + 7, 1, true); // a hole in the file between: apart
        assertEquals(3, x.count());
        x.insert(6, D + 6, 1, true); // fills the hole: the three unwritten ones merge
        assertEquals("[0+4@" + D + ", 4+4@" + (D + 4) + "u]", x.toString());
        x.setWritten(0, 100);
        assertEquals("[0+8@" + D + "]", x.toString());
    }

    @Test
    void convertingTheMiddleOfAnUnwrittenExtentSplitsIt() {
        ExtentList x = new ExtentList(25);
        x.insert(10, D, 10, true);
        x.setWritten(13, 15);
        assertEquals("[10+3@" + D + "u, 13+2@" + (D + 3) + ", 15+5@" + (D + 5) + "u]", x.toString());
        assertEquals(10, x.blocks());
    }

    @Test
    void unwritingTheMiddleOfAWrittenExtentSplitsItAndWritingItBackMerges() {
        ExtentList x = new ExtentList(25);
        x.insert(10, D, 10, false);
        x.setState(13, 15, true);
        assertEquals("[10+3@" + D + ", 13+2@" + (D + 3) + "u, 15+5@" + (D + 5) + "]", x.toString());
        x.setState(0, 100, true);
        assertEquals("[10+10@" + D + "u]", x.toString());
        x.setState(0, 100, false);
        assertEquals("[10+10@" + D + "]", x.toString());
    }

    @Test
    void punchTakesOnePieceOfOneExtentAtATimeSplittingOneTheRangeEndsInside() {
        ExtentList x = new ExtentList(25);
        x.insert(0, D, 4, false);
        x.insert(6, D + 10, 4, true);
        assertArrayEquals(new long[] {D + 2, 2}, x.punch(2, 8)); // the tail of the first
        assertArrayEquals(new long[] {D + 10, 2}, x.punch(2, 8)); // the head of the second
        assertEquals(null, x.punch(2, 8));
        assertEquals("[0+2@" + D + ", 8+2@" + (D + 12) + "u]", x.toString());
        assertArrayEquals(new long[] {D + 1, 1}, x.punch(1, 2)); // inside: nothing to split off past it
        assertArrayEquals(new long[] {D + 12, 1}, x.punch(8, 9)); // the head: the tail stays
        assertEquals("[0+1@" + D + ", 9+1@" + (D + 13) + "u]", x.toString());
        x.insert(20, D + 30, 5, false);
        assertArrayEquals(new long[] {D + 32, 1}, x.punch(22, 23)); // the middle: it splits in two
        assertEquals("[0+1@" + D + ", 9+1@" + (D + 13) + "u, 20+2@" + (D + 30) + ", 23+2@" + (D + 33) + "]", x.toString());
    }

    @Test
    void trimFromTakesTheLastPiecesFirstAndSplitsAStraddler() {
        ExtentList x = new ExtentList(25);
        x.insert(0, D, 4, false);
        x.insert(10, D + 20, 4, false);
        long[][] one = x.trimFrom(2, 1);
        assertEquals(1, one.length);
        assertEquals(D + 20, one[0][0]);
        long[][] rest = x.trimFrom(2, 5);
        assertEquals(1, rest.length);
        assertEquals(D + 2, rest[0][0]);
        assertEquals(2, rest[0][1]);
        assertEquals("[0+2@" + D + "]", x.toString());
        assertEquals(0, x.trimFrom(2, 5).length);
    }

    @Test
    void gapsAndLookups() {
        ExtentList x = new ExtentList(25);
        x.insert(4, D, 2, false);
        x.insert(8, D + 10, 2, true);
        assertEquals(0, x.find(4));
        assertEquals(-1 - 1, x.find(6)); // before extent 1
        assertEquals(-1, x.find(0));
        assertArrayEquals(new long[] {0, 4}, x.firstGap(0, 20, false));
        assertArrayEquals(new long[] {6, 2}, x.firstGap(4, 20, false));
        assertArrayEquals(new long[] {8, 2}, x.firstGap(8, 20, true)); // unwritten counts as a gap when asked
        assertArrayEquals(new long[] {10, 10}, x.firstGap(8, 20, false));
        assertNull(x.firstGap(4, 6, true));
    }

    private static void assertArrayEquals(long[] expected, long[] actual) {
        org.junit.jupiter.api.Assertions.assertArrayEquals(expected, actual);
    }

    @Test
    void theFastPathLookupFindsOnlyAWrittenRunInsideTheSizeAndOneGroup() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = inodeBlock(arena);
            InodeFormat.init(b, REC, InodeFormat.recordSize(BS), InodeFormat.S_IFREG | 0644, 0, 0, 1, 0);
            ExtentList x = new ExtentList(25);
            x.insert(0, D, 4, false);
            x.insert(4, D + 10, 4, true);
            x.insert(8, D + 20, 4, false);
            ExtentFormat.encode(b, REC, x);
            InodeFormat.setSize(b, REC, 10L * BS);
            assertEquals(D + 1, ExtentFormat.writtenBlock(b, REC, 1, 4, G));
            assertEquals(-1, ExtentFormat.writtenBlock(b, REC, 3, 5, G), "runs into another extent");
            assertEquals(-1, ExtentFormat.writtenBlock(b, REC, 4, 5, G), "unwritten");
            assertEquals(D + 20, ExtentFormat.writtenBlock(b, REC, 8, 10, G));
            assertEquals(-1, ExtentFormat.writtenBlock(b, REC, 8, 11, G), "past the size");
            assertEquals(-1, ExtentFormat.writtenBlock(b, REC, 12, 13, G), "a hole");
            ExtentFormat.set(b, REC + InodeFormat.INLINE, 0, 0, 0, 4, false); // a hostile extent over the superblock
            assertEquals(-1, ExtentFormat.writtenBlock(b, REC, 1, 2, G));
            InodeFormat.setFork(b, REC, InodeFormat.FORK_EMPTY);
            assertEquals(-1, ExtentFormat.writtenBlock(b, REC, 8, 9, G), "no extent list");
        }
    }

    @Test
    void decodeRefusesWhatNoFileHolds() {
        try (Arena arena = Arena.ofConfined()) {
            int area = REC + InodeFormat.INLINE;
            // overlapping extents
            assertCorrupt(arena, b -> {
                ExtentFormat.set(b, area, 0, 0, D, 4, false);
                ExtentFormat.set(b, area, 1, 2, D + 10, 4, false);
                return 2;
            }, "overlaps");
            // unsorted
            assertCorrupt(arena, b -> {
                ExtentFormat.set(b, area, 0, 10, D, 4, false);
                ExtentFormat.set(b, area, 1, 0, D + 10, 4, false);
                return 2;
            }, "overlaps");
            // outside the data blocks (the superblock)
            assertCorrupt(arena, b -> {
                ExtentFormat.set(b, area, 0, 0, 0, 4, false);
                return 1;
            }, "not inside one allocation group");
            // across two groups
            assertCorrupt(arena, b -> {
                ExtentFormat.set(b, area, 0, 0, G.agStart(2) - 2, 4, false);
                return 1;
            }, "not inside one allocation group");
            // zero length (a hand-made word: set refuses it)
            assertCorrupt(arena, b -> {
                b.set(dev.ferrite.io.internal.OnDisk.U64, area + ExtentFormat.PACKED, D);
                return 1;
            }, "empty");
            // more than the area holds is the record's own check
            assertCorrupt(arena, b -> 26, "inline area");
            // a used length that is no whole number of extents
            MemorySegment b = inodeBlock(arena);
            InodeFormat.setFork(b, REC, InodeFormat.FORK_EXTENTS);
            InodeFormat.setInlineUsed(b, REC, 20);
            CorruptionException e = assertThrows(CorruptionException.class, () -> ExtentFormat.decode(b, REC, G));
            assertTrue(e.getMessage().contains("not a multiple"), e.getMessage());
            // a file with another fork
            MemorySegment c = inodeBlock(arena);
            InodeFormat.setFork(c, REC, InodeFormat.FORK_TREE);
            assertTrue(assertThrows(CorruptionException.class, () -> ExtentFormat.decode(c, REC, G)).getMessage().contains("fork format 3"));
        }
    }

    private interface Filler {
        int fill(MemorySegment b);
    }

    private static void assertCorrupt(Arena arena, Filler filler, String expected) {
        MemorySegment b = inodeBlock(arena);
        int n = filler.fill(b);
        InodeFormat.setFork(b, REC, InodeFormat.FORK_EXTENTS);
        InodeFormat.setInlineUsed(b, REC, n * ExtentFormat.SIZE);
        CorruptionException e = assertThrows(CorruptionException.class, () -> ExtentFormat.decode(b, REC, G));
        assertEquals(4242, e.block(), e.getMessage());
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }
}
