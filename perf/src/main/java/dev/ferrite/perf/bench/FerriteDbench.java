package dev.ferrite.perf.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import dev.ferrite.dir.DirBuffer;
import dev.ferrite.dir.DirEntry;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.NamespaceException;
import dev.ferrite.dir.StatBuffer;
import dev.ferrite.dir.Volume;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.Errno;
import dev.ferrite.io.FerriteException;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.perf.bench.DbenchLoadfile.Kind;
import dev.ferrite.perf.bench.DbenchLoadfile.Op;

import org.HdrHistogram.Histogram;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/**
 * Replays a dbench loadfile through Ferrite's {@link Namespace}, doing for each operation what dbench's
 * fileio backend ({@code fileio.c}) does with system calls, so that Ferrite does the same work as a
 * kernel file system under the real {@code dbench}:
 * <ul>
 *   <li>every client is a thread with its own tree, {@code /clients/clientN} (N from 0, dbench's
 *       substitution of {@code client1}), looping over the loadfile until its time is up;
 *   <li>an operation naming a path first looks it up and, when it is missing, lists its directory (dbench
 *       simulates a server's case-insensitive name resolution so);
 *   <li>NTCreateX opens read-write ({@link Namespace#O_RDWR}): with create disposition FILE_CREATE it
 *       creates a missing file, with FILE_OVERWRITE(_IF) it also truncates to 0 (dbench's O_CREAT and
 *       O_CREAT|O_TRUNC; the other dispositions only open), and with create option FILE_DIRECTORY_FILE it
 *       makes the directory first and opens it read-only; a directory opens read-only, as dbench retries
 *       with O_DIRECTORY after EISDIR;
 *   <li>ReadX/WriteX read and write at the loadfile's offsets and sizes from a buffer placed as dbench's
 *       calloc places it (16 bytes into a page), so that all of them, aligned or not, take the buffered
 *       path (Ferrite sends a call aligned in offset, length and buffer straight to the device; the kernel
 *       serves dbench's from its page cache); QUERY_PATH/FILE_INFORMATION stat, QUERY_FS_INFORMATION is statfs,
 *       SET_FILE_INFORMATION sets the times by path as dbench's utime does, Flush is fsync (the only
 *       fsync: no O_SYNC), FIND_FIRST lists the directory when the name holds a wildcard, Deltree unlinks
 *       the files of a tree and leaves its directories, LockX/UnlockX take {@link ByteRangeLocks}.
 * </ul>
 * Every operation's status is compared with the one the loadfile expects, mapped from Ferrite's errno by
 * {@link NtStatus#ofErrno}; where dbench does not look at a result (Mkdir, Deltree) neither does this.
 * The measurement is dbench's: a warm-up, then the bytes of the ReadX and WriteX operations started in the
 * measured time over that time, and each operation's count, mean and largest latency. Ferrite has no
 * byte-range lock calls; the lock table is in this process, as dbench's fcntl locks are in the kernel.
 */
public final class FerriteDbench {
    /** Mismatches kept as examples, per client. */
    private static final int SAMPLES = 5;
    private static final int DIR_PAGE = 256;
    /** A name's longest, in bytes. */
    private static final int MAX_NAME = 255;
    private static final byte[] DOT = {'.'}, DOT_DOT = {'.', '.'};
    /** The clients' thread names, then "-" and the client's number. */
    static final String WORKERS = "dbench-ferrite";
    /** A large calloc'd block's address modulo the page size under glibc (its chunk header). */
    private static final int MALLOC_OFFSET = 16;
    private static final long TEN_SECONDS = TimeUnit.SECONDS.toNanos(10), TWELVE_SECONDS = TimeUnit.SECONDS.toNanos(12);
    /** dbench's create options and dispositions (MS-SMB2 values). */
    private static final int FILE_DIRECTORY_FILE = 0x1;
    private static final int FILE_CREATE = 2, FILE_OVERWRITE = 4, FILE_OVERWRITE_IF = 5;

    private final Volume volume;
    private final Namespace ns;
    private final DbenchLoadfile load;
    private final ByteRangeLocks locks = new ByteRangeLocks();

