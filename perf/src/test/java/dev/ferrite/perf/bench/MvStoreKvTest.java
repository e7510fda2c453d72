package dev.ferrite.perf.bench;

import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertTrue;

class MvStoreKvTest extends DurableKvContract {
    @Override
    KvTarget target() {
        return KvTarget.MVSTORE;
    }

    /** MVStore locks each key a transaction writes: crossing batches deadlock, and H2's victim is run again. */
    @Test
    void aBatchThatDeadlocksIsRolledBackAndRunAgain(@TempDir Path dir) throws InterruptedException {
        try (KvStore store = open(dir)) {
            crossBatches(store);
            assertTrue(store.retries() >= 1, "retries: " + store.retries());
        }
    }
}
