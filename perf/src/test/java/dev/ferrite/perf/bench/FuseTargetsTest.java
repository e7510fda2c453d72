package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import dev.ferrite.dir.VolumeOptions;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The workloads' {@code fuse} target: a volume on a loop device mounted through FUSE, the real tools run on
 * the mount, and nothing left behind. Needs root, losetup and /dev/fuse, and dbench or fio for theirs.
 */
class FuseTargetsTest {
    private static void assumeFuse() {
        assumeTrue(MetaStores.fuseUnavailable().isEmpty(), () -> "fuse targets skipped: " + MetaStores.fuseUnavailable().get());
    }

    @Test
    void metaRunsThroughTheMountAndCountsItsRequests(@TempDir Path dir) throws IOException {
        assumeFuse();
        MetaBench bench = new MetaBench(List.of(MetaStores.fuse(dir, 16L << 20, MetaApi.HANDLE)), 300, List.of(1),
                List.of(MetaBench.Layout.PRIVATE));
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(List.of("create-private", "walk-private", "unlink-private"), results.stream().map(Result::phase).toList());
        results.forEach(r -> {
            assertEquals("ferrite-fuse", r.target());
            assertEquals(300, r.n(), r.toString());
        });
        String create = bench.contention().getFirst();
        assertTrue(create.contains("FUSE requests/op: ") && create.contains("create 1.00"), create);
        assertLeftNothing(dir);
    }

    @Test
    void dbenchRunsOnTheMount(@TempDir Path dir) throws IOException {
        assumeFuse();
        DbenchBinary dbench = DbenchBinary.find().orElse(null);
        assumeTrue(dbench != null, "dbench is not on the PATH");
        Path loadfile = Files.writeString(dir.resolve("load.txt"), DbenchLoadfileTest.sample());
        Path work = Files.createDirectory(dir.resolve("work"));
        DbenchBench bench = new DbenchBench(work, DbenchLoadfile.read(loadfile), loadfile, List.of(1), 1,
                List.of(DbenchBench.Target.FUSE), dbench, VolumeOptions.defaults(), 0);
        List<DbenchResult> results = bench.run(Progress.NONE);
        assertEquals(List.of(), bench.notes());
        assertEquals(1, results.size());
        assertEquals("ferrite-fuse", results.getFirst().target());
        assertTrue(results.getFirst().ops().stream().anyMatch(o -> o.kind() == DbenchLoadfile.Kind.NTCREATEX && o.count() > 0),
                results.toString());
        assertTrue(bench.contention().getFirst().contains("FUSE requests/op: "), bench.contention().toString());
        assertLeftNothing(work);
    }

    @Test
    void randwriteRunsFioOnTheMount(@TempDir Path dir) throws IOException {
        assumeFuse();
        Fio fio = Fio.find().orElse(null);
        assumeTrue(fio != null, "fio is not on the PATH");
        RandWriteBench bench = new RandWriteBench(dir, 16L << 20, 4096, List.of(1), 0.2, List.of(RandWriteBench.Target.FUSE),
                fio, false, false);
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(List.of(), bench.notes());
        assertEquals(List.of("ferrite-fuse"), results.stream().map(Result::target).toList());
        assertTrue(results.getFirst().rate() > 0, results.toString());
        assertLeftNothing(dir);
    }

    /** No mount of the run's directory stays in the mount table, and the directory is empty. */
    private static void assertLeftNothing(Path dir) throws IOException {
        String mounts = Files.readString(Path.of("/proc/self/mounts"));
        assertFalse(mounts.contains(dir.toString()), mounts);
        try (Stream<Path> left = Files.list(dir)) {
            assertEquals(List.of(), left.filter(p -> !p.getFileName().toString().endsWith(".txt")).toList());
        }
    }
}
