package dev.ferrite.perf.crash;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import dev.ferrite.dir.Volume;

/**
 * git with {@code core.fsync=all}: step 0 is {@code git init} and the configuration, made durable by a
 * volume sync (git syncs none of it); step {@code k} writes generated files (new ones, and a line
 * appended to a log), then {@code git add -A} and {@code git commit}. git fsyncs every object, the index
 * and the ref it writes, but not the directory it renames the ref into, so each commit is acknowledged
 * once the harness has also fsync'd {@code .git/refs/heads}, as an application wanting it durable must.
 * The checker: {@code git fsck --full} passes, HEAD is a commit the workload made (or unborn), and every
 * acknowledged commit is reachable from it.
 */
final class GitApp implements Apps.App {
    private static final int TIMEOUT_SECONDS = 60;
    private final long seed;
    private final int commits;
    /** The commits made, in order; index 0 unused (step 0 makes none). */
    private final List<String> made = new ArrayList<>(List.of(""));
    private Map<String, String> env;

    GitApp(long seed, int commits) {
        this.seed = seed;
        this.commits = commits;
    }

    @Override
    public String name() {
        return "git";
    }

    @Override
    public int lag() {
        return 0;
    }

    /** git's environment: no system or user configuration, fixed names and dates (so a seed makes the same commits). */
    private Map<String, String> env(Path home) throws IOException {
        if (env == null) {
            env = Map.of("HOME", Files.createDirectories(home).toString(), "GIT_CONFIG_NOSYSTEM", "1",
                    "GIT_AUTHOR_NAME", "crashtest", "GIT_AUTHOR_EMAIL", "crashtest@ferrite", "GIT_COMMITTER_NAME", "crashtest",
                    "GIT_COMMITTER_EMAIL", "crashtest@ferrite", "GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z",
                    "GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z");
        }
        return env;
    }

    @Override
    public void run(Path dir, Volume volume, Runnable ack) throws IOException, InterruptedException {
        Map<String, String> e = env(dir.getParent().getParent().resolve("home"));
        Apps.execOk(dir, e, TIMEOUT_SECONDS, "git", "init", "-q", "-b", "main", ".");
        Apps.execOk(dir, e, TIMEOUT_SECONDS, "git", "config", "core.fsync", "all");
        Apps.execOk(dir, e, TIMEOUT_SECONDS, "git", "config", "core.fsyncMethod", "fsync");
        volume.sync();
        ack.run();
        Random rnd = new Random(seed);
        for (int k = 1; k <= commits; k++) {
            for (int f = 0, n = 1 + rnd.nextInt(4); f < n; f++) {
                StringBuilder text = new StringBuilder();
                for (int line = 0, lines = 1 + rnd.nextInt(300); line < lines; line++) {
                    text.append("commit ").append(k).append(" file ").append(f).append(" line ").append(line).append(' ')
                            .append(Long.toHexString(rnd.nextLong())).append('\n');
                }
                Files.writeString(Files.createDirectories(dir.resolve("d" + rnd.nextInt(3))).resolve("f" + k + "-" + f), text);
            }
            Files.writeString(dir.resolve("log"), "commit " + k + "\n", StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            Apps.execOk(dir, e, TIMEOUT_SECONDS, "git", "add", "-A");
            Apps.execOk(dir, e, TIMEOUT_SECONDS, "git", "commit", "-q", "-m", "commit " + k);
            made.add(Apps.execOk(dir, e, TIMEOUT_SECONDS, "git", "rev-parse", "HEAD").strip());
            try (FileChannel refs = FileChannel.open(dir.resolve(".git/refs/heads"), StandardOpenOption.READ)) {
                refs.force(true);
            }
            ack.run();
        }
    }

    @Override
    public String check(Path dir, int durable) throws IOException, InterruptedException {
        if (durable == 0) {
            return null; // git init was not acknowledged: the repository may be anything
        }
        if (!Files.isRegularFile(dir.resolve(".git/HEAD"))) {
            return "the repository is gone (no .git/HEAD), though git init was acknowledged durable";
        }
        Map<String, String> e = env(dir.getParent().getParent().resolve("home"));
        Apps.Exit fsck = Apps.exec(dir, e, TIMEOUT_SECONDS, "git", "fsck", "--full", "--no-dangling");
        if (fsck.status() != 0) {
            return "git fsck --full failed (" + (durable - 1) + " commits acknowledged durable):\n" + fsck.output();
        }
        Apps.Exit head = Apps.exec(dir, e, TIMEOUT_SECONDS, "git", "rev-parse", "-q", "--verify", "HEAD");
        if (head.status() != 0) {
            return durable > 1 ? "HEAD names no commit, though commits 1.." + (durable - 1) + " were acknowledged durable:\n" + head.output()
                    : null;
        }
        String at = head.output().strip();
        if (!made.contains(at)) {
            return "HEAD is " + at + ", a commit the workload never made";
        }
        Set<String> reachable = Set.of(Apps.execOk(dir, e, TIMEOUT_SECONDS, "git", "rev-list", "HEAD").strip().split("\n"));
        for (int k = 1; k < durable; k++) {
            if (!reachable.contains(made.get(k))) {
                return "commit " + k + " (" + made.get(k) + ") is not reachable from HEAD (" + at + "), though it was acknowledged durable";
            }
        }
        return null;
    }
}
