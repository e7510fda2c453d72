package dev.ferrite.dir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.IoEngineKind;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.internal.OnDisk;
import dev.ferrite.journal.VolumeShutdownException;
import dev.ferrite.io.testkit.RecordingDevice;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static dev.ferrite.dir.VolumeFixtures.BLOCKS;
import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertSound;
import static dev.ferrite.dir.VolumeFixtures.formatted;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Format, mount and unmount, and every way a mount is refused. */
class VolumeTest {
    @TempDir
    Path dir;

    @Test
    void formatOpenCloseRoundTripOnMemory() {
        try (MemoryDevice dev = formatted()) {
            roundTrip(dev);
            Volume v = Volume.open(dev, OPTIONS);
            v.close();
            v.close();
            assertThrows(VolumeShutdownException.class, v::sync);
            assertThrows(VolumeShutdownException.class, () -> VolumeAllocations.allocInode(v, InodeFormat.S_IFREG, 0, 0, 1, 0));
        }
    }

    @Test
    void formatOpenCloseRoundTripOnDirectFile() {
        try (DirectDevice dev = DirectDevice.open(dir.resolve("vol"), DeviceOptions.defaults().withSize(BLOCKS * 4096L))) {
            Volume.format(dev, OPTIONS);
            roundTrip(dev);
        }
    }

    /**
     * A volume on a file in tmpfs, whose batches (the log's checkpoints, the AIL's write-back) run on the
     * submitting thread ({@link IoEngineKind#SYNC}): a table's puts survive a close and a reopen.
     */
    @Test
    void formatOpenCloseRoundTripOnTmpfsFile() throws IOException {
        Path shm = Path.of("/dev/shm");
        assumeTrue(Files.isDirectory(shm) && Files.getFileStore(shm).type().equals("tmpfs"), "no tmpfs at /dev/shm");
        Path file = Files.createTempFile(shm, "volume-test", ".dev");
        try (DirectDevice dev = DirectDevice.open(file, DeviceOptions.defaults().withSize(BLOCKS * 4096L))) {
            assertEquals(IoEngineKind.SYNC, dev.engine());
            Volume.format(dev, OPTIONS);
            roundTrip(dev);
            try (Volume v = Volume.open(dev, OPTIONS); Table t = v.tables().create("kv")) {
                for (int i = 0; i < 5_000; i++) {
                    t.put(("key" + i).getBytes(), ("value" + i).getBytes());
                }
            }
            try (Volume v = Volume.open(dev, OPTIONS)) {
                assertTrue(v.mountReport().wasClean());
                try (Table t = v.tables().open("kv")) {
                    for (int i = 0; i < 5_000; i++) {
                        assertEquals("value" + i, new String(t.get(("key" + i).getBytes())));
                    }
                }
                CheckReport report = v.namespace().check();
                assertTrue(report.clean(), report.toString());
            }
        } finally {
            Files.deleteIfExists(file);
        }
    }

    private static void roundTrip(BlockDevice dev) {
        UUID uuid;
        long root;
        VolumeStats before;
        try (Volume v = Volume.open(dev, OPTIONS)) {
            MountReport r = v.mountReport();
            assertTrue(r.wasClean(), r.toString());
            assertFalse(r.usedMirror());
            assertFalse(r.rebuiltCounters());
            assertEquals(List.of(), r.notes());
            before = v.statfs();
            assertEquals(4, before.agCount());
            assertEquals(Geometry.CHUNK_INODES, before.inodes(), "the root's chunk");
            assertEquals(Geometry.CHUNK_INODES - 1, before.freeInodes());
            assertTrue(before.freeBlocks() > BLOCKS / 2, before.toString());
            root = v.rootInode();
            InodeStat s = v.stat(root);
            assertTrue(s.isDirectory(), s.toString());
            assertEquals(2, s.nlink());
            assertTrue(s.generation() != 0, "a first generation is random, never 0");
            uuid = v.uuid();
            assertSound(v);
        }
        try (Volume v = Volume.open(dev, OPTIONS)) {
            assertTrue(v.mountReport().wasClean());
            assertEquals(uuid, v.uuid());
            assertEquals(root, v.rootInode());
            assertEquals(before, v.statfs());
            assertSound(v);
        }
    }

    @Test
    void journalAndCacheCountersSinceMount() {
        try (MemoryDevice dev = formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            long commits = v.journalStats().commits();
            v.namespace().mkdir("/d", 0755);
            for (int i = 0; i < 100; i++) {
                v.namespace().create("/d/f" + i, 0644, true);
            }
            v.sync();
            assertTrue(v.journalStats().commits() >= commits + 101, v.journalStats().toString());
            assertTrue(v.journalStats().checkpoints() > 0, v.journalStats().toString());
            assertTrue(v.cacheStats().hits() > 0 && v.cacheStats().cached() > 0, v.cacheStats().toString());
            assertEquals(v.cacheStats().frames(), (int) ((8L << 20) / 4096));
        }
    }

