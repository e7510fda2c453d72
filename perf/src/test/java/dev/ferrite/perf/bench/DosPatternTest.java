package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class DosPatternTest {
    @Test
    void matchesAsAServerSearches() {
        assertTrue(new DosPattern("*").matches("."));
        assertTrue(new DosPattern("*.TXT").matches("draft.txt"));
        assertFalse(new DosPattern("*.TXT").matches("draft.txt2"));
        assertFalse(new DosPattern("*.TXT").matches(".."));
        assertTrue(new DosPattern("FILLER.*").matches("filler.000"));
        assertTrue(new DosPattern("<.JNK").matches("A.jnk"));
        assertFalse(new DosPattern("<.JNK").matches("."));
        assertTrue(new DosPattern("a?c").matches("abc"));
        assertFalse(new DosPattern("a?c").matches("ac"));
        assertTrue(new DosPattern("a>c").matches("ac"));
        assertTrue(new DosPattern("a>c").matches("abc"));
        assertTrue(new DosPattern("name\"").matches("name"));
        assertTrue(new DosPattern("name\"txt").matches("name.txt"));
        assertTrue(DosPattern.isPattern("<.JNK"));
        assertFalse(DosPattern.isPattern("plain.doc"));
    }
}
