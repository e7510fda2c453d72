package dev.ferrite.io;

import dev.ferrite.io.testkit.Blocks;

import dev.ferrite.io.sys.Posix;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.BiFunction;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static dev.ferrite.io.testkit.Blocks.assertHolds;
import static dev.ferrite.io.testkit.Blocks.buffer;
import static dev.ferrite.io.testkit.Blocks.fill;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Real errors from the kernel become {@link DeviceException}s that name the device, the operation, the
 * offset and the errno, and leave nothing behind: EPERM (immutable file), EACCES (a sysfs attribute,
 * which refuses writers even to root), ENOSPC (a 1 MiB tmpfs), EROFS (a read-only mount) and EIO (an ext4
 * filesystem shut down with FS_IOC_SHUTDOWN). Most need root to set up and are skipped with a message
 * otherwise. Errors Ferrite raises itself (closed, read-only, bad arguments) are in the device contract.
 */
class DeviceExceptionTest {
    private static final int BLOCK = 4096;
    /** _IOR('X', 125, __u32): ext4's and XFS's "shut the filesystem down now". */
    private static final long FS_IOC_SHUTDOWN = 0x8004587DL;
    /** Shut down without flushing the log: every later I/O fails with EIO. */
    private static final int SHUTDOWN_NOLOGFLUSH = 2;

    enum Kind {
        DIRECT(DirectDevice::open),
        MAPPED(MappedDevice::open);

        final BiFunction<Path, DeviceOptions, BlockDevice> opener;

        Kind(BiFunction<Path, DeviceOptions, BlockDevice> opener) {
            this.opener = opener;
        }

        BlockDevice open(Path path, DeviceOptions options) {
            return opener.apply(path, options);
        }
    }

    @TempDir
    Path dir;

    private static DeviceException assertDeviceError(int errno, String device, String op, long offset, Executable call) {
        var e = assertThrows(DeviceException.class, call);
        assertEquals(Errno.name(errno), Errno.name(e.errno()), e.getMessage());
        assertEquals(device, e.device());
        assertEquals(op, e.operation());
        assertEquals(offset, e.offset());
        String where = offset >= 0 ? " at offset " + offset : "";
        assertTrue(e.getMessage().startsWith(device + ": " + op + where + " failed: " + Errno.name(errno) + " ("),
                "message should name device, operation, offset and errno: " + e.getMessage());
        return e;
    }

