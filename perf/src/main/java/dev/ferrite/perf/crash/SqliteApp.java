package dev.ferrite.perf.crash;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.ferrite.dir.Volume;

/**
 * sqlite3 with synchronous=FULL, in rollback-journal (DELETE) or WAL mode: one sqlite3 process reads
 * statements from a pipe; step 0 creates table {@code t} (and an index on its values), step {@code k}
 * inserts row {@code k} in a transaction of its own, acknowledged when sqlite3 prints the marker that
 * follows its COMMIT. A row's value is a function of its id (and the seed), so the checker can tell a
 * row that was never written. The checker: {@code PRAGMA integrity_check} is ok, and the rows are
 * exactly {@code 1..m} with the right values, {@code m} at least the last acknowledged durable row.
 */
final class SqliteApp implements Apps.App {
    private static final int TIMEOUT_SECONDS = 120;
    private final boolean wal;
    private final long seed;
    private final int transactions;

    SqliteApp(boolean wal, long seed, int transactions) {
        this.wal = wal;
        this.seed = seed;
        this.transactions = transactions;
    }

    @Override
    public String name() {
        return wal ? "sqlite-wal" : "sqlite-rollback";
    }

    @Override
    public int lag() {
        return wal ? 0 : 1;
    }

    /** Row {@code id}'s value as an SQL expression of {@code id}: 'row ID ' and up to 3000 copies of a letter. */
    private String value(String id) {
        return "printf('row %d ', " + id + ") || replace(hex(zeroblob(1 + (" + id + " * 389 + " + Math.floorMod(seed, 1500)
                + ") % 1500)), '0', char(97 + " + id + " % 26))";
    }

    @Override
    public void run(Path dir, Volume volume, Runnable ack) throws IOException, InterruptedException {
        // stdbuf: sqlite3 writes to a pipe through a full stdio buffer; each marker must arrive as printed
        Process p = new ProcessBuilder("stdbuf", "-oL", "sqlite3", "db").directory(dir.toFile()).redirectErrorStream(true).start();
        Thread.ofVirtual().start(() -> { // ends a hung sqlite3, so that reading its output ends
            try {
                if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                }
            } catch (InterruptedException e) {
                p.destroyForcibly();
            }
        });
        try (Writer in = new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8);
             BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            step(in, out, 0, "PRAGMA journal_mode=" + (wal ? "WAL" : "DELETE") + "; PRAGMA synchronous=FULL;"
                    + " CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL); CREATE INDEX tv ON t(v);");
            ack.run();
            for (int k = 1; k <= transactions; k++) {
                step(in, out, k, "BEGIN; INSERT INTO t VALUES(" + k + ", " + value(Integer.toString(k)) + "); COMMIT;");
                ack.run();
            }
        } finally {
            if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
        }
        if (p.exitValue() != 0) {
            throw new IllegalStateException("sqlite3 in " + dir + " exited " + p.exitValue());
        }
    }

    /** Sends {@code sql} and a marker after it; returns once sqlite3 printed the marker. */
    private void step(Writer in, BufferedReader out, int k, String sql) throws IOException {
        in.write(sql + " SELECT 'ack " + k + "';\n");
        in.flush();
        for (String line; (line = out.readLine()) != null; ) {
            if (line.equals("ack " + k)) {
                return;
            }
            if (!line.equals("wal") && !line.equals("delete")) { // journal_mode answers with the mode
                throw new IllegalStateException(name() + ", step " + k + ": sqlite3 said: " + line);
            }
        }
        throw new IllegalStateException(name() + ", step " + k + ": sqlite3 ended (or was killed after "
                + TIMEOUT_SECONDS + " s) before acknowledging it");
    }

    @Override
    public String check(Path dir, int durable) throws IOException, InterruptedException {
        if (!Files.isDirectory(dir)) {
            return "the database's directory is gone";
        }
        Apps.Exit e = Apps.exec(dir, Map.of(), 60, "sqlite3", "db", "PRAGMA integrity_check;"
                + " SELECT 'rows', count(*), coalesce(min(id), 0), coalesce(max(id), 0), coalesce(sum(v IS NOT " + value("id") + "), 0) FROM t;");
        // sqlite3 reports a missing table when it prepares the statement, on stderr, before stdout's buffered lines
        boolean missing = e.output().contains("no such table: t");
        List<String> lines = e.output().strip().lines().filter(l -> !l.contains("no such table: t")).toList();
        List<String> integrity = lines.stream().filter(l -> !l.startsWith("rows|")).toList();
        if (!integrity.equals(List.of("ok"))) {
            return "PRAGMA integrity_check failed (" + durable + " steps acknowledged durable):\n" + e.output();
        }
        if (missing) {
            return durable >= 1 ? "table t is missing, though its creation was acknowledged durable" : null;
        }
        String[] f = lines.size() == 2 ? lines.get(1).split("\\|") : new String[0];
        if (f.length != 5 || !f[0].equals("rows") || e.status() != 0) {
            return "sqlite3 could not read table t (exit " + e.status() + "):\n" + e.output();
        }
        long count = Long.parseLong(f[1]), min = Long.parseLong(f[2]), max = Long.parseLong(f[3]), wrong = Long.parseLong(f[4]);
        if (wrong != 0) {
            return wrong + " rows hold a value never written to them";
        }
        if (count != max || count > 0 && min != 1) {
            return "the rows are not 1.." + max + " (" + count + " rows from " + min + "): a transaction was lost or applied out of order";
        }
        if (max > transactions) {
            return "row " + max + " was never inserted";
        }
        if (max < durable - 1) {
            return "rows " + (max + 1) + ".." + (durable - 1) + " are lost: their transactions were acknowledged durable";
        }
        return null;
    }
}
