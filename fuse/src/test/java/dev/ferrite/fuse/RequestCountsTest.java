package dev.ferrite.fuse;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The FUSE requests a create, a stat and an unlink through the mount cost, per file, and a listing of 1000 entries
 * with a stat of each ({@code ls -l}), from the mount's own counts ({@link dev.ferrite.dir.FileSystemMount#requestCounts()});
 * prints the table docs/mount.md shows ("where the time goes"). Run with the kernel's entry and attribute cache
 * (1 s, the default) and without it (timeouts 0).
 */
class RequestCountsTest {
    private static final int FILES = 50;
    private static final int LISTED = 1000;
    /** The requests that only refresh what the kernel knows: its lookups and attribute fetches, and its FORGETs. */
    private static final List<String> KERNEL_CACHE = List.of("lookup", "getattr", "forget", "forget_multi");

    @TempDir
    Path scratch;

    @ParameterizedTest(name = "cached={0}")
    @ValueSource(booleans = {true, false})
    void createStatAndUnlinkCostAFewRequestsPerFile(boolean cached) throws Exception {
        try (FuseFixture fx = cached ? new FuseFixture(scratch, 64) : FuseFixture.uncached(scratch, 64)) {
            Path dir = Files.createDirectory(fx.mountPoint.resolve("d"));
            ByteBuffer data = ByteBuffer.wrap(new byte[100]);
            Map<String, Long> before = fx.mount.requestCounts();
            for (int i = 0; i < FILES; i++) {
                try (SeekableByteChannel c = Files.newByteChannel(dir.resolve("f" + i), StandardOpenOption.CREATE_NEW,
                        StandardOpenOption.WRITE)) {
                    c.write(data.clear());
                }
            }
            awaitReleases(fx, before.getOrDefault("release", 0L) + FILES); // the kernel sends RELEASE after close(2) returns
            Map<String, Long> create = since(before, fx.mount.requestCounts());
            before = fx.mount.requestCounts();
            for (int i = 0; i < FILES; i++) {
                assertEquals(100L, Files.readAttributes(dir.resolve("f" + i), "unix:size").get("size"));
            }
            Map<String, Long> stat = since(before, fx.mount.requestCounts());
            before = fx.mount.requestCounts();
            for (int i = 0; i < FILES; i++) {
                Files.delete(dir.resolve("f" + i));
            }
            Map<String, Long> unlink = since(before, fx.mount.requestCounts());

            Namespace ns = fx.volume.namespace();
            try (Handle r = ns.mkdir(ns.openRoot(), "r", 0755)) { // made in-process: the kernel knows none of them
                for (int i = 0; i < LISTED; i++) {
                    ns.create(r, "file-number-" + i, 0644, true).close();
                }
            }
            before = fx.mount.requestCounts();
            long seen = 0;
            try (DirectoryStream<Path> list = Files.newDirectoryStream(fx.mountPoint.resolve("r"))) {
                for (Path p : list) {
                    seen += (long) Files.readAttributes(p, "unix:size").get("size") + 1;
                }
            }
            assertEquals(LISTED, seen);
            Map<String, Long> listing = since(before, fx.mount.requestCounts());
            print(cached, Map.of("create+write 100 B+close", create, "stat", stat, "unlink", unlink), FILES);
            print(cached, Map.of("list 1000, stat each", listing), LISTED);

            // The operation itself exactly once per file and nothing else but the kernel's LOOKUPs, GETATTRs and
            // FORGETs: a negative lookup before a create (no negative entries are cached), attributes fetched again
            // after a write changed them and, without the cache, for default_permissions' checks of each directory
            // walked. The bounds are what Linux 6.x sends (docs/mount.md); with the cache, fewer as entries stay fresh.
            long n = FILES;
            assertEquals(Map.of("create", n, "write", n, "release", n), without(create, KERNEL_CACHE), create::toString);
            assertTrue(between(create, n, cached ? 3 * n : 7 * n), create::toString);
            assertEquals(Map.of(), without(stat, KERNEL_CACHE), stat::toString);
            assertTrue(between(stat, 0, cached ? 2 * n : 5 * n), stat::toString);
            assertEquals(Map.of("unlink", n), without(unlink, KERNEL_CACHE), unlink::toString);
            assertTrue(between(unlink, 0, cached ? 2 * n : 10 * n), unlink::toString);
            // A listing carries every entry's attributes (readdirplus): with the cache, no lookup or getattr per entry.
            assertTrue(between(listing, 0, cached ? LISTED / 10 : 5 * LISTED + 10), listing::toString);
        }
    }

    /**
     * A file read again after closing and reopening it is read from the kernel's page cache: the open keeps the
     * cache ({@code keep_cache}), so no READ reaches the server (without it each open drops the file's pages).
     */
    @Test
    void aFileReadAgainAfterAReopenCostsNoReads() throws Exception {
        try (FuseFixture fx = new FuseFixture(scratch, 64)) {
            Path f = fx.mountPoint.resolve("f");
            byte[] data = new byte[64 * 1024];
            new Random(18).nextBytes(data);
            Files.write(f, data);
            assertArrayEquals(data, Files.readAllBytes(f)); // may reach the server: the write changed the mtime the kernel had
            Map<String, Long> before = fx.mount.requestCounts();
            assertArrayEquals(data, Files.readAllBytes(f));
            Map<String, Long> again = since(before, fx.mount.requestCounts());
            System.out.println("FUSE requests to read a 64 KiB file again after a reopen: " + again);
            assertEquals(0L, again.getOrDefault("read", 0L), again::toString);
        }
    }

    /** Whether the kernel's lookups and getattrs in {@code counts} are from {@code min} to {@code max}. */
    private static boolean between(Map<String, Long> counts, long min, long max) {
        long fetches = counts.getOrDefault("lookup", 0L) + counts.getOrDefault("getattr", 0L);
        return fetches >= min && fetches <= max;
    }

    private static void awaitReleases(FuseFixture fx, long count) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (fx.mount.requestCounts().getOrDefault("release", 0L) < count) {
            assertTrue(System.nanoTime() < deadline, () -> "releases still missing after 10 s: " + fx.mount.requestCounts());
            Thread.yield();
        }
    }

    /** The requests served between {@code before} and {@code after}, per operation. */
    private static Map<String, Long> since(Map<String, Long> before, Map<String, Long> after) {
        Map<String, Long> m = new LinkedHashMap<>();
        after.forEach((op, n) -> {
            if (n - before.getOrDefault(op, 0L) != 0) {
                m.put(op, n - before.getOrDefault(op, 0L));
            }
        });
        return m;
    }

    private static Map<String, Long> without(Map<String, Long> counts, List<String> ops) {
        Map<String, Long> m = new LinkedHashMap<>(counts);
        m.keySet().removeAll(ops);
        return m;
    }

    private static void print(boolean cached, Map<String, Map<String, Long>> phases, int files) {
        StringBuilder b = new StringBuilder("FUSE requests per file (of " + files + "), "
                + (cached ? "entry/attr cache 1 s" : "cache timeouts 0, one thread") + ":\n");
        for (String phase : new TreeSet<>(phases.keySet())) {
            b.append(String.format("  %-26s", phase));
            phases.get(phase).forEach((op, n) -> b.append(String.format(" %s %.3f", op, n / (double) files)));
            b.append('\n');
        }
        System.out.print(b);
    }
}
