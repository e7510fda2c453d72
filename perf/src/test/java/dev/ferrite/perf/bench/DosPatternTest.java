package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

class DosPatternTest {
    private static boolean matches(String pattern, String name) {
        byte[] b = name.getBytes(StandardCharsets.UTF_8);
        return new DosPattern(pattern).matches(b, b.length);
    }

    @Test
    void matchesAsAServerSearches() {
        assertTrue(matches("*", "."));
        assertTrue(matches("*.TXT", "draft.txt"));
        assertFalse(matches("*.TXT", "draft.txt2"));
        assertFalse(matches("*.TXT", ".."));
        assertTrue(matches("FILLER.*", "filler.000"));
        assertTrue(matches("<.JNK", "A.jnk"));
        assertFalse(matches("<.JNK", "."));
        assertTrue(matches("a?c", "abc"));
        assertFalse(matches("a?c", "ac"));
        assertTrue(matches("a>c", "ac"));
        assertTrue(matches("a>c", "abc"));
        assertTrue(matches("name\"", "name"));
        assertTrue(matches("name\"txt", "name.txt"));
        assertTrue(matches("a?c", "a\u00e9c"), "? takes a whole UTF-8 character");
        assertFalse(matches("a??c", "a\u00e9c"));
        assertTrue(matches("*\u00e9", "x\u00e9"));
        assertFalse(matches("\u00c9", "\u00e9"), "letters fold as strcasecmp folds them: ASCII only");
        assertTrue(DosPattern.isPattern("<.JNK"));
        assertFalse(DosPattern.isPattern("plain.doc"));
    }
}
