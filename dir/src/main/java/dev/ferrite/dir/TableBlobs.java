package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import java.util.zip.CRC32C;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.internal.BufferPool;

/**
 * Table values too long for a B-tree cell ({@link TableValueFormat#MAX_INLINE}) kept out of line: each in
 * a regular file of a directory that no path reaches (group 0's AGI names it), written to the device by
 * a direct write ({@link #writeData}) before the key that names it commits, not fsync'd. What a crash must not separate is ordered by the log: the file's
 * extents and size commit after its data (ordered after it), and the key's commit after them, itself
 * ordered after data, so no checkpoint holding the key is written before a flush that follows the data;
 * a {@code SYNC} commit's force then makes both durable, and a {@code NONE} insert forces nothing. A
 * blob's file is named {@code l<id>} from its create on, and its inode's {@link InodeFormat#FLAG_DOOMED}
 * says its state, so that a crash never leaks one:
 * <ul>
 *   <li>flagged, pending: written, no key names it yet (its commit is being applied, or failed). The create
 *       sets the flag in the inode's first record, in its own transaction, so that a crash at any point
 *       before the commit leaves a flagged file;</li>
 *   <li>not flagged, live: a key names it. A commit clears the flag in the same journal group as the key's
 *       change, so both are recovered or neither;</li>
 *   <li>flagged again, doomed: its key was deleted, or changed to another value (the flag set in that
 *       change's group); deleted once no snapshot can read it, in the background ({@link ParkedThread}): the
 *       commit only queues it.</li>
 * </ul>
 * Each change of state is one inode record's change. A pending blob used to be named {@code p<id>} and
 * renamed {@code l<id>} at its commit (a key's blob replaced by another exchanged the two names), a doomed
 * one renamed {@code d<id>}: a rename deletes a directory entry and inserts another. A mount still
 * deletes the {@code p} and {@code d} files older code left.
 * A mount deletes every pending and doomed blob (no open snapshot survives a crash), so a crash before the
 * reaper got to a doomed blob leaks nothing. {@link Volume#sync} deletes the blobs doomed before it on its
 * own thread if the reaper has not, and an unmount those still queued. Reads open the file by inode number,
 * so a doomed blob a snapshot still reads is found whatever its name.
 */
final class TableBlobs {
    /**
     * Bounce buffers for values not already in whole aligned blocks ({@link #writeData}): one for each
     * processor, {@link #BOUNCE_MAX} bytes of address space each, memory only for what values touched;
     * one pool for the process, made at the first blob write and never freed, as {@code Tables}' staging.
     */
    private static final class Bounces {
        static final BufferPool POOL = new BufferPool(BOUNCE_MAX, Runtime.getRuntime().availableProcessors());
    }

    private static final System.Logger LOG = System.getLogger(TableBlobs.class.getName());
    private static final int DIR_MODE = InodeFormat.S_IFDIR | 0700;
    /** The longest value written to the device in one direct write (from frames or a bounce buffer); longer ones go through the page cache. */
    static final int BOUNCE_MAX = 4 << 20;

    private final Volume volume;
    private final Namespace namespace;
    private final TableVersions versions;
    /** Ids: taken from the clock at mount and counted up, so that ids stay unique across mounts (an id met again is skipped). */
    private final AtomicLong ids = new AtomicLong(System.currentTimeMillis() << 20);
    /** The file names of doomed blobs waiting for the snapshots that may read them to close, and for the reaper, in commit order. */
    private final ConcurrentLinkedQueue<String> doomed = new ConcurrentLinkedQueue<>();
    /**
     * Held while taking a doomed blob off the queue and deleting it, by the reaper and by a sync: a sync
     * that holds it knows that the blobs the reaper took are gone, and deletes the rest itself. A volume
     * check holds it throughout ({@link #holdingDeletions}).
     */
    private final ReentrantLock reaping = new ReentrantLock();
    final ParkedThread reaper = new ParkedThread("ferrite-blob-reaper", this::reap);
    /** Tests: run by the reaper thread before each blob it deletes (to hold it back). */
    volatile Runnable beforeReap;
    /** Tests: run by whoever deletes a doomed blob, once it has taken it off the queue, before deleting it. */
    volatile Runnable whileReaping;
    /** The blob directory's inode once known to exist. */
    private volatile long known;
    /** The superblock has {@link SuperblockFormat#INCOMPAT_DOOMED_BLOBS} (known from this mount's first doom on). */
    private volatile boolean doomFlags;

