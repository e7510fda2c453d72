package dev.ferrite.io;

import dev.ferrite.io.testkit.BlockDeviceContract;

import dev.ferrite.io.testkit.Blocks;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The contract plus what file-backed devices add: data survives close and reopen, sizing of new and
 * existing files, read-only opens, and the open errors that do not need a special filesystem (those
 * that do are in {@link DeviceExceptionTest}).
 */
abstract class FileDeviceContract extends BlockDeviceContract {
    @TempDir
    Path dir;
    Path file;

    abstract BlockDevice open(Path path, DeviceOptions options);

    @Override
    protected BlockDevice create(long blocks, int blockSize) {
        file = dir.resolve("device");
        return open(file, DeviceOptions.defaults().withBlockSize(blockSize).withSize(blocks * blockSize));
    }

    @Override
    protected void assertContentsAfterClose(byte[] expected) {
        try (BlockDevice reopened = open(file, DeviceOptions.defaults())) {
            assertArrayEquals(expected, Blocks.contents(reopened), "device contents changed");
        }
    }

    static byte[] fileBytes(Path path) throws IOException {
        return Files.readAllBytes(path);
    }

    @Test
    void exclusiveLockExcludesASecondHandleUntilReleased() {
        try (BlockDevice second = open(file, DeviceOptions.defaults())) {
            assertTrue(device.tryLockExclusive());
            assertTrue(device.tryLockExclusive(), "taking it again through the same handle");
            assertFalse(second.tryLockExclusive(), "a second handle must see the device locked");
            device.unlockExclusive();
            assertTrue(second.tryLockExclusive());
            assertFalse(device.tryLockExclusive());
            second.close();
            assertTrue(device.tryLockExclusive(), "closing a handle releases its lock");
        }
    }

    @Test
    void namesItselfByPath() {
        assertEquals(file.toString(), device.name());
    }

    @Test
    void createsAMissingFileOfTheRequestedSize() throws IOException {
        assertEquals((long) BLOCKS * BLOCK, Files.size(file));
    }

    @Test
    void dataSurvivesCloseAndReopen() {
        Blocks.writeAll(device, 1);
        device.write(0, fill(buffer(arena, BLOCK), 0, BLOCK, 2));
        device.write(BLOCKS - 1, fill(buffer(arena, BLOCK), BLOCKS - 1, BLOCK, 3));
        device.flush();
        device.close();
        try (BlockDevice reopened = open(file, DeviceOptions.defaults())) {
            assertEquals(BLOCKS, reopened.blockCount(), "size 0 reopens the whole file");
            MemorySegment all = buffer(arena, reopened.size());
            reopened.read(0, all);
            assertHolds(all.asSlice(0, BLOCK), 0, BLOCK, 2);
            assertHolds(all.asSlice(BLOCK, (BLOCKS - 2L) * BLOCK), 1, BLOCK, 1);
            assertHolds(all.asSlice((BLOCKS - 1L) * BLOCK), BLOCKS - 1, BLOCK, 3);
        }
    }

    @Test
    void dataIsInTheFileAtTheBlocksOffsets() throws IOException {
        device.write(5, fill(buffer(arena, 2L * BLOCK), 5, BLOCK, 4));
        device.flush();
        device.close();
        MemorySegment fromFile = MemorySegment.ofArray(fileBytes(file));
        assertHolds(fromFile.asSlice(5L * BLOCK, 2L * BLOCK), 5, BLOCK, 4);
    }

    @Test
    void existingFileIsUsedWholeOrInPart() throws IOException {
        Blocks.writeAll(device, 1);
        device.flush();
        device.close();
        try (BlockDevice part = open(file, DeviceOptions.defaults().withSize(10L * BLOCK + 100))) {
            assertEquals(10, part.blockCount(), "size rounds down to whole blocks");
            MemorySegment ten = buffer(arena, part.size());
            part.read(0, ten);
            assertHolds(ten, 0, BLOCK, 1);
        }
        assertEquals((long) BLOCKS * BLOCK, Files.size(file), "a smaller device must not truncate the file");
        try (BlockDevice small = open(file, DeviceOptions.defaults().withBlockSize(512))) {
            assertEquals(BLOCKS * 8L, small.blockCount());
            MemorySegment one = buffer(arena, 512);
            small.read(BLOCKS * 8L - 1, one);
            assertHolds(one, BLOCKS * 8L - 1, 512, 1);
        }
    }

    @Test
    void shortFileIsExtendedKeepingItsData() throws IOException {
        Blocks.writeAll(device, 1);
        device.flush();
        device.close();
        try (BlockDevice bigger = open(file, DeviceOptions.defaults().withSize(2L * BLOCKS * BLOCK))) {
            assertEquals(2L * BLOCKS, bigger.blockCount());
            MemorySegment old = buffer(arena, (long) BLOCKS * BLOCK);
            bigger.read(0, old);
            assertHolds(old, 0, BLOCK, 1);
            bigger.write(2L * BLOCKS - 1, fill(buffer(arena, BLOCK), 2L * BLOCKS - 1, BLOCK, 2));
        }
        assertEquals(2L * BLOCKS * BLOCK, Files.size(file));
    }

