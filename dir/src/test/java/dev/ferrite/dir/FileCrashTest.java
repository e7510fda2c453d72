package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.RecordingDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.dir.Namespace.FALLOC_FL_KEEP_SIZE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_PUNCH_HOLE;
import static dev.ferrite.dir.Namespace.FALLOC_FL_ZERO_RANGE;
import static dev.ferrite.io.internal.OnDisk.U64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Crashes at sampled points of a workload of random aligned writes (into holes and over written blocks),
 * truncates, fallocates (every mode: punched and zeroed blocks read zeros from then on) and fsyncs or
 * fdatasyncs on one file, with fsyncs of another file among them (which force the log past the
 * first file's changes without flushing its data): after a flush with a random subset of the next epoch's writes
 * (reordered, the last torn half the time), or anywhere inside an epoch with every earlier event landed
 * (the last write torn half the time). Every recovered volume checks clean; the file's size is one it had
 * at or after the last fsync the crash kept; and every 8-byte word of it (each write stamps every word
 * with its file offset and the write's number) is zero or the stamp of a write to that block, the one the
 * block held at that fsync or a later one: fsync'd data is intact and no block shows bytes the file
 * never wrote there. The free space the file allocates from first held another file's bytes. A variant
 * scatters single-block writes over a wide span so that the file's extents move to a tree and back
 * (crashes during the conversions and the tree's changes), and recovers each of its crash states twice:
 * again from crash points inside the first recovery, which must give the same file and free space.
 */
@ExtendWith(TestSeed.class)
class FileCrashTest {
    private static final long SEED = TestSeed.get(16);
    private static final int BS = 4096;
    private static final int SPAN = 40;
    private static final int OPS = 160;
    private static final int SAMPLES = Integer.getInteger("ferrite.crash.samples", 60);
    private static final int[] FALLOC_MODES = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
        FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE};

    /** The workload's shape: blocks the offsets fall in, most blocks a write or fallocate covers, and scattered (tree) truncates. */
    private record Shape(int span, int most, boolean tree) {
    }

    private static final Shape SMALL = new Shape(SPAN, 4, false);
    /** Scattered single blocks over a wide span: far more extents than the record holds. */
    private static final Shape TREE = new Shape(400, 1, true);

    @Test
    void everyFsyncedByteSurvivesAndNoBlockShowsForeignData() {
        recoverSampledCrashes(SEED, OPS, SAMPLES, SMALL);
    }

    @Test
    void crashesDuringExtentTreeChangesRecoverTwiceToTheSameFile() {
        recoverSampledCrashes(SEED, 2 * OPS, SAMPLES / 10, TREE);
    }

    /** Longer workloads and many more crash states, over several seeds. */
    @Test
    @Tag("stress")
    void longerWorkloadsAndManyMoreCrashStates() {
        for (long seed = SEED; seed < SEED + 6; seed++) {
            recoverSampledCrashes(seed, 4 * OPS, 300, SMALL);
            recoverSampledCrashes(seed, 4 * OPS, 40, TREE);
        }
    }

    /**
     * Blocks freed as metadata (a directory's tree, inode chunks) and then written as a file's data: a
     * crash after the file's fsync replays the log, which may still hold the blocks' metadata items from
     * before their free; recovery must not write those over the data.
     */
    @Test
    void recoveryLeavesMetadataBlocksReusedForDataAlone() {
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted()); Arena arena = Arena.ofConfined()) {
            int files = 300, writes = 20;
            MemoryDevice crashed;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                for (int i = 0; i < files; i++) {
                    ns.create("/d/file-with-a-long-name-" + i, 0644, true);
                }
                for (int i = 0; i < files; i++) {
                    ns.unlink("/d/file-with-a-long-name-" + i);
                }
                ns.rmdir("/d");
                ns.sync();
                MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                try (Handle root = ns.openRoot(); Handle f = ns.create(root, "f", 0644, true)) {
                    for (int i = 0; i < writes; i++) { // single blocks with holes between: each takes the smallest free extent
                        long offset = 2L * i * BS;
                        for (long w = 0; w < BS; w += 8) {
                            block.set(U64, w, (offset + w) << 16 | 1);
                        }
                        ns.write(f, offset, block);
                    }
                    crashed = rec.materialize(rec.crashAfterFlush(SyncPoint.of(rec, v, () -> ns.fsync(f))));
                }
            }
            try (crashed; Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                VolumeFixtures.assertChecked(ns);
                MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                try (Handle f = ns.open("/f")) {
                    for (int i = 0; i < writes; i++) {
                        long offset = 2L * i * BS;
                        assertEquals(BS, ns.read(f, offset, block));
                        for (long w = 0; w < BS; w += 8) {
                            if (block.get(U64, w) != ((offset + w) << 16 | 1)) {
                                fail("the word at offset " + (offset + w) + " of the fsync'd file is 0x" + Long.toHexString(block.get(U64, w)));
                            }
                        }
                    }
                }
            }
        }
    }

    /** Block {@code b} of {@link #crashesWhileATreeIsMadeFromScatteredBlocksRecoverClean}'s file: its number plus one in every byte. */
    private static byte[] numbered(int b) {
        byte[] m = new byte[BS];
        Arrays.fill(m, (byte) (b + 1));
        return m;
    }

    /**
     * A file's extents becoming a tree where free space lies in single blocks (its header and root taken
     * apart, its reserve refilled a block per transaction, then its extents written back): every crash state
     * checks clean (each block in the tree's reserve, in the tree, or free) and the file keeps what it held.
     */
    @Test
    void crashesWhileATreeIsMadeFromScatteredBlocksRecoverClean() {
        Random rnd = new Random(SEED);
        int firstFlush, lastFlush;
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted())) {
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                try (Handle root = ns.openRoot()) {
                    try (Handle f = ns.create(root, "f", 0644, true)) {
                        for (int b = 0; b < 50; b += 2) { // 25 extents: the most the inline list holds
                            ns.write(f, (long) b * BS, MemorySegment.ofArray(numbered(b)));
                        }
                        ns.fsync(f);
                    }
                    FileTestBase.freeSpaceInSingleBlocks(v, root);
                    ns.sync();
                    firstFlush = rec.flushCount();
                    try (Handle f = ns.open(root, "f")) {
                        for (int b = 50; b < 90; b += 2) { // the first one's write-back makes the tree
                            ns.write(f, (long) b * BS, MemorySegment.ofArray(numbered(b)));
                        }
                        ns.fsync(f);
                        assertEquals(45, ns.extents(f, 0, Long.MAX_VALUE).size());
                    }
                    lastFlush = rec.flushCount();
                }
            }
            for (int sample = 0; sample < SAMPLES / 2; sample++) {
                RecordingDevice.CrashState state = CrashTest.sampledState(rec, rnd, sample, firstFlush, lastFlush);
                String where = "crash " + state + ", seed " + SEED;
                try (MemoryDevice image = rec.materialize(state); Volume v = Volume.open(image, VolumeFixtures.OPTIONS)) {
                    Namespace ns = v.namespace();
                    CheckReport report = ns.check();
                    assertTrue(report.clean(), where + ":\n" + report);
                    try (Handle f = ns.open("/f")) {
                        long size = ns.stat(f).size();
                        byte[] got = new byte[BS];
                        for (int b = 0; b < 90 && (long) b * BS < size; b += 2) {
                            ns.read(f, (long) b * BS, MemorySegment.ofArray(got));
                            if (b < 50 || got[0] != 0) { // a later block's write-back may not have reached the log
                                assertEquals(-1, Arrays.mismatch(numbered(b), got), where + ": block " + b);
                            }
                        }
                    }
                }
            }
        }
    }

    /** fdatasync after a write that extends the file forces its size and extents: a crash right after keeps them. */
    @Test
    void anExtendingWriteSurvivesACrashAfterFdatasync() {
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted()); Arena arena = Arena.ofConfined()) {
            MemorySegment data = arena.allocate(3L * BS, BlockDevice.BUFFER_ALIGNMENT);
            for (long w = 0; w < data.byteSize(); w += 8) {
                data.set(U64, w, w << 16 | 7);
            }
            MemoryDevice crashed;
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                try (Handle root = ns.openRoot(); Handle f = ns.create(root, "f", 0644, true)) {
                    ns.fsync(f);
                    ns.write(f, 0, data);
                    ns.fdatasync(f);
                    crashed = rec.materialize(rec.crashAfterFlush(rec.flushCount() - 1)); // nothing after the last flush
                }
            }
            try (crashed; Volume v = Volume.open(crashed, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                VolumeFixtures.assertChecked(ns);
                MemorySegment got = arena.allocate(data.byteSize(), BlockDevice.BUFFER_ALIGNMENT);
                try (Handle f = ns.open("/f")) {
                    assertEquals(data.byteSize(), ns.stat(f).size(), "the fdatasync'd size");
                    assertEquals(data.byteSize(), ns.read(f, 0, got));
                    assertEquals(-1, data.mismatch(got), "the fdatasync'd bytes");
                }
            }
        }
    }

    /**
     * Writes 0xA5 over the free space a file allocates from first and frees it again: bytes no write of
     * a workload makes, so that any block a crash exposes unwritten shows them.
     */
    static void fillFreeSpaceWithJunk(Namespace ns, Handle root, Arena arena) {
        try (Handle junk = ns.create(root, "junk", 0644, true)) {
            MemorySegment j = arena.allocate(256L * BS, BlockDevice.BUFFER_ALIGNMENT);
            j.fill((byte) 0xA5);
            for (int k = 0; k < 4; k++) {
                ns.write(junk, k * j.byteSize(), j);
            }
        }
        ns.unlink(root, "junk");
    }

    /** A digest of what the file and free space hold: its size, its blocks and the free block count. */
    private static String contents(Volume v, Arena arena) {
        Namespace ns = v.namespace();
        try (Handle f = ns.open("/f")) {
            long size = ns.stat(f).size();
            MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
            for (long at = 0; at < size; at += BS) {
                ns.read(f, at, block);
                crc.update(block.asByteBuffer());
            }
            return "size " + size + ", crc32c 0x" + Long.toHexString(crc.getValue()) + ", free blocks " + v.statfs().freeBlocks();
        }
    }

    /**
     * The op after which the last sync that {@code state} keeps was made: of {@code syncs}' {flush index, op}
     * pairs (flush index -1: none), the last whose flush lies before the state's prefix; 0 if none does.
     */
    static int lastSynced(List<int[]> syncs, RecordingDevice rec, RecordingDevice.CrashState state) {
        int synced = 0;
        for (int[] s : syncs) {
            if (s[0] >= 0 && rec.flushEvent(s[0]) < state.prefix()) {
                synced = s[1];
            }
        }
        return synced;
    }

    /** What a file block held over the workload: {op, value} pairs, value a write's number or 0 (cut off by a truncate). */
    static final class History {
        final List<long[]> values = new ArrayList<>(List.of(new long[] {0, 0}));

        /** The value the block holds now. */
        long now() {
            return values.getLast()[1];
        }

        /** The values a crash after an fsync at op {@code synced} may show: the one then, and every later one. */
        Set<Long> allowedAfter(int synced) {
            Set<Long> out = new HashSet<>();
            long then = 0;
            for (long[] v : values) {
                if (v[0] <= synced) {
                    then = v[1];
                } else {
                    out.add(v[1]);
                }
            }
            out.add(then);
            return out;
        }
    }

    private static void recoverSampledCrashes(long seed, int ops, int samples, Shape shape) {
        Random rnd = new Random(seed);
        int span = shape.span();
        int trees = 0, reverts = 0;
        History[] blocks = new History[span + shape.most()];
        for (int i = 0; i < blocks.length; i++) {
            blocks[i] = new History();
        }
        History sizes = new History();
        List<int[]> fsyncs = new ArrayList<>(); // {flush index, op}
        int firstFlush, lastFlush;
        long emptyFree; // free blocks with f and g empty: what truncating both to 0 after any crash must give back
        try (RecordingDevice rec = RecordingDevice.wrap(VolumeFixtures.formatted()); Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(4L * BS, BlockDevice.BUFFER_ALIGNMENT);
            try (Volume v = Volume.open(rec, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                Handle f, g;
                try (Handle root = ns.openRoot()) {
                    fillFreeSpaceWithJunk(ns, root, arena);
                    f = ns.create(root, "f", 0644, true);
                    g = ns.create(root, "g", 0644, true);
                }
                fsyncs.add(new int[] {SyncPoint.of(rec, v, ns::sync), 0});
                emptyFree = v.statfs().freeBlocks();
                firstFlush = rec.flushCount();
                long size = 0;
                for (int op = 1; op <= ops; op++) {
                    int r = rnd.nextInt(24);
                    int fork = ns.records.readRecord(f.ino(), InodeFormat::fork);
                    if (fork == InodeFormat.FORK_TREE) {
                        trees++;
                    } else if (trees > 0) {
                        reverts++;
                    }
                    if (r < 13) {
                        int at = rnd.nextInt(span), n = 1 + rnd.nextInt(shape.most());
                        long offset = (long) at * BS;
                        MemorySegment src = buf.asSlice(0, (long) n * BS);
                        for (long w = 0; w < src.byteSize(); w += 8) {
                            src.set(U64, w, (offset + w) << 16 | op);
                        }
                        ns.write(f, offset, src);
                        for (int b = at; b < at + n; b++) {
                            blocks[b].values.add(new long[] {op, op});
                        }
                        size = Math.max(size, offset + (long) n * BS);
                    } else if (r < 16) {
                        long to = !shape.tree() ? (long) rnd.nextInt(span) * BS
                                : rnd.nextInt(10) == 0 ? 0 : Math.max(0, size / BS - rnd.nextInt(8)) * BS;
                        ns.truncate(f, to);
                        for (long b = to / BS; b < size / BS; b++) {
                            blocks[(int) b].values.add(new long[] {op, 0});
                        }
                        size = to;
                    } else if (r < 18) { // fdatasync keeps what the checks look at (data, size) as fsync does
                        if (rnd.nextBoolean()) {
                            ns.fsync(f);
                        } else {
                            ns.fdatasync(f);
                        }
                        fsyncs.add(new int[] {rec.flushCount() - 1, op}); // at or after the fsync's own flush
                        continue;
                    } else if (r < 22) {
                        int mode = FALLOC_MODES[rnd.nextInt(FALLOC_MODES.length)];
                        int at = rnd.nextInt(span), n = 1 + rnd.nextInt(shape.most());
                        ns.fallocate(f, mode, (long) at * BS, (long) n * BS);
                        if ((mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) != 0) { // zeros from here on (past the size too)
                            for (int b = at; b < at + n; b++) {
                                blocks[b].values.add(new long[] {op, 0});
                            }
                        }
                        if ((mode & FALLOC_FL_KEEP_SIZE) == 0) {
                            size = Math.max(size, (long) (at + n) * BS);
                        }
                    } else { // another file's fsync: f's changes so far reach the log, though f's data was not flushed for it
                        ns.truncate(g, (long) rnd.nextInt(span) * BS);
                        ns.fsync(g);
                        continue;
                    }
                    sizes.values.add(new long[] {op, size});
                }
                lastFlush = rec.flushCount();
                f.close();
                g.close();
            }
            assertTrue(fsyncs.size() > 5, "fsyncs: " + fsyncs.size());
            assertTrue(!shape.tree() || trees > ops / 4 && reverts > 0, "seed " + seed + ": " + trees + " operations of " + ops
                    + " on an extent tree, " + reverts + " after it went back inline");
            for (int sample = 0; sample < samples; sample++) {
                RecordingDevice.CrashState state = CrashTest.sampledState(rec, rnd, sample, firstFlush, lastFlush);
                int synced = lastSynced(fsyncs, rec, state);
                String where = "crash " + state + " (last fsync kept: after op " + synced + "), seed " + seed;
                String recovered = null;
                RecordingDevice again = null;
                try (MemoryDevice image = rec.materialize(state); RecordingDevice watched = RecordingDevice.wrap(image);
                     Volume v = Volume.open(shape.tree() ? watched : image, VolumeFixtures.OPTIONS)) {
                    Namespace ns = v.namespace();
                    CheckReport report = ns.check();
                    assertTrue(report.clean(), where + ":\n" + report);
                    if (shape.tree()) {
                        recovered = contents(v, arena);
                        again = watched;
                    }
                    if (again != null) { // crash points inside the first recovery and mount: the second gives the same file
                        int flushes = again.flushCount();
                        for (int k = rnd.nextInt(2); k < flushes; k += Math.max(1, flushes / 2)) {
                            try (MemoryDevice twice = again.materialize(again.crashAfterFlush(k));
                                 Volume v2 = Volume.open(twice, VolumeFixtures.OPTIONS)) {
                                Namespace ns2 = v2.namespace();
                                CheckReport report2 = ns2.check();
                                assertTrue(report2.clean(), where + ", recovered again after flush " + k + ":\n" + report2);
                                assertEquals(recovered, contents(v2, arena), where + ", recovered again after flush " + k);
                            }
                        }
                    }
                    try (Handle f = ns.open("/f")) {
                        long size = ns.stat(f).size();
                        assertTrue(sizes.allowedAfter(synced).contains(size), where + ": size " + size + " is none of "
                                + sizes.allowedAfter(synced));
                        MemorySegment block = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                        for (int b = 0; b < size / BS; b++) {
                            assertEquals(BS, ns.read(f, (long) b * BS, block));
                            Set<Long> allowed = blocks[b].allowedAfter(synced);
                            for (long w = 0; w < BS; w += 8) {
                                long word = block.get(U64, w);
                                long offset = (long) b * BS + w;
                                if (word == 0 ? !allowed.contains(0L) : (word >>> 16) != offset || !allowed.contains(word & 0xFFFF)) {
                                    fail(where + ": the word at offset " + offset + " is 0x" + Long.toHexString(word)
                                            + "; the block may hold only " + allowed);
                                }
                            }
                        }
                        ns.truncate(f, 0);
                    }
                    try (Handle g = ns.open("/g")) {
                        ns.truncate(g, 0);
                    }
                    assertEquals(emptyFree, v.statfs().freeBlocks(), where + ": free blocks after truncating both files to 0");
                    assertTrue(ns.check().clean(), where + ": after truncating both files to 0");
                }
            }
        }
    }
}
