package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MetaBenchTest {
    @TempDir
    Path dir;

    private MetaBench.Target posix(String label) {
        return MetaStores.posix(dir, label, MetaApi.HANDLE);
    }

    @ParameterizedTest
    @EnumSource(MetaApi.class)
    void everyPhaseOnEveryLayoutAndThreadCount(MetaApi api) {
        MetaBench bench = new MetaBench(List.of(MetaStores.posix(dir, "posix", api)), 1_000, List.of(1, 2),
                List.of(MetaBench.Layout.PRIVATE, MetaBench.Layout.SHARED));
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(2 * 2 * 3, results.size());
        for (Result r : results) {
            assertEquals(1_000, r.n(), r.toString());
            assertTrue(r.rate() > 0, r.toString());
        }
        assertEquals(List.of("create-private", "walk-private", "unlink-private"),
                results.subList(0, 3).stream().map(Result::phase).toList());
        assertEquals(4, bench.notes().size());
        assertEquals(List.of(), bench.contention(), "no counters for a kernel file system");
    }

    @ParameterizedTest
    @EnumSource(MetaApi.class)
    void ferriteVolume(MetaApi api) {
        MetaBench bench = new MetaBench(List.of(MetaStores.ferrite(dir, 64L << 20, api)), 1_000,
                List.of(1, 2), List.of(MetaBench.Layout.PRIVATE, MetaBench.Layout.SHARED));
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(2 * 2 * 3, results.size());
        assertTrue(results.stream().allMatch(r -> r.n() == 1_000), results.toString());
        assertTrue(bench.notes().stream().anyMatch(n -> n.startsWith("ferrite") && n.contains("closed and opened again")),
                bench.notes().toString());
        List<String> contention = bench.contention();
        assertEquals(results.size(), contention.size(), "a contention line per measured phase: " + contention);
        assertTrue(contention.getFirst().startsWith(api.targetLabel("ferrite") + " create private: log ") && contention.getFirst().contains(" B/op"),
                contention.getFirst());
    }

    @Test
    void watchedStallsGiveALinePerMeasuredPhase() {
        MetaBench bench = new MetaBench(List.of(MetaStores.posix(dir, "posix", MetaApi.HANDLE)), 500, List.of(2),
                List.of(MetaBench.Layout.PRIVATE));
        bench.watchStalls(1); // every operation is slow: each is split, up to Stalls.KEPT per thread
        List<Result> results = bench.run(Progress.NONE);
        List<String> stalls = bench.stalls();
        assertEquals(results.size(), stalls.size(), "a line per measured phase: " + stalls);
        assertTrue(stalls.getFirst().startsWith("posix create private x2: 500 of 500 operations took 0.0 ms or more"),
                stalls.getFirst());
    }

    @Test
    void aWalkThatMissesAnEntryFailsTheRun() {
        MetaBench.Target lossy = new MetaBench.Target("lossy", files -> new Lossy(PosixMeta.in(dir, MetaApi.HANDLE)), false);
        MetaBench bench = new MetaBench(List.of(lossy), 100, List.of(1), List.of(MetaBench.Layout.PRIVATE));
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> bench.run(Progress.NONE));
        assertTrue(e.getMessage().matches("(?s).*the walk of d0 listed (\\d+) and stat'ed \\1 entries, expected .*"), e.getMessage());
    }

    @Test
    void dirScaleReportsAWindowPerDecade() {
        assertEquals(List.of(10_000L, 100_000L, 250_000L), DirScaleBench.windowEnds(250_000));
        assertEquals("create@10M", DirScaleBench.phase(10_000_000));
        // a window of a thousand, as the default's 20,000 would take 200,000 files of the host's
        List<Result> results = new DirScaleBench(List.of(posix("posix")), 10_000, 1_000).run(Progress.NONE);
        assertEquals(1, results.size());
        assertEquals("create@10k", results.getFirst().phase());
        assertEquals(1_000, results.getFirst().n());
    }

    /** Hides the first entry of every listing. */
    private static final class Lossy extends ForwardingMetaStore {
        Lossy(MetaStore inner) {
            super(inner);
        }

        @Override
        public Session session() {
            return new ForwardingSession(inner.session()) {
                @Override
                public long list(String d, Consumer<String> names) {
                    boolean[] first = {true};
                    return inner.list(d, n -> {
                        if (!first[0]) {
                            names.accept(n);
                        }
                        first[0] = false;
                    }) - 1;
                }
            };
        }

        @Override
        public String coldCache() {
            return "warm";
        }

        @Override
        public void check() {
        }
    }
}
