package dev.ferrite.perf.bench;

import java.nio.charset.StandardCharsets;

/**
 * An SMB search pattern, as a server matches a FIND_FIRST name against directory entries: case-insensitive,
 * {@code *} any run of characters, {@code ?} any one, and the DOS forms a client sends for them:
 * {@code <} (DOS_STAR) a run, {@code >} (DOS_QM) one character or none, {@code "} (DOS_DOT) a dot or the
 * end of the name. (The DOS forms stop at dots in Windows' own matcher; names in a dbench tree make the
 * difference moot, and the simpler reading is the one Samba's {@code ms_fnmatch} approximates too.)
 */
final class DosPattern {
    /** The pattern's bytes (UTF-8). */
    private final byte[] pattern;

    DosPattern(String pattern) {
        this.pattern = pattern.getBytes(StandardCharsets.UTF_8);
    }

    /** Whether {@code name} holds any of the wildcard characters. */
    static boolean isPattern(String name) {
        for (int i = 0; i < name.length(); i++) {
            switch (name.charAt(i)) {
                case '*', '?', '<', '>', '"' -> {
                    return true;
                }
                default -> {
                }
            }
        }
        return false;
    }

    /** Whether the UTF-8 name {@code name[0, length)} matches (letters compared as {@code strcasecmp} does: ASCII). */
    boolean matches(byte[] name, int length) {
        return matches(0, name, 0, length);
    }

    private boolean matches(int p, byte[] name, int n, int length) {
        while (p < pattern.length) {
            byte c = pattern[p];
            switch (c) {
                case '*', '<' -> {
                    for (int k = n; k <= length; k = next(name, k, length)) {
                        if (matches(p + 1, name, k, length)) {
                            return true;
                        }
                        if (k == length) {
                            break;
                        }
                    }
                    return false;
                }
                case '?' -> {
                    if (n == length) {
                        return false;
                    }
                    n = next(name, n, length);
                }
                case '>' -> {
                    return n < length && matches(p + 1, name, next(name, n, length), length) || matches(p + 1, name, n, length);
                }
                case '"' -> {
                    if (n == length) {
                        p++;
                        continue;
                    }
                    if (name[n] != '.') {
                        return false;
                    }
                    n++;
                }
                default -> {
                    if (n == length || toLower(c) != toLower(name[n])) {
                        return false;
                    }
                    n++;
                }
            }
            p++;
        }
        return n == length;
    }

    /** Where the character after the one at {@code n} starts: past its UTF-8 continuation bytes. */
    private static int next(byte[] name, int n, int length) {
        do {
            n++;
        } while (n < length && (name[n] & 0xC0) == 0x80);
        return n;
    }

    private static int toLower(byte b) {
        return b >= 'A' && b <= 'Z' ? b + ('a' - 'A') : b;
    }
}
