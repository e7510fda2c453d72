package dev.ferrite.perf.crash;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;

import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Child JVMs SIGKILLed over rounds on one volume file: every acknowledged fact holds after each; a fact never made is reported. */
@ExtendWith(TestSeed.class)
class KillsTest {
    private static final long SEED = TestSeed.get(4);

    @TempDir
    Path dir;

    @Test
    void killedChildrenLoseNothingTheyAcknowledged() throws Exception {
        Path image = dir.resolve("kill.img");
        StringWriter log = new StringWriter();
        Kills.Summary s = Kills.run(new Kills.Options(SEED, 4, image), new PrintWriter(log));
        assertNull(s.failure(), s + "\n" + log);
        assertEquals(4, s.rounds(), log.toString());
        assertTrue(s.facts() > 0, "no child acknowledged anything: " + s + "\n" + log);
        String wrong = Kills.verify(image, List.of("file /r1/never 10 0"));
        assertNotNull(wrong, "a file no child made passed as acknowledged");
        assertTrue(wrong.contains("acknowledged \"file /r1/never 10 0\", but opening it failed"), wrong);
        wrong = Kills.verify(image, List.of("counter r1/counter 1000000"));
        assertNotNull(wrong, "a counter no child reached passed as acknowledged");
    }

    @Test
    @Tag("stress")
    void manyRounds() throws Exception {
        StringWriter log = new StringWriter();
        Kills.Summary s = Kills.run(new Kills.Options(SEED, 60, dir.resolve("kill.img")), new PrintWriter(log));
        assertNull(s.failure(), s + "\n" + log);
    }
}
