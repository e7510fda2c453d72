package dev.ferrite.fuse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static dev.ferrite.fuse.FuseFixture.run;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Programs nobody here wrote, on a mounted volume, each beside the same run in a tmpfs directory: the
 * results must be the same. Every program runs under a timeout; the mount is always taken down.
 */
class RealProgramsTest {
    private static final long SEED = Long.getLong("ferrite.seed", 18);

    @TempDir
    Path scratch;
    FuseFixture fx;
    Path ref;

    @BeforeEach
    void mount() throws IOException {
        fx = new FuseFixture(scratch, 256);
        ref = HostTree.reference(scratch, "ref");
    }

    @AfterEach
    void unmount() throws Exception {
        try {
            if (fx != null) { // null where FUSE is missing: the mount's assumption skipped the test
                fx.close();
            }
        } finally {
            if (ref != null) {
                HostTree.delete(ref);
            }
        }
    }

    @Test
    void tarInAndOutKeepsTheTree() throws Exception {
        assumeProgram("tar");
        Path src = Files.createDirectory(ref.resolve("src"));
        HostTree.generate(src, SEED, 300);
        Path in = Files.createDirectory(fx.mountPoint.resolve("tree"));
        Path out = Files.createDirectory(ref.resolve("out"));
        run(ref, 60, "bash", "-c", "tar -C src -cf - . | tar -C " + in + " -xpf -");
        run(ref, 60, "bash", "-c", "tar -C " + in + " -cf - . | tar -C out -xpf -");
        HostTree.assertSame(src, in, "seed " + SEED + ": the tree extracted onto the mount");
        HostTree.assertSame(src, out, "seed " + SEED + ": the tree archived back from the mount");
    }

    @Test
    void rsyncRoundTrip() throws Exception {
        assumeProgram("rsync");
        Path src = Files.createDirectory(ref.resolve("src"));
        HostTree.generate(src, SEED + 1, 300);
        run(ref, 60, "rsync", "-aH", "src/", fx.mountPoint + "/copy/");
        run(ref, 60, "rsync", "-aH", fx.mountPoint + "/copy/", "back/");
        HostTree.assertSame(src, fx.mountPoint.resolve("copy"), "seed " + (SEED + 1));
        HostTree.assertSame(src, ref.resolve("back"), "seed " + (SEED + 1));
        // a second pass, checksumming, finds nothing to send
        assertEquals("", run(ref, 60, "rsync", "-aHc", "--itemize-changes", "src/", fx.mountPoint + "/copy/").strip());
    }

    @Test
    void gitRepositoryCommitsChecksOutAndPassesFsck() throws Exception {
        assumeProgram("git");
        String onMount = git(fx.mountPoint.resolve("repo"));
        String onTmpfs = git(ref.resolve("repo"));
        assertEquals(onTmpfs, onMount, "the same commits, trees and checkout on the mount as on tmpfs");
    }

    /** A small history in a new repository at {@code repo}; returns what identifies it (commit and tree ids, the checkout's files). */
    private String git(Path repo) throws Exception {
        Files.createDirectories(repo);
        String script = """
                export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
                export GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z' GIT_CONFIG_NOSYSTEM=1 HOME=$PWD
                git init -q -b main .
                for i in $(seq 1 40); do mkdir -p d$((i % 5)); seq 1 $((i * 50)) > d$((i % 5))/f$i; done
                git add -A && git commit -q -m one
                git checkout -q -b side
                for i in $(seq 1 20); do echo side $i >> d1/f1; git mv d2/f$((i * 2 % 40 + 2)) d3/moved$i 2>/dev/null || true; done
                rm -f d4/f4 && ln -s ../d0/f5 d4/link
                git add -A && git commit -q -m two
                git checkout -q main
                test ! -e d4/link && test -f d4/f4
                git merge -q --no-edit side
                git gc -q --prune=now
                git fsck --full --strict 2>&1
                git log --format='%H %T %s' --all
                git ls-files -s | sha256sum
                find . -path ./.git -prune -o -type f -print | sort | xargs sha256sum | sha256sum
                """;
        return run(repo, 120, "bash", "-euo", "pipefail", "-c", script);
    }

    @Test
    void sqliteTransactionsSurviveRemount() throws Exception {
        sqliteSurvivesRemount(20_000);
    }

    /** The size: 100k rows. */
    @Test
    @Tag("stress")
    void sqliteHundredThousandRowsSurviveRemount() throws Exception {
        sqliteSurvivesRemount(100_000);
    }

    private void sqliteSurvivesRemount(int rows) throws Exception {
        assumeProgram("sqlite3");
        String onMount = sqlite(fx.mountPoint, rows);
        assertEquals(sqlite(ref, rows), onMount);
        assertTrue(onMount.startsWith("ok\n" + (rows - rows / 1000) + "|"), onMount); // a row in 1000 deleted
        fx.unmount();
        fx.mount();
        assertEquals(onMount, run(fx.mountPoint, 60, "sqlite3", "db", "PRAGMA integrity_check; SELECT count(*), sum(length(v)), sum(id) FROM t;"));
    }

    /** {@code rows} rows inserted in transactions of 1000 into a new database in {@code dir}; returns the integrity check and a digest of the table. */
    static String sqlite(Path dir, int rows) throws Exception {
        StringBuilder sql = new StringBuilder("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL);\nCREATE INDEX tv ON t(v);\n");
        for (int done = 0; done < rows; done += 1000) {
            sql.append("BEGIN; INSERT INTO t(v) WITH RECURSIVE c(x) AS (SELECT ").append(done + 1)
                    .append(" UNION ALL SELECT x + 1 FROM c WHERE x < ").append(Math.min(rows, done + 1000))
                    .append(") SELECT printf('row %d %s', x, hex(randomblob(x % 64))) FROM c; COMMIT;\n");
        }
        sql.append("UPDATE t SET v = v || '!' WHERE id % 7 = 0; DELETE FROM t WHERE id % 1000 = 999;\n");
        Path script = Files.writeString(dir.resolve("load.sql"), sql);
        run(dir, 120, "sqlite3", "db", ".read " + script);
        return run(dir, 60, "sqlite3", "db", "PRAGMA integrity_check; SELECT count(*), sum(length(v)), sum(id) FROM t;");
    }

    @Test
    void fioRandomWritesVerifyWithCrc32c() throws Exception {
        assumeProgram("fio");
        for (Path dir : List.of(fx.mountPoint, ref)) {
            String out = run(dir, 120, "fio", "--name=verify", "--filename=fio.dat", "--size=16M", "--bs=4k", "--rw=randwrite",
                    "--ioengine=psync", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--randrepeat=1");
            assertTrue(out.contains("err= 0"), dir + ":\n" + out);
        }
    }

    @Test
    void dbenchRunsWithoutErrors() throws Exception {
        assumeProgram("dbench");
        Path loadfile = Path.of("/usr/share/dbench/client.txt");
        assumeTrue(Files.exists(loadfile), "dbench test skipped: no " + loadfile);
        String out = run(fx.mountPoint, 120, "dbench", "-c", loadfile.toString(), "-D", fx.mountPoint.toString(), "-t", "3", "2");
        // dbench 4.00 takes semaphore id 0, which the first semget in a fresh IPC namespace returns, for a
        // failure and goes on without its start barrier: not a failure of the file system under test
        String ours = out.replace("failed to create barrier semaphore", "");
        assertTrue(ours.contains("Throughput") && !ours.contains("ERROR") && !ours.contains("failed"), out);
    }

    private static void assumeProgram(String program) {
        assumeTrue(FuseFixture.onPath(program), "test skipped: " + program + " is not installed");
    }
}
