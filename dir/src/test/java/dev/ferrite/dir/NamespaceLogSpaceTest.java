package dev.ferrite.dir;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;

import dev.ferrite.btree.internal.BufferCache;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A namespace writer that waits for log space must hold no lock while it waits: the test takes every
 * free byte of the log with transactions it keeps open (after a checkpoint, so the AIL has nothing to
 * push that could free more), starts one writer, and once that writer is parked in the journal's grant
 * queue, reads the directory it changes (open, which takes the inode's lock, lookup, lstat, readdir) and
 * opens the entry it changes: each must finish while the writer still waits.
 */
class NamespaceLogSpaceTest {
    private static final long READER_BOUND_MS = 3_000;
    private static final String LONG_TARGET = "t".repeat(3000); // a symlink with a block of its own

    @ParameterizedTest
    @ValueSource(strings = {"mkdir", "create", "symlink", "longSymlink", "link", "unlink", "rmdir", "rename", "renameOver", "setattr"})
    void readersAreNotBlockedByAWriterWaitingForLogSpace(String op) throws Exception {
        run(op, false);
    }

    /** The same in a directory kept in a tree, whose changes may need a reserve refill or spill first. */
    @ParameterizedTest
    @ValueSource(strings = {"mkdir", "create", "longSymlink", "link", "unlink", "rmdir", "renameOver"})
    void inATreeDirectory(String op) throws Exception {
        run(op, true);
    }

    private static void run(String op, boolean tree) throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(16384, 4096)) {
            Volume.format(dev, VolumeFixtures.OPTIONS);
            try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
                Namespace ns = v.namespace();
                ns.mkdir("/d", 0755);
                ns.create("/d/f", 0644, true);
                ns.create("/d/g", 0644, true);
                ns.mkdir("/d/e", 0755);
                for (int i = 0; tree && i < 300; i++) {
                    ns.create("/d/n" + i, 0644, true);
                }
                Consumer<Namespace> writer = switch (op) {
                    case "mkdir" -> n -> n.mkdir("/d/x", 0755);
                    case "create" -> n -> n.create("/d/x", 0644, true);
                    case "symlink" -> n -> n.symlink("f", "/d/x");
                    case "longSymlink" -> n -> n.symlink(LONG_TARGET, "/d/x");
                    case "link" -> n -> n.link("/d/f", "/d/x");
                    case "unlink" -> n -> n.unlink("/d/f");
                    case "rmdir" -> n -> n.rmdir("/d/e");
                    case "rename" -> n -> n.rename("/d/f", "/d/x");
                    case "renameOver" -> n -> n.rename("/d/f", "/d/g");
                    case "setattr" -> n -> n.setattr("/d", 0700, -1, -1, -1, -1);
                    default -> throw new IllegalArgumentException(op);
                };
                v.quiesce(); // everything home: nothing the AIL could push to free log space
                List<Txn> hog = takeAllLogSpace(v);
                Thread w;
                CompletableFuture<Void> written = new CompletableFuture<>();
                try {
                    w = Thread.ofPlatform().name("log-space-writer").start(() -> {
                        try {
                            writer.accept(ns);
                            written.complete(null);
                        } catch (Throwable t) {
                            written.completeExceptionally(t);
                        }
                    });
                    awaitWaitingForLogSpace(w, v);
                    CompletableFuture<Void> read = CompletableFuture.runAsync(() -> {
                        try (Handle h = ns.open("/d")) {
                            assertTrue(ns.stat(h).isDirectory());
                        }
                        ns.lookup("/d/f");
                        ns.lstat("/d");
                        ns.readdir("/d", DirCookie.START, 16);
                        try (Handle h = ns.open("/d/f")) {
                            assertTrue(ns.stat(h).nlink() >= 1);
                        }
                    }, r -> Thread.ofPlatform().daemon().name("log-space-reader").start(r));
                    try {
                        read.get(READER_BOUND_MS, TimeUnit.MILLISECONDS);
                    } catch (TimeoutException e) {
                        fail(op + ": a reader of /d waited over " + READER_BOUND_MS + " ms behind a writer waiting for log space ("
                                + v.diagnostics() + ")");
                    } catch (ExecutionException e) {
                        throw new AssertionError(op + ": the reader failed", e.getCause());
                    }
                    assertTrue(w.isAlive() && !written.isDone(), op + ": the writer should still be waiting for log space");
                } finally {
                    for (Txn t : hog) {
                        t.close();
                    }
                }
                written.get(30, TimeUnit.SECONDS);
                w.join();
                CheckReport report = ns.check();
                assertTrue(report.clean(), op + ": " + report);
            }
        }
    }

    /**
     * Begins transactions, each under half the log (the most one may reserve), until what is left would
     * not fit the smallest one: every later reservation waits until these close.
     */
    private static List<Txn> takeAllLogSpace(Volume v) {
        BufferCache cache = v.cache();
        List<Txn> hog = new ArrayList<>();
        long free0 = v.journalStats().freeBytes();
        hog.add(Txn.begin(cache, 1));
        long one = free0 - v.journalStats().freeBytes();
        hog.add(Txn.begin(cache, 2));
        long perItem = free0 - one - v.journalStats().freeBytes() - one;
        long half = v.journalStats().logBytes() / 2;
        for (long free; (free = v.journalStats().freeBytes()) >= one; ) {
            long bytes = Math.min(free, half);
            int items = (int) Math.max(1, (bytes - (one - perItem)) / perItem);
            hog.add(Txn.begin(cache, items));
        }
        return hog;
    }

    /**
     * Waits (bounded) until {@code w} is parked inside the journal: with every byte of the log taken,
     * that is the grant queue of {@code Journal.begin}.
     */
    private static void awaitWaitingForLogSpace(Thread w, Volume v) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            Thread.State s = w.getState();
            if (s == Thread.State.WAITING || s == Thread.State.TIMED_WAITING) {
                for (StackTraceElement e : w.getStackTrace()) {
                    if (e.getClassName().startsWith("dev.ferrite.journal.")) { // parked in the grant queue (Journal.begin)
                        return;
                    }
                }
            }
            if (!w.isAlive()) {
                fail("the writer finished without waiting for log space");
            }
            Thread.onSpinWait();
        }
        fail("the writer did not come to wait for log space: " + v.diagnostics());
    }
}