    TableBlobs(Volume volume, Namespace namespace, TableVersions versions) {
        this.volume = volume;
        this.namespace = namespace;
        this.versions = versions;
    }

    static String name(char state, long id) {
        return state + Long.toHexString(id);
    }

    /** The blob directory's inode, 0 if the volume has none. */
    long directory() {
        long d = known;
        if (d == 0) {
            known = d = volume.group(0).blobDirectory(); // once made it stays: read the header until then only
        }
        return d;
    }

    private synchronized long requireDirectory() {
        long d = directory();
        if (d == 0) {
            volume.allocInode(0, DIR_MODE, 0, 0, 2, 1, (txn, ino) -> volume.group(0).setTablesInode(txn, AgHeaderFormat.BLOBS, ino));
            d = directory();
        }
        return d;
    }

    private Handle openDirectory(long d) {
        Handle h = namespace.openInode(d);
        if (h == null) {
            throw new CorruptionException(-1, "table blob directory", "group 0 names inode " + d + ", which has no links");
        }
        return h;
    }

    /**
     * Writes {@code value} to a new pending blob, on the device (not forced: see the class comment); the
     * caller links it or discards it. The file is made flagged doomed (the superblock's feature set first,
     * so that a mount reads the flag and older code refuses the volume).
     */
    TableValueFormat.Blob write(MemorySegment value) {
        long dir = requireDirectory();
        featureDoomFlags();
        CRC32C crc = new CRC32C();
        crc.update(value.asByteBuffer());
        try (Handle d = openDirectory(dir)) {
            for (;;) {
                long id = ids.incrementAndGet();
                Handle f;
                try {
                    f = namespace.createFlagged(d, name('l', id), 0600, InodeFormat.FLAG_DOOMED);
                } catch (NamespaceException e) {
                    if (e.errno() == Errno.EEXIST) {
                        continue; // an id of an earlier mount's blob
                    }
                    throw e;
                }
                try (f) {
                    writeData(f, value); // on the device, its extents committed, before any key can name it
                    return new TableValueFormat.Blob(id, f.ino(), namespace.records.statIno(f.ino()).generation(), (int) crc.getValue(),
                            value.byteSize());
                } catch (RuntimeException e) {
                    discard(id);
                    throw e;
                }
            }
        }
    }

    /**
     * Writes {@code value} into new blob file {@code f}: straight to the device from an aligned native
     * buffer (the caller's; else a run of free page-cache frames it is copied into, which become its
     * pages; else a bounce buffer; the last block padded with zeros), the file's size its exact length,
     * its pages cached clean for the reads that follow; a value over
     * {@link #BOUNCE_MAX} bytes, or one finding every bounce buffer lent, through the page cache, written
     * back. The buffered write took a copy more (a staging copy of each page at write-back) and a
     * reservation, dirty mark and write-back per page.
     */
    private void writeData(Handle f, MemorySegment value) {
        long block = volume.geometry().blockSize();
        long length = value.byteSize(), whole = (length + block - 1) / block * block;
        if (length == whole && value.isNative() && (value.address() & (BlockDevice.BUFFER_ALIGNMENT - 1)) == 0) {
            namespace.files.writeBlocks(f, 0, value, length);
            namespace.files.buffered.keepClean(f, f.requireOpen(), value);
            return;
        }
        if (whole <= BOUNCE_MAX && writeFromFrames(f, value, whole / block)) {
            return;
        }
        MemorySegment bounce = whole > BOUNCE_MAX ? null : Bounces.POOL.tryAcquire();
        if (bounce == null) {
            namespace.write(f, 0, value);
            namespace.files.writeBack(f);
            return;
        }
        try {
            MemorySegment data = bounce.asSlice(0, whole);
            writePadded(f, value, data);
            namespace.files.buffered.keepClean(f, f.requireOpen(), data);
        } finally {
            Bounces.POOL.release(bounce);
        }
    }

