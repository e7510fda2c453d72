package dev.ferrite.fuse;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.testkit.HostFs;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.Errno;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The mount against the namespace under it: every operation reaches the volume with the namespace's answers. */
class FuseMountTest {
    @TempDir
    Path scratch;
    FuseFixture fx;

    @BeforeEach
    void mount() throws IOException {
        fx = new FuseFixture(scratch, 64);
    }

    @AfterEach
    void unmount() throws Exception {
        if (fx != null) { // null where FUSE is missing: the mount's assumption skipped the test
            fx.close();
        }
    }

    @Test
    void filesDirectoriesAndLinksShowTheNamespacesInodes() throws IOException {
        Path m = fx.mountPoint;
        Files.createDirectories(m.resolve("a/b"));
        Files.writeString(m.resolve("a/b/f"), "hello, ferrite\n");
        Files.createSymbolicLink(m.resolve("a/l"), Path.of("b/f"));
        Files.createLink(m.resolve("a/hard"), m.resolve("a/b/f"));
        Namespace ns = fx.volume.namespace();
        InodeStat f = ns.stat("/a/b/f");
        assertEquals(15, f.size());
        assertEquals(2, f.nlink());
        assertEquals(f.ino(), Files.getAttribute(m.resolve("a/b/f"), "unix:ino"));
        assertEquals(f.ino(), Files.getAttribute(m.resolve("a/hard"), "unix:ino"));
        assertEquals(2, Files.getAttribute(m.resolve("a/hard"), "unix:nlink"));
        assertEquals("b/f", ns.readlink("/a/l"));
        assertEquals("hello, ferrite\n", Files.readString(m.resolve("a/l")));
        try (Stream<Path> s = Files.list(m.resolve("a"))) {
            assertEquals(List.of("b", "hard", "l"), s.map(p -> p.getFileName().toString()).sorted().toList());
        }
        Files.move(m.resolve("a/hard"), m.resolve("moved"));
        assertEquals(f.ino(), ns.stat("/moved").ino());
        Files.setPosixFilePermissions(m.resolve("moved"), java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        assertEquals(0600, ns.stat("/moved").mode() & 07777);
        Files.setLastModifiedTime(m.resolve("moved"), java.nio.file.attribute.FileTime.fromMillis(1_000_000_000_123L));
        assertEquals(1_000_000_000_123_000_000L, ns.stat("/moved").mtimeNanos());
        Files.delete(m.resolve("moved"));
        assertEquals(1, ns.stat("/a/b/f").nlink());
    }

    @Test
    void newEntriesBelongToTheCallingUser() throws IOException, InterruptedException {
        Files.setPosixFilePermissions(fx.mountPoint, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxrwx"));
        FuseFixture.run(fx.mountPoint, 20, "setpriv", "--reuid=4321", "--regid=8765", "--clear-groups", "bash", "-c",
                "mkdir d && touch d/f && ln -s f d/l && echo x > d/g && mkdir d/e");
        Namespace ns = fx.volume.namespace();
        for (String p : List.of("/d", "/d/f", "/d/l", "/d/g", "/d/e")) {
            InodeStat s = ns.lstat(p);
            assertEquals(4321 + ":" + 8765, s.uid() + ":" + s.gid(), p);
        }
        Files.createFile(fx.mountPoint.resolve("root-owned"));
        assertEquals(0, ns.lstat("/root-owned").uid());
    }

    @Test
    void errorsAreTheNamespaces() throws IOException {
        Path m = fx.mountPoint;
        Files.createDirectories(m.resolve("d/e"));
        assertThrows(DirectoryNotEmptyException.class, () -> Files.delete(m.resolve("d")));
        assertThrows(FileAlreadyExistsException.class, () -> Files.createDirectory(m.resolve("d/e")));
        assertThrows(NoSuchFileException.class, () -> Files.readString(m.resolve("d/missing")));
        FuseFixture.Result r = exec("rmdir", "d"); // ENOTEMPTY by its message
        assertTrue(r.output().contains("Directory not empty"), r.output());
        r = exec("ln", "d", "dlink");  // hard link to a directory: EPERM from the kernel, before the volume
        assertTrue(r.output().contains("not allowed") || r.output().contains("Operation not permitted"), r.output());
        r = exec("truncate", "-s", "-1", "d/e"); // EISDIR
        assertTrue(r.exit() != 0, r.output());
    }

    /** renameat2's flags reach the namespace: the kernel refuses an existing target of RENAME_NOREPLACE itself, the rest is the volume's. */
    @Test
    void renameNoReplaceAndExchange() throws IOException {
        Path m = fx.mountPoint;
        Namespace ns = fx.volume.namespace();
        Files.createDirectories(m.resolve("p/d"));
        Files.writeString(m.resolve("p/d/inside"), "in d\n");
        Files.createDirectory(m.resolve("q"));
        Files.writeString(m.resolve("q/f"), "f\n");
        Files.writeString(m.resolve("q/g"), "g\n");
        long d = ns.lookup("/p/d"), f = ns.lookup("/q/f");

        assertEquals(0, HostFs.rename(m + "/q/g", m + "/q/h", HostFs.RENAME_NOREPLACE));
        assertEquals("g\n", Files.readString(m.resolve("q/h")));
        assertEquals(Errno.EEXIST, HostFs.rename(m + "/q/h", m + "/q/f", HostFs.RENAME_NOREPLACE));
        assertEquals(Errno.ENOENT, HostFs.rename(m + "/q/f", m + "/q/g", HostFs.RENAME_EXCHANGE));

        assertEquals(0, HostFs.rename(m + "/q/f", m + "/q/h", HostFs.RENAME_EXCHANGE)); // one directory
        assertEquals("g\n", Files.readString(m.resolve("q/f")));
        assertEquals("f\n", Files.readString(m.resolve("q/h")));
        assertEquals(0, HostFs.rename(m + "/p/d", m + "/q/h", HostFs.RENAME_EXCHANGE)); // a directory and a file, across parents
        assertEquals(f, ns.lookup("/p/d"));
        assertEquals(d, ns.lookup("/q/h"));
        assertEquals("f\n", Files.readString(m.resolve("p/d")));
        assertEquals("in d\n", Files.readString(m.resolve("q/h/inside")));
        assertEquals(ns.lookup("/q"), Files.getAttribute(m.resolve("q/h/.."), "unix:ino"));
        assertEquals(2, Files.getAttribute(m.resolve("p"), "unix:nlink"));
        assertEquals(3, Files.getAttribute(m.resolve("q"), "unix:nlink"));
        assertEquals(Errno.EINVAL, HostFs.rename(m + "/q", m + "/q/h", HostFs.RENAME_EXCHANGE)); // into itself
        assertTrue(ns.check().clean());
    }

    /**
     * lseek's SEEK_DATA and SEEK_HOLE through the mount against the same file on tmpfs, whose answers for these
     * shapes are ext4's too: data, holes, a fallocated range (a hole) and buffered writes, into it and into a hole
     * past the end, made through a descriptor still open (not synced) while another one seeks.
     */
    @Test
    void seekDataAndHoleAgreeWithTmpfs() throws IOException, InterruptedException {
        Path shm = Path.of("/dev/shm");
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.isDirectory(shm) && Files.isWritable(shm), "no writable /dev/shm to compare with");
        Path tmpfs = Files.createTempDirectory(shm, "ferrite-seek");
        try {
            String onTmpfs = seekMap(tmpfs.resolve("sparse"));
            String onMount = seekMap(fx.mountPoint.resolve("sparse"));
            assertEquals(onTmpfs, onMount);
            assertTrue(onMount.contains("data 4096 -> 65536,"), onMount);
            assertTrue(onMount.contains("data 73728 -> 163840,"), onMount); // the fallocated range is a hole but for the page written into it
        } finally {
            Files.deleteIfExists(tmpfs.resolve("sparse"));
            Files.delete(tmpfs);
        }
    }

    /** What SEEK_DATA and SEEK_HOLE answer at chosen offsets of a sparse file made at {@code file}, one "whence offset -> answer" each. */
    private static String seekMap(Path file) throws IOException, InterruptedException {
        int bs = 4096;
        long size = 64 * bs + 110;
        StringBuilder out = new StringBuilder();
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.wrap(filled(bs)), 0);
            ch.write(ByteBuffer.wrap(filled(2 * bs)), 16 * bs);
            FuseFixture.run(file.getParent(), 20, "fallocate", "-o", String.valueOf(32 * bs), "-l", String.valueOf(16 * bs),
                    file.getFileName().toString());
            ch.write(ByteBuffer.wrap(filled(100)), 40 * bs + 5);
            ch.write(ByteBuffer.wrap(filled(10)), 64 * bs + 100);
            int fd = HostFs.openFd(file.toString(), 0);
            assertTrue(fd >= 0, "open: errno " + -fd);
            try {
                for (long at : new long[] {0, 100, bs, 5000, 16 * bs + 10, 18 * bs, 100_000, 32 * bs, 40 * bs, 40 * bs + 7,
                        41 * bs, 200_000, 64 * bs, size - 1, size, size + 5000, -1}) {
                    out.append("data ").append(at).append(" -> ").append(answer(HostFs.lseek(fd, at, HostFs.SEEK_DATA))).append(", ");
                    out.append("hole ").append(at).append(" -> ").append(answer(HostFs.lseek(fd, at, HostFs.SEEK_HOLE))).append(", ");
                }
            } finally {
                HostFs.close(fd);
            }
        }
        return out.toString();
    }

    private static String answer(long r) {
        return r >= 0 ? Long.toString(r) : Errno.name((int) -r);
    }

    private static byte[] filled(int n) {
        byte[] b = new byte[n];
        java.util.Arrays.fill(b, (byte) 'x');
        return b;
    }

    @Test
    void readsWritesSparseFilesAndFallocate() throws IOException, InterruptedException {
        Path f = fx.mountPoint.resolve("data");
        byte[] block = new byte[10_000];
        for (int i = 0; i < block.length; i++) {
            block[i] = (byte) (i * 31);
        }
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.wrap(block), 1 << 20);
            ch.force(true);
            assertEquals((1 << 20) + block.length, ch.size());
            ByteBuffer in = ByteBuffer.allocate(block.length);
            ch.read(in, 1 << 20);
            assertArrayEquals(block, in.array());
            ByteBuffer hole = ByteBuffer.allocate(4096);
            ch.read(hole, 4096);
            assertArrayEquals(new byte[4096], hole.array());
            ch.truncate(5000);
        }
        assertEquals(5000, fx.volume.namespace().stat("/data").size());
        FuseFixture.run(fx.mountPoint, 20, "fallocate", "-l", "8M", "data");
        assertEquals(8 << 20, fx.volume.namespace().stat("/data").size());
        FuseFixture.run(fx.mountPoint, 20, "fallocate", "-p", "-o", "0", "-l", "4M", "data");
        FuseFixture.run(fx.mountPoint, 20, "sync", "data");
        String df = FuseFixture.run(fx.mountPoint, 20, "stat", "-f", "-c", "%S %b %f", ".");
        var s = fx.volume.statfs();
        assertEquals(s.blockSize() + " " + s.totalBlocks(), df.substring(0, df.lastIndexOf(' ')));
        Files.writeString(f, "short\n", StandardCharsets.UTF_8, StandardOpenOption.TRUNCATE_EXISTING);
        assertEquals("short\n", Files.readString(f));
    }

    /**
     * A shared writable mapping of a file on the mount: stores into it reach the volume at {@code force()} (msync,
     * the kernel writing the dirty pages back as FUSE writes), and are there after a remount.
     */
    @Test
    void aSharedWritableMappingReachesTheVolumeAtForce() throws IOException {
        byte[] want = pattern(3 * 4096 + 100, 7);
        try (FileChannel ch = FileChannel.open(fx.mountPoint.resolve("mapped"), StandardOpenOption.CREATE_NEW,
                StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_WRITE, 0, want.length); // grows the file (a truncate)
            map.put(want);
            map.force();
            assertArrayEquals(want, readThroughNamespace("/mapped", want.length), "after force, before close");
        }
        fx.unmount();
        fx.mount();
        assertArrayEquals(want, readThroughNamespace("/mapped", want.length), "after a remount");
        assertArrayEquals(want, Files.readAllBytes(fx.mountPoint.resolve("mapped")));
    }

    /**
     * O_DIRECT through the mount ({@link DirectDevice}, the project's own O_DIRECT path): aligned writes and reads
     * bypass the page cache as FUSE writes and reads, and their bytes are the volume's.
     */
    @Test
    void oDirectWritesAndReadsAlignedBlocks() {
        int blocks = 16;
        byte[] want = pattern(blocks * 4096, 11);
        try (DirectDevice d = DirectDevice.open(fx.mountPoint.resolve("direct"), DeviceOptions.defaults().withSize(want.length));
             Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(4096, 4096);
            for (int b = blocks - 1; b >= 0; b--) { // backwards: each write lands in a hole, not past the end
                buf.copyFrom(MemorySegment.ofArray(want).asSlice(b * 4096L, 4096));
                d.write(b, buf);
            }
            d.flush();
            assertArrayEquals(want, readThroughNamespace("/direct", want.length));
            for (int b = 0; b < blocks; b++) {
                d.read(b, buf);
                assertArrayEquals(java.util.Arrays.copyOfRange(want, b * 4096, (b + 1) * 4096), buf.toArray(ValueLayout.JAVA_BYTE), "block " + b);
            }
        }
        assertEquals(want.length, fx.volume.namespace().stat("/direct").size());
    }

    private byte[] readThroughNamespace(String path, int length) {
        Namespace ns = fx.volume.namespace();
        ByteBuffer b = ByteBuffer.allocate(length);
        try (Handle h = ns.open(path, Namespace.O_RDONLY)) {
            while (b.hasRemaining()) {
                if (ns.read(h, b.position(), b) <= 0) {
                    break;
                }
            }
        }
        return b.array();
    }

    private static byte[] pattern(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * seed + (i >>> 12));
        }
        return b;
    }

    private FuseFixture.Result exec(String... command) throws IOException {
        try {
            return FuseFixture.exec(fx.mountPoint, 20, command);
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }
}