    public FerriteDbench(Volume volume, DbenchLoadfile load) {
        this.volume = volume;
        this.ns = volume.namespace();
        this.load = load;
    }

    /**
     * Runs {@code clients} clients for a warm-up of {@code warmupSeconds} and then {@code seconds} measured,
     * then removes their files as dbench's cleanup does (unmeasured).
     *
     * @throws FerriteException if a client fails other than by a status (a device error, a corrupt volume)
     */
    public DbenchResult run(int clients, double seconds, double warmupSeconds, Progress progress) {
        return run(clients, seconds, warmupSeconds, progress, null);
    }

    /** The same, with the measured operations of {@code stalls}' length or more split by what they spent their time on. */
    DbenchResult run(int clients, double seconds, double warmupSeconds, Progress progress, Stalls stalls) {
        long warmup = TimeUnit.MILLISECONDS.toNanos(Math.round(warmupSeconds * 1000));
        long measured = TimeUnit.MILLISECONDS.toNanos(Math.round(seconds * 1000));
        String phase = "dbench x" + clients;
        PhaseTimer timer = new PhaseTimer(phase, "ferrite", warmup + measured, progress);
        long from = timer.start() + warmup, to = from + measured;
        ThreadCounts done = new ThreadCounts(clients);
        AtomicBoolean stop = new AtomicBoolean();
        Client[] cs = new Client[clients];
        CpuMeter.Sample cpu = CpuMeter.sample();
        Throwable failure;
        try (Arena arena = Arena.ofShared()) {
            for (int i = 0; i < clients; i++) {
                cs[i] = new Client(i, arena, from, to, stalls);
            }
            failure = Workers.run(clients, WORKERS, timer, done::total, stop, id -> cs[id].run(stop, done));
            timer.finish(System.nanoTime());
        }
        double cpus = CpuMeter.busyCpusSince(cpu);
        if (failure != null) {
            throw new FerriteException("dbench on ferrite with " + clients + " clients failed: " + failure.getMessage(), failure);
        }
        cleanup(clients);
        return result(cs, clients, measured, cpus);
    }

    private DbenchResult result(Client[] cs, int clients, long measuredNanos, double cpus) {
        List<DbenchResult.OpRow> rows = new ArrayList<>();
        long bytes = 0, mismatches = 0;
        List<String> samples = new ArrayList<>();
        for (Client c : cs) {
            bytes += c.bytes;
            mismatches += c.mismatches;
            samples.addAll(c.samples);
        }
        long maxNanos = 0;
        for (Kind k : Kind.values()) {
            long count = 0, total = 0, max = 0;
            Histogram h = latencyHistogram();
            for (Client c : cs) {
                count += c.count[k.ordinal()];
                total += c.totalNanos[k.ordinal()];
                max = Math.max(max, c.maxNanos[k.ordinal()]);
                h.add(c.latency[k.ordinal()]);
            }
            if (count > 0) {
                maxNanos = Math.max(maxNanos, max);
                rows.add(new DbenchResult.OpRow(k, count, total / 1e6 / count, max / 1e6, h.getValueAtPercentile(99.9) / 1e6));
            }
        }
        return new DbenchResult("ferrite", clients, bytes * 1e3 / measuredNanos, maxNanos / 1e6, rows, mismatches,
                samples.subList(0, Math.min(samples.size(), 2 * SAMPLES)), cpus);
    }

    /**
     * A client's read/write buffer where glibc's calloc puts dbench's: 16 bytes into a page, so that no call
     * is aligned for the direct path and every ReadX/WriteX goes through the page cache, as dbench's go
     * through the kernel's.
     */
    static MemorySegment ioBuffer(Arena arena, int size) {
        return arena.allocate(size + MALLOC_OFFSET, BlockDevice.BUFFER_ALIGNMENT).asSlice(MALLOC_OFFSET, size);
    }

    /** What dbench's cleanup does: each client's tree goes, then {@code /clients}. */
    private void cleanup(int clients) {
        for (int i = 0; i < clients; i++) {
            deltree("/clients/client" + i);
        }
        try {
            ns.rmdir("/clients");
        } catch (NamespaceException e) {
            // not there, or another replay's clients are: as dbench's rmdir, ignored
        }
    }

