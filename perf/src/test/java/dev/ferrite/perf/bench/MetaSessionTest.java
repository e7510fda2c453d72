package dev.ferrite.perf.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.stream.Stream;

import dev.ferrite.dir.NamespaceException;
import dev.ferrite.io.Errno;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** The sessions the metadata workloads drive: every store and API does the same work and fails alike. */
class MetaSessionTest {
    /** More than one getdents64 buffer's worth (some 800 entries), so that listings take several calls. */
    private static final int FILES = 3_000;

    @TempDir
    Path dir;

    private MetaStore posix(MetaApi api) throws IOException {
        return PosixMeta.in(Files.createDirectories(dir.resolve("posix-" + api.label())), api);
    }

    private MetaStore ferrite(MetaApi api) throws IOException {
        return FerriteMeta.create(Files.createDirectories(dir.resolve("ferrite-" + api.label())), FILES, 32L << 20, api);
    }

    /**
     * Two directories filled, listed twice (the second from a session that has listed before), stat'ed,
     * half unlinked, listed again, emptied and removed: what each step saw, as text.
     */
    private static List<String> script(MetaStore store) {
        List<String> seen = new ArrayList<>();
        try (MetaStore.Session s = store.session()) {
            s.mkdir("a");
            s.mkdir("b");
            for (int i = 0; i < FILES; i++) {
                s.create(i % 3 == 0 ? "b" : "a", MetaBench.name(i));
            }
            for (String d : List.of("a", "b", "a")) {
                seen.add(d + ": " + listing(s, d));
            }
            long sizes = 0;
            for (int i = 0; i < FILES; i++) {
                sizes += s.stat(i % 3 == 0 ? "b" : "a", MetaBench.name(i));
            }
            seen.add("sizes " + sizes);
            for (int i = 0; i < FILES; i += 2) {
                s.unlink(i % 3 == 0 ? "b" : "a", MetaBench.name(i));
            }
            seen.add("a: " + listing(s, "a"));
            seen.add("b: " + listing(s, "b"));
        }
        try (MetaStore.Session s = store.session()) {
            for (String d : List.of("a", "b")) {
                for (int i = 1; i < FILES; i += 2) {
                    if ((i % 3 == 0) == d.equals("b")) {
                        s.unlink(d, MetaBench.name(i));
                    }
                }
                seen.add(d + " emptied: " + s.list(d, n -> { }));
                s.rmdir(d);
            }
        }
        store.check();
        return seen;
    }

    private static String listing(MetaStore.Session s, String d) {
        TreeSet<String> names = new TreeSet<>();
        long n = s.list(d, names::add);
        return n + " " + names.size() + " " + names.hashCode();
    }

    private static Path root(Path base) throws IOException {
        try (Stream<Path> children = Files.list(base)) {
            return children.findFirst().orElseThrow();
        }
    }

    @Test
    void everyStoreAndApiDoesTheSameWork() throws IOException {
        List<String> expected;
        try (MetaStore s = posix(MetaApi.PATH)) {
            expected = script(s);
        }
        assertEquals("a: 2000 2000", expected.getFirst().substring(0, "a: 2000 2000".length()), expected.toString());
        assertEquals("b emptied: 0", expected.getLast());
        for (MetaApi api : MetaApi.values()) {
            try (MetaStore s = posix(api)) {
                assertEquals(expected, script(s), "posix " + api.label());
                try (Stream<Path> left = Files.list(root(dir.resolve("posix-" + api.label())))) {
                    assertEquals(0, left.count(), "posix " + api.label() + " left entries behind");
                }
            }
            try (MetaStore s = ferrite(api)) {
                assertEquals(expected, script(s), "ferrite " + api.label());
            }
            try (MetaStore s = new MemoryMeta(api)) {
                assertEquals(expected, script(s), "memory " + api.label());
            }
        }
    }

    /**
     * xfs, ext4 and btrfs made for the run on loop devices (those this process can make: root, losetup,
     * the mkfs) do the same work as the host directory through either API, and leave nothing behind.
     */
    @Test
    void kernelFileSystemsOnLoopDevicesDoTheSameWorkAndLeaveNothing() throws IOException {
        List<String> expected;
        try (MetaStore s = posix(MetaApi.PATH)) {
            expected = script(s);
        }
        int ran = 0;
        for (LoopDevice.Kind kind : List.of(LoopDevice.Kind.XFS, LoopDevice.Kind.EXT4, LoopDevice.Kind.BTRFS)) {
            if (!LoopDevice.available(kind)) {
                continue;
            }
            Path base = Files.createDirectory(dir.resolve("loop-" + kind.label()));
            for (MetaApi api : MetaApi.values()) {
                try (MetaStore s = LoopMeta.create(base, 2 * FILES, kind, api)) {
                    assertTrue(s.describe().startsWith(kind.label() + " ("), s.describe());
                    assertEquals(expected, script(s), kind.label() + " " + api.label());
                }
                try (Stream<Path> left = Files.list(base)) {
                    assertEquals(List.of(), left.toList(), kind.label() + " left its image or mount point behind");
                }
                assertTrue(LoopDevice.run("losetup", "--list", "--noheadings", "--output", "BACK-FILE").lines()
                        .noneMatch(l -> l.contains(base.toString())), kind.label() + " left its device attached");
            }
            ran++;
        }
        assumeTrue(ran > 0, "needs root, losetup and mkfs.xfs, mkfs.ext4 or mkfs.btrfs");
    }

