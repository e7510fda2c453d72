package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.TableTest.b;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Values of any length: those over {@link Table#MAX_MEDIUM} bytes kept out of line as blob files (medium ones:
 * {@link TableMediumTest}). They
 * round-trip whole, in pieces and by streaming reads, across remounts; overwriting or deleting one frees
 * its blob (none left behind, space returned), but not while a snapshot that reads it is open; a
 * transaction that fails part way leaves no blob behind; the volume checks clean throughout.
 */
@ExtendWith(TestSeed.class)
class TableBlobTest {
    private static final long SEED = TestSeed.get(17);

    private static byte[] random(Random rnd, int n) {
        byte[] v = new byte[n];
        rnd.nextBytes(v);
        return v;
    }

    /** The blob files the volume holds, by state. */
    static List<String> blobFiles(Volume v) {
        long dir = v.tables().blobs.directory();
        return dir == 0 ? List.of() : v.namespace().dirs.allEntries(dir).stream().map(DirEntry::name).sorted().toList();
    }

    /** The blob files whose inodes are flagged doomed ({@link InodeFormat#FLAG_DOOMED}), sorted. */
    static List<String> doomedBlobFiles(Volume v) {
        long dir = v.tables().blobs.directory();
        return dir == 0 ? List.of() : v.namespace().dirs.allEntries(dir).stream()
                .filter(e -> (v.namespace().records.statIno(e.ino()).flags() & InodeFormat.FLAG_DOOMED) != 0).map(DirEntry::name).sorted().toList();
    }

