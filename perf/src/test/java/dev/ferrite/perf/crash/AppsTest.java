package dev.ferrite.perf.crash;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.io.testkit.RecordingDevice.CrashState;
import dev.ferrite.io.testkit.TestSeed;
import dev.ferrite.perf.bench.Progress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Application crash consistency at a small size: sqlite3 in both journal modes and git on a FUSE mount over a
 * recording, every flush-epoch prefix and one more state per epoch judged by the programs' own checkers;
 * and the checkers report a state that lacks what was acknowledged. Skipped where FUSE cannot mount or the
 * programs are missing.
 */
@ExtendWith(TestSeed.class)
class AppsTest {
    private static final long SEED = TestSeed.get(20);

    @TempDir
    Path scratch;

    private static void assumeApps(String... names) {
        String missing = Apps.unavailable(List.of(names));
        assumeTrue(missing == null, () -> "application crash tests skipped: " + missing);
    }

    private List<Apps.Result> run(String app, int steps) throws Exception {
        List<Apps.Failure> failures = new ArrayList<>();
        List<Apps.Result> results = Apps.run(new Apps.Options(List.of(app), SEED, steps, 1, null), scratch, failures::add, Progress.NONE);
        assertEquals(List.of(), failures, "seed " + SEED);
        return results;
    }

    @Test
    void sqliteInBothJournalModesKeepsEveryAcknowledgedTransaction() throws Exception {
        assumeApps("sqlite");
        List<Apps.Result> results = run("sqlite", 3);
        assertEquals(List.of("sqlite-rollback", "sqlite-wal"), results.stream().map(Apps.Result::app).toList());
        for (Apps.Result r : results) {
            assertEquals(4, r.acknowledged(), r.toString());
            assertTrue(r.flushes() >= 4 && r.states() > r.flushes(), r.toString()); // every transaction synced at least once
        }
    }

    @Test
    void gitKeepsEveryAcknowledgedCommit() throws Exception {
        assumeApps("git");
        Apps.Result r = run("git", 2).getFirst();
        assertEquals(3, r.acknowledged(), r.toString());
        assertTrue(r.states() > r.flushes(), r.toString());
    }

    /** A step is durable from the state holding the last flush before its acknowledgement; rollback mode's one acknowledgement later. */
    @Test
    void aStepIsDurableFromTheFlushBeforeItsAcknowledgement() {
        int[] flushes = {5, 10}, acks = {7, 12, 13};
        Apps.Run wal = new Apps.Run(new SqliteApp(true, 0, 2), null, List.of(), flushes, acks);
        Apps.Run rollback = new Apps.Run(new SqliteApp(false, 0, 2), null, List.of(), flushes, acks);
        assertEquals(List.of(0, 1, 1, 3), List.of(wal.durable(5), wal.durable(6), wal.durable(10), wal.durable(11)));
        assertEquals(List.of(0, 0, 2, 2), List.of(rollback.durable(5), rollback.durable(6), rollback.durable(11), rollback.durable(20)));
    }

    /** Judged as if more were acknowledged than was: the checkers name what is missing. */
    @Test
    void theCheckersReportWhatAnAcknowledgedStateLacks() throws Exception {
        assumeApps("sqlite-wal", "git");
        for (Apps.App app : Apps.apps(List.of("sqlite-wal", "git"), SEED, 2)) {
            Apps.Run run = Apps.record(app, scratch);
            List<CrashState> states = CrashStates.of(run.events(), run.flushes(), SEED, 0);
            try (CrashStates.Images images = new CrashStates.Images()) {
                images.start(run.base(), run.events());
                CrashState base = states.getFirst(), all = new CrashState(run.events().size());
                assertEquals(0, base.prefix());
                String missing = Apps.judge(app, images.image(base), 1, scratch.resolve("state"));
                assertNotNull(missing, app.name());
                assertTrue(missing.contains(app.name().equals("git") ? "the repository is gone" : "table t is missing"), missing);
                assertNull(Apps.judge(app, images.image(all), 3, scratch.resolve("state")), app.name() + ": the whole recording holds every step");
                if (app instanceof SqliteApp) { // a row past the last one written: lost
                    String lost = Apps.judge(app, images.image(all), 4, scratch.resolve("state"));
                    assertNotNull(lost);
                    assertTrue(lost.contains("rows 3..3 are lost"), lost);
                }
            } finally {
                run.base().close();
            }
        }
    }
}
