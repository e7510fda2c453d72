package dev.ferrite.perf.fuzz;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.dir.CheckReport;
import dev.ferrite.dir.DirEntry;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.TableCursor;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.WriteTransaction;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.FerriteException;

/**
 * Puts one hostile image through everything a user does: mount (recovery), walk every directory
 * (stat, lstat, readlink, open, read every file), read every table (cursor, get), write (create,
 * mkdir, write, rename, unlink, table puts and deletes), sync, check, unmount, then mount and check
 * the result again. Each step may fail only with a {@link FerriteException} (the answer to a damaged
 * image), and one that does is skipped; any other exception, from the API or (as the cause of a
 * shutdown) from a background thread, is a {@link Failure}.
 */
final class Exercise {
    /** Directory entries walked at most per image: a grafted tree may list a subtree many times, or itself. */
    private static final int WALK_LIMIT = 5_000;
    private static final int DEPTH_LIMIT = 40;

    /** What went wrong: a JDK exception where only Ferrite's may come out. */
    static final class Failure extends RuntimeException {
        Failure(String step, Throwable cause) {
            super(step + ": " + cause, cause);
        }
    }

    private final List<String> notes = new ArrayList<>();
    private int walked;

    /** Runs the image; returns a short account of how it answered (a refusal, problems found, or clean). */
    static String run(BlockDevice image) {
        return new Exercise().use(image);
    }

    private String use(BlockDevice image) {
        if (!mountAndUse(image, true)) {
            return String.join("; ", notes);
        }
        mountAndUse(image, false); // the image as the first mount left it: recovering it again must hold up too
        return String.join("; ", notes);
    }

    /** One mount; false if it was refused. */
    private boolean mountAndUse(BlockDevice image, boolean change) {
        Volume v;
        try {
            v = Volume.open(image, BaseImage.OPTIONS);
        } catch (FerriteException e) {
            accept("mount", e);
            notes.add("mount refused: " + e.getClass().getSimpleName());
            return false;
        } catch (RuntimeException | Error e) {
            throw new Failure("mount", e);
        }
        try {
            step("walk", () -> {
                Namespace ns = v.namespace();
                walk(ns, "/", 0);
            });
            step("tables", () -> readTables(v));
            if (change) {
                step("write", () -> write(v));
                step("sync", v::sync);
            }
            step("check", () -> {
                CheckReport r = v.namespace().check();
                notes.add(r.clean() ? "checked clean" : "check found " + r.problems().size() + " problems");
            });
        } finally {
            step("unmount", v::close);
        }
        return true;
    }

    private void walk(Namespace ns, String dir, int depth) {
        List<DirEntry> entries;
        try {
            entries = ns.list(dir);
        } catch (FerriteException e) {
            accept("list " + dir, e);
            return;
        }
        for (DirEntry e : entries) {
            if (++walked > WALK_LIMIT) {
                return;
            }
            String p = (dir.equals("/") ? "" : dir) + "/" + e.name();
            step("lstat " + p, () -> ns.lstat(p));
            InodeStat st;
            try {
                st = ns.stat(p);
            } catch (FerriteException ex) {
                accept("stat " + p, ex);
                step("readlink " + p, () -> ns.readlink(p));
                continue;
            }
            int type = st.mode() & 0170000;
            if (type == 0040000) {
                if (depth < DEPTH_LIMIT) {
                    walk(ns, p, depth + 1);
                }
            } else if (type == 0120000) {
                step("readlink " + p, () -> ns.readlink(p));
            } else {
                step("read " + p, () -> read(ns, p));
            }
        }
    }

    private static void read(Namespace ns, String path) {
        try (Handle h = ns.open(path); Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(64 * 1024, BlockDevice.BUFFER_ALIGNMENT);
            long size = Math.min(ns.stat(h).size(), 64L << 20);
            for (long off = 0; off < size; ) {
                int n = ns.read(h, off, buf);
                if (n <= 0) {
                    break;
                }
                off += n;
            }
            ns.read(h, 3, ByteBuffer.allocate(5000)); // the buffered path too
            ns.extents(h, 0, Long.MAX_VALUE / 2);
        }
    }

    private void readTables(Volume v) {
        for (String name : v.tables().list()) {
            step("table " + name, () -> {
                Table t = v.tables().open(name);
                try (TableCursor c = t.cursor()) {
                    for (int n = 0; n < 20_000 && c.next(); n++) {
                        t.get(c.key());
                    }
                }
            });
        }
    }

    private void write(Volume v) {
        Namespace ns = v.namespace();
        step("create", () -> {
            ns.create("/fuzz-new", 0644, true);
            try (Handle h = ns.open("/fuzz-new")) {
                ns.write(h, 0, ByteBuffer.wrap("hostile".getBytes(StandardCharsets.UTF_8)));
                ns.write(h, 1 << 16, ByteBuffer.allocate(3 * BaseImage.BLOCK_SIZE));
                ns.fsync(h);
            }
        });
        step("mkdir", () -> ns.mkdir("/tree/fuzz-dir", 0755));
        step("append", () -> {
            try (Handle h = ns.open("/frag")) {
                ns.append(h, ByteBuffer.allocate(10_000));
                ns.truncate(h, 50_000);
            }
        });
        step("rename", () -> ns.rename("/a/b", "/tree/b-moved"));
        step("unlink", () -> ns.unlink("/tree/file-with-a-longer-name-21"));
        step("rmdir", () -> ns.rmdir("/tree/d20"));
        step("overwrite", () -> {
            try (Handle h = ns.open("/big"); Arena arena = Arena.ofConfined()) {
                ns.write(h, 4096, arena.allocate(8192, BlockDevice.BUFFER_ALIGNMENT));
            }
        });
        step("table write", () -> {
            Table t = v.tables().openOrCreate("big");
            try (WriteTransaction tx = v.begin()) {
                for (int i = 0; i < 50; i++) {
                    tx.put(t, ("fuzz-" + i).getBytes(StandardCharsets.UTF_8), new byte[i * 20]);
                }
                tx.delete(t, "key-00100".getBytes(StandardCharsets.UTF_8));
                tx.commit();
            }
        });
        step("table drop", () -> v.tables().drop("blobs"));
    }

    private void step(String what, Runnable r) {
        try {
            r.run();
        } catch (FerriteException e) {
            accept(what, e);
        } catch (Failure f) {
            throw f; // an inner step's
        } catch (RuntimeException | Error e) {
            throw new Failure(what, e);
        }
    }

    /**
     * A Ferrite exception is an answer, unless it carries a JDK exception from somewhere inside (a
     * background thread's, as the cause of a shutdown). The engine's own deliberate stops are answers too:
     * an IllegalStateException or IllegalArgumentException thrown by Ferrite code (a transaction that met
     * a corrupt block after changing others shuts the journal down so, and its caller got the
     * CorruptionException).
     */
    private static void accept(String what, FerriteException e) {
        for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
            if (!(c instanceof FerriteException) && !thrownByFerrite(c)) {
                throw new Failure(what + " (" + e.getClass().getSimpleName() + " caused by)", c);
            }
        }
    }

    private static boolean thrownByFerrite(Throwable t) {
        StackTraceElement[] st = t.getStackTrace();
        return (t instanceof IllegalStateException || t instanceof IllegalArgumentException) && st.length > 0
                && st[0].getClassName().startsWith("dev.ferrite.");
    }
}