    /**
     * Removes the tree at {@code dir}, files and directories, errors ignored. (dbench's fileio backend
     * unlinks only the files and leaves the directories, so from the loadfile's second pass on the tree is
     * not the one the loadfile's statuses were recorded against: its QUERY_PATH_INFORMATION of a directory
     * it is about to make finds it. Removing them too costs a dozen rmdirs per pass of client.txt.)
     */
    private void deltree(String dir) {
        List<DirEntry> entries;
        try {
            entries = ns.list(dir);
        } catch (NamespaceException e) {
            return;
        }
        for (DirEntry e : entries) {
            String path = dir + "/" + e.name();
            try {
                if (e.isDirectory()) {
                    deltree(path);
                } else {
                    ns.unlink(path);
                }
            } catch (NamespaceException ignored) {
                // gone meanwhile
            }
        }
        try {
            ns.rmdir(dir);
        } catch (NamespaceException ignored) {
            // something was made in it meanwhile, or it is gone
        }
    }

    /** A file a client has open under a loadfile handle number. */
    private static final class Open {
        final Handle handle;
        final int path;

        Open(Handle handle, int path) {
            this.handle = handle;
            this.path = path;
        }
    }

    /**
     * A histogram of one kind of operation's latencies: two significant digits (1%), grown as values need.
     * A client records into one per kind of operation (sixteen), and at three digits each held ~200 KB of
     * counts: their cache misses were 5% of an 8-client run's samples, a cost dbench's own clients, which
     * keep a mean and a max, do not pay. The max is kept exactly beside it.
     */
    private static Histogram latencyHistogram() {
        return new Histogram(2);
    }

    /** One client: its paths, open files, buffer and counters, used by its own thread only. */
    private final class Client {
        final int id;
        final String[] paths;
        final DosPattern[] patterns;
        /** Each path's directory and last name (UTF-8), split once: a lookup that misses searches the one for the other. */
        final String[] parents;
        final byte[][] lasts;
        /** The entries a search lists, and the name of one: reused, as dbench's readdir fills libc's buffer. */
        final DirBuffer listing = new DirBuffer(DIR_PAGE);
        final byte[] listed = new byte[MAX_NAME];
        /** The attributes a stat reads, reused: a dbench client's stat fills a struct, allocating nothing either. */
        final StatBuffer st = new StatBuffer();
        final Map<Integer, Open> open = new HashMap<>();
        final MemorySegment buffer;
        final long from, to;
        final long[] count = new long[Kind.values().length];
        final long[] totalNanos = new long[Kind.values().length];
        final long[] maxNanos = new long[Kind.values().length];
        /** Latencies for the p99.9 column (dbench keeps only the mean and max): see {@link #latencyHistogram()}. */
        final Histogram[] latency = new Histogram[Kind.values().length];
        final List<String> samples = new ArrayList<>();
        /** Its slow measured operations, when watched. */
        final Stalls.Log slow;
        long bytes, mismatches;
        /** Bytes the last ReadX returned, for its mismatch message. */
        int lastRead;

        Client(int id, Arena arena, long from, long to, Stalls stalls) {
            this.id = id;
            this.slow = stalls == null ? null : stalls.log();
            this.paths = load.clientPaths("", "client" + id);
            this.patterns = new DosPattern[paths.length];
            this.parents = new String[paths.length];
            this.lasts = new byte[paths.length][];
            this.from = from;
            this.to = to;
            int size = Math.max(load.maxIoSize(), 1);
            this.buffer = ioBuffer(arena, size);
            for (long i = 0; i < size; i++) {
                buffer.set(JAVA_BYTE, i, (byte) (i * 31 + id));
            }
            for (int k = 0; k < latency.length; k++) {
                latency[k] = latencyHistogram();
            }
        }

