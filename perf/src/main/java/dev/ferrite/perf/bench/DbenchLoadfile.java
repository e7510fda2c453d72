package dev.ferrite.perf.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A dbench 4.0 NetBench loadfile ({@code client.txt}), parsed once and shared by every client: one
 * {@link Op} per line, each naming an operation, its paths (interned: a loadfile names a few hundred
 * paths hundreds of thousands of times), its numbers and the status the recorded server answered.
 * <pre>
 * [timestamp] OpName ["\path" ["\path2"]] [number ...] NT_STATUS_NAME | 0xCODE
 * </pre>
 * As dbench reads it: a leading number is a timestamp (4.0's later files have one; it is ignored, as
 * dbench ignores it without a target rate), names are case-insensitive, quoted paths use backslashes
 * (made slashes here), numbers are decimal or {@code 0x} hexadecimal, blank lines and lines starting
 * with {@code #} are skipped. Each client replays the paths with {@code client1} replaced by its own
 * name ({@link #clientPaths}). dbench's scripting lines (LOOP, REPEAT, SLEEP, RANDOMSTRING, ...) and
 * random ({@code *}) or relative ({@code +}) numbers belong to its iSCSI/NFS loadfiles, not NetBench
 * ones, and are refused with the line that holds them.
 */
public final class DbenchLoadfile {
    /**
     * The operations, in the order dbench 4.00 prints its table, each with the name its loadfiles use,
     * the name its table uses, and how many paths and numbers follow the name.
     */
    public enum Kind {
        NTCREATEX("NTCreateX", "NTCreateX", 1, 3),
        CLOSE("Close", "Close", 0, 1),
        RENAME("Rename", "Rename", 2, 0),
        UNLINK("Unlink", "Unlink", 1, 1),
        DELTREE("Deltree", "Deltree", 1, 0),
        RMDIR("Rmdir", "Rmdir", 1, 0),
        MKDIR("Mkdir", "Mkdir", 1, 0),
        QUERY_PATH_INFORMATION("QUERY_PATH_INFORMATION", "Qpathinfo", 1, 1),
        QUERY_FILE_INFORMATION("QUERY_FILE_INFORMATION", "Qfileinfo", 0, 2),
        QUERY_FS_INFORMATION("QUERY_FS_INFORMATION", "Qfsinfo", 0, 1),
        SET_FILE_INFORMATION("SET_FILE_INFORMATION", "Sfileinfo", 0, 2),
        FIND_FIRST("FIND_FIRST", "Find", 1, 3),
        WRITEX("WriteX", "WriteX", 0, 4),
        READX("ReadX", "ReadX", 0, 4),
        LOCKX("LockX", "LockX", 0, 3),
        UNLOCKX("UnlockX", "UnlockX", 0, 3),
        FLUSH("Flush", "Flush", 0, 1);

        private static final Map<String, Kind> BY_NAME = new HashMap<>();

        static {
            for (Kind k : values()) {
                BY_NAME.put(k.loadName.toLowerCase(Locale.ROOT), k);
                BY_NAME.put(k.tableName.toLowerCase(Locale.ROOT), k);
            }
        }

        private final String loadName;
        private final String tableName;
        final int paths;
        final int numbers;

        Kind(String loadName, String tableName, int paths, int numbers) {
            this.loadName = loadName;
            this.tableName = tableName;
            this.paths = paths;
            this.numbers = numbers;
        }

        /** As a loadfile names it: {@code QUERY_PATH_INFORMATION}. */
        public String loadName() {
            return loadName;
        }

        /** As dbench's table names it: {@code Qpathinfo}. */
        public String tableName() {
            return tableName;
        }

        /** By its loadfile or table name, any case; null if neither. */
        public static Kind byName(String name) {
            return BY_NAME.get(name.toLowerCase(Locale.ROOT));
        }
    }

    /**
     * One line. {@code path} and {@code path2} index {@link #paths()} (-1 when absent); {@code a} to
     * {@code d} are the numbers in their order on the line (0 when absent):
     * <ul>
     *   <li>NTCreateX: create options, disposition, handle number;
     *   <li>Close, Flush: handle; QUERY_FILE_INFORMATION, SET_FILE_INFORMATION: handle, info level;
     *   <li>ReadX, WriteX: handle, offset, size, size the server returned;
     *   <li>LockX, UnlockX: handle, offset, length;
     *   <li>Unlink: attributes; QUERY_PATH_INFORMATION, QUERY_FS_INFORMATION: info level;
     *   <li>FIND_FIRST: info level, most entries asked for, entries the server returned.
     * </ul>
     */
    public record Op(int line, Kind kind, int path, int path2, long a, long b, long c, long d, NtStatus expected) {
    }

    /** dbench's read/write buffer: no operation moves more. */
    private static final long MAX_IO = 16 << 20;

    private final String source;
    private final List<String> paths;
    private final List<Op> ops;

    private DbenchLoadfile(String source, List<String> paths, List<Op> ops) {
        this.source = source;
        this.paths = List.copyOf(paths);
        this.ops = List.copyOf(ops);
    }

    /**
     * Reads and parses {@code file}.
     *
     * @throws IllegalArgumentException naming the file and line of the first line it cannot replay, or if
     *         it holds no operation
     */
    public static DbenchLoadfile read(Path file) {
        try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.ISO_8859_1)) {
            return parse(in, file.toString());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read loadfile " + file + ": " + e.getMessage(), e);
        }
    }

    /** Parses a loadfile's text; {@code source} names it in errors. */
    public static DbenchLoadfile parse(String text, String source) {
        try {
            return parse(new BufferedReader(new StringReader(text)), source);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static DbenchLoadfile parse(BufferedReader in, String source) throws IOException {
        List<String> paths = new ArrayList<>();
        Map<String, Integer> pathIds = new HashMap<>();
        List<Op> ops = new ArrayList<>();
        List<String> fields = new ArrayList<>();
        int lineNo = 0;
        for (String line; (line = in.readLine()) != null; ) {
            lineNo++;
            String s = line.strip();
            if (s.isEmpty() || s.startsWith("#")) {
                continue;
            }
            try {
                tokenize(s, fields);
                ops.add(op(lineNo, fields, paths, pathIds));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(source + ":" + lineNo + ": " + e.getMessage() + ": " + s, e);
            }
        }
        if (ops.isEmpty()) {
            throw new IllegalArgumentException(source + ": no operations");
        }
        return new DbenchLoadfile(source, paths, ops);
    }

    /** Splits on blanks; a field in double quotes (a path) may hold blanks and loses its quotes. */
    private static void tokenize(String s, List<String> fields) {
        fields.clear();
        int i = 0, n = s.length();
        while (i < n) {
            char c = s.charAt(i);
            if (Character.isWhitespace(c)) {
                i++;
            } else if (c == '"') {
                int end = s.indexOf('"', i + 1);
                if (end < 0) {
                    throw new IllegalArgumentException("unbalanced quote");
                }
                fields.add(s.substring(i + 1, end));
                i = end + 1;
            } else {
                int end = i;
                while (end < n && !Character.isWhitespace(s.charAt(end))) {
                    end++;
                }
                fields.add(s.substring(i, end));
                i = end;
            }
        }
    }

    private static Op op(int lineNo, List<String> fields, List<String> paths, Map<String, Integer> pathIds) {
        int first = !fields.isEmpty() && Character.isDigit(fields.getFirst().charAt(0)) ? 1 : 0; // a timestamp
        if (fields.size() - first < 2) {
            throw new IllegalArgumentException("expected an operation and a status");
        }
        String name = fields.get(first);
        Kind kind = Kind.byName(name);
        if (kind == null) {
            throw new IllegalArgumentException("'" + name + "' is not a NetBench operation this replay knows");
        }
        int given = fields.size() - first - 2;
        if (given != kind.paths + kind.numbers) {
            throw new IllegalArgumentException(kind.loadName + " takes " + describe(kind) + " then a status, not "
                    + given + " field" + (given == 1 ? "" : "s"));
        }
        NtStatus expected = NtStatus.parse(fields.getLast());
        int at = first + 1;
        int[] p = {-1, -1};
        for (int i = 0; i < kind.paths; i++) {
            String path = fields.get(at++).replace('\\', '/');
            if (!path.startsWith("/")) {
                throw new IllegalArgumentException("path '" + path + "' does not start with a backslash");
            }
            p[i] = pathIds.computeIfAbsent(path, k -> {
                paths.add(k);
                return paths.size() - 1;
            });
        }
        long[] v = new long[4];
        for (int i = 0; i < kind.numbers; i++) {
            v[i] = number(fields.get(at++));
        }
        requireInRange(kind, v);
        return new Op(lineNo, kind, p[0], p[1], v[0], v[1], v[2], v[3], expected);
    }

    /** What a replay can do: an I/O no larger than dbench's 16 MiB buffer, offsets and handles that fit. */
    private static void requireInRange(Kind kind, long[] v) {
        switch (kind) {
            case READX, WRITEX -> {
                if (v[1] < 0 || v[2] < 0 || v[2] > MAX_IO || v[3] < 0 || v[3] > v[2]) {
                    throw new IllegalArgumentException("offset " + v[1] + ", size " + v[2] + " and returned size " + v[3]
                            + " must be 0 <= returned <= size <= " + MAX_IO + ", offset >= 0");
                }
            }
            case LOCKX, UNLOCKX -> {
                if (v[1] < 0 || v[2] < 0) {
                    throw new IllegalArgumentException("lock offset " + v[1] + " and length " + v[2] + " must not be negative");
                }
            }
            default -> {
            }
        }
    }

    private static String describe(Kind kind) {
        return switch (kind.paths) {
            case 0 -> kind.numbers + " number" + (kind.numbers == 1 ? "" : "s");
            default -> kind.paths + " path" + (kind.paths == 1 ? "" : "s")
                    + (kind.numbers == 0 ? "" : " and " + kind.numbers + " number" + (kind.numbers == 1 ? "" : "s"));
        };
    }

    private static long number(String field) {
        if (field.startsWith("*") || field.startsWith("+")) {
            throw new IllegalArgumentException("random or relative number '" + field + "' (dbench's scripted loadfiles) is not supported");
        }
        try {
            return Long.decode(field);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + field + "' is not a number");
        }
    }

    /** Where it was read from. */
    public String source() {
        return source;
    }

    /** Every distinct path, slashes for backslashes, as the file spells it (client1's). */
    public List<String> paths() {
        return paths;
    }

    public List<Op> ops() {
        return ops;
    }

    /**
     * {@link #paths()} as client {@code name} replays them, under {@code root} (no trailing slash; empty
     * for the namespace root): every {@code client1} replaced by {@code name}, as dbench substitutes it.
     */
    public String[] clientPaths(String root, String name) {
        String[] out = new String[paths.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = root + paths.get(i).replace("client1", name);
        }
        return out;
    }

    /** The largest ReadX or WriteX size, for sizing each client's buffer. */
    public int maxIoSize() {
        long max = 0;
        for (Op op : ops) {
            if (op.kind == Kind.READX || op.kind == Kind.WRITEX) {
                max = Math.max(max, op.c);
            }
        }
        return Math.toIntExact(max);
    }
}
