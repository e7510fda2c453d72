package dev.ferrite.perf.fuzz;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Runs cases in child JVMs ({@link FuzzWorker}), {@code threads} at a time, many cases per child: a
 * case that fails, crashes its JVM or gives no answer within the time limit is a failure, and its child
 * is replaced (a hung one killed). Work is a shared sequence of worker commands ({@code gen SEED},
 * {@code run RECIPE}).
 */
final class FuzzRunner {
    /** How long a child JVM may take to start. */
    private static final long START_LIMIT_S = 60;
    /**
     * Up to this many cases a child, children compile with C1 only: C2's compiles do not pay back in so
     * few cases (one child, 60 generated cases: 16.2 s of CPU with C2, 8.3 s with C1 only; 300 cases: 33
     * against 26 s, though C2 finishes sooner where it has a core to itself).
     */
    static final long SHORT_RUN_CASES = 300;

    /** One case's end: its recipe (or command), and for a failure what happened. */
    record Result(String recipe, String outcome, boolean failed) {
    }

    private final int threads;
    private final long caseLimitMillis;
    private final boolean shortRun;
    private final Path scratch;

    /** {@code cases}: how many the run will give at most (Long.MAX_VALUE: not known). */
    FuzzRunner(int threads, long caseLimitMillis, long cases) throws IOException {
        this.threads = threads;
        this.caseLimitMillis = caseLimitMillis;
        this.shortRun = cases / threads <= SHORT_RUN_CASES;
        this.scratch = Files.createTempDirectory("ferrite-fuzz");
    }

    /**
     * Runs every command {@code work} gives (it is shared by the threads; take from it only here) until it
     * is empty or {@code deadlineNanos} passes; {@code results} hears each case's end, from any thread.
     */
    void run(Iterator<String> work, long deadlineNanos, Consumer<Result> results) throws InterruptedException {
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            int id = i;
            ts.add(Thread.ofPlatform().name("fuzz-runner-" + i).start(() -> drive(id, work, deadlineNanos, results)));
        }
        for (Thread t : ts) {
            t.join();
        }
    }

    private void drive(int id, Iterator<String> work, long deadlineNanos, Consumer<Result> results) {
        Child child = null;
        try {
            while (System.nanoTime() - deadlineNanos < 0) {
                String cmd;
                synchronized (work) {
                    if (!work.hasNext()) {
                        return;
                    }
                    cmd = work.next();
                }
                if (child == null) {
                    child = new Child(id);
                }
                Result r = child.runCase(cmd);
                results.accept(r);
                if (r.failed()) {
                    child.stop();
                    child = null;
                }
            }
        } catch (IOException e) {
            results.accept(new Result("(worker " + id + ")", "cannot run a child JVM: " + e.getMessage(), true));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (child != null) {
                child.stop();
            }
        }
    }

    /** One worker JVM and the lines it has answered. */
    private final class Child {
        private final Process process;
        private final Writer in;
        private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        private final Path stderr;
        private static final String EOF = "\u0000eof";

        Child(int id) throws IOException, InterruptedException {
            stderr = scratch.resolve("worker-" + id + ".err");
            List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Xmx768m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "--enable-native-access=ALL-UNNAMED"));
            if (shortRun) {
                cmd.add("-XX:TieredStopAtLevel=1");
            }
            cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), FuzzWorker.class.getName()));
            process = new ProcessBuilder(cmd).redirectError(stderr.toFile()).start();
            in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
            Thread.ofPlatform().daemon().name("fuzz-child-reader-" + id).start(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String l; (l = r.readLine()) != null; ) {
                        lines.add(l);
                    }
                } catch (IOException ignored) {
                    // the child died: EOF below says so
                }
                lines.add(EOF);
            });
            String ready = lines.poll(START_LIMIT_S, TimeUnit.SECONDS);
            if (!"ready".equals(ready)) {
                stop();
                throw new IOException("worker did not start: " + (ready == null ? "no answer in " + START_LIMIT_S + " s" : "died")
                        + "; " + tail());
            }
        }

        Result runCase(String cmd) throws InterruptedException {
            try {
                in.write(cmd + "\n");
                in.flush();
            } catch (IOException e) {
                return new Result(cmd, "child JVM gone before the case: " + tail(), true);
            }
            long limit = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(caseLimitMillis);
            String recipe = cmd;
            while (true) {
                String l = lines.poll(Math.max(0, limit - System.nanoTime()), TimeUnit.NANOSECONDS);
                if (l == null) {
                    return new Result(recipe, "hang: no answer within " + caseLimitMillis / 1000.0 + " s", true);
                }
                if (l.equals(EOF)) {
                    int code = waitExit();
                    return new Result(recipe, "child JVM died (exit code " + code + "): " + tail(), true);
                }
                if (l.startsWith("case ")) {
                    recipe = l.substring(5);
                } else if (l.startsWith("ok ")) {
                    return new Result(recipe, l.substring(3), false);
                } else if (l.startsWith("fail ")) {
                    return new Result(recipe, l.substring(5), true);
                }
            }
        }

        private int waitExit() throws InterruptedException {
            return process.waitFor(10, TimeUnit.SECONDS) ? process.exitValue() : -1;
        }

        /** The last lines the child wrote on stderr (a JVM crash's or an OOM's report), on one line. */
        private String tail() {
            try {
                List<String> all = Files.readAllLines(stderr, StandardCharsets.UTF_8);
                String t = String.join(" | ", all.subList(Math.max(0, all.size() - 3), all.size()));
                return t.isEmpty() ? "(nothing on stderr)" : t.substring(0, Math.min(400, t.length()));
            } catch (IOException e) {
                return "(no stderr: " + e.getMessage() + ")";
            }
        }

        void stop() {
            process.destroyForcibly();
            try {
                process.waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
