package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class KvBenchTest {
    private static final KvBench.Plan EVERY = new KvBench.Plan(EnumSet.allOf(KvBench.Family.class), List.of(64, 1024), 0.05);
    private static final List<String> NAMES = List.of("insert", "get", "scan", "batch1", "batch100", "batch1000",
            "ycsb-a", "ycsb-b", "ycsb-c", "ycsb-e", "delete");

    private static List<String> phases(List<Result> results, String target, int threads) {
        return results.stream().filter(r -> r.target().equals(target) && r.threads() == threads).map(Result::phase).toList();
    }

    @Test
    void everyFamilyRunsAtEveryValueSizeAndThreadCountWithItsChecks(@TempDir Path dir) {
        assertEquals(NAMES, KvBench.phases(EVERY));
        KvBench bench = new KvBench(dir, List.of(KvTarget.MEMORY), 3_000, List.of(1, 2), 16L << 20, 0, 0, EVERY);
        List<Result> results = bench.run(Progress.NONE);

        List<String> expected = new ArrayList<>(NAMES);
        NAMES.forEach(p -> expected.add(p + "-1KiB"));
        for (int threads : List.of(1, 2)) {
            assertEquals(expected, phases(results, "memory", threads), "x" + threads);
        }
        for (Result r : results) {
            assertTrue(r.rate() > 0 && r.n() > 0, r.toString());
            if (r.phase().startsWith("batch")) {
                int size = Integer.parseInt(r.phase().replaceAll("batch(\\d+).*", "$1"));
                // 3,000 puts, a latency sample per batch: each thread's 1,500 (x2) or 3,000 in batches of the size
                long batches = (1_500 + size - 1) / size * 2;
                assertEquals(r.threads() == 2 ? batches : (3_000 + size - 1) / size, r.n(), r.toString());
            }
            if (r.phase().equals("insert") || r.phase().equals("get")) {
                assertEquals(3_000, r.n(), r.toString());
            }
        }
        assertEquals(List.of(), bench.skipped());
        assertEquals(List.of(), bench.notes(), "3,000 1 KiB values fit the budget");
    }

    @Test
    void getsGoOnPassAfterPassForTheScanTimeAsScansDo(@TempDir Path dir) {
        KvBench.Plan plan = new KvBench.Plan(EnumSet.of(KvBench.Family.BASIC), List.of(64), 0);
        KvBench bench = new KvBench(dir, List.of(KvTarget.MEMORY), 1_000, List.of(1, 2), 16L << 20, 0, 0.2, plan);
        for (Result r : bench.run(Progress.NONE)) {
            if (r.phase().equals("get")) { // whole passes over each thread's share, checked, more than one in 0.2 s
                assertTrue(r.n() > 1_000 && r.n() % (1_000 / r.threads()) == 0, r.toString());
            }
        }
    }

    @Test
    void eachMeasuredLoadStartsOnMemoryJustTouchedAndFreed(@TempDir Path dir) {
        KvBench.Plan plan = new KvBench.Plan(EnumSet.of(KvBench.Family.BASIC), List.of(64, 1024), 0);
        KvBench bench = new KvBench(dir, List.of(KvTarget.MEMORY), 1_000, List.of(1, 2), 16L << 20, 0, 0, plan);
        List<Long> warmed = new ArrayList<>();
        bench.beforeLoad = warmed::add;
        bench.run(Progress.NONE);
        long small = HostMemory.forValues(1_000 * 64L), large = HostMemory.forValues(1_000 * 1024L);
        // not the warm-up's loads (several passes at each size): the measured one at each thread count and value size
        assertEquals(List.of(small, large, small, large), warmed);
    }

    @Test
    void largeValuesRunOnFewerKeysAndSaySo(@TempDir Path dir) {
        KvBench.Plan plan = new KvBench.Plan(EnumSet.of(KvBench.Family.BASIC), List.of(1 << 20), 0);
        KvBench bench = new KvBench(dir, List.of(KvTarget.MEMORY), 1_000, List.of(2), 16L << 20, 0, 0, plan);
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(List.of("insert-1MiB", "get-1MiB", "scan-1MiB", "delete-1MiB"), phases(results, "memory", 2));
        assertEquals(256, results.getFirst().n(), "256 MiB of 1 MiB values");
        assertEquals(List.of("1MiB values: 256 keys, not 1,000, to keep at most 256 MiB of values in a store"), bench.notes());
        assertTrue(bench.jit().startsWith("the quarters at 2 threads: warm-up of 4 passes of 256 operations, a tenth and "),
                "1,000 warm-up keys (as many as the run) at most 256 a pass: " + bench.jit());
        assertEquals(256, KvBench.keysFor(1_000_000, 1 << 20));
        assertEquals(1_000_000, KvBench.keysFor(1_000_000, 64));
    }

    /**
     * Every store's warm-up makes at least 4,096 operations of each phase where a value size leaves fewer
     * keys (1 MiB: 16 passes of 256), or the run's warm-up keys if fewer; one pass where they fit.
     */
    @Test
    void theWarmUpRepeatsFullPassesWhereLargeValuesLeaveFewKeys() {
        assertEquals(16, KvBench.warmUpPasses(30_000, KvBench.keysFor(30_000, 1 << 20)));
        assertEquals(1, KvBench.warmUpPasses(30_000, KvBench.keysFor(30_000, 16 << 10)));
        assertEquals(1, KvBench.warmUpPasses(30_000, KvBench.keysFor(30_000, 64)));
        assertEquals(2, KvBench.warmUpPasses(300, KvBench.keysFor(300, 1 << 20)), "300 warm-up keys: 2 passes of 256");
        assertEquals(1, KvBench.warmUpPasses(100, KvBench.keysFor(100, 1 << 20)));
    }

    /** Values past a Ferrite B-tree cell go out of line (blobs): every size runs on every store, nothing skipped. */
    @Test
    void valuesPastATreeCellRunOnFerriteToo(@TempDir Path dir) {
        KvBench.Plan plan = new KvBench.Plan(EnumSet.of(KvBench.Family.BASIC, KvBench.Family.BATCH),
                List.of(960, 4096), 0);
        KvBench bench = new KvBench(dir, List.of(KvTarget.FERRITE, KvTarget.MEMORY), 1_000, List.of(1), 16L << 20, 0, 0, plan);
        List<Result> results = bench.run(Progress.NONE);
        List<String> ran = List.of("insert", "get", "scan", "batch1", "batch100", "batch1000", "delete");
        List<String> both = new java.util.ArrayList<>(ran.stream().map(p -> p + "-960B").toList());
        both.addAll(ran.stream().map(p -> p + "-4KiB").toList());
        assertEquals(both, phases(results, "ferrite", 1));
        assertEquals(both, phases(results, "memory", 1));
        assertEquals(List.of(), bench.skipped());
        // each measured Ferrite phase says where its workers' time went (Linux keeps schedstats)
        assertEquals(both.size(), bench.contention().size());
        for (String line : bench.contention()) {
            assertTrue(line.matches(".*; workers on a CPU [0-9.]+ µs/op, queued for one [0-9.]+, blocked [0-9.]+; sync [0-9.]+ ms"), line);
        }
    }

    @Test
    void aLoadCutShortByTheTimeLimitSkipsThePhasesThatNeedEveryKey(@TempDir Path dir) {
        KvBench.Plan plan = new KvBench.Plan(EnumSet.of(KvBench.Family.BASIC, KvBench.Family.BATCH, KvBench.Family.YCSB),
                List.of(64), 1);
        KvBench bench = new KvBench(dir, List.of(KvTarget.MEMORY), 100_000_000, List.of(1), 16L << 20, 0.1, 0, plan);
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(List.of("insert", "get", "scan", "delete"), phases(results, "memory", 1));
        assertTrue(results.getFirst().n() < 100_000_000, results.getFirst().toString());
        assertEquals(List.of("batch1", "batch100", "batch1000", "ycsb-a", "ycsb-b", "ycsb-c", "ycsb-e"),
                bench.skipped().stream().map(Skipped::phase).toList());
        assertTrue(bench.skipped().stream().allMatch(k -> k.reason().equals("the load was cut short by the time limit")),
                bench.skipped().toString());
    }

    /**
     * A batch session's puts stay invisible until its commit, then all show: one atomic write; a batch
     * closed before its commit leaves nothing.
     */
    @ParameterizedTest
    @EnumSource(value = KvTarget.class, names = {"FERRITE", "ROCKSDB", "LMDB", "XODUS", "MVSTORE"})
    void aBatchIsOneAtomicCommit(KvTarget target, @TempDir Path dir) {
        try (KvStore store = target.open(dir, 100, 64, 16L << 20)) {
            try (KvStore.Session batch = KvStoreContract.batching(store)) {
                KvStoreContract.putAll(batch, 0, 0, 1, 2);
                assertEquals(-1, KvStoreContract.words(store, 1)[0], "a put before its batch's commit");
                batch.commit();
            }
            assertArrayEquals(new long[] {0, 1, 2}, KvStoreContract.words(store, 3));
            try (KvStore.Session batch = KvStoreContract.batching(store)) {
                KvStoreContract.putAll(batch, 10, 0, 1, 3);
            }
            assertArrayEquals(new long[] {0, 1, 2, -1}, KvStoreContract.words(store, 4), "a batch closed uncommitted");
        }
    }

    /** Batches whose keys cross on two threads serialize: see {@link KvStoreContract#crossBatches}. */
    @ParameterizedTest
    @EnumSource(value = KvTarget.class, names = {"FERRITE", "ROCKSDB", "LMDB", "XODUS", "MVSTORE"})
    void crossingBatchesSerialize(KvTarget target, @TempDir Path dir) throws InterruptedException {
        try (KvStore store = target.open(dir, 100, 64, 16L << 20)) {
            KvStoreContract.crossBatches(store);
        }
    }

    @Test
    void storesWithoutMultiKeyTransactionsHaveNoBatchSession(@TempDir Path dir) {
        try (KvStore ferrite = KvTarget.FERRITE.open(dir, 100, 64, 16L << 20); KvStore memory = new MemoryKv()) {
            assertNull(memory.batchSession());
        }
    }

    @Test
    void valuesOfAnyLengthCarryTheirWordAndVersionsDiffer() {
        byte[] a = KvKeys.newValue(13), b = KvKeys.newValue(13);
        KvKeys.value(7, a);
        KvKeys.value(7, 0, b);
        assertEquals(List.of(7L, 7L), List.of(KvKeys.word(a), KvKeys.word(b)));
        assertTrue(Arrays.equals(a, b), "version 0 is the plain value");
        KvKeys.value(7, 1, b);
        assertEquals(7, KvKeys.word(b));
        assertFalse(Arrays.equals(a, b), "another version, other bytes");
        byte[] big = KvKeys.newValue(1 << 20), big2 = KvKeys.newValue(1 << 20);
        KvKeys.value(9, big);
        KvKeys.value(9, big2);
        assertTrue(Arrays.equals(big, big2), "the filler is the same in every buffer");
        assertThrows(IllegalArgumentException.class, () -> KvKeys.newValue(7));
    }

    @Test
    void aPlanRefusesWhatItCannotRun() {
        assertThrows(IllegalArgumentException.class, () -> new KvBench.Plan(EnumSet.of(KvBench.Family.YCSB), List.of(64), 0));
        assertThrows(IllegalArgumentException.class, () -> new KvBench.Plan(EnumSet.of(KvBench.Family.BASIC), List.of(4), 0));
        assertThrows(IllegalArgumentException.class,
                () -> new KvBench.Plan(EnumSet.of(KvBench.Family.BASIC), List.of((1 << 20) + 1), 0));
        assertThrows(IllegalArgumentException.class, () -> new KvBench.Plan(EnumSet.of(KvBench.Family.BASIC), List.of(64, 64), 0));
        assertThrows(IllegalArgumentException.class, () -> new KvBench.Plan(EnumSet.noneOf(KvBench.Family.class), List.of(64), 0));
    }

    @Test
    void aPhaseTimerStartsAfterTheStoresCountersAreRead() {
        long[] read = new long[1];
        KvStore slow = (KvStore) java.lang.reflect.Proxy.newProxyInstance(KvStore.class.getClassLoader(), new Class<?>[] {KvStore.class},
                (proxy, method, args) -> switch (method.getName()) {
                    case "counters" -> {
                        Thread.sleep(20); // as Ferrite's read of /proc/self/task: milliseconds
                        read[0] = System.nanoTime();
                        yield null;
                    }
                    case "retries" -> 0L;
                    default -> throw new UnsupportedOperationException(method.getName());
                });
        KvBench.Metered m = KvBench.Metered.start(slow, () -> new PhaseTimer("delete", "slow", 1, Progress.NONE));
        assertTrue(m.timer().start() - read[0] >= 0, "the counters' read is not the phase's time");
    }
}
