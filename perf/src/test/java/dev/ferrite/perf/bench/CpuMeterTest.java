package dev.ferrite.perf.bench;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CpuMeterTest {
    @Test
    void busyShareOfAllCpusTimesTheirCount() {
        CpuMeter.Sample a = new CpuMeter.Sample(1000, 4000), b = new CpuMeter.Sample(1600, 5000);
        assertEquals(2.4, CpuMeter.busyCpus(a, b, 4), 1e-9, "600 of 1000 jiffies busy on 4 CPUs");
        assertTrue(Double.isNaN(CpuMeter.busyCpus(a, a, 4)), "no time passed");
        assertTrue(Double.isNaN(CpuMeter.busyCpus(new CpuMeter.Sample(-1, -1), b, 4)), "unknown");
    }

    @Test
    void spinningOneThreadShowsUpOnThisMachine() {
        CpuMeter.Sample s = CpuMeter.sample();
        assertTrue(s.total() > 0 && s.busy() > 0, "/proc/stat: " + s);
        long end = System.nanoTime() + 300_000_000L;
        long x = 0;
        while (System.nanoTime() < end) {
            x += x * 31 + 7;
        }
        double busy = CpuMeter.busyCpusSince(s);
        assertTrue(busy >= 0.5 && busy <= Runtime.getRuntime().availableProcessors() + 0.01, busy + " CPUs (" + x + ")");
    }
}