    @Test
    void valuesOfAnyLengthRoundTripAndFreeTheirBlobs() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = MemoryDevice.create(32_768, 4096);
        Volume.format(dev, VolumeFixtures.OPTIONS);
        int[] sizes = {0, 1, Table.MAX_INLINE, Table.MAX_INLINE + 1, 4096, 65_536 + 3, (1 << 20) + 17};
        byte[][] values = new byte[sizes.length][];
        long free;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(b("k0"), new byte[Table.MAX_MEDIUM]); // the free lists refilled for extents (an overflow tree made and grown, without them)
            t.delete(b("k0"));
            free = freeCountingReserve(v);
            for (int i = 0; i < sizes.length; i++) {
                values[i] = random(rnd, sizes[i]);
                t.put(b("k" + i), values[i]);
            }
            assertEquals(2, blobFiles(v).size(), "values over MAX_MEDIUM only: " + blobFiles(v));
            assertTrue(blobFiles(v).stream().allMatch(n -> n.startsWith("l")), blobFiles(v).toString());
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            for (int i = 0; i < sizes.length; i++) {
                assertArrayEquals(values[i], t.get(b("k" + i)), "size " + sizes[i]);
                assertEquals(sizes[i], t.valueLength(b("k" + i)));
                MemorySegment part = MemorySegment.ofArray(new byte[100]);
                assertEquals(sizes[i], t.get(MemorySegment.ofArray(b("k" + i)), part));
                int n = Math.min(100, sizes[i]);
                assertArrayEquals(Arrays.copyOf(values[i], n), Arrays.copyOf(part.toArray(ValueLayout.JAVA_BYTE), n));
            }
            byte[] big = values[values.length - 1]; // streamed in odd pieces
            byte[] back = new byte[big.length];
            for (int at = 0; at < big.length; at += 77_777) {
                int n = Math.min(77_777, big.length - at);
                assertEquals(big.length, t.read(MemorySegment.ofArray(b("k" + (sizes.length - 1))), at,
                        MemorySegment.ofArray(back).asSlice(at, n)));
            }
            assertArrayEquals(big, back);
            TableCursor c = t.cursor();
            int seen = 0;
            while (c.next()) {
                int i = Integer.parseInt(new String(c.key(), StandardCharsets.UTF_8).substring(1));
                assertArrayEquals(values[i], c.value());
                assertEquals(sizes[i], c.valueSegment().byteSize());
                seen++;
            }
            assertEquals(sizes.length, seen);
            t.put(b("k4"), b("small now"));
            t.put(b("k1"), random(rnd, 70_000)); // small to large
            t.delete(b("k6"));
            v.sync(); // doomed blobs go in the background, all before a sync returns
            assertEquals(2, blobFiles(v).size(), "k6's doomed and deleted, k1's new: " + blobFiles(v));
            for (int i = 0; i < sizes.length; i++) {
                t.delete(b("k" + i));
            }
            v.sync();
            assertEquals(List.of(), blobFiles(v));
            assertEquals(free, freeCountingReserve(v), "every blob's blocks are free again");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A cursor reads blobs into one buffer it keeps, not an array per value: longer and shorter ones in
     * turn, through {@code valueSegment} and in pieces, each exact, with far less allocated per entry than
     * the values' bytes (an array of each value's length before).
     */
    @Test
    void aScanOfBlobsReadsThemIntoTheCursorsBuffer() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            int[] sizes = {300_000, Table.MAX_MEDIUM + 1, (1 << 20) + 5, 70_001};
            byte[][] values = new byte[sizes.length][];
            for (int i = 0; i < sizes.length; i++) {
                t.put(b("k" + i), values[i] = random(rnd, sizes[i]));
            }
            double best = Double.MAX_VALUE;
            try (TableCursor c = t.cursor()) {
                java.io.ByteArrayOutputStream lent = new java.io.ByteArrayOutputStream();
                for (int round = 0; round < 4; round++) {
                    long allocated = 0;
                    for (int pass = 0; pass < 5; pass++) {
                        c.seek(b("k"));
                        for (int i = 0; c.next(); i++) {
                            long before = FileTestBase.allocatedBytes();
                            MemorySegment got = c.valueSegment();
                            allocated += FileTestBase.allocatedBytes() - before;
                            assertEquals(MemorySegment.ofArray(values[i]).byteSize(), got.byteSize(), "round " + round + " value " + i);
                            assertEquals(-1, MemorySegment.mismatch(got, 0, got.byteSize(), MemorySegment.ofArray(values[i]), 0, sizes[i]),
                                    "round " + round + " value " + i);
                            lent.reset();
                            assertEquals(sizes[i], c.value((bytes, offset, length) -> lent.writeBytes(
                                    bytes.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE))));
                            assertArrayEquals(values[i], lent.toByteArray(), "round " + round + " value " + i + " in pieces");
                        }
                    }
                    best = round == 0 ? best : Math.min(best, allocated / (5.0 * sizes.length)); // the first round grows the buffer
                }
            }
            assertTrue(best < 4096, best + " bytes allocated per blob read through valueSegment (seed " + SEED + ")");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A cursor outside a snapshot that read a key's blob stub before the key was deleted or given another
     * value, the old blob then deleted by the reaper, reads the key as it is now, as for a medium value:
     * null (or -1) once it is gone, its new value once replaced. Before, the read found the blob's file gone
     * and threw CorruptionException ("not that blob any more"), damage reported for a legal change.
     */
    @Test
    void aCursorWhoseBlobIsDeletedUnderItReadsTheKeyAsItIsNow() {
        Random rnd = new Random(SEED);
        byte[] a = random(rnd, Table.MAX_MEDIUM + 10), b1 = random(rnd, 200_000), b2 = random(rnd, 150_000);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(b("a"), a);
            t.put(b("b"), b1);
            try (TableCursor c = t.cursor()) {
                assertTrue(c.next()); // at "a": the leaf copied, the stub with it
                t.delete(b("a"));
                v.sync(); // the doomed blob deleted (no snapshot can read it)
                assertNull(c.value());
                assertEquals(-1, c.value(MemorySegment.ofArray(new byte[16])));
                assertTrue(c.next());
                t.put(b("b"), b2);
                v.sync();
                assertArrayEquals(b2, c.value());
                byte[] part = new byte[100];
                assertEquals(b2.length, c.value(MemorySegment.ofArray(part)));
                assertArrayEquals(Arrays.copyOf(b2, 100), part);
            }
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A cursor lends a blob whose file's pages are cached straight from them: read-only native views, in
     * order, the exact bytes (one piece of the cursor's heap buffer before); a blob whose pages are not all
     * cached is read as before, and lent once the read has cached them.
     */
    @Test
    void aScanLendsACachedBlobsPagesWithoutCopying() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formatted();
        int[] sizes = {(1 << 20) + 5, Table.MAX_MEDIUM + 1, 300_000};
        byte[][] values = new byte[sizes.length][];
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            for (int i = 0; i < sizes.length; i++) {
                t.put(b("k" + i), values[i] = random(rnd, sizes[i]));
            }
            assertScanLends(t, values, true, "as written");
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            assertScanLends(t, values, false, "after a remount, nothing cached");
            assertScanLends(t, values, true, "read once");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A blob's value goes to the device in one direct write, from a bounce buffer or (whole aligned native
     * blocks) the caller's memory, not through dirty pages written back: no page is written back for it,
     * its file's size is the value's length (not rounded up to its last block), and its pages are cached
     * clean as written, so a scan lends them. A buffered write wrote back every page of the value.
     */
    @Test
    void aBlobIsWrittenStraightToTheDeviceAndCachedClean() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formatted();
        byte[][] values = {random(rnd, (1 << 20) + 5), random(rnd, 1 << 20), random(rnd, Table.MAX_MEDIUM + 1)};
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t");
             Arena arena = Arena.ofConfined()) {
            long before = v.pageCache().stats().writtenBack();
            t.put(b("k0"), values[0]);
            MemorySegment aligned = arena.allocate(values[1].length, BlockDevice.BUFFER_ALIGNMENT).copyFrom(MemorySegment.ofArray(values[1]));
            t.put(MemorySegment.ofArray(b("k1")), aligned);
            t.put(b("k2"), values[2]);
            assertEquals(before, v.pageCache().stats().writtenBack(), "pages written back for blobs: " + v.pageCache().stats());
            assertEquals(0, v.pageCache().stats().dirtyPages());
            List<Long> sizes = v.namespace().dirs.allEntries(v.tables().blobs.directory()).stream()
                    .map(e -> v.namespace().records.statIno(e.ino()).size()).sorted().toList();
            assertEquals(List.of((long) values[2].length, (long) values[1].length, (long) values[0].length), sizes, "the blob files' sizes");
            assertScanLends(t, values, true, "as written");
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            for (int i = 0; i < values.length; i++) {
                assertArrayEquals(values[i], t.get(b("k" + i)), "value " + i + " after a remount");
            }
        }
    }

    /**
     * A blob's file takes three transactions (its create, its blocks' allocation, its size with the
     * conversion ordered after the data), and a put naming a new blob two more (the rename to live and the
     * key's change); a replacing put as many, its rename exchanging the two blobs' names (a link and a
     * doom of the old blob took two). The speculative flag the allocation sets goes with the size, since
     * the file then maps nothing past its end: before, the file's close cleared it in a fourth
     * transaction of its own (a put 6, a replacing put 7). The files keep no speculative flag, and the
     * volume checks.
     */
    @Test
    void aBlobPutTakesFiveTransactionsAndItsFileKeepsNoSpeculativeFlag() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formatted();
        byte[] value = random(rnd, 1 << 20), other = random(rnd, (1 << 20) + 5);
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t").withDurability(Durability.NONE);
             Arena arena = Arena.ofConfined()) {
            t.put(b("first"), value); // the blob directory, made once
            long before = v.journal().stats().commits();
            TableValueFormat.Blob blob = v.tables().blobs.write(MemorySegment.ofArray(value));
            assertEquals(3, v.journal().stats().commits() - before, "transactions of a blob's file");
            v.tables().blobs.discard(blob.id());
            before = v.journal().stats().commits();
            t.put(b("k"), value);
            assertEquals(5, v.journal().stats().commits() - before, "transactions of a put of a new blob (from frames)");
            MemorySegment aligned = arena.allocate(value.length, BlockDevice.BUFFER_ALIGNMENT).copyFrom(MemorySegment.ofArray(value));
            before = v.journal().stats().commits();
            t.put(MemorySegment.ofArray(b("a")), aligned);
            assertEquals(5, v.journal().stats().commits() - before, "transactions of a put of a new blob (from the caller's blocks)");
            v.sync(); // the discarded blob's deletion out of the way
            BlobReaperTest.holdReaper(v); // its deletion of the replaced blob is not the put's (the sync below does it)
            before = v.journal().stats().commits();
            t.put(b("k"), other);
            assertEquals(5, v.journal().stats().commits() - before, "transactions of a put replacing a blob");
            for (DirEntry e : v.namespace().dirs.allEntries(v.tables().blobs.directory())) {
                assertEquals(0, v.namespace().records.statIno(e.ino()).flags() & InodeFormat.FLAG_SPECULATIVE, "flags of blob " + e.name());
            }
            v.sync();
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            assertArrayEquals(other, t.get(b("k")));
            assertArrayEquals(value, t.get(b("a")));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A blob directory holding the names older code gave blobs no key names, {@code p<id>} (pending, or
     * the old blob of an exchange) and {@code d<id>} (doomed by a rename), mounts: the mount deletes them
     * (new blobs are born {@code l<id>}, flagged), keeps the live blob, and their space is free again.
     */
    @Test
    void aMountDeletesThePendingAndDoomedNamesOfOlderCode() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formatted();
        byte[] value = random(rnd, (1 << 20) + 9);
        long free;
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(b("k"), value);
            v.sync();
            free = freeCountingReserve(v);
            Namespace ns = v.namespace();
            try (Handle d = ns.openInode(v.tables().blobs.directory())) {
                for (String name : List.of("p1", "d2")) {
                    try (Handle f = ns.create(d, name, 0600, true)) {
                        ns.write(f, 0, MemorySegment.ofArray(random(rnd, 70_000)));
                    }
                }
            }
            v.sync();
            assertEquals(3, blobFiles(v).size(), blobFiles(v).toString());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            assertEquals(1, blobFiles(v).size(), "seed " + SEED + ": " + blobFiles(v));
            assertTrue(blobFiles(v).getFirst().startsWith("l"), "seed " + SEED + ": " + blobFiles(v));
            assertArrayEquals(value, t.get(b("k")));
            v.sync();
            assertEquals(free, freeCountingReserve(v), "seed " + SEED + ": the old names' blocks are free again");
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * Blobs replacing blobs, the reaper freeing the replaced ones meanwhile (busy until a checkpoint, which
     * {@code NONE} commits never ask for): once the blobs' group has no free blocks that are not busy, the
     * next allocation takes another group's instead of forcing the log. It forced the log every few 1 MiB
     * puts (0.4 a put in a harness), with three groups' blocks free and not busy.
     */
    @Test
    void replacingBlobsTakeAnotherGroupsFreeBlocksBeforeTheyForceTheLog() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = MemoryDevice.create(16384, 4096);
        Volume.format(dev, VolumeFixtures.OPTIONS);
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t").withDurability(Durability.NONE)) {
            byte[] value = random(rnd, 1 << 20);
            for (int i = 0; i < 4; i++) {
                t.put(b("k" + i), value);
            }
            v.sync();
            long forces = v.journal().stats().forces();
            for (int i = 0; i < 24; i++) {
                t.put(b("k" + rnd.nextInt(4)), value);
            }
            assertEquals(0, v.journal().stats().forces() - forces, "seed " + SEED + ": log forces of 24 replacing puts");
            v.sync();
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A heap value's blob is copied once, into page-cache frames side by side that are written to the
     * device in one write and then become the blob's pages; deleting the blob gives them back so that the
     * next blob takes the same run. Frames given back in the cache map's order came out one by one, so
     * a later blob found no run (a bounce buffer and a copy more).
     */
    @Test
    void aBlobIsWrittenFromARunOfFramesThatTheNextBlobTakesAgain() {
        Random rnd = new Random(SEED);
        MemoryDevice dev = VolumeFixtures.formatted();
        byte[] first = random(rnd, (1 << 20) + 5), second = random(rnd, 1 << 20);
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(b("k0"), first);
            int run = blobRun(v, 257);
            t.delete(b("k0"));
            v.sync(); // deletes the doomed blob, its pages with it
            t.put(b("k1"), second);
            assertEquals(run, blobRun(v, 256), "the second blob's frames (seed " + SEED + ")");
            assertEquals(0, v.pageCache().stats().dirtyPages());
            assertArrayEquals(second, t.get(b("k1")));
            VolumeFixtures.assertChecked(v.namespace());
        }
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            assertArrayEquals(second, t.get(b("k1")), "after a remount");
            assertNull(t.get(b("k0")));
        }
    }

    /** The volume's one blob's cached pages: {@code blocks} frames side by side, the first returned. */
    private static int blobRun(Volume v, int blocks) {
        List<DirEntry> entries = v.namespace().dirs.allEntries(v.tables().blobs.directory());
        assertEquals(1, entries.size(), "blob files: " + entries);
        try (Handle h = v.namespace().openInode(entries.get(0).ino())) {
            FilePages p = h.inode.pages;
            assertEquals(blocks, p.size(), "the blob's cached pages");
            int first = p.get(0);
            for (int b = 1; b < blocks; b++) {
                assertEquals(first + b, p.get(b), "frame of block " + b);
            }
            return first;
        }
    }

    /** Scans {@code t}'s blobs through {@code value(Pieces)}: each exact, lent from the cache's frames ({@code lent}) or not. */
    private static void assertScanLends(Table t, byte[][] values, boolean lent, String when) {
        java.io.ByteArrayOutputStream got = new java.io.ByteArrayOutputStream();
        boolean[] frames = {true, true};
        try (TableCursor c = t.cursor()) {
            for (int i = 0; c.next(); i++) {
                got.reset();
                frames[0] = frames[1] = true;
                assertEquals(values[i].length, c.value((bytes, offset, length) -> {
                    frames[0] &= bytes.isNative() && bytes.isReadOnly();
                    frames[1] &= !(bytes.isNative() && bytes.isReadOnly());
                    got.writeBytes(bytes.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE));
                }), when);
                assertArrayEquals(values[i], got.toByteArray(), when + ", value " + i + " (seed " + SEED + ")");
                assertTrue(frames[lent ? 0 : 1], when + ", value " + i + ": " + (lent ? "not" : "") + " lent from the frames");
            }
        }
    }

    /** The blob value of the damage and lend tests: 1 MiB and 5 bytes (its last page partial), random by the seed. */
    private static byte[] blobValue() {
        return random(new Random(SEED), (1 << 20) + 5);
    }

    /**
     * A blob block damaged on the device is a {@code CorruptionException} to a cursor's {@code value(Pieces)}
     * even when its pages are all cached, filled from the device by a read of part of the value (which checks
     * no CRC): a lend checks the CRC in the frames. The same value as written (cached before the damage) is
     * lent whole and exact.
     */
    @Test
    void aDamagedBlobIsACorruptionToALendWhetherOrNotItsPagesAreCached() {
        MemoryDevice dev = VolumeFixtures.formatted();
        byte[] val = blobValue();
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(b("k"), val);
        }
        flipAByteOfTheBlockHolding(dev, Arrays.copyOfRange(val, 5 * 4096, 6 * 4096));
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().open("t")) {
            byte[] part = new byte[val.length - 1]; // not the whole value: no CRC checked, every page cached
            assertEquals(val.length, t.read(MemorySegment.ofArray(b("k")), 0, MemorySegment.ofArray(part)));
            assertTrue(!Arrays.equals(Arrays.copyOf(val, part.length), part), "the read of part of it sees the damage");
            for (int pass = 0; pass < 2; pass++) {
                assertLendsNothing(t, "pass " + pass);
            }
            t.put(b("k2"), val); // written: its pages hold it as written, whatever the device holds
            try (TableCursor c = t.cursor()) {
                c.seek(b("k2"));
                assertTrue(c.next());
                assertArrayEquals(val, lent(c));
            }
        }
    }

    /**
     * A lend checks a blob's CRC once per state of its file's pages, not once for good: after a lend found
     * it right, a page dropped (as an eviction drops it) and filled again from a damaged device block by a
     * read of part of the value is a {@code CorruptionException} to the next lend, nothing handed.
     */
    @Test
    void aLendChecksABlobAgainOnceItsPagesChanged() {
        MemoryDevice dev = VolumeFixtures.formatted();
        byte[] val = blobValue();
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(b("k"), val);
            try (TableCursor c = t.cursor()) {
                assertTrue(c.next());
                assertArrayEquals(val, lent(c), "lent as written, its CRC checked");
            }
            damagePageFive(v, dev, val, TableValueFormat.readBlob(MemorySegment.ofArray(t.storedValue(b("k")))));
            byte[] part = new byte[val.length - 1]; // fills the page again from the device, checking no CRC
            t.read(MemorySegment.ofArray(b("k")), 0, MemorySegment.ofArray(part));
            assertLendsNothing(t, "after the page was filled again");
        }
    }

    /**
     * A get of a whole blob whose pages are cached copies them with its CRC checked once per state of the
     * pages (the lend's check, remembered in {@code FilePages}), not over again each time; once a page was
     * dropped and filled again from a damaged device block, the next get is a {@code CorruptionException}.
     */
    @Test
    void aGetOfACachedBlobChecksItsCrcOncePerStateOfItsPages() {
        MemoryDevice dev = VolumeFixtures.formatted();
        byte[] val = blobValue();
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            t.put(b("k"), val);
            for (int pass = 0; pass < 2; pass++) {
                assertArrayEquals(val, t.get(b("k")), "pass " + pass);
            }
            TableValueFormat.Blob blob = TableValueFormat.readBlob(MemorySegment.ofArray(t.storedValue(b("k"))));
            try (Handle h = v.namespace().openInode(blob.ino())) {
                FilePages p = h.requireReadable().pages;
                p.lock.lock();
                try { // before, each get summed the whole value again and remembered nothing
                    assertEquals(p.changes, p.checkedAt, "the check remembered for the pages as they are");
                    assertEquals(blob.crc(), p.checkedCrc);
                    assertEquals(val.length, p.checkedLength);
                } finally {
                    p.lock.unlock();
                }
            }
            damagePageFive(v, dev, val, blob);
            assertThrows(CorruptionException.class, () -> t.get(b("k")), "the page read again from the damaged block");
            assertThrows(CorruptionException.class, () -> t.get(b("k")), "and cached so: checked again, not remembered");
        }
    }

    /** Damages the device block holding page 5 of {@code blob}, whose value is {@code val}, and drops that page from the cache, as an eviction would. */
    private static void damagePageFive(Volume v, MemoryDevice dev, byte[] val, TableValueFormat.Blob blob) {
        flipAByteOfTheBlockHolding(dev, Arrays.copyOfRange(val, 5 * 4096, 6 * 4096));
        try (Handle h = v.namespace().openInode(blob.ino())) {
            Inode i = h.requireReadable();
            IoLock l = v.namespace().files.lockExclusive(h, i);
            try {
                v.namespace().files.buffered.drop(i, 5, 6); // as an eviction of that page
            } finally {
                l.unlock();
            }
        }
    }

    /** The bytes {@code c}'s {@code value(Pieces)} hands over, checked against the length it returns. */
    private static byte[] lent(TableCursor c) {
        java.io.ByteArrayOutputStream got = new java.io.ByteArrayOutputStream();
        long n = c.value((bytes, offset, length) -> got.writeBytes(bytes.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE)));
        assertEquals(n, got.size());
        return got.toByteArray();
    }

    /** {@code t}'s first value is a {@code CorruptionException} to {@code value(Pieces)}, nothing handed. */
    private static void assertLendsNothing(Table t, String when) {
        try (TableCursor c = t.cursor()) {
            assertTrue(c.next());
            boolean[] handed = {false};
            assertThrows(CorruptionException.class, () -> c.value((bytes, offset, length) -> handed[0] = true), when + " (seed " + SEED + ")");
            assertTrue(!handed[0], when + ": nothing lent of a damaged value");
        }
    }

    /** Flips a byte of the one device block that holds {@code bytes} (a block of a blob's random value). */
    private static void flipAByteOfTheBlockHolding(MemoryDevice dev, byte[] bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment blk = a.allocate(dev.blockSize(), BlockDevice.BUFFER_ALIGNMENT), want = MemorySegment.ofArray(bytes);
            long found = -1;
            for (long n = 0; n < dev.blockCount(); n++) {
                dev.read(n, blk);
                if (MemorySegment.mismatch(blk, 0, blk.byteSize(), want, 0, want.byteSize()) == -1) {
                    assertEquals(-1, found, "one block holds those bytes");
                    found = n;
                }
            }
            assertTrue(found >= 0, "some block holds those bytes");
            dev.read(found, blk);
            blk.set(ValueLayout.JAVA_BYTE, 99, (byte) ~blk.get(ValueLayout.JAVA_BYTE, 99));
            dev.write(found, blk);
        }
    }

    @Test
    void aSnapshotKeepsTheBlobsItReads() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            byte[] old = random(rnd, 70_000), next = random(rnd, 80_000);
            t.put(b("k"), old);
            try (Snapshot s = v.tables().snapshot()) {
                t.put(b("k"), next);
                t.put(b("gone"), random(rnd, 66_000));
                t.delete(b("gone"));
                assertArrayEquals(old, s.get(t, b("k")));
                assertArrayEquals(next, t.get(b("k")));
                assertEquals(2, doomedBlobFiles(v).size(), blobFiles(v).toString());
                TableCursor c = s.cursor(t, null, null, false);
                assertTrue(c.next());
                assertArrayEquals(old, c.value());
                v.sync();
                assertEquals(3, blobFiles(v).size(), "a sync leaves the blobs a snapshot may read: " + blobFiles(v));
            }
            v.sync();
            assertEquals(1, blobFiles(v).size(), "the doomed blobs go after the last snapshot, by a sync: " + blobFiles(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /**
     * A snapshot streams the values it sees a piece at a time, by key and at its cursor, whatever later
     * commits did to them: an inline, a medium and a blob value replaced, one deleted, a key inserted. A
     * negative offset and a closed snapshot are refused.
     */
    @Test
    void aSnapshotStreamsItsValuesAPieceAtATime() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            String[] keys = {"inline", "medium", "blob", "gone"};
            byte[][] old = {random(rnd, 300), random(rnd, 20_000), random(rnd, 150_000), random(rnd, 90_000)};
            for (int i = 0; i < keys.length; i++) {
                t.put(b(keys[i]), old[i]);
            }
            Snapshot s = v.tables().snapshot();
            byte[][] next = {random(rnd, 40), random(rnd, 70_000), random(rnd, 30_000)};
            for (int i = 0; i < next.length; i++) {
                t.put(b(keys[i]), next[i]);
            }
            t.delete(b("gone"));
            t.put(b("fresh"), random(rnd, 5_000));
            v.sync(); // the replaced blobs stay for the snapshot
            MemorySegment piece = MemorySegment.ofArray(new byte[4_099]); // pieces across block edges
            for (int i = 0; i < keys.length; i++) {
                byte[] key = b(keys[i]);
                assertEquals(old[i].length, s.valueLength(t, key), keys[i]);
                assertArrayEquals(old[i], streamed(old[i].length, (off, out) -> s.read(t, key, off, out), piece), keys[i]);
                assertEquals(old[i].length, s.read(t, key, old[i].length + 10, piece), "past the end: nothing copied");
            }
            assertEquals(-1, s.read(t, b("fresh"), 0, piece), "inserted after the snapshot");
            try (TableCursor c = s.cursor(t, null, null, false)) {
                int seen = 0;
                while (c.next()) {
                    int i = Arrays.asList(keys).indexOf(new String(c.key(), StandardCharsets.UTF_8));
                    assertTrue(i >= 0, "a key of the snapshot");
                    assertArrayEquals(old[i], streamed(old[i].length, c::value, piece), keys[i] + " at the cursor");
                    seen++;
                }
                assertEquals(keys.length, seen);
            }
            for (int i = 0; i < next.length; i++) {
                MemorySegment key = MemorySegment.ofArray(b(keys[i]));
                assertArrayEquals(next[i], streamed(next[i].length, (off, out) -> t.read(key, off, out), piece), keys[i] + " now");
            }
            assertThrows(InvalidArgumentException.class, () -> s.read(t, b("blob"), -1, piece));
            s.close();
            TableException closed = assertThrows(TableException.class, () -> s.read(t, b("blob"), 0, piece));
            assertEquals(TableException.Kind.TRANSACTION_DONE, closed.kind());
            v.sync();
            assertEquals(1, blobFiles(v).size(), "the snapshot's blobs go once it closes, medium's new one stays: " + blobFiles(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    /** A streaming read of one value. */
    private interface Reader {
        long read(long offset, MemorySegment out);
    }

    /** The value {@code reader} gives a piece of {@code piece}'s size at a time, each read returning the whole length. */
    private static byte[] streamed(int length, Reader reader, MemorySegment piece) {
        byte[] all = new byte[length];
        for (int off = 0; off < length; off += (int) piece.byteSize()) {
            assertEquals(length, reader.read(off, piece));
            int n = (int) Math.min(piece.byteSize(), length - off);
            MemorySegment.copy(piece, ValueLayout.JAVA_BYTE, 0, all, off, n);
        }
        return all;
    }

    /**
     * A blob is on the device before its key commits, not forced: {@code NONE} puts of blob values force
     * the log about never (each used to fsync its blob file, one force per put), and they read back whole
     * after a crash right after a sync.
     */
    @Test
    void noneBlobPutsForceNothingAndSurviveASync() {
        Random rnd = new Random(SEED);
        byte[][] values = new byte[24][];
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, VolumeFixtures.OPTIONS);
             Table t = v.tables().create("t")) {
            t.withDurability(Durability.NONE);
            long forces = v.journalStats().forces();
            for (int i = 0; i < values.length; i++) {
                values[i] = random(rnd, Table.MAX_MEDIUM + 1 + rnd.nextInt(100_000));
                t.put(b("k" + i), values[i]);
            }
            long forced = v.journalStats().forces() - forces;
            // a few forces of its own (the blob directory made, a free list refilled); one per put before
            assertTrue(forced < values.length / 4, values.length + " NONE blob puts forced the log " + forced + " times");
            v.sync();
            try (MemoryDevice crashed = dev.copy("crashed"); // a point in time, the volume still open
                 Volume after = Volume.open(crashed, VolumeFixtures.OPTIONS); Table r = after.tables().open("t")) {
                for (int i = 0; i < values.length; i++) {
                    assertArrayEquals(values[i], r.get(b("k" + i)), "blob " + i + " after the crash");
                }
                VolumeFixtures.assertChecked(after.namespace());
            }
        }
    }

    /**
     * A transaction whose changes pass the log's share part way undoes them: its blob is not left behind,
     * the blob it replaced is live again, and the one it deleted is no longer flagged doomed.
     */
    @Test
    void aTransactionFailingPartWayLeavesNoBlob() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS); Table t = v.tables().create("t")) {
            byte[] kept = random(rnd, 70_000), undeleted = random(rnd, 75_000);
            t.put(b("a-kept"), kept);
            t.put(b("a-undeleted"), undeleted);
            t.withDurability(Durability.NONE);
            for (int i = 0; i < 40_000; i++) { // a wide tree: the transaction's inserts below land in most of its leaves
                t.put(random(rnd, 16), new byte[100]);
            }
            List<String> before = blobFiles(v);
            // the log emptied first: on a loaded machine the write-back of those puts could lag so far that
            // the group's budget, standing in for log space, ran out before its size did (LOG_FULL)
            v.journal().quiesce();
            WriteTransaction tx = v.begin(Durability.NONE);
            tx.delete(t, b("a-undeleted")); // dooms a blob: its inode flagged, the flag cleared by the undo
            tx.put(t, b("a-kept"), random(rnd, 72_000)); // replaces a blob, then small inserts all over: the size
            for (int i = 0; i < 8500; i++) {             // check lets them in, the log share stops them part way
                tx.put(t, random(rnd, 12), new byte[1]);
            }
            TableException e = assertThrows(TableException.class, tx::commit);
            assertEquals(TableException.Kind.TOO_LARGE, e.kind());
            assertTrue(e.getMessage().contains("before they were all applied"), e.getMessage());
            assertEquals(40_002, t.count());
            assertArrayEquals(kept, t.get(b("a-kept")));
            assertArrayEquals(undeleted, t.get(b("a-undeleted")));
            assertEquals(before, blobFiles(v));
            assertEquals(List.of(), doomedBlobFiles(v));
            VolumeFixtures.assertChecked(v.namespace());
        }
    }

    @Test
    void droppingATableFreesItsBlobs() {
        Random rnd = new Random(SEED);
        try (Volume v = Volume.open(VolumeFixtures.formatted(), VolumeFixtures.OPTIONS)) {
            long free = 0;
            for (int round = 0; round < 2; round++) { // the first round grows the catalog and the blob directory
                try (Table t = v.tables().create("t")) {
                    for (int i = 0; i < 8; i++) {
                        t.put(b("k" + i), random(rnd, Table.MAX_MEDIUM + 1 + i));
                    }
                    if (round == 0) {
                        for (int i = 0; i < 8; i++) {
                            t.delete(b("k" + i));
                        }
                    }
                }
                v.tables().drop("t");
                v.sync(); // the deleted values' doomed blobs, deleted in the background
                assertEquals(List.of(), blobFiles(v));
                assertNull(v.tables().exists("t") ? "still there" : null);
                VolumeFixtures.assertChecked(v.namespace());
                if (round == 0) {
                    free = v.statfs().freeBlocks();
                }
            }
            assertEquals(free, v.statfs().freeBlocks(), "the dropped table's blobs are free again");
        }
    }

    /**
     * Free blocks, with those in the overflow tree's block reserve if there is one: the reserve is brought
     * between its marks before each change, not after, so its level after a value's chunks go depends on
     * how they were batched.
     */
    static long freeCountingReserve(Volume v) {
        long ino = v.tables().overflow.inode();
        if (ino == 0) {
            return v.statfs().freeBlocks();
        }
        int area = v.namespace().records.rec(ino) + InodeFormat.INLINE;
        return v.statfs().freeBlocks() + v.namespace().records.readRecord(ino, (b, r) -> DirEntryFormat.reserveCount(b, area));
    }
}
