package dev.ferrite.perf.bench;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MemoryKvTest extends KvStoreContract {
    @Override
    KvStore open(Path dir) {
        return new MemoryKv();
    }

    @Test
    void theWorkloadRunsAndChecksOnTheCeiling(@TempDir Path dir) {
        KvBench bench = new KvBench(dir, List.of(KvTarget.FERRITE, KvTarget.MEMORY), 3_000, List.of(1, 2),
                16L << 20, 0, 0, KvBench.Plan.BASIC);
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(KvBench.PHASES.size() * 2 * 2, results.size());
        assertTrue(results.stream().filter(r -> r.target().equals("memory")).allMatch(r -> r.n() == 3_000 && r.rate() > 0),
                results.toString());
        assertEquals(MemoryKv.DESCRIPTION, bench.setups().get(KvTarget.MEMORY));
    }
}
