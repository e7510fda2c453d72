package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;

class HostMemoryTest {
    @Test
    void aPhaseWarmsTwiceItsValuesAndSomeUpToAGibibyte() {
        assertEquals((64L << 20) + 2_000, HostMemory.forValues(1_000));
        assertEquals((512L << 20) + (64L << 20), HostMemory.forValues(256L << 20));
        assertEquals(HostMemory.MAX_WARM, HostMemory.forValues(1L << 30));
    }

    @Test
    void warmingTakesEveryPageAndGivesItBack() throws IOException {
        long faults = Contention.processMinorFaults(), rss = residentKiB();
        HostMemory.warm(64L << 20);
        // populated: at least a fault per huge page (512 per one where the kernel had none)
        assertTrue(Contention.processMinorFaults() - faults >= 32, "64 MiB were populated");
        assertTrue(residentKiB() - rss < 16 << 10, "and given back: " + (residentKiB() - rss) + " KiB more resident");
    }

    private static long residentKiB() throws IOException {
        return Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("VmRSS:"))
                .mapToLong(l -> Long.parseLong(l.replaceAll("[^0-9]", ""))).findFirst().orElseThrow();
    }
}