    /**
     * Copies {@code value} into a run of free page-cache frames side by side (its last block padded with
     * zeros), writes them to the device in one direct write and maps them as the file's clean pages; false,
     * nothing done, if the cache has no such run free.
     */
    private boolean writeFromFrames(Handle f, MemorySegment value, long blocks) {
        BufferedIo buffered = namespace.files.buffered;
        int run = buffered.frameRun(f.requireOpen(), (int) blocks);
        if (run < 0) {
            return false;
        }
        boolean mapped = false;
        try {
            writePadded(f, value, buffered.frames(run, blocks * volume.geometry().blockSize()));
            buffered.mapRun(f, f.requireOpen(), run, (int) blocks);
            mapped = true;
        } finally {
            if (!mapped) {
                buffered.releaseRun(run, (int) blocks);
            }
        }
        return true;
    }

    /** Writes {@code value} to new blob file {@code f} from {@code data}, its whole blocks, into which it is copied first (zeros after it). */
    private void writePadded(Handle f, MemorySegment value, MemorySegment data) {
        MemorySegment.copy(value, 0, data, 0, value.byteSize());
        data.asSlice(value.byteSize()).fill((byte) 0); // past the size: a read there sees zeros
        namespace.files.writeBlocks(f, 0, data, value.byteSize());
    }

    /**
     * A change of blob files inside a commit's group, each a change of {@link InodeFormat#FLAG_DOOMED} in
     * one inode record, undone by {@link #undo} (a group failing part way).
     */
    sealed interface Change {
        /**
         * Pending blob {@code blob} is live: a key now names it. Its flag is cleared, where the file was
         * renamed {@code p<id>} to {@code l<id>} (a directory entry deleted and another inserted).
         */
        record Link(TableValueFormat.Blob blob) implements Change {
        }

        /**
         * Blob {@code blob} is doomed: no key names it any more. Its inode is flagged
         * {@link InodeFormat#FLAG_DOOMED}, its name kept: one record's change, where the rename to
         * {@code d<old>} deleted a directory entry and inserted another (half of a 1 MiB delete's CPU on
         * the deleting thread).
         */
        record Doom(TableValueFormat.Blob blob) implements Change {
        }

        /**
         * A key that named blob {@code old} now names new blob {@code blob}: the flag moves from the new
         * one's inode to the old one's, in one transaction
         * ({@link Volume#moveInodeFlag}), where a link and a doom would take two. The key names the new blob
         * by its own id: the files' names do not change (they were exchanged in one rename before).
         */
        record Replace(TableValueFormat.Blob blob, TableValueFormat.Blob old) implements Change {
        }

        /** The file the reaper deletes once no snapshot can read it; null for a link. */
        default String doomed() {
            return switch (this) {
                case Link l -> null;
                case Doom d -> name('l', d.blob().id());
                case Replace x -> name('l', x.old().id());
            };
        }
    }

    /** Inside a commit's group: makes change {@code c}. */
    void apply(Change c) {
        change(c, false);
    }

    /** Undoes {@link #apply} (a group failing part way). */
    void undo(Change c) {
        change(c, true);
    }

    private void change(Change c, boolean back) {
        switch (c) {
            case Change.Link l -> volume.setInodeFlag(l.blob().ino(), InodeFormat.FLAG_DOOMED, back);
            case Change.Doom d -> {
                if (!back) {
                    featureDoomFlags(); // a blob from before this code's creates, on a volume without the feature
                }
                volume.setInodeFlag(d.blob().ino(), InodeFormat.FLAG_DOOMED, !back);
            }
            case Change.Replace x -> {
                if (!back) {
                    featureDoomFlags(); // as for a doom
                }
                long nu = x.blob().ino(), old = x.old().ino();
                volume.moveInodeFlag(back ? old : nu, back ? nu : old, InodeFormat.FLAG_DOOMED);
            }
        }
    }

    /**
     * Sets the superblock's doomed-blob feature before the first blob is doomed by its flag (a write of the
     * superblock, inside the commit's group but holding no buffer's lock, as the pending-free feature is
     * set from inside a delete).
     */
    private void featureDoomFlags() {
        if (!doomFlags) {
            volume.requireIncompatFeature(SuperblockFormat.INCOMPAT_DOOMED_BLOBS);
            doomFlags = true;
        }
    }

    /** Deletes pending blob {@code id}, which no commit linked (kept, and logged, if its flag says a key names it). */
    void discard(long id) {
        deleteIfDoomed(name('l', id));
    }

