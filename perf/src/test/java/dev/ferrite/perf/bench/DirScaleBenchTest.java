package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DirScaleBenchTest {
    @TempDir
    Path dir;

    /**
     * The warm-up is JitSettle's: a full pass on a store of its own, a tenth on a fresh one, then quarters
     * while the JIT is busy, and the wait; the measured store comes last, sized for the run. A single
     * untimed pass left C2 compiling through the first window.
     */
    @Test
    void theFirstWindowFollowsTheSettlingWarmUp() {
        List<Long> opened = new CopyOnWriteArrayList<>();
        MetaBench.Target memory = MetaStores.memory(MetaApi.HANDLE);
        MetaBench.Target counted = new MetaBench.Target(memory.label(), files -> {
            opened.add(files);
            return memory.open().apply(files);
        }, true);
        DirScaleBench bench = new DirScaleBench(List.of(counted), 10_000);
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(List.of("create@10k"), results.stream().map(Result::phase).toList());
        assertEquals(List.of(10_000L, 1_000L), opened.subList(0, 2), opened.toString());
        assertTrue(opened.subList(2, opened.size() - 1).stream().allMatch(n -> n == 2_500), opened.toString());
        assertEquals(10_000L, opened.getLast(), opened.toString());
        assertTrue(bench.jit().startsWith("warm-up of 10,000 operations, a tenth and "), bench.jit());
        assertEquals(List.of(), bench.contention(), "no counters for the ceiling");
    }

    /** Each window on Ferrite gets a line: the creating thread's time per create, split, and the engine's counters. */
    @Test
    void eachFerriteWindowSaysWhereTheCreatingThreadsTimeWent() {
        DirScaleBench bench = new DirScaleBench(List.of(MetaStores.ferrite(dir, 64L << 20, MetaApi.HANDLE)), 10_000);
        List<Result> results = bench.run(Progress.NONE);
        List<String> lines = bench.contention();
        assertEquals(results.size(), lines.size(), lines.toString());
        assertTrue(lines.getFirst().matches("ferrite create@10k: creating thread \\d+\\.\\d µs/op on a CPU, \\d+\\.\\d runnable, "
                + "\\d+\\.\\d off; log .* B/op .*"), lines.getFirst());
    }

    /**
     * The 10k window's tenth is 1,000 creates, a few milliseconds: it times 20,000, the big directory's
     * thousand and those of 19 directories of the same size grown beside it, which are gone before the
     * big one grows on.
     */
    @Test
    void aShortWindowIsTimedInDirectoriesOfItsSizeBesideTheBigOne() {
        assertEquals(19, DirScaleBench.copies(10_000, DirScaleBench.MIN_WINDOW_CREATES).size());
        assertEquals(1, DirScaleBench.copies(100_000, DirScaleBench.MIN_WINDOW_CREATES).size());
        assertEquals(List.of(), DirScaleBench.copies(1_000_000, DirScaleBench.MIN_WINDOW_CREATES));
        List<Map<String, Long>> stores = new CopyOnWriteArrayList<>();
        MetaBench.Target memory = MetaStores.memory(MetaApi.HANDLE);
        MetaBench.Target counted = new MetaBench.Target(memory.label(), files -> {
            Map<String, Long> net = new TreeMap<>();
            stores.add(net);
            return counting(memory.open().apply(files), net);
        }, true);
        List<Result> results = new DirScaleBench(List.of(counted), 20_000).run(Progress.NONE);
        assertEquals(List.of("create@10k", "create@20k"), results.stream().map(Result::phase).toList());
        assertEquals(List.of(20_000L, 20_000L), results.stream().map(Result::n).toList());
        // the measured store's directories at the end and their entries: the big one only
        assertEquals(Map.of("big", 20_000L), stores.getLast());
    }

    /** {@code store}, keeping in {@code net} each directory's entry count until it is removed. */
    private static MetaStore counting(MetaStore store, Map<String, Long> net) {
        return new ForwardingMetaStore(store) {
            @Override
            public Session session() {
                return new ForwardingSession(inner.session()) {
                    @Override
                    public void mkdir(String dir) {
                        inner.mkdir(dir);
                        net.put(dir, 0L);
                    }

                    @Override
                    public void create(String dir, String name) {
                        inner.create(dir, name);
                        net.merge(dir, 1L, Long::sum);
                    }

                    @Override
                    public void unlink(String dir, String name) {
                        inner.unlink(dir, name);
                        net.merge(dir, -1L, Long::sum);
                    }

                    @Override
                    public void rmdir(String dir) {
                        inner.rmdir(dir);
                        net.remove(dir);
                    }
                };
            }
        };
    }
}