    @Test
    void fileTooSmallForOneBlockIsRejectedAndLeftAlone() throws IOException {
        Path tiny = Files.write(dir.resolve("tiny"), new byte[100]);
        var e = assertThrows(InvalidArgumentException.class, () -> open(tiny, DeviceOptions.defaults()));
        assertTrue(e.getMessage().startsWith(tiny + ": 100 bytes hold no block of 4096 bytes"), e.getMessage());
        assertArrayEquals(new byte[100], fileBytes(tiny));
        var e2 = assertThrows(InvalidArgumentException.class,
                () -> open(dir.resolve("new-tiny"), DeviceOptions.defaults().withSize(4095)));
        assertTrue(e2.getMessage().contains("4095 bytes hold no block"), e2.getMessage());
        assertFalse(Files.exists(dir.resolve("new-tiny")), "a failed open left the file it created behind");
    }

    // ---- Read-only.

    @Test
    void readOnlyDeviceReadsButRefusesWritesAndDiscardsWithErofs() throws IOException {
        Blocks.writeAll(device, 1);
        device.flush();
        device.close();
        byte[] before = fileBytes(file);
        try (BlockDevice ro = open(file, DeviceOptions.defaults().withReadOnly(true))) {
            assertTrue(ro.isReadOnly());
            assertEquals(BLOCKS, ro.blockCount());
            MemorySegment src = fill(buffer(arena, 2L * BLOCK), 6, BLOCK, 2);
            assertReadOnly(ro, "write", 6L * BLOCK, () -> ro.write(6, src));
            assertReadOnly(ro, "discard", 6L * BLOCK, () -> ro.discard(6, 2));
            assertReadOnly(ro, "write", 9L * BLOCK,
                    () -> ro.submit(new IoBatch(2).read(0, buffer(arena, BLOCK)).write(9, src)));
            MemorySegment back = buffer(arena, 2L * BLOCK);
            IoBatch reads = new IoBatch(2).read(6, back.asSlice(0, BLOCK)).read(7, back.asSlice(BLOCK));
            ro.submit(reads);
            assertHolds(back, 6, BLOCK, 1);
            ro.read(0, back);
            assertHolds(back, 0, BLOCK, 1);
            ro.flush();
        }
        assertArrayEquals(before, fileBytes(file), "a read-only device changed its file");
    }

    private static void assertReadOnly(BlockDevice ro, String op, long offset, org.junit.jupiter.api.function.Executable call) {
        var e = assertThrows(DeviceException.class, call);
        assertEquals(Errno.EROFS, e.errno());
        assertEquals(op, e.operation());
        assertEquals(offset, e.offset());
        assertTrue(e.getMessage().startsWith(ro.name() + ": " + op + " at offset " + offset + " failed: EROFS"), e.getMessage());
    }

    @Test
    void readOnlyOpenOfAShortFileFailsWithErofs() throws IOException {
        device.close();
        byte[] before = fileBytes(file);
        var e = assertThrows(DeviceException.class,
                () -> open(file, DeviceOptions.defaults().withReadOnly(true).withSize(2L * BLOCKS * BLOCK)));
        assertEquals(Errno.EROFS, e.errno());
        assertTrue(e.getMessage().startsWith(file + ": open failed: EROFS"), e.getMessage());
        assertArrayEquals(before, fileBytes(file));
    }

    // ---- Open errors any filesystem can produce.

    @Test
    void missingFileWithoutSizeFailsWithEnoentAndCreatesNothing() {
        Path missing = dir.resolve("missing");
        for (DeviceOptions options : new DeviceOptions[] {DeviceOptions.defaults(),
                DeviceOptions.defaults().withReadOnly(true).withSize(BLOCK)}) {
            var e = assertThrows(DeviceException.class, () -> open(missing, options));
            assertEquals(Errno.ENOENT, e.errno());
            assertEquals("open", e.operation());
            assertTrue(e.getMessage().startsWith(missing + ": open failed: ENOENT"), e.getMessage());
            assertFalse(Files.exists(missing));
        }
    }

    @Test
    void missingParentDirectoryFailsWithEnoent() {
        Path orphan = dir.resolve("no-such-dir").resolve("device");
        var e = assertThrows(DeviceException.class, () -> open(orphan, DeviceOptions.defaults().withSize(BLOCK)));
        assertEquals(Errno.ENOENT, e.errno());
        assertTrue(e.getMessage().startsWith(orphan + ": open failed: ENOENT"), e.getMessage());
    }

    @Test
    void directoryIsRejectedAsNeitherFileNorBlockDevice() throws IOException {
        Path sub = Files.createDirectory(dir.resolve("sub"));
        for (DeviceOptions options : new DeviceOptions[] {DeviceOptions.defaults(), DeviceOptions.defaults().withSize(BLOCK),
                DeviceOptions.defaults().withReadOnly(true)}) {
            var e = assertThrows(InvalidArgumentException.class, () -> open(sub, options), options.toString());
            assertTrue(e.getMessage().startsWith(sub.toString()) && e.getMessage().contains("directory"), e.getMessage());
            assertTrue(Files.isDirectory(sub));
        }
    }
}