    /** After a commit: the blobs it doomed go in the background once no snapshot is open. */
    void doomed(List<String> names) {
        if (!names.isEmpty()) {
            doomed.addAll(names);
            reaper.wake();
        }
    }

    /** A snapshot closed: the blobs it held back may go now. */
    void snapshotClosed() {
        reaper.wake();
    }

    /** The reaper's work: deletes doomed blobs while no snapshot is open, until none is left or it stops. */
    private void reap() {
        for (;;) {
            Runnable hook = beforeReap;
            if (hook != null) {
                hook.run();
            }
            if (reaper.stopping() || !deleteOneDoomed()) {
                return;
            }
        }
    }

    /**
     * For {@link Volume#sync}: unless a snapshot is open, returns once the blobs doomed before the call are
     * deleted, by the reaper or here. It deletes at most as many as were queued, so commits dooming more
     * meanwhile cannot keep it going. It takes {@link #reaping} first, even with nothing queued: a blob the
     * reaper has taken off the queue is still being deleted until the reaper lets go of it.
     */
    void deleteDoomed() {
        reaping.lock();
        try {
            for (int n = doomed.size(); n > 0; n--) {
                if (!deleteOneDoomed()) {
                    return;
                }
            }
        } finally {
            reaping.unlock();
        }
    }

    /**
     * Runs {@code read} with no doomed blob being deleted meanwhile: waits for the deletion under way, if
     * any, and holds the reaper back from the next until {@code read} returns. For the volume check, which
     * reads the namespace and the groups without locks: a deletion is several transactions (the name, the
     * file's extents, its inode), so a check beside one found a blob's blocks both a file's and free, or an
     * inode named but without links. Doomed blobs it holds back stay as flagged files, which a check
     * accepts.
     */
    <T> T holdingDeletions(Supplier<T> read) {
        reaping.lock();
        try {
            return read.get();
        } finally {
            reaping.unlock();
        }
    }

    /** Unmount, before the journal closes: stops the reaper and deletes what is still doomed, if no snapshot is open. */
    void stop() {
        reaper.stop();
        deleteDoomed();
    }

