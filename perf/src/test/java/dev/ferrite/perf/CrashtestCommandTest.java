package dev.ferrite.perf;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code ferrite crashtest} from the command line: a short run with JSON, a replay whose saved image checks clean, usage errors. */
class CrashtestCommandTest extends CommandTest {
    @TempDir
    Path dir;

    @Test
    void aShortRunPrintsItsSummaryAndWritesJson() throws Exception {
        Path json = dir.resolve("crash.json");
        assertEquals(0, run("crashtest", "--workloads", "2", "--threads", "1", "--states", "1", "--json", json.toString()), out + " " + err);
        assertTrue(out.toString().contains("crashtest: 2 workloads, "), out.toString());
        assertTrue(out.toString().contains("states/s), 0 failures"), out.toString());
        String written = Files.readString(json);
        assertTrue(written.contains("\"workloads\": 2,") && written.contains("\"failures\": []"), written);
    }

    @Test
    void aReplayedStateSavesAnImageThatChecks() {
        Path image = dir.resolve("crashed.img");
        assertEquals(0, run("crashtest", "--replay", "6:2", "--save", image.toString()), out + " " + err);
        assertTrue(out.toString().contains("workload 6, state 2: passed"), out.toString());
        assertEquals(0, run("check", image.toString()), out + " " + err);
        assertTrue(out.toString().contains(": clean"), out.toString());
    }

    @Test
    void usageErrors() {
        assertEquals(2, run("crashtest", "--replay", "six"));
        assertTrue(err.toString().contains("expected ID:STATE or ID:STATE:SHAPE"), err.toString());
        assertEquals(2, run("crashtest", "--save", dir.resolve("x").toString()));
        assertTrue(err.toString().contains("--save needs --replay, --kill or --apps"), err.toString());
        assertEquals(2, run("crashtest", "--apps", "sqlite,mysql"));
        assertTrue(err.toString().contains("--apps takes a list of sqlite, sqlite-rollback, sqlite-wal, git"), err.toString());
        assertEquals(2, run("crashtest", "--json", dir.resolve("none/crash.json").toString()));
        assertTrue(err.toString().contains("does not exist"), err.toString());
    }
}
