package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ScratchFileTest {
    @Test
    void closeDeletesTheFile(@TempDir Path dir) {
        Path path;
        try (ScratchFile f = ScratchFile.create(dir, "t-", ".dev")) {
            path = f.path();
            assertTrue(Files.isRegularFile(path));
            assertTrue(path.getFileName().toString().startsWith("t-"));
        }
        assertFalse(Files.exists(path));
    }

    @Test
    void closeDeletesADirectoryWithWhatIsInIt(@TempDir Path dir) throws Exception {
        Path path;
        try (ScratchFile d = ScratchFile.directory(dir, "kv-")) {
            path = d.path();
            Files.createDirectories(path.resolve("a/b"));
            Files.writeString(path.resolve("a/b/c"), "x");
            Files.writeString(path.resolve("d"), "y");
        }
        assertFalse(Files.exists(path));
        assertTrue(Files.isDirectory(dir));
    }
}