        void run(AtomicBoolean stop, ThreadCounts done) throws InterruptedException {
            List<Op> ops = load.ops();
            long n = 0;
            try {
                while (true) {
                    for (Op op : ops) {
                        long t0 = System.nanoTime();
                        if (t0 - to >= 0 || stop.get()) {
                            return;
                        }
                        NtStatus status = execute(op);
                        long t1 = System.nanoTime();
                        if (t0 - from >= 0) {
                            int k = op.kind().ordinal();
                            count[k]++;
                            totalNanos[k] += t1 - t0;
                            latency[k].recordValue(t1 - t0);
                            maxNanos[k] = Math.max(maxNanos[k], t1 - t0);
                            if (slow != null) {
                                slow.record(t0, t1);
                            }
                            if (op.kind() == Kind.READX || op.kind() == Kind.WRITEX) {
                                bytes += op.c();
                            }
                        }
                        if (status != op.expected()) {
                            mismatch(op, status);
                        }
                        done.set(id, ++n);
                    }
                }
            } finally {
                for (Open o : open.values()) {
                    locks.closed(o, o.handle.ino());
                    o.handle.close();
                }
                open.clear();
            }
        }

        private void mismatch(Op op, NtStatus got) {
            mismatches++;
            if (samples.size() < SAMPLES) {
                String what = op.path() >= 0 ? " " + paths[op.path()] : " handle " + op.a();
                String detail = op.kind() == Kind.READX && got == NtStatus.END_OF_FILE
                        ? " (read " + lastRead + " of " + op.c() + " bytes at " + op.b() + ")" : "";
                samples.add(String.format(Locale.ROOT, "client %d line %d %s%s: expected %s, got %s%s", id, op.line(),
                        op.kind().loadName(), what, op.expected(), got, detail));
            }
        }

        NtStatus execute(Op op) throws InterruptedException {
            try {
                return switch (op.kind()) {
                    case NTCREATEX -> createx(op);
                    case CLOSE -> close(op);
                    case RENAME -> {
                        resolve(op.path());
                        resolve(op.path2());
                        ns.rename(paths[op.path()], paths[op.path2()]);
                        yield NtStatus.OK;
                    }
                    case UNLINK -> {
                        resolve(op.path());
                        ns.unlink(paths[op.path()]);
                        yield NtStatus.OK;
                    }
                    case DELTREE -> {
                        deltree(paths[op.path()]);
                        yield op.expected(); // dbench does not look
                    }
                    case RMDIR -> {
                        resolve(op.path());
                        ns.rmdir(paths[op.path()]);
                        yield NtStatus.OK;
                    }
                    case MKDIR -> {
                        resolve(op.path());
                        mkdirQuietly(paths[op.path()]);
                        yield op.expected(); // dbench does not look: the second client finds /clients made
                    }
                    case QUERY_PATH_INFORMATION -> resolve(op.path());
                    case QUERY_FILE_INFORMATION -> {
                        ns.stat(file(op).handle, st);
                        yield NtStatus.OK;
                    }
                    case QUERY_FS_INFORMATION -> {
                        volume.statfs();
                        yield NtStatus.OK;
                    }
                    case SET_FILE_INFORMATION -> setTimes(op);
                    case FIND_FIRST -> find(op);
                    case WRITEX -> write(op);
                    case READX -> read(op);
                    case LOCKX -> {
                        Open o = file(op);
                        locks.lock(o, o.handle.ino(), op.b(), op.c());
                        yield NtStatus.OK;
                    }
                    case UNLOCKX -> {
                        Open o = file(op);
                        yield locks.unlock(o, o.handle.ino(), op.b(), op.c());
                    }
                    case FLUSH -> {
                        ns.fsync(file(op).handle);
                        yield NtStatus.OK;
                    }
                };
            } catch (UnknownHandle e) {
                return NtStatus.INVALID_HANDLE;
            } catch (NamespaceException e) {
                return status(e.errno(), op.path());
            } catch (NoSpaceException e) {
                return NtStatus.DISK_FULL;
            }
        }