    /** Room for the run's files: ext4 gets an inode for each (its default would run out), XFS half the device for inodes. */
    @Test
    void kernelFileSystemsAreMadeWithRoomForTheFiles() {
        long files = 1_000_000;
        assertTrue(LoopMeta.deviceBytes(files) >= FerriteMeta.deviceBytes(files));
        assertTrue(LoopMeta.deviceBytes(files) >= files * 2048, "2 KiB a file at least");
        List<String> ext4 = LoopMeta.mkfsOptions(LoopDevice.Kind.EXT4, files);
        assertEquals("-N", ext4.get(0));
        assertTrue(Long.parseLong(ext4.get(1)) > files, ext4.toString());
        assertEquals(List.of("-i", "maxpct=50"), LoopMeta.mkfsOptions(LoopDevice.Kind.XFS, files));
        assertEquals(List.of(), LoopMeta.mkfsOptions(LoopDevice.Kind.BTRFS, files));
    }

    /** The handle session's names land where the path session (java.nio) finds them, and the other way round. */
    @Test
    void posixHandleSessionWorksOnTheRealTree() throws IOException {
        try (MetaStore store = posix(MetaApi.HANDLE); MetaStore.Session s = store.session()) {
            Path root = root(dir.resolve("posix-handle"));
            s.mkdir("d");
            s.create("d", "made-by-handle");
            Files.writeString(root.resolve("d/made-by-nio"), "12345");
            assertEquals(new TreeSet<>(List.of("made-by-handle", "made-by-nio")), listNio(root.resolve("d")));
            TreeSet<String> listed = new TreeSet<>();
            assertEquals(2, s.list("d", listed::add));
            assertEquals(listNio(root.resolve("d")), listed);
            assertEquals(0, s.stat("d", "made-by-handle"));
            assertEquals(5, s.stat("d", "made-by-nio"));
            s.unlink("d", "made-by-nio");
            assertEquals(new TreeSet<>(List.of("made-by-handle")), listNio(root.resolve("d")));
        }
    }

    private static TreeSet<String> listNio(Path d) throws IOException {
        try (Stream<Path> children = Files.list(d)) {
            return children.map(p -> p.getFileName().toString()).collect(TreeSet::new, TreeSet::add, TreeSet::addAll);
        }
    }

    /** The errno each refused call gets, from the host's kernel and from Ferrite alike. */
    @Test
    void refusedCallsThrowTheKernelsErrno() throws IOException {
        List<MetaStore> stores = List.of(posix(MetaApi.HANDLE), ferrite(MetaApi.HANDLE), ferrite(MetaApi.PATH));
        try {
            for (MetaStore store : stores) {
                try (MetaStore.Session s = store.session()) {
                    s.mkdir("d");
                    s.create("d", "f");
                    String which = store.describe();
                    assertErrno(Errno.EEXIST, () -> s.create("d", "f"), which);
                    assertErrno(Errno.EEXIST, () -> s.mkdir("d"), which);
                    assertErrno(Errno.ENOENT, () -> s.stat("d", "missing"), which);
                    assertErrno(Errno.ENOENT, () -> s.unlink("d", "missing"), which);
                    assertErrno(Errno.ENOENT, () -> s.list("missing", n -> { }), which);
                    assertErrno(Errno.ENOENT, () -> s.create("missing", "f"), which);
                    assertErrno(Errno.ENOTEMPTY, () -> s.rmdir("d"), which);
                }
            }
        } finally {
            stores.forEach(MetaStore::close);
        }
    }

    private static void assertErrno(int errno, Executable call, String store) {
        NamespaceException e = assertThrows(NamespaceException.class, call, store);
        assertEquals(Errno.name(errno), Errno.name(e.errno()), store + ": " + e.getMessage());
        assertTrue(e.getMessage().startsWith(Errno.name(errno) + ": "), e.getMessage());
    }

    @Test
    void theApiIsParsedStrictlyAndCarriedInTheLabel() {
        assertEquals(MetaApi.HANDLE, MetaApi.parse("handle"));
        assertEquals(MetaApi.PATH, MetaApi.parse("PATH"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MetaApi.parse("fd"));
        assertEquals("--api fd: give handle or path", e.getMessage());
        assertEquals("posix:/mnt/xfs", MetaApi.HANDLE.targetLabel("posix:/mnt/xfs"));
        assertEquals("posix:/mnt/xfs (path)", MetaApi.PATH.targetLabel("posix:/mnt/xfs"));
        assertEquals("ferrite (path)", MetaStores.ferrite(dir, 1 << 20, MetaApi.PATH).label());
    }
}