    /**
     * Deletes the oldest doomed blob; false if there is none, a snapshot is open or the journal shut down.
     * The queue is read before the snapshots: a snapshot that can read a doomed blob opened before the
     * commit that queued it, so if it is still open this sees it. A failure is logged and leaves the blob to
     * the next mount, which deletes doomed blobs.
     */
    private boolean deleteOneDoomed() {
        reaping.lock();
        try {
            String name = doomed.peek();
            if (name == null || versions.anyOpen() || volume.journal().isShutdown()) {
                return false;
            }
            doomed.poll();
            Runnable hook = whileReaping;
            if (hook != null) {
                hook.run();
            }
            try {
                deleteIfDoomed(name);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "could not delete doomed table blob " + name + " (the next mount does): " + e);
            }
            return true;
        } finally {
            reaping.unlock();
        }
    }

    /**
     * Deletes blob file {@code name} (a live name: a pending blob never linked, or a doomed one) if its inode
     * carries {@link InodeFormat#FLAG_DOOMED} or it is gone already; else logs and keeps it. The reaper and a
     * discard trust their lists for which blob a name is; this look (a lookup and a record read, beside a
     * deletion's three transactions) keeps a list gone wrong from deleting a blob a key still names.
     */
    private void deleteIfDoomed(String name) {
        long ino = namespace.paths.entryIfExists(directory(), name);
        if (ino == PathResolver.MISSING) {
            return;
        }
        if (doomedInode(ino)) {
            delete(name);
        } else {
            LOG.log(System.Logger.Level.WARNING, "table blob " + name + " was to be deleted but is not flagged doomed: kept");
        }
    }

    private boolean doomedInode(long ino) {
        return (namespace.records.readLong(ino, TableBlobs::flags) & InodeFormat.FLAG_DOOMED) != 0;
    }

    private void delete(String name) {
        try (Handle d = openDirectory(directory())) {
            namespace.unlink(d, name);
        } catch (NamespaceException e) {
            if (e.errno() != Errno.ENOENT) {
                throw e;
            }
        }
    }

    /** Deletes live blob {@code id} (already gone: fine), named by a key of an orphaned table, before its keys go ({@link Tables}). */
    void release(long id) {
        delete(name('l', id));
    }

    private static long flags(MemorySegment b, int rec) {
        return InodeFormat.flags(b, rec);
    }

    /** At mount: deletes the pending and doomed blobs a crash (or an unmount with snapshots open) left. */
    int recover() {
        long dir = directory();
        if (dir == 0) {
            return 0;
        }
        List<String> gone = new ArrayList<>();
        boolean flags = volume.hasIncompatFeature(SuperblockFormat.INCOMPAT_DOOMED_BLOBS); // else no blob is flagged
        for (DirEntry e : namespace.dirs.allEntries(dir)) {
            if (!e.name().startsWith("l") || flags && doomedInode(e.ino())) {
                gone.add(e.name());
            }
        }
        for (String n : gone) {
            delete(n);
        }
        return gone.size();
    }

    /**
     * Lends {@code b}'s value to {@code pieces} straight from its file's cached pages, checked by its CRC in
     * them ({@link BufferedIo#lend}); false, having lent nothing, if a page is not cached, the CRC does not
     * match or the file is not that blob any more: {@link #read} then reads it, or says what is wrong.
     */
    boolean lend(TableValueFormat.Blob b, TableCursor.Pieces pieces) {
        Handle f = namespace.openInode(b.ino());
        if (f == null) {
            return false;
        }
        try (f) {
            return namespace.records.statIno(b.ino()).generation() == b.generation()
                    && namespace.files.buffered.lend(f, f.requireReadable(), b.length(), b.crc(), pieces);
        }
    }

    /** The damage of a blob {@link #read} found gone though table {@code table}'s key still names it. */
    static CorruptionException gone(TableValueFormat.Blob b, long table) {
        return new CorruptionException(-1, "table blob", "table inode " + table + " names blob " + b.id() + " in inode "
                + b.ino() + " (generation " + b.generation() + "), which is not that blob any more");
    }

    /**
     * Copies bytes {@code [offset, offset + out.byteSize())} of {@code b}'s value (as many as there are)
     * into {@code out}; returns how many. Checks the CRC when the whole value is read: from its cached
     * pages through {@link BufferedIo#lend}, which checks it once per state of the pages (a get of a
     * cached 1 MiB value computed it every time: 1 MiB of CRC32C beside the 1 MiB copy), else over what a
     * read copied. Returns -1, having copied nothing, if the blob's file is gone (or its inode is another
     * file's now): a reader that took the stub before a change of its key doomed the blob and the reaper
     * deleted it, which the reader tells from damage by the key's stored form now ({@link #gone}).
     */
    long read(TableValueFormat.Blob b, long offset, MemorySegment out, long table) {
        Handle f = namespace.openInode(b.ino());
        if (f == null || namespace.records.statIno(b.ino()).generation() != b.generation()) {
            if (f != null) {
                f.close();
            }
            return -1;
        }
        try (f) {
            long want = Math.max(0, Math.min(out.byteSize(), b.length() - offset));
            boolean whole = offset == 0 && want == b.length();
            if (whole && namespace.files.buffered.lend(f, f.requireReadable(), want, b.crc(), new Copier(out))) {
                return want;
            }
            long done = 0;
            while (done < want) {
                int n = namespace.read(f, offset + done, out.asSlice(done, want - done));
                if (n <= 0) {
                    throw new CorruptionException(-1, "table blob", "blob " + b.id() + " (inode " + b.ino() + ") ends at "
                            + (offset + done) + " bytes of its " + b.length());
                }
                done += n;
            }
            if (whole) {
                CRC32C crc = new CRC32C();
                crc.update(out.asSlice(0, want).asByteBuffer());
                if ((int) crc.getValue() != b.crc()) {
                    throw new CorruptionException(-1, "table blob", "blob " + b.id() + " (inode " + b.ino()
                            + ") does not match its checksum");
                }
            }
            return want;
        }
    }

    /** A value's pieces, lent in order, copied into {@code out} one after another. */
    private static final class Copier implements TableCursor.Pieces {
        private final MemorySegment out;
        private long at;

        Copier(MemorySegment out) {
            this.out = out;
        }

        @Override
        public void accept(MemorySegment bytes, long offset, long length) {
            MemorySegment.copy(bytes, offset, out, at, length);
            at += length;
        }
    }
}