        private NtStatus createx(Op op) {
            int path = op.path();
            String name = paths[path];
            long options = op.a(), disposition = op.b();
            resolve(path);
            Handle h;
            if ((options & FILE_DIRECTORY_FILE) != 0) {
                mkdirQuietly(name);
                h = openDirectory(name);
            } else {
                boolean truncate = disposition == FILE_OVERWRITE || disposition == FILE_OVERWRITE_IF;
                if (truncate || disposition == FILE_CREATE) {
                    createQuietly(name);
                }
                h = openReadWrite(name);
                if (h == null) { // the name is missing, as the loadfile often expects: open(2)'s ENOENT
                    return status(Errno.ENOENT, path);
                }
                if (truncate && !isDirectory(h)) {
                    ns.truncate(h, 0);
                }
            }
            if (op.expected() != NtStatus.OK) {
                h.close(); // opened where the server refused: dbench closes it and goes on
                return NtStatus.OK;
            }
            Open previous = open.put((int) op.c(), new Open(h, path));
            if (previous != null) { // the loadfile reuses a number it never closed: that file is lost to it
                locks.closed(previous, previous.handle.ino());
                previous.handle.close();
            }
            return NtStatus.OK;
        }

        /** O_CREAT without O_EXCL: the file made if it is missing; a directory there is left to the open to find. */
        private void createQuietly(String name) {
            try {
                ns.create(name, 0600, false);
            } catch (NamespaceException e) {
                if (e.errno() != Errno.EISDIR) {
                    throw e;
                }
            }
        }

        /**
         * O_RDWR, and a directory opened read-only instead, as dbench retries with O_DIRECTORY after EISDIR;
         * null if the name is missing.
         */
        private Handle openReadWrite(String name) {
            try {
                return ns.openIfExists(name, Namespace.O_RDWR);
            } catch (NamespaceException e) {
                if (e.errno() != Errno.EISDIR) {
                    throw e;
                }
                return openDirectory(name);
            }
        }

        /** O_RDONLY | O_DIRECTORY: ENOTDIR for anything but a directory. */
        private Handle openDirectory(String name) {
            Handle h = ns.open(name, Namespace.O_RDONLY);
            if (!isDirectory(h)) {
                h.close();
                throw new NamespaceException(Errno.ENOTDIR, name + " is not a directory");
            }
            return h;
        }

        private boolean isDirectory(Handle h) {
            ns.stat(h, st);
            return st.isDirectory();
        }

        private NtStatus close(Op op) {
            Open o = open.remove((int) op.a());
            if (o == null) {
                throw new UnknownHandle();
            }
            locks.closed(o, o.handle.ino());
            o.handle.close();
            return NtStatus.OK;
        }

        private NtStatus setTimes(Op op) {
            Open o = file(op);
            ns.stat(o.handle, st);
            ns.setattr(paths[o.path], -1, -1, -1, st.atimeNanos() - TEN_SECONDS, st.mtimeNanos() - TWELVE_SECONDS);
            return NtStatus.OK;
        }

        private NtStatus write(Op op) {
            Open o = file(op);
            int size = (int) op.c();
            ns.write(o.handle, op.b(), buffer.asSlice(0, size));
            return NtStatus.OK;
        }

        private NtStatus read(Op op) {
            Open o = file(op);
            int size = (int) op.c();
            lastRead = ns.read(o.handle, op.b(), buffer.asSlice(0, size));
            return lastRead == op.d() ? NtStatus.OK : NtStatus.END_OF_FILE;
        }