    private Path fileWithBlocks(String name, int blocks) throws IOException {
        byte[] data = new byte[blocks * BLOCK];
        Blocks.fill(MemorySegment.ofArray(data), 0, BLOCK, 1);
        return Files.write(dir.resolve(name), data);
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    void immutableFileRefusesWritersWithEperm(Kind kind) throws IOException {
        Path file = fileWithBlocks("immutable", 16);
        byte[] before = Files.readAllBytes(file);
        try (var _ = SystemTools.Immutable.set(file)) {
            assertDeviceError(Errno.EPERM, file.toString(), "open", -1, () -> kind.open(file, DeviceOptions.defaults()));
            assertDeviceError(Errno.EPERM, file.toString(), "open", -1,
                    () -> kind.open(file, DeviceOptions.defaults().withSize(32L * BLOCK)));
            try (Arena arena = Arena.ofConfined(); BlockDevice ro = kind.open(file, DeviceOptions.defaults().withReadOnly(true))) {
                MemorySegment all = buffer(arena, ro.size());
                ro.read(0, all);
                assertHolds(all, 0, BLOCK, 1);
            }
        }
        assertArrayEquals(before, Files.readAllBytes(file));
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    void readOnlySysfsAttributeRefusesWritersWithEacces(Kind kind) {
        // kernfs refuses to open a file without write permission for writing even to root (CAP_DAC_OVERRIDE
        // does not apply there), so this is a genuine EACCES whoever runs the test.
        Path attribute = Path.of("/sys/kernel/uevent_seqnum");
        assumeTrue(Files.isRegularFile(attribute), "no sysfs at /sys to provide a write-protected file");
        assertDeviceError(Errno.EACCES, attribute.toString(), "open", -1, () -> kind.open(attribute, DeviceOptions.defaults()));
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    void deviceBiggerThanTheFilesystemFailsWithEnospcAndLeavesNoFile(Kind kind) throws IOException {
        try (var tmpfs = SystemTools.Mount.tmpfs(dir, "1m")) {
            Path file = tmpfs.dir.resolve("device");
            assertDeviceError(Errno.ENOSPC, file.toString(), "fallocate", 0,
                    () -> kind.open(file, DeviceOptions.defaults().withSize(4L << 20)));
            assertFalse(Files.exists(file), "a failed open left the file it created behind");
            // The space the failed allocation took was given back: most of the filesystem is still usable.
            try (BlockDevice fits = kind.open(file, DeviceOptions.defaults().withSize(768L << 10))) {
                Blocks.writeAll(fits, 2);
            }
            // An existing file that cannot grow keeps its size and contents.
            Path existing = Files.write(tmpfs.dir.resolve("existing"), new byte[BLOCK]);
            assertDeviceError(Errno.ENOSPC, existing.toString(), "fallocate", kind == Kind.DIRECT ? BLOCK : 0,
                    () -> kind.open(existing, DeviceOptions.defaults().withSize(1L << 20)));
            assertArrayEquals(new byte[BLOCK], Files.readAllBytes(existing));
        }
    }

    @Test
    void writeIntoAHoleOfAFullFilesystemFailsWithEnospc() throws IOException {
        try (var tmpfs = SystemTools.Mount.tmpfs(dir, "1m"); Arena arena = Arena.ofConfined()) {
            Path file = tmpfs.dir.resolve("sparse");
            try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
                raf.setLength(2L << 20); // twice what the filesystem holds, all hole
            }
            // A mapped device allocates up front, so it fails at once instead of raising SIGBUS on a store later.
            assertDeviceError(Errno.ENOSPC, file.toString(), "fallocate", 0, () -> MappedDevice.open(file, DeviceOptions.defaults()));
            assertEquals(2L << 20, Files.size(file));

            try (DirectDevice device = DirectDevice.open(file, DeviceOptions.defaults())) {
                MemorySegment one = buffer(arena, BLOCK);
                long b = 0;
                DeviceException full = null;
                for (; b < device.blockCount() && full == null; b++) {
                    try {
                        device.write(b, fill(one, b, BLOCK, 1));
                    } catch (DeviceException e) {
                        full = e;
                    }
                }
                long failed = b - 1;
                assertTrue(full != null && failed > 0, "a 1 MiB tmpfs accepted " + b + " blocks of a 2 MiB file");
                long at = failed * BLOCK;
                assertDeviceError(Errno.ENOSPC, file.toString(), "write", at, () -> device.write(failed, one));
                IoBatch batch = new IoBatch(8);
                for (int i = 0; i < 8; i++) {
                    batch.write(failed + i, fill(buffer(arena, BLOCK), failed + i, BLOCK, 1));
                }
                var e = assertDeviceError(Errno.ENOSPC, file.toString(), "write", at, () -> device.submit(batch));
                assertTrue(e.getMessage().contains("batch request 0 of 8 (8 failed)"), e.getMessage());
                for (int i = 0; i < 8; i++) {
                    assertEquals(Errno.ENOSPC, batch.error(i), "request " + i);
                }
                MemorySegment written = buffer(arena, failed * BLOCK);
                device.read(0, written);
                assertHolds(written, 0, BLOCK, 1);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    void readOnlyMountRefusesWritersWithErofs(Kind kind) throws IOException {
        try (var tmpfs = SystemTools.Mount.tmpfs(dir, "1m")) {
            Path file = Files.write(tmpfs.dir.resolve("device"), new byte[4 * BLOCK]);
            SystemTools.run("mount", "-o", "remount,ro", tmpfs.dir.toString());
            assertDeviceError(Errno.EROFS, file.toString(), "open", -1, () -> kind.open(file, DeviceOptions.defaults()));
            try (BlockDevice ro = kind.open(file, DeviceOptions.defaults().withReadOnly(true))) {
                assertEquals(4, ro.blockCount());
            }
            Path absent = tmpfs.dir.resolve("absent");
            assertDeviceError(Errno.EROFS, absent.toString(), "open", -1, () -> kind.open(absent, DeviceOptions.defaults().withSize(BLOCK)));
            assertFalse(Files.exists(absent));
        }
    }

    /** Shuts down the filesystem holding {@code dir}: from now on its I/O fails with EIO. */
    private static void shutDown(Path dir) {
        try (Arena arena = Arena.ofConfined()) {
            int fd = Posix.open(arena.allocateFrom(dir.toString()), Posix.O_RDONLY | Posix.O_CLOEXEC, 0);
            assertTrue(fd >= 0, "open " + dir + ": " + Errno.name(Posix.errno()));
            try {
                MemorySegment flags = arena.allocate(JAVA_INT);
                flags.set(JAVA_INT, 0, SHUTDOWN_NOLOGFLUSH);
                int r = Posix.ioctl(fd, FS_IOC_SHUTDOWN, flags);
                assumeTrue(r == 0, "FS_IOC_SHUTDOWN refused: " + Errno.name(Posix.errno()));
            } finally {
                Posix.close(fd);
            }
        }
    }

    @Test
    void shutDownFilesystemFailsDirectTransfersAndFlushWithEio() throws IOException {
        try (var ext4 = SystemTools.Mount.ext4(dir, 16); Arena arena = Arena.ofConfined()) {
            Path uringFile = ext4.dir.resolve("uring");
            Path threadsFile = ext4.dir.resolve("threads");
            try (DirectDevice uring = DirectDevice.open(uringFile, DeviceOptions.defaults().withSize(64L * BLOCK));
                 DirectDevice threads = DirectDevice.open(threadsFile,
                         DeviceOptions.defaults().withSize(64L * BLOCK).withEngine(IoEngineKind.THREADS))) {
                for (DirectDevice d : new DirectDevice[] {uring, threads}) {
                    Blocks.writeAll(d, 1);
                    d.flush();
                }
                shutDown(ext4.dir);
                for (DirectDevice d : new DirectDevice[] {uring, threads}) {
                    String name = d.name();
                    MemorySegment dst = fill(buffer(arena, BLOCK), 0, 8, 77);
                    assertDeviceError(Errno.EIO, name, "read", 5L * BLOCK, () -> d.read(5, dst));
                    assertHolds(dst, 0, 8, 77);
                    assertDeviceError(Errno.EIO, name, "write", 6L * BLOCK, () -> d.write(6, fill(buffer(arena, BLOCK), 6, BLOCK, 2)));
                    assertDeviceError(Errno.EIO, name, "flush", -1, d::flush);
                    IoBatch batch = new IoBatch(4)
                            .read(1, buffer(arena, BLOCK)).write(2, fill(buffer(arena, BLOCK), 2, BLOCK, 2))
                            .read(3, buffer(arena, 2L * BLOCK)).write(63, fill(buffer(arena, BLOCK), 63, BLOCK, 2));
                    var e = assertDeviceError(Errno.EIO, name, "read", BLOCK, () -> d.submit(batch));
                    assertTrue(e.getMessage().contains("batch request 0 of 4 (4 failed)"), d.engine() + ": " + e.getMessage());
                    for (int i = 0; i < 4; i++) {
                        assertEquals(Errno.EIO, batch.error(i), d.engine() + " request " + i);
                    }
                }
            }
        }
    }

    @Test
    void shutDownFilesystemFailsMappedFlushWithEioUntilTheDataIsWritten() throws IOException {
        try (var ext4 = SystemTools.Mount.ext4(dir, 16); Arena arena = Arena.ofConfined()) {
            Path file = ext4.dir.resolve("mapped");
            try (BlockDevice mapped = MappedDevice.open(file, DeviceOptions.defaults().withSize(64L * BLOCK))) {
                Blocks.writeAll(mapped, 1);
                mapped.flush();
                mapped.write(9, fill(buffer(arena, BLOCK), 9, BLOCK, 2)); // dirty, not yet flushed
                shutDown(ext4.dir);
                assertDeviceError(Errno.EIO, file.toString(), "flush", 0, mapped::flush);
                // The failed region stays dirty: a second flush must not report success for data it never wrote.
                assertDeviceError(Errno.EIO, file.toString(), "flush", 0, mapped::flush);
            }
        }
    }
}
