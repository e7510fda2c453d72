package dev.ferrite.perf.bench;

import java.util.ArrayList;
import java.util.List;

import dev.ferrite.dir.NamespaceException;
import dev.ferrite.io.Errno;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MemoryMetaTest {
    private static void refused(int errno, Executable op) {
        NamespaceException e = assertThrows(NamespaceException.class, op);
        assertEquals(Errno.name(errno), Errno.name(e.errno()), e.getMessage());
    }

    private static List<String> list(MetaStore.Session s, String dir) {
        List<String> names = new ArrayList<>();
        assertEquals(s.list(dir, names::add), names.size());
        return names;
    }

    @Test
    void aNamespaceWithPosixRefusals() {
        try (MetaStore store = new MemoryMeta(MetaApi.HANDLE); MetaStore.Session a = store.session(); MetaStore.Session b = store.session()) {
            a.mkdir("d");
            refused(Errno.EEXIST, () -> b.mkdir("d"));
            refused(Errno.ENOENT, () -> a.create("nodir", "f"));
            for (String name : List.of("c", "a", "b")) {
                a.create("d", name);
            }
            refused(Errno.EEXIST, () -> b.create("d", "a"));
            assertEquals(List.of("a", "b", "c"), list(b, "d"), "another session sees the entries, in name order");
            assertEquals(0, b.stat("d", "b"));
            refused(Errno.ENOENT, () -> b.stat("d", "x"));

            refused(Errno.ENOTEMPTY, () -> a.rmdir("d"));
            b.unlink("d", "b");
            refused(Errno.ENOENT, () -> a.unlink("d", "b"));
            refused(Errno.ENOENT, () -> a.stat("d", "b"));
            assertEquals(List.of("a", "c"), list(a, "d"));
            a.unlink("d", "a");
            a.unlink("d", "c");
            a.rmdir("d");
            refused(Errno.ENOENT, () -> b.rmdir("d"));
            a.mkdir("d");
            assertEquals(List.of(), list(a, "d"), "a directory made again starts empty");
            assertEquals(MemoryMeta.DESCRIPTION, store.describe());
        }
    }

    @Test
    void theWorkloadsRunAndCheckOnTheCeiling() {
        MetaBench bench = new MetaBench(List.of(MetaStores.memory(MetaApi.HANDLE)), 2_000, List.of(1, 2),
                List.of(MetaBench.Layout.PRIVATE, MetaBench.Layout.SHARED));
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(2 * 2 * 3, results.size());
        assertTrue(results.stream().allMatch(r -> r.target().equals("memory") && r.n() == 2_000), results.toString());
        assertTrue(bench.notes().getFirst().startsWith("memory private x1: " + MemoryMeta.DESCRIPTION), bench.notes().toString());

        DirScaleBench scale = new DirScaleBench(List.of(MetaStores.memory(MetaApi.HANDLE)), 10_000);
        assertEquals(1, scale.run(Progress.NONE).size());
        assertEquals(MemoryMeta.DESCRIPTION, scale.setups().get("memory"));
    }

    @Test
    void theDirScaleTableGivesTheFirstTargetsRatioToEachOther() {
        List<Result> results = List.of(result("ferrite", 10_000, 100), result("ferrite", 100_000, 80),
                result("memory", 10_000, 400), result("memory", 100_000, 400), result("posix", 10_000, 50));
        String[] lines = DirScaleBench.table(results, List.of("ferrite", "memory", "posix")).split("\n");
        assertEquals(List.of("target", "window", "creates/s", "vs", "first", "window", "vs", "memory", "vs", "posix"),
                List.of(lines[0].split(" +")));
        assertEquals(List.of("ferrite", "create@10k", "100", "1.00", "0.25", "2.00"), List.of(lines[1].split(" +")));
        assertEquals(List.of("ferrite", "create@100k", "80", "0.80", "0.20", "-"), List.of(lines[2].split(" +")));
        assertEquals(List.of("memory", "create@100k", "400", "1.00"), List.of(lines[4].split(" +")));
    }

    private static Result result(String target, long window, double rate) {
        Histogram h = Result.newHistogram();
        h.recordValue(1_000);
        return Result.of(DirScaleBench.WORKLOAD, DirScaleBench.phase(window), target, 1, rate, MetaBench.UNIT, h);
    }
}