    /** After a remount, statting a chunk's files reads the chunk in one transfer; a cluster of 1 reads block by block. */
    @Test
    void inodeBlocksAreReadAChunkAtATime() {
        try (RecordingDevice dev = RecordingDevice.wrap(formatted())) {
            try (Volume v = Volume.open(dev, OPTIONS)) {
                v.namespace().mkdir("/d", 0755);
                for (int i = 0; i < 200; i++) {
                    v.namespace().create("/d/f" + i, 0644, true);
                }
            }
            for (int cluster : new int[] {8, 1}) {
                try (Volume v = Volume.open(dev, OPTIONS.withInodeClusterBlocks(cluster))) {
                    long before = dev.issued(RecordingDevice.Op.READ);
                    List<DirEntry> entries = v.namespace().list("/d");
                    long listed = dev.issued(RecordingDevice.Op.READ);
                    for (DirEntry e : entries) {
                        assertEquals(0, v.namespace().stat("/d/" + e.name()).size());
                    }
                    long reads = dev.issued(RecordingDevice.Op.READ) - listed;
                    // 202 inodes, 8 records a block: 26 blocks (the root's and /d's cached already) in 4 chunks of
                    // 8 blocks (a chunk can start mid-cluster, so up to 8 cluster reads)
                    String what = "reads for 200 stats with a cluster of " + cluster + " (listing took " + (listed - before) + ")";
                    assertTrue(cluster == 8 ? reads <= 8 : reads >= 24, what + ": " + reads);
                    VolumeFixtures.assertChecked(v.namespace());
                }
            }
            try (Volume v = Volume.open(dev, OPTIONS.withInodeClusterBlocks(1))) {
                long before = dev.issued(RecordingDevice.Op.READ);
                v.checkGroups(java.util.Collections.emptyNavigableMap()); // the groups' part: reads every chunk
                long reads = dev.issued(RecordingDevice.Op.READ) - before;
                // block by block, the 4 chunks alone would be 32 reads, besides the groups' tree nodes
                assertTrue(reads < 32, "the checker read the inode chunks block by block: " + reads + " reads");
            }
        }
        assertThrows(InvalidArgumentException.class, () -> OPTIONS.withInodeClusterBlocks(9));
        assertThrows(InvalidArgumentException.class, () -> OPTIONS.withInodeClusterBlocks(-1));
    }

    @Test
    void damagedPrimaryMountsFromTheMirrorAndIsRepaired() {
        try (MemoryDevice dev = formatted()) {
            flipByte(dev, SuperblockFormat.PRIMARY, 100);
            try (Volume v = Volume.open(dev, OPTIONS)) {
                MountReport r = v.mountReport();
                assertTrue(r.usedMirror(), r.toString());
                assertTrue(r.notes().getFirst().contains("mounted from the mirror"), r.notes().toString());
                assertSound(v);
            }
            try (Volume v = Volume.open(dev, OPTIONS)) {
                assertFalse(v.mountReport().usedMirror(), "the primary was rewritten");
                assertTrue(v.mountReport().wasClean());
            }
        }
    }

    @Test
    void bothSuperblocksDamagedIsCorruptionNamingTheBlock() {
        try (MemoryDevice dev = formatted()) {
            flipByte(dev, SuperblockFormat.PRIMARY, 40);
            flipByte(dev, SuperblockFormat.MIRROR, 40);
            CorruptionException e = assertThrows(CorruptionException.class, () -> Volume.open(dev, OPTIONS));
            assertEquals(0, e.block());
            assertEquals("superblock", e.structure());
            assertTrue(e.getMessage().contains("mirror at block 1"), e.getMessage());
            flipByte(dev, SuperblockFormat.MIRROR, 40); // the mirror alone is sound again: the device was not left locked
            try (Volume v = Volume.open(dev, OPTIONS)) {
                assertTrue(v.mountReport().usedMirror());
            }
        }
    }

