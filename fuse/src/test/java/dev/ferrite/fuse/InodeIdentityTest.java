package dev.ferrite.fuse;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the kernel sees of an inode through the default mount (1 s entry and attribute cache, multithreaded) is
 * the inode itself: every name of a hard link is one kernel inode (a link count changed through one name shows at
 * once through the others), the inode's number and generation are Ferrite's, a file unlinked while open is an
 * orphan (no hidden name) freed once the kernel lets go of it, and every inode the kernel knew is let go of by
 * FORGET or at unmount.
 */
@SuppressWarnings("restricted")
class InodeIdentityTest {
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
    void theOtherNameOfAHardLinkShowsTheNewLinkCountAtOnce() throws IOException {
        Path m = fx.mountPoint;
        Namespace ns = fx.volume.namespace();
        Files.writeString(m.resolve("a"), "linked\n");
        Files.createLink(m.resolve("b"), m.resolve("a"));
        assertEquals(2, Files.getAttribute(m.resolve("a"), "unix:nlink"));
        assertEquals(2, Files.getAttribute(m.resolve("b"), "unix:nlink")); // both names' attributes now cached for 1 s
        Files.delete(m.resolve("a"));
        assertEquals(ns.stat("/b").nlink(), Files.getAttribute(m.resolve("b"), "unix:nlink"), "after unlinking a");
        Files.createLink(m.resolve("c"), m.resolve("b"));
        Files.delete(m.resolve("c"));
        assertEquals(1, ns.stat("/b").nlink());
        assertEquals(ns.stat("/b").nlink(), Files.getAttribute(m.resolve("b"), "unix:nlink"), "after a link and an unlink");
    }

    /** The generation, read back by name_to_handle_at(2): FUSE's file handle is the node id and the kernel inode's generation. */
    @Test
    void inodeNumbersAndGenerationsAreTheNamespaces() throws Throwable {
        Path m = fx.mountPoint;
        Namespace ns = fx.volume.namespace();
        Files.createDirectories(m.resolve("d/e"));
        Files.writeString(m.resolve("d/f"), "f\n");
        Files.createSymbolicLink(m.resolve("d/l"), Path.of("f"));
        for (String p : List.of("/d", "/d/e", "/d/f", "/d/l")) {
            InodeStat s = ns.lstat(p);
            Path on = m.resolve(p.substring(1));
            assertEquals(s.ino(), Files.getAttribute(on, "unix:ino", java.nio.file.LinkOption.NOFOLLOW_LINKS), p);
            assertEquals(s.generation(), generation(on), p);
        }
    }

    private static int generation(Path p) throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle nameToHandleAt = linker.downcallHandle(linker.defaultLookup().findOrThrow("name_to_handle_at"),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment handle = arena.allocate(8 + 128, 4); // struct file_handle: handle_bytes, handle_type, f_handle[]
            handle.set(JAVA_INT, 0, 128);
            int rc = (int) nameToHandleAt.invokeExact(-100 /* AT_FDCWD */, arena.allocateFrom(p.toString()), handle,
                    arena.allocate(JAVA_INT), 0);
            assertEquals(0, rc, "name_to_handle_at(" + p + ")");
            return handle.get(JAVA_INT, 8 + 8); // fuse_encode_fh: node id (two words), then the generation
        }
    }

    @Test
    void aFileUnlinkedWhileOpenStaysUsableAndIsFreedOnceTheKernelLetsGo() throws IOException {
        Path m = fx.mountPoint;
        Path d = Files.createDirectory(m.resolve("d"));
        byte[] data = new byte[1 << 20];
        java.util.Arrays.fill(data, (byte) 7);
        long freeWhileOpen;
        try (FileChannel ch = FileChannel.open(d.resolve("f"), StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.wrap(data), 0);
            ch.force(true); // its blocks allocated
            Files.delete(d.resolve("f"));
            try (Stream<Path> s = Files.list(d)) {
                assertEquals(List.of(), s.map(p -> p.getFileName().toString()).toList(), "names left after the unlink");
            }
            Files.delete(d); // empty: no hidden name keeps it
            ch.write(ByteBuffer.wrap("more".getBytes(StandardCharsets.UTF_8)), data.length);
            ByteBuffer back = ByteBuffer.allocate(4);
            ch.read(back, data.length);
            assertEquals("more", new String(back.array(), StandardCharsets.UTF_8));
            assertEquals(data.length + 4, ch.size());
            freeWhileOpen = fx.volume.statfs().freeBlocks();
        }
        long blocks = data.length / fx.volume.statfs().blockSize();
        await(() -> fx.volume.statfs().freeBlocks() >= freeWhileOpen + blocks,
                () -> "free blocks " + fx.volume.statfs().freeBlocks() + ", " + freeWhileOpen + " while open: the orphan's "
                        + blocks + " not freed");
    }

    /**
     * A file closed, then unlinked, is freed by the unlink itself: its node lets go of the inode first (the kernel has
     * it open nowhere), so the volume need not keep it as an orphan until the kernel's FORGET.
     */
    @Test
    void aClosedFileIsFreedByItsUnlink() throws IOException {
        Path f = fx.mountPoint.resolve("f");
        long before = fx.mount.requestCounts().getOrDefault("release", 0L);
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.wrap(new byte[1 << 20]), 0);
            ch.force(true);
        }
        await(() -> fx.mount.requestCounts().getOrDefault("release", 0L) > before, () -> "no release"); // sent after close(2) returns
        long free = fx.volume.statfs().freeBlocks();
        Files.delete(f);
        long blocks = (1 << 20) / fx.volume.statfs().blockSize();
        assertTrue(fx.volume.statfs().freeBlocks() >= free + blocks,
                () -> "free blocks right after the unlink: " + fx.volume.statfs().freeBlocks() + ", before " + free);
    }

    /** Every lookup the kernel made is forgotten: unlinked names at once (FORGET), the rest at unmount. */
    @Test
    void theKernelsLookupsAreForgottenAndEveryHandleClosedAtUnmount() throws IOException {
        Path m = fx.mountPoint;
        Path d = Files.createDirectory(m.resolve("d"));
        for (int i = 0; i < 100; i++) {
            Files.writeString(d.resolve("f" + i), "x");
        }
        try (Stream<Path> s = Files.list(d)) { // readdirplus: a lookup per entry
            assertEquals(100, s.count());
        }
        FuseFileSystemProvider.Mounted mounted = (FuseFileSystemProvider.Mounted) fx.mount;
        assertTrue(mounted.server.nodeCount() >= 102, () -> "nodes " + mounted.server.nodeCount());
        for (int i = 0; i < 100; i++) {
            Files.delete(d.resolve("f" + i));
        }
        await(() -> mounted.server.nodeCount() == 2, () -> "nodes after the unlinks: " + mounted.server.nodeCount()
                + " (the root and d expected), requests " + mounted.requestCounts());
        Files.writeString(d.resolve("kept"), "y");
        fx.mount.close();
        assertEquals(0, mounted.server.nodeCount());
    }

    private static void await(BooleanSupplier done, java.util.function.Supplier<String> failure) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, () -> failure.get() + " after 10 s");
            Thread.onSpinWait();
        }
    }
}
