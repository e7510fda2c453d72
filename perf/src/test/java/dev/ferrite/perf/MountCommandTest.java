package dev.ferrite.perf;

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferrite.fuse.FuseFileSystemProvider;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@code ferrite mount} and {@code ferrite umount} as a user runs them: a background server, a second mount
 * refused, a clean unmount; and a server killed with SIGKILL between sqlite commits, whose volume recovers on
 * the next mount with every committed row. Skipped where FUSE cannot mount. Every server started here is
 * killed and every mount taken down (lazily as a last resort) whatever happens.
 */
class MountCommandTest extends CommandTest {
    @TempDir
    Path dir;
    Path img;
    Path mnt;
    private final List<Process> servers = new ArrayList<>();

    @BeforeEach
    void volume() throws IOException {
        assumeTrue(Files.exists(Path.of("/dev/fuse")), "mount tests skipped: no /dev/fuse");
        assumeTrue("root".equals(System.getProperty("user.name")), "mount tests skipped: mounting needs root");
        assumeTrue(onPath("fusermount3"), "mount tests skipped: no fusermount3 (apt-get install fuse3)");
        img = dir.resolve("v.img");
        mnt = Files.createDirectory(dir.resolve("mnt"));
        assertEquals(0, run("format", img.toString(), "--size", "128M"), err.toString());
    }

    @AfterEach
    void takeDown() throws Exception {
        for (Process p : servers) {
            p.destroyForcibly().waitFor(20, TimeUnit.SECONDS);
        }
        if (mnt != null && FuseFileSystemProvider.isMounted(mnt)) {
            exec(30, "fusermount3", "-u", "-z", mnt.toString());
        }
    }

    @Test
    void mountsInTheBackgroundRefusesASecondMountAndUnmountsCleanly() throws Exception {
        assertEquals(0, run("mount", img.toString(), mnt.toString(), "--log", dir.resolve("server.log").toString()), err.toString());
        assertTrue(FuseFileSystemProvider.isMounted(mnt), "the command returned before the mount showed");
        assertEquals(img.toString(), FuseFileSystemProvider.source(mnt), "the mount table names the device");
        Files.writeString(mnt.resolve("hello"), "over FUSE\n");
        Path other = Files.createDirectory(dir.resolve("other"));
        assertEquals(1, run("mount", img.toString(), other.toString(), "--log", dir.resolve("second.log").toString()));
        assertTrue(err.toString().contains("is in use"), err.toString());
        assertFalse(FuseFileSystemProvider.isMounted(other));
        assertEquals(1, run("mount", img.toString(), mnt.toString()));
        assertTrue(err.toString().contains("is a mount point already"), err.toString());

        assertEquals(0, run("umount", mnt.toString()), err.toString());
        assertFalse(FuseFileSystemProvider.isMounted(mnt));
        String log = Files.readString(dir.resolve("server.log"));
        assertTrue(log.contains("closed cleanly"), log);
        assertTrue(log.matches("(?s).*FUSE requests served: \\{.*write=1, .*create=1.*"), log);
        assertEquals(0, run("check", img.toString()), out.toString());
        assertTrue(out.toString().contains(": clean"), out.toString());
        Process again = server("--read-only");
        assertEquals("over FUSE\n", Files.readString(mnt.resolve("hello")));
        assertTrue(exec(20, "touch", mnt.resolve("new").toString()).contains("Read-only file system"));
        again.destroy(); // SIGTERM: unmounts and closes the volume
        assertTrue(again.waitFor(60, TimeUnit.SECONDS), "the server did not end on SIGTERM");
        assertEquals(0, again.exitValue() == 143 ? 0 : again.exitValue(), "exit status " + again.exitValue());
        assertFalse(FuseFileSystemProvider.isMounted(mnt), "SIGTERM left the mount");
    }

    @Test
    void aServerKilledBetweenCommitsRecoversEveryCommittedRow() throws Exception {
        assumeTrue(onPath("sqlite3"), "test skipped: sqlite3 is not installed");
        Process first = server();
        // synchronous=EXTRA: sqlite's setting that also syncs the directory when it deletes its journal
        StringBuilder sql = new StringBuilder("PRAGMA synchronous=EXTRA; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\n");
        for (int c = 0; c < 40; c++) {
            sql.append("BEGIN; INSERT INTO t(v) WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 250)"
                    + " SELECT hex(randomblob(40)) FROM n; COMMIT;\n");
        }
        Files.writeString(dir.resolve("load.sql"), sql);
        exec(120, "sqlite3", mnt.resolve("db").toString(), ".read " + dir.resolve("load.sql"));
        first.destroyForcibly(); // SIGKILL: no unmount, no clean close
        assertTrue(first.waitFor(30, TimeUnit.SECONDS));
        exec(30, "fusermount3", "-u", "-z", mnt.toString()); // the dead server's mount
        server();
        String check = exec(60, "sqlite3", mnt.resolve("db").toString(), "PRAGMA integrity_check; SELECT count(*) FROM t;");
        assertEquals("ok\n10000\n", check, "after recovery from SIGKILL");
        assertEquals(0, run("umount", mnt.toString()), err.toString());
        assertEquals(0, run("check", img.toString()), out.toString());
    }

    /** Starts {@code ferrite mount --foreground} as a child and waits (60 s at most) for its mount. */
    private Process server(String... options) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), Main.class.getName(), "mount", img.toString(),
                mnt.toString(), "--foreground"));
        command.addAll(Arrays.asList(options));
        Path log = Files.createTempFile(dir, "server", ".log");
        Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile())
                .redirectInput(new File("/dev/null")).start();
        servers.add(p);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!FuseFileSystemProvider.isMounted(mnt)) {
            assertFalse(p.waitFor(20, TimeUnit.MILLISECONDS), () -> "the server exited: " + read(log));
            assertTrue(System.nanoTime() < deadline, () -> "no mount after 60 s: " + read(log));
        }
        return p;
    }

    private static String read(Path p) {
        try {
            return Files.readString(p);
        } catch (IOException e) {
            return e.toString();
        }
    }

    /** Runs {@code command} (stdout and stderr together) within {@code seconds}, else kills it and fails; returns its output. */
    private String exec(int seconds, String... command) throws IOException, InterruptedException {
        Path output = Files.createTempFile(dir, "exec", ".out");
        Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).redirectOutput(output.toFile()).start();
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            throw new AssertionError(String.join(" ", command) + " did not end within " + seconds + " s: " + read(output));
        }
        return Files.readString(output);
    }

    private static boolean onPath(String program) {
        return Arrays.stream(System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(File.pathSeparator))
                .anyMatch(d -> Files.isExecutable(Path.of(d, program)));
    }
}
