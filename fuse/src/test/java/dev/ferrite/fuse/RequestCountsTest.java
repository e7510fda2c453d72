package dev.ferrite.fuse;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeSet;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The FUSE requests a create, a stat and an unlink through the mount cost, per file, from the mount's own counts
 * ({@link dev.ferrite.dir.FileSystemMount#requestCounts()}); prints the table docs/mount.md shows ("where the time
 * goes"). Run with the kernel's entry and attribute cache (1 s, the default) and without it (timeouts 0).
 */
class RequestCountsTest {
    private static final int FILES = 50;

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
            print(cached, Map.of("create+write 100 B+close", create, "stat", stat, "unlink", unlink));

            // The operation itself exactly once per file and nothing else but getattr: the kernel's LOOKUPs and GETATTRs,
            // for the path's entries and, without the cache, for default_permissions' checks of each directory walked.
            // The bounds are what Linux 6.x sends (docs/mount.md); with the cache, fewer as entries stay fresh.
            long n = FILES;
            assertEquals(Map.of("create", n, "write", n, "release", n), without(create, "getattr"), create::toString);
            assertTrue(between(create, n, cached ? 3 * n : 7 * n), create::toString);
            assertEquals(Map.of(), without(stat, "getattr"), stat::toString);
            assertTrue(between(stat, 0, cached ? 2 * n : 5 * n), stat::toString);
            assertEquals(Map.of("unlink", n), without(unlink, "getattr"), unlink::toString);
            assertTrue(between(unlink, 0, cached ? 2 * n : 10 * n), unlink::toString);
        }
    }

    private static boolean between(Map<String, Long> counts, long min, long max) {
        long getattr = counts.getOrDefault("getattr", 0L);
        return getattr >= min && getattr <= max;
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

    private static Map<String, Long> without(Map<String, Long> counts, String op) {
        Map<String, Long> m = new LinkedHashMap<>(counts);
        m.remove(op);
        return m;
    }

    private static void print(boolean cached, Map<String, Map<String, Long>> phases) {
        StringBuilder b = new StringBuilder("FUSE requests per file, " + (cached ? "entry/attr cache 1 s" : "cache timeouts 0, one thread") + ":\n");
        for (String phase : new TreeSet<>(phases.keySet())) {
            b.append(String.format("  %-26s", phase));
            phases.get(phase).forEach((op, n) -> b.append(String.format(" %s %.2f", op, n / (double) FILES)));
            b.append('\n');
        }
        System.out.print(b);
    }
}
