package dev.ferrite.perf.bench;

import java.nio.file.Path;

import dev.ferrite.io.FerriteException;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class AppendBenchTest {
    private static final Path FILE = Path.of("/mnt/x/append-0");

    @Test
    void readsFilefragsCountInBothNumbers() {
        assertEquals(2, AppendBench.parseFilefrag("/mnt/x/append-0: 2 extents found\n", FILE));
        assertEquals(1, AppendBench.parseFilefrag("/mnt/x/append-0: 1 extent found\n", FILE));
        // a name with a colon and digits in it does not confuse it
        assertEquals(37, AppendBench.parseFilefrag("/mnt/a: 5/append-0: 37 extents found\n", FILE));
    }

    @Test
    void outputWithoutACountIsAnError() {
        FerriteException e = assertThrows(FerriteException.class,
                () -> AppendBench.parseFilefrag("filefrag: Operation not supported\n", FILE));
        assertEquals(true, e.getMessage().contains("printed no extent count"), e.getMessage());
    }
}
