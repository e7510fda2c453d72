package dev.ferrite.perf.bench;

import java.lang.foreign.Arena;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code bench journal}'s logic: the device's forced-commit baseline shares its flushes between
 * concurrent committers (group commit, as a database's log does), and a whole run gives every phase on
 * both sides.
 */
class JournalBenchTest {
    private static final long SIZE = 128L << 20;

    /** A memory device that counts its flushes, each taking a little time as a real one does. */
    private static final class CountingDevice extends ForwardingDevice {
        final AtomicLong flushes = new AtomicLong();

        CountingDevice() {
            super(MemoryDevice.create(64, 4096));
        }

        @Override
        public void flush() {
            flushes.incrementAndGet();
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Test
    void theDeviceBaselineSharesFlushesBetweenConcurrentCommitters(@TempDir Path dir) {
        JournalBench bench = new JournalBench(dir.resolve("unused"), SIZE, 0.3, List.of(1, 8));
        for (int threads : new int[] {1, 8}) {
            try (CountingDevice device = new CountingDevice(); Arena arena = Arena.ofShared()) {
                Result r = bench.groupCommits(device, threads, arena, Progress.NONE, "");
                long commits = r.n();
                assertTrue(commits > 0);
                if (threads == 1) {
                    assertEquals(commits, device.flushes.get(), "one committer: a flush each");
                } else {
                    assertTrue(device.flushes.get() < commits / 2, threads + " committers share flushes: "
                            + device.flushes.get() + " flushes for " + commits + " commits");
                }
            }
        }
    }

    @Test
    void forcedCommitsAlternateBetweenTheDeviceAndTheJournal(@TempDir Path dir) {
        // laps of a second, each reported once, at its end, with its round and side
        List<String> laps = new java.util.concurrent.CopyOnWriteArrayList<>();
        Progress recording = new Progress() {
            @Override
            public void update(String phase, String target, long ops, long elapsedNanos) {
                if (phase.startsWith("round ") && phase.contains(JournalBench.FORCED_COMMIT)) {
                    laps.add(phase + " " + target);
                }
            }

            @Override
            public void done() {
            }
        };
        List<Result> results = new JournalBench(dir.resolve("journal.dev"), SIZE, 2, List.of(1)).run(recording);
        assertEquals(List.of("round 1/2 forced-commit x1 device", "round 1/2 forced-commit x1 ferrite",
                "round 2/2 forced-commit x1 ferrite", "round 2/2 forced-commit x1 device"), laps,
                "each side's time is split into laps that take turns, the side that starts alternating");
        assertEquals(5, results.size(), results.toString());
    }

    @Test
    void aRunMeasuresEveryPhaseOnBothSides(@TempDir Path dir) {
        List<Result> results = new JournalBench(dir.resolve("journal.dev"), SIZE, 0.2, List.of(1, 2)).run(Progress.NONE);
        for (int threads : new int[] {1, 2}) {
            for (String target : new String[] {JournalBench.BASELINE, "ferrite"}) {
                assertTrue(results.stream().anyMatch(r -> r.phase().equals(JournalBench.FORCED_COMMIT) && r.threads() == threads
                        && r.target().equals(target) && r.rate() > 0 && r.unit().equals("commits/s")), threads + " " + target + ": " + results);
            }
        }
        for (String target : new String[] {JournalBench.BASELINE, JournalBench.FLUSHED, "ferrite"}) {
            assertTrue(results.stream().anyMatch(r -> r.phase().equals(JournalBench.LOG_WRITE) && r.target().equals(target)
                    && r.rate() > 0 && r.unit().equals("MB/s")), target + ": " + results);
        }
        assertEquals(7, results.size(), results.toString());
    }

    /** The flushed baseline flushes after the journal's mean checkpoint, in whole 1 MiB writes, never after none. */
    @Test
    void theFlushedBaselineFlushesAfterTheMeanCheckpoint() {
        assertEquals(1 << 20, JournalBench.flushInterval(0, 0), "before any checkpoint: a flush per write");
        assertEquals(1 << 20, JournalBench.flushInterval(10, 10 * 4096), "small checkpoints: still a whole write");
        assertEquals(36L << 20, JournalBench.flushInterval(112, 112 * 37_500_000L), "37.5 MB (35.8 MiB) ones: 36 MiB");
        assertEquals(2L << 20, JournalBench.flushInterval(3, 3 * (3L << 19)), "1.5 MiB rounds to 2");
    }
}