    @Test
    void foreignImageIsRefused() {
        try (MemoryDevice dev = MemoryDevice.create(BLOCKS, 4096); Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(4096, 4096);
            b.fill((byte) 0x5A);
            dev.write(0, b);
            dev.write(1, b);
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> Volume.open(dev, OPTIONS));
            assertTrue(e.getMessage().contains("holds no Ferrite volume"), e.getMessage());
        }
    }

    @Test
    void newerVersionIsRefused() {
        assertVersionRefused(SuperblockFormat.VERSION + 1);
    }

    @Test
    void olderVersionIsRefused() {
        assertVersionRefused(SuperblockFormat.VERSION - 1);
    }

    private static void assertVersionRefused(int version) {
        try (MemoryDevice dev = formatted()) {
            for (long block : new long[] {SuperblockFormat.PRIMARY, SuperblockFormat.MIRROR}) {
                rewrite(dev, block, b -> b.set(OnDisk.U32, SuperblockFormat.VERSION_OFF, version));
            }
            IncompatibleVolumeException e = assertThrows(IncompatibleVolumeException.class, () -> Volume.open(dev, OPTIONS));
            assertTrue(e.getMessage().contains("format version " + version + ";"), e.getMessage());
        }
    }

    @Test
    void unknownIncompatibleFeatureIsRefused() {
        try (MemoryDevice dev = formatted()) {
            rewrite(dev, SuperblockFormat.PRIMARY, b -> b.set(OnDisk.U64, SuperblockFormat.INCOMPAT, 1L << 40));
            IncompatibleVolumeException e = assertThrows(IncompatibleVolumeException.class, () -> Volume.open(dev, OPTIONS));
            assertTrue(e.getMessage().contains("0x10000000000"), e.getMessage());
        }
    }

    @Test
    void tooSmallDevicesAreRefused() {
        try (MemoryDevice tiny = MemoryDevice.create(1000, 4096)) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> Volume.format(tiny, VolumeOptions.defaults()));
            assertTrue(e.getMessage().contains("needs at least"), e.getMessage());
        }
        try (MemoryDevice dev = formatted(); MemoryDevice truncated = MemoryDevice.create(BLOCKS - 8, 4096);
             Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(4096, 4096);
            for (long i = 0; i < BLOCKS - 8; i++) {
                dev.read(i, b);
                truncated.write(i, b);
            }
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> Volume.open(truncated, OPTIONS));
            assertTrue(e.getMessage().contains("too small"), e.getMessage());
        }
    }

    @Test
    void tooManyGroupsForTheDeviceAreRefused() {
        try (MemoryDevice dev = MemoryDevice.create(BLOCKS, 4096)) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                    () -> Volume.format(dev, OPTIONS.withAgCount(64)));
            assertTrue(e.getMessage().contains("64 allocation groups"), e.getMessage());
        }
    }

    @Test
    void secondOpenOfTheSameDeviceIsRefused() {
        try (MemoryDevice dev = formatted()) {
            try (Volume v = Volume.open(dev, OPTIONS)) {
                DeviceException e = assertThrows(DeviceException.class, () -> Volume.open(dev, OPTIONS));
                assertEquals(Errno.EBUSY, e.errno());
                assertThrows(DeviceException.class, () -> Volume.format(dev, OPTIONS));
                assertSound(v);
            }
            Volume.open(dev, OPTIONS).close();
        }
    }

    @Test
    void secondHandleOnTheSameFileIsRefused() {
        Path file = dir.resolve("vol");
        try (DirectDevice a = DirectDevice.open(file, DeviceOptions.defaults().withSize(BLOCKS * 4096L));
             DirectDevice b = DirectDevice.open(file, DeviceOptions.defaults())) {
            Volume.format(a, OPTIONS);
            try (Volume v = Volume.open(a, OPTIONS)) {
                DeviceException e = assertThrows(DeviceException.class, () -> Volume.open(b, OPTIONS));
                assertEquals(Errno.EBUSY, e.errno());
                assertTrue(e.getMessage().contains("another process"), e.getMessage());
            }
            Volume.open(b, OPTIONS).close();
        }
    }

    static void flipByte(BlockDevice dev, long block, int offset) {
        rewriteRaw(dev, block, b -> b.set(java.lang.foreign.ValueLayout.JAVA_BYTE, offset,
                (byte) ~b.get(java.lang.foreign.ValueLayout.JAVA_BYTE, offset)));
    }

    /** Changes a superblock copy and stamps a valid checksum over the change. */
    static void rewrite(BlockDevice dev, long block, java.util.function.Consumer<MemorySegment> change) {
        rewriteRaw(dev, block, b -> {
            change.accept(b);
            BlockHeaderFormat.stamp(b, 0);
        });
    }

    static void rewriteRaw(BlockDevice dev, long block, java.util.function.Consumer<MemorySegment> change) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(dev.blockSize(), 4096);
            dev.read(block, b);
            change.accept(b);
            dev.write(block, b);
        }
    }
}
