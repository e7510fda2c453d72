package dev.ferrite.perf.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A peer of {@code bench kv} that keeps its data in files: the workload runs on it, and sync() reaches the files. */
abstract class DurableKvContract extends KvStoreContract {
    static final int KEYS = 3_000;

    abstract KvTarget target();

    @Override
    KvStore open(Path dir) {
        return target().open(dir, KEYS, KvKeys.VALUE, 16L << 20);
    }

    /**
     * A copy of the store's files taken right after {@link KvStore#sync()}, the files a crashed process
     * leaves, opens with every write the phase made (the fsync itself, against a power cut, no test here
     * can tell).
     */
    @Test
    void whatSyncMadeDurableIsInTheFiles(@TempDir Path dir) throws IOException {
        Path live = Files.createDirectory(dir.resolve("live"));
        Path copy = Files.createDirectory(dir.resolve("copy"));
        byte[] key = new byte[KvKeys.KEY_MAX];
        byte[] value = new byte[KvKeys.VALUE];
        try (KvStore store = open(live)) {
            try (KvStore.Session s = store.session()) {
                for (int i = 0; i < KEYS; i++) {
                    KvKeys.value(i, value);
                    s.put(key, KvKeys.key(i, key), value);
                    if ((i + 1) % store.writeBatch() == 0) {
                        s.commit();
                    }
                }
                s.commit();
                s.delete(key, KvKeys.key(7, key));
                s.commit();
            }
            store.sync();
            try (Stream<Path> files = Files.list(live)) {
                files.forEach(f -> {
                    try {
                        Files.copy(f, copy.resolve(f.getFileName()));
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                });
            }
        }
        try (KvStore store = open(copy); KvStore.Session s = store.session()) {
            for (int i = 0; i < KEYS; i++) {
                int length = s.get(key, KvKeys.key(i, key), value);
                if (i == 7) {
                    assertEquals(-1, length, "the delete is in the copy too");
                } else {
                    assertEquals(KvKeys.VALUE, length, "key #" + i);
                    assertArrayEquals(value(i), value, "key #" + i);
                }
            }
            assertEquals(KEYS - 1, scan(s, null, null).size());
        }
    }

    @Test
    void theWorkloadRunsAndChecks(@TempDir Path dir) {
        KvBench bench = new KvBench(dir, List.of(target()), KEYS, List.of(1, 2), 16L << 20, 0, 0, KvBench.Plan.BASIC);
        List<Result> results = bench.run(Progress.NONE);
        assertEquals(KvBench.PHASES.size() * 2, results.size(), results.toString());
        assertTrue(results.stream().allMatch(r -> r.target().equals(target().label()) && r.n() == KEYS && r.rate() > 0),
                results.toString());
        assertTrue(bench.setups().get(target()).contains("at phase end"), bench.setups().toString());
    }
}
