package dev.ferrite.perf;

import java.io.PrintWriter;
import java.io.StringWriter;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ProgressLineTest {
    private static final long SECOND = 1_000_000_000L;

    @Test
    void aTerminalGetsOneLineRewrittenInPlace() {
        StringWriter out = new StringWriter();
        ProgressLine p = new ProgressLine(new PrintWriter(out), true);
        p.update("create", "ferrite", 1000, SECOND);
        p.update("create", "ferrite", 2000, 2 * SECOND);
        p.done();
        assertTrue(out.toString().startsWith("\rcreate  ferrite  1,000 ops  1,000 ops/s  1 s"), out.toString());
        assertFalse(out.toString().contains("\n"));
    }

    @Test
    void aLogGetsALineOfItsOwnEveryTenSeconds() {
        StringWriter out = new StringWriter();
        ProgressLine p = new ProgressLine(new PrintWriter(out), false);
        for (int s = 1; s <= 25; s++) {
            p.update("unlink", "ferrite", s * 100L, s * SECOND);
        }
        p.done();
        p.update("walk", "ferrite", 5000, 10 * SECOND); // a new phase counts from its own start
        String[] lines = out.toString().split("\n");
        assertEquals(3, lines.length, out.toString());
        assertEquals("unlink  ferrite  1,000 ops  100 ops/s  10 s", lines[0]);
        assertEquals("unlink  ferrite  2,000 ops  100 ops/s  20 s", lines[1]);
        assertEquals("walk  ferrite  5,000 ops  500 ops/s  10 s", lines[2]);
        assertFalse(out.toString().contains("\r"));
    }

    @Test
    void aCountOfSomethingElseSaysWhat() {
        StringWriter out = new StringWriter();
        ProgressLine p = new ProgressLine(new PrintWriter(out), false);
        p.update("crashtest", "7 workloads, 0 failures", 2500, "states", 10 * SECOND);
        assertEquals("crashtest  7 workloads, 0 failures  2,500 states  250 states/s  10 s", out.toString().strip());
    }
}
