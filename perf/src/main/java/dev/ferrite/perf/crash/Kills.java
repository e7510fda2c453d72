package dev.ferrite.perf.crash;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import dev.ferrite.dir.CheckReport;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.Volume;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceOptions;
import dev.ferrite.io.DirectDevice;
import dev.ferrite.io.OverlayDevice;

/**
 * {@code ferrite crashtest --kill}: rounds of a {@link KillChild} JVM working on one volume in a file
 * through {@link DirectDevice}, each SIGKILLed at a random moment: half the rounds at a random time
 * around how long the last child took to mount the volume (so some kills hit the recovery of the last
 * kill), half at up to 0.5 s after its first acknowledgement. After each kill the volume is checked
 * without being changed (recovery replays into an {@link OverlayDevice}, as {@code ferrite check}
 * does), so that the next child recovers the crashed volume itself, and every fact any child
 * acknowledged so far must hold.
 */
public final class Kills {
    private Kills() {
    }

    /**
     * @param seed   picks the kill moments and seeds the children
     * @param rounds children to kill
     * @param image  the volume's file (made anew), or null for a temporary one, deleted after a clean run
     */
    public record Options(long seed, int rounds, Path image) {
    }

    /**
     * @param rounds    rounds run
     * @param beforeReady kills that hit a child before it had mounted the volume (in start-up or recovery)
     * @param facts     acknowledged facts verified after the last round
     * @param failure   what was wrong, or null
     */
    public record Summary(int rounds, int beforeReady, int facts, double seconds, String failure) {
        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%d rounds (%d killed before the volume was mounted), %d acknowledged facts hold, %.1f s%s",
                    rounds, beforeReady, facts, seconds, failure == null ? "" : "; FAILED: " + failure);
        }
    }

    /** Volume size: room for every round's acknowledged files. */
    static final long SIZE = 256L << 20;

    public static Summary run(Options o, PrintWriter log) throws IOException, InterruptedException {
        long start = System.nanoTime();
        Path image = o.image() != null ? o.image() : Files.createTempFile("ferrite-kill", ".img");
        Files.deleteIfExists(image);
        try (BlockDevice dev = DirectDevice.open(image, DeviceOptions.defaults().withSize(SIZE))) {
            Volume.format(dev, Recording.OPTIONS.withAgCount(4).withLogBlocks(0));
        }
        Random rnd = new Random(o.seed());
        Map<String, String> facts = new LinkedHashMap<>();
        int beforeReady = 0;
        String failure = null;
        int round = 0;
        long mountMillis = 1000; // how long the last child took to mount: early kills aim around it, at its recovery
        while (round < o.rounds() && failure == null) {
            round++;
            boolean early = rnd.nextBoolean();
            long delay = early ? mountMillis / 2 + rnd.nextLong(mountMillis) : rnd.nextInt(500);
            boolean ready;
            try (Child child = Child.start(image, round, rnd.nextLong())) {
                ready = child.killAfter(delay, early);
                beforeReady += ready ? 0 : 1;
                mountMillis = ready ? Math.max(50, child.mountMillis()) : mountMillis;
                if (child.exitedAlone()) {
                    failure = "round " + round + ": the child exited by itself: " + child.stderr();
                    break;
                }
                for (String fact : child.facts()) {
                    String[] f = fact.split(" ");
                    facts.put(f[0] + " " + f[1], fact); // a counter's later acknowledgement replaces its earlier
                }
            }
            failure = verify(image, facts.values());
            if (failure != null) {
                failure = "round " + round + " (child killed " + delay + " ms after " + (early ? "it started" : "its first acknowledgement")
                        + "): " + failure;
            }
            log.printf("kill round %d: killed %d ms after %s%s, %d facts acknowledged so far%s%n", round, delay,
                    early ? "start" : "its first acknowledgement", ready ? "" : " (before it mounted)", facts.size(), failure == null ? ", all hold" : "");
            log.flush();
        }
        if (failure == null && o.image() == null) {
            Files.deleteIfExists(image);
        } else if (failure != null) {
            failure += " (the volume is left in " + image + ")";
        }
        return new Summary(round, beforeReady, facts.size(), (System.nanoTime() - start) / 1e9, failure);
    }

    /** Checks the volume in {@code image} without changing it and verifies every fact; what is wrong, or null. */
    static String verify(Path image, Iterable<String> facts) {
        try (BlockDevice dev = openWhenFree(image, DeviceOptions.defaults().withReadOnly(true));
             OverlayDevice view = OverlayDevice.over(dev);
             Volume v = Volume.open(view, Recording.OPTIONS);
             Arena arena = Arena.ofConfined()) {
            Namespace ns = v.namespace();
            CheckReport report = ns.check();
            if (!report.clean()) {
                return "the check found problems: " + report;
            }
            if (!v.tables().exists(KillChild.TABLE)) {
                for (String fact : facts) {
                    if (!fact.startsWith("file ")) {
                        return "table " + KillChild.TABLE + " is gone, but a child acknowledged: " + fact;
                    }
                }
            }
            MemorySegment buf = arena.allocate(64 << 10, BlockDevice.BUFFER_ALIGNMENT);
            try (Table t = v.tables().exists(KillChild.TABLE) ? v.tables().open(KillChild.TABLE) : null) {
                for (String fact : facts) {
                    String wrong = verify(ns, t, buf, fact.split(" "));
                    if (wrong != null) {
                        return "acknowledged \"" + fact + "\", but " + wrong;
                    }
                }
            }
            return null;
        } catch (RuntimeException e) {
            return "recovery or the check failed: " + e;
        }
    }

    /**
     * Opens the volume's file once no other process holds its lock. A killed child's io_uring instance is
     * torn down by the kernel after the process is gone, and holds the file (and its lock) until then.
     */
    static BlockDevice openWhenFree(Path image, DeviceOptions options) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            BlockDevice dev = DirectDevice.open(image, options);
            if (dev.tryLockExclusive()) {
                dev.unlockExclusive();
                return dev;
            }
            dev.close();
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(image + " is still locked 30 s after the process that had it was killed");
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10)); // polling the kernel: nothing here signals the release
        }
    }

    private static String verify(Namespace ns, Table t, MemorySegment buf, String[] f) {
        switch (f[0]) {
            case "file" -> {
                try (Handle h = ns.open(f[1])) {
                    long size = ns.stat(h).size();
                    if (size != Long.parseLong(f[2])) {
                        return "the file's size is " + size;
                    }
                    for (long got = 0; got < size; ) {
                        got += ns.read(h, got, buf.asSlice(got, size - got));
                    }
                    String crc = KillChild.crc(buf.asSlice(0, size));
                    return crc.equals(f[3]) ? null : "its contents have CRC32C " + crc;
                } catch (dev.ferrite.dir.NamespaceException e) {
                    return "opening it failed: " + e.getMessage();
                }
            }
            case "key" -> {
                byte[] value = t.get(f[1].getBytes(StandardCharsets.UTF_8));
                if (value == null) {
                    return "the key is absent";
                }
                String crc = KillChild.crc(MemorySegment.ofArray(value));
                return value.length == Integer.parseInt(f[2]) && crc.equals(f[3]) ? null
                        : "its value has " + value.length + " bytes, CRC32C " + crc;
            }
            default -> {
                byte[] value = t.get(f[1].getBytes(StandardCharsets.UTF_8));
                long n = value == null ? -1 : Long.parseLong(new String(value, StandardCharsets.UTF_8));
                return n >= Long.parseLong(f[2]) ? null : "the counter is " + (value == null ? "absent" : n);
            }
        }
    }

    /** A running child JVM and the facts it printed; closing it deletes the file its stderr went to. */
    private static final class Child implements AutoCloseable {
        private final Process process;
        private final Path stderr;
        private final List<String> lines = new ArrayList<>();
        private final Thread reader;
        private final CountDownLatch ready = new CountDownLatch(1);
        private final CountDownLatch acknowledged = new CountDownLatch(1);
        private final long started = System.nanoTime();
        private volatile long readyAt;
        private boolean killed;

        private Child(Process process, Path stderr) {
            this.process = process;
            this.stderr = stderr;
            this.reader = Thread.ofPlatform().name("ferrite-kill-reader").daemon().start(this::read);
        }

        static Child start(Path image, int round, long seed) throws IOException {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            Path err = Files.createTempFile("ferrite-kill-child", ".err");
            Process p = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                    KillChild.class.getName(), image.toString(), Integer.toString(round), Long.toString(seed))
                    .redirectError(err.toFile()).start();
            return new Child(p, err);
        }

        /** Runs on the reader thread until the child's stdout ends. */
        private void read() {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                    if (line.equals("ready")) {
                        readyAt = System.nanoTime();
                        ready.countDown();
                    } else if (line.startsWith(KillChild.ACK)) {
                        synchronized (lines) {
                            lines.add(line.substring(KillChild.ACK.length()));
                        }
                        acknowledged.countDown();
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException("reading the child's output", e);
            }
        }

        /**
         * SIGKILLs the child {@code delay} ms after now ({@code fromStart}) or after it mounted the volume
         * and acknowledged its first fact, and waits until it is gone and its output read; returns whether
         * it had mounted the volume.
         */
        boolean killAfter(long delay, boolean fromStart) throws InterruptedException {
            if (!fromStart) { // each wait ends early if the child dies: the reader then sees the end of its output
                ready.await(60, TimeUnit.SECONDS);
                acknowledged.await(60, TimeUnit.SECONDS);
            }
            if (!process.waitFor(delay, TimeUnit.MILLISECONDS)) {
                process.destroyForcibly(); // SIGKILL
                killed = true;
            }
            process.waitFor();
            reader.join();
            return ready.getCount() == 0;
        }

        /** Milliseconds from the start to ready (the JVM's start-up and the volume's recovery and mount). */
        long mountMillis() {
            return TimeUnit.NANOSECONDS.toMillis(readyAt - started);
        }

        boolean exitedAlone() {
            return !killed;
        }

        List<String> facts() {
            synchronized (lines) {
                return List.copyOf(lines);
            }
        }

        /** The last 20 lines the child wrote on stderr. */
        String stderr() throws IOException {
            List<String> all = Files.readAllLines(stderr);
            return String.join("\n", all.subList(Math.max(0, all.size() - 20), all.size()));
        }

        @Override
        public void close() throws IOException {
            process.destroyForcibly();
            Files.deleteIfExists(stderr);
        }
    }
}
