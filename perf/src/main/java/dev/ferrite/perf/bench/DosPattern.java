package dev.ferrite.perf.bench;

/**
 * An SMB search pattern, as a server matches a FIND_FIRST name against directory entries: case-insensitive,
 * {@code *} any run of characters, {@code ?} any one, and the DOS forms a client sends for them:
 * {@code <} (DOS_STAR) a run, {@code >} (DOS_QM) one character or none, {@code "} (DOS_DOT) a dot or the
 * end of the name. (The DOS forms stop at dots in Windows' own matcher; names in a dbench tree make the
 * difference moot, and the simpler reading is the one Samba's {@code ms_fnmatch} approximates too.)
 */
final class DosPattern {
    private final String pattern;

    DosPattern(String pattern) {
        this.pattern = pattern;
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

    boolean matches(String name) {
        return matches(0, name, 0);
    }

    private boolean matches(int p, String name, int n) {
        while (p < pattern.length()) {
            char c = pattern.charAt(p);
            switch (c) {
                case '*', '<' -> {
                    for (int k = n; k <= name.length(); k++) {
                        if (matches(p + 1, name, k)) {
                            return true;
                        }
                    }
                    return false;
                }
                case '?' -> {
                    if (n == name.length()) {
                        return false;
                    }
                    n++;
                }
                case '>' -> {
                    return n < name.length() && matches(p + 1, name, n + 1) || matches(p + 1, name, n);
                }
                case '"' -> {
                    if (n == name.length()) {
                        p++;
                        continue;
                    }
                    if (name.charAt(n) != '.') {
                        return false;
                    }
                    n++;
                }
                default -> {
                    if (n == name.length() || !sameIgnoringCase(c, name.charAt(n))) {
                        return false;
                    }
                    n++;
                }
            }
            p++;
        }
        return n == name.length();
    }

    private static boolean sameIgnoringCase(char a, char b) {
        return a == b || Character.toUpperCase(a) == Character.toUpperCase(b)
                || Character.toLowerCase(a) == Character.toLowerCase(b);
    }
}
