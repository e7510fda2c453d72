package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.ferrite.dir.Table;

class FerriteKvTest {
    private static final long MIB = 1 << 20;

    @Test
    void theLogHoldsAPassOfPutsOfValuesKeptInTheTree() {
        long keys = 100_000;
        long log = FerriteKv.logBytes(keys, 1024);
        // a 1 KiB put logs its value and a few hundred bytes: the log holds one put of every key
        assertTrue(log >= keys * (1024 + 64), "log of " + log + " bytes for " + keys + " keys of 1 KiB");
        assertEquals(0, log % MIB, "whole MiB");
    }

    @Test
    void defaultAndOutOfLineValuesKeepTwoHundredFiftySixBytesAKey() {
        assertEquals(300_000 * 256 / MIB + 1, FerriteKv.logBytes(300_000, KvKeys.VALUE) / MIB); // 73.2 MiB, rounded up
        assertEquals(64 * MIB, FerriteKv.logBytes(100_000, KvKeys.VALUE), "at least 64 MiB");
        assertEquals(64 * MIB, FerriteKv.logBytes(100_000, Table.MAX_INLINE_ENTRY), "a value kept out of line logs its stub");
        assertEquals(512 * MIB, FerriteKv.logBytes(10_000_000, 1024), "at most 512 MiB");
    }
}
