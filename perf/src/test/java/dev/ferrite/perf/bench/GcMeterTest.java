package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class GcMeterTest {
    @Test
    void countsTheCollectionsOfAPhase() {
        GcMeter.Pauses none = GcMeter.start().pauses();
        assertTrue(none.count() >= 0 && none.totalMillis() >= 0, none.toString());
        GcMeter m = GcMeter.start();
        System.gc(); // a full collection: a pause on every collector the tests run with
        System.gc();
        GcMeter.Pauses p = m.pauses();
        assertTrue(p.count() >= 2, "two collections requested, " + p);
    }
}