        /**
         * FIND_FIRST: a name without wildcards is only looked up (dbench does no more); a pattern lists its
         * directory until {@code maxcnt} entries have matched. OK if any matched ({@code .} and {@code ..} count,
         * as a server lists them), NO_SUCH_FILE if none, OBJECT_PATH_NOT_FOUND without the directory.
         */
        private NtStatus find(Op op) {
            int path = op.path();
            NtStatus found = resolve(path);
            String name = paths[path];
            int slash = name.lastIndexOf('/');
            String pattern = name.substring(slash + 1);
            if (!DosPattern.isPattern(pattern)) {
                return found == NtStatus.OK ? NtStatus.OK : found == NtStatus.OBJECT_NAME_NOT_FOUND ? NtStatus.NO_SUCH_FILE : found;
            }
            DosPattern p = patterns[path];
            if (p == null) {
                p = patterns[path] = new DosPattern(pattern);
            }
            String dir = slash == 0 ? "/" : name.substring(0, slash);
            long want = Math.max(op.b(), 1), matched = (p.matches(DOT, 1) ? 1 : 0) + (p.matches(DOT_DOT, 2) ? 1 : 0);
            try {
                listing.rewind();
                for (boolean end = false; !end && matched < want; ) {
                    int n = ns.readdir(dir, listing);
                    for (int i = 0; i < n; i++) {
                        if (p.matches(listed, listing.copyName(i, listed))) {
                            matched++;
                        }
                    }
                    end = listing.end();
                }
            } catch (NamespaceException e) {
                return e.errno() == Errno.ENOENT || e.errno() == Errno.ENOTDIR ? NtStatus.OBJECT_PATH_NOT_FOUND
                        : NtStatus.ofErrno(e.errno(), false);
            }
            return matched > 0 ? NtStatus.OK : NtStatus.NO_SUCH_FILE;
        }

        /**
         * dbench's resolve_name: stat the path, and if it is missing, list its directory (a server searching
         * for the name case-insensitively). Returns the stat's status, as QUERY_PATH_INFORMATION answers.
         */
        private NtStatus resolve(int path) {
            int errno = Errno.ENOENT;
            try {
                if (ns.statIfExists(paths[path], st)) {
                    return NtStatus.OK;
                }
            } catch (NamespaceException e) {
                errno = e.errno();
            }
            split(path);
            byte[] last = lasts[path];
            try {
                listing.rewind();
                for (boolean end = false; !end; ) {
                    int n = ns.readdir(parents[path], listing);
                    for (int i = 0; i < n; i++) {
                        if (sameIgnoringCase(last, listed, listing.copyName(i, listed))) {
                            end = true;
                            break;
                        }
                    }
                    end |= listing.end();
                }
            } catch (NamespaceException dirMissing) {
                // no directory to search
            }
            return status(errno, path);
        }

        /** Splits path number {@code path} into {@link #parents} and {@link #lasts}, once. */
        private void split(int path) {
            if (parents[path] == null) {
                String name = paths[path];
                int slash = name.lastIndexOf('/');
                parents[path] = slash == 0 ? "/" : name.substring(0, slash);
                lasts[path] = name.substring(slash + 1).getBytes(StandardCharsets.UTF_8);
            }
        }

        /** Whether {@code name} is {@code entry[0, length)} with ASCII letters folded, as {@code strcasecmp} compares. */
        private static boolean sameIgnoringCase(byte[] name, byte[] entry, int length) {
            if (name.length != length) {
                return false;
            }
            for (int i = 0; i < length; i++) {
                byte a = name[i], b = entry[i];
                if (a != b && ((a | 0x20) != (b | 0x20) || (a | 0x20) < 'a' || (a | 0x20) > 'z')) {
                    return false;
                }
            }
            return true;
        }

        private void mkdirQuietly(String name) {
            try {
                ns.mkdir(name, 0777);
            } catch (NamespaceException e) {
                // dbench ignores mkdir's result: the directory is usually there already
            }
        }

        private Open file(Op op) {
            Open o = open.get((int) op.a());
            if (o == null) {
                throw new UnknownHandle();
            }
            return o;
        }

        /** The status for {@code errno} on {@code path} (-1: a handle): a missing directory on the way is a missing path. */
        private NtStatus status(int errno, int path) {
            return NtStatus.ofErrno(errno, errno == Errno.ENOENT && path >= 0 && parentMissing(path));
        }

        private boolean parentMissing(int path) {
            String name = paths[path];
            int slash = name.lastIndexOf('/');
            if (slash <= 0) {
                return false;
            }
            split(path);
            try {
                return !ns.statIfExists(parents[path], st) || !st.isDirectory();
            } catch (NamespaceException e) {
                return true;
            }
        }
    }

    /** A loadfile handle number no NTCreateX opened (or already closed): dbench stops there; this counts it. */
    private static final class UnknownHandle extends RuntimeException {
        UnknownHandle() {
            super(null, null, false, false);
        }
    }
}
