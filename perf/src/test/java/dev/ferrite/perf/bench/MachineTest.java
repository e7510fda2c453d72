package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class MachineTest {
    @Test
    void namesTheCollectorAndHeapOfThisJvm() {
        assertNotEquals("unknown", Machine.collector());
        String jvm = Machine.jvm();
        assertTrue(jvm.startsWith(Machine.collector() + ", heap "), jvm);
        assertTrue(Machine.collect(null).jdk().endsWith(jvm), "the JSON's jdk names it too");
    }
}
