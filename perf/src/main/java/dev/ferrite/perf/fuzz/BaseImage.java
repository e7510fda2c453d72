package dev.ferrite.perf.fuzz;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.dir.Handle;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Table;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.dir.WriteTransaction;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.testkit.ForwardingDevice;
import dev.ferrite.journal.internal.LogRecordFormat;

/**
 * A formatted, populated volume the fuzzer mutates, built the same way every time (one thread, fixed
 * names and sizes): directories inline and in trees, a deep path, small, large, fragmented and sparse
 * files, short and long symlinks, a hard link, and two tables (one a multi-level tree, one with an
 * out-of-line value). {@link Kind#CLEAN} is unmounted cleanly; {@link Kind#DIRTY} stops as a crash would
 * after a sync, with later changes only in the log (so recovery replays log records, an open-but-unlinked
 * file waits on its orphan list, and the anchor and records are worth mutating).
 *
 * <p>Blocks are classified for targeting by what they hold, read raw: a valid block header (metadata,
 * by magic), the file-data pattern, the superblock copies, and the log region before the first
 * allocation group.
 */
final class BaseImage {
    static final int BLOCK_SIZE = 4096;
    static final int BLOCKS = 8192;
    static final VolumeOptions OPTIONS = VolumeOptions.defaults().withAgCount(4).withCacheBytes(8L << 20);
    /** First bytes of every file-data block written here: how {@link #classify} tells data from log. */
    static final byte[] DATA_TAG = "FUZD".getBytes(StandardCharsets.US_ASCII);

    enum Kind { CLEAN, DIRTY }

    /** What a block holds, as the fuzzer targets it. */
    enum Role { SUPERBLOCK, LOG_ANCHOR, LOG, METADATA, DATA }

    final Kind kind;
    final MemoryDevice device;
    /** Blocks by role; metadata also by magic. */
    final TreeMap<Role, long[]> byRole = new TreeMap<>();
    final TreeMap<Integer, long[]> byMagic = new TreeMap<>();
    /** Log blocks that start with a record header's magic (valid or not). */
    final long[] logRecords;
    /** First block of allocation group 0 (the log region ends there). */
    final long dataStart;

    private BaseImage(Kind kind, MemoryDevice device) {
        this.kind = kind;
        this.device = device;
        this.dataStart = classify();
        this.logRecords = logRecords();
    }

    private long[] logRecords() {
        List<Long> headers = new ArrayList<>();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(BLOCK_SIZE, BlockDevice.BUFFER_ALIGNMENT);
            for (long blk : byRole.getOrDefault(Role.LOG, new long[0])) {
                device.read(blk, b);
                if (LogRecordFormat.isRecordHeader(b)) {
                    headers.add(blk);
                }
            }
        }
        return headers.stream().mapToLong(Long::longValue).toArray();
    }

    static BaseImage build(Kind kind) {
        MemoryDevice dev = MemoryDevice.create("fuzz-" + kind.name().toLowerCase(java.util.Locale.ROOT), BLOCKS, BLOCK_SIZE);
        Volume.format(dev, OPTIONS);
        if (kind == Kind.CLEAN) {
            try (Volume v = Volume.open(dev, OPTIONS)) {
                populate(v);
            }
        } else {
            LogOnlyAfterFreeze frozen = new LogOnlyAfterFreeze(dev);
            Volume v = Volume.open(frozen, OPTIONS);
            populate(v);
            v.quiesce();
            frozen.freeze(firstGroupBlock(dev));
            Handle open = changeAfterFreeze(v);
            v.sync();
            open.close(); // frees the orphan: dropped, as the rest
            v.close(); // its home writes and clean marks are dropped: the image is a crash after the sync
        }
        return new BaseImage(kind, dev);
    }

    private static void populate(Volume v) {
        Namespace ns = v.namespace();
        ns.mkdir("/a", 0755);
        ns.mkdir("/a/b", 0755);
        ns.mkdir("/a/b/c", 0700);
        ns.mkdir("/inline", 0755);
        ns.mkdir("/tree", 0755);
        for (int i = 0; i < 5; i++) {
            ns.create("/inline/f" + i, 0644, true);
        }
        for (int i = 0; i < 300; i++) {
            if (i % 10 == 0) {
                ns.mkdir("/tree/d" + i, 0755);
            } else {
                ns.create("/tree/file-with-a-longer-name-" + i, 0644, true);
            }
        }
        ns.symlink("a/b", "/short");
        ns.symlink("/" + "x".repeat(1500), "/long");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment block = dataBlocks(arena, 64);
            ns.create("/small", 0644, true);
            try (Handle h = ns.open("/small")) {
                ns.write(h, 0, ByteBuffer.wrap(new byte[] {'F', 'U', 'Z', 'D', 1, 2, 3}));
            }
            ns.link("/small", "/a/b/hardlink");
            ns.create("/big", 0644, true);
            try (Handle h = ns.open("/big")) {
                ns.write(h, 0, block);
            }
            ns.create("/frag", 0644, true);
            try (Handle h = ns.open("/frag")) { // every other block: one extent each, past the inline map
                for (int i = 0; i < 120; i += 2) {
                    ns.write(h, (long) i * BLOCK_SIZE, block.asSlice(0, BLOCK_SIZE));
                }
            }
            ns.create("/sparse", 0644, true);
            try (Handle h = ns.open("/sparse")) {
                ns.write(h, 5L << 20, block.asSlice(0, 2L * BLOCK_SIZE));
                ns.fallocate(h, 0, 1L << 20, 8L * BLOCK_SIZE);
            }
        }
        // settle before the tables: blocks freed above are busy until their checkpoint is durable, and an
        // allocation that meets them goes elsewhere, so the tables' place would depend on the log's timing
        v.sync();
        Table big = v.tables().create("big");
        Table blobs = v.tables().create("blobs");
        v.sync();
        Random r = new Random(7);
        try (WriteTransaction tx = v.begin()) {
            for (int i = 0; i < 3000; i++) {
                byte[] value = new byte[8 + r.nextInt(60)];
                r.nextBytes(value);
                tx.put(big, String.format("key-%05d", i).getBytes(StandardCharsets.UTF_8), value);
            }
            byte[] large = new byte[40_000];
            System.arraycopy(DATA_TAG, 0, large, 0, DATA_TAG.length);
            tx.put(blobs, "large".getBytes(StandardCharsets.UTF_8), large);
            tx.put(blobs, "small".getBytes(StandardCharsets.UTF_8), new byte[] {1});
            tx.commit();
        }
        v.sync();
    }

    /** The dirty image's changes after the freeze: they reach the log only. Returns a handle on an unlinked file. */
    private static Handle changeAfterFreeze(Volume v) {
        Namespace ns = v.namespace();
        ns.mkdir("/after", 0755);
        for (int i = 0; i < 40; i++) {
            ns.create("/after/f" + i, 0644, true);
        }
        ns.rename("/inline/f1", "/tree/moved");
        ns.unlink("/tree/file-with-a-longer-name-11");
        Handle open = ns.open("/inline/f2");
        ns.unlink("/inline/f2");
        Table big = v.tables().open("big");
        try (WriteTransaction tx = v.begin()) {
            for (int i = 0; i < 200; i++) {
                tx.put(big, String.format("key-%05d", i * 7).getBytes(StandardCharsets.UTF_8), new byte[] {9, 9});
            }
            tx.delete(big, "key-02999".getBytes(StandardCharsets.UTF_8));
            tx.commit();
        }
        return open;
    }

    private static MemorySegment dataBlocks(Arena arena, int blocks) {
        MemorySegment s = arena.allocate((long) blocks * BLOCK_SIZE, BlockDevice.BUFFER_ALIGNMENT);
        for (long b = 0; b < blocks; b++) {
            MemorySegment.copy(DATA_TAG, 0, s, ValueLayout.JAVA_BYTE, b * BLOCK_SIZE, DATA_TAG.length);
            s.set(ValueLayout.JAVA_BYTE, b * BLOCK_SIZE + 8, (byte) b);
        }
        return s;
    }

    /** The first block past the superblock copies with a valid block header: group 0's first header. */
    private static long firstGroupBlock(BlockDevice dev) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(BLOCK_SIZE, BlockDevice.BUFFER_ALIGNMENT);
            for (long blk = 2; blk < dev.blockCount(); blk++) {
                dev.read(blk, b);
                if (BlockHeaderFormat.magic(b) != 0 && BlockHeaderFormat.checksumValid(b) && BlockHeaderFormat.blockNo(b) == blk) {
                    return blk;
                }
            }
        }
        throw new IllegalStateException("no allocation group header on " + dev.name());
    }

    private long classify() {
        long start = firstGroupBlock(device);
        TreeMap<Role, List<Long>> roles = new TreeMap<>();
        TreeMap<Integer, List<Long>> magics = new TreeMap<>();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(BLOCK_SIZE, BlockDevice.BUFFER_ALIGNMENT);
            byte[] head = new byte[DATA_TAG.length];
            for (long blk = 0; blk < device.blockCount(); blk++) {
                device.read(blk, b);
                Role role;
                if (blk < 2) {
                    role = Role.SUPERBLOCK;
                } else if (blk == 2) {
                    role = Role.LOG_ANCHOR;
                } else if (blk < start) {
                    role = isZero(b) ? null : Role.LOG;
                } else if (BlockHeaderFormat.magic(b) != 0 && BlockHeaderFormat.checksumValid(b)) {
                    role = Role.METADATA;
                    magics.computeIfAbsent(BlockHeaderFormat.magic(b), m -> new ArrayList<>()).add(blk);
                } else {
                    MemorySegment.copy(b, ValueLayout.JAVA_BYTE, 0, head, 0, head.length);
                    role = java.util.Arrays.equals(head, DATA_TAG) ? Role.DATA : null;
                }
                if (role != null) {
                    roles.computeIfAbsent(role, x -> new ArrayList<>()).add(blk);
                }
            }
        }
        roles.forEach((role, list) -> byRole.put(role, list.stream().mapToLong(Long::longValue).toArray()));
        magics.forEach((m, list) -> byMagic.put(m, list.stream().mapToLong(Long::longValue).toArray()));
        return start;
    }

    private static boolean isZero(MemorySegment b) {
        for (long off = 0; off < b.byteSize(); off += 8) {
            if (b.get(ValueLayout.JAVA_LONG_UNALIGNED, off) != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * The device under the dirty image: passes everything until {@link #freeze}, then only writes to the
     * circular log (past the anchor), dropping home blocks, the anchor and the superblock as a crash would.
     */
    private static final class LogOnlyAfterFreeze extends ForwardingDevice {
        private volatile long logEnd = -1;

        LogOnlyAfterFreeze(BlockDevice inner) {
            super(inner);
        }

        void freeze(long logEnd) {
            this.logEnd = logEnd;
        }

        private boolean kept(long block) {
            long end = logEnd;
            return end < 0 || block > 2 && block < end;
        }

        @Override
        public boolean isReadOnly() {
            return false;
        }

        @Override
        public void write(long block, MemorySegment src) {
            if (kept(block)) {
                inner.write(block, src);
            }
        }

        @Override
        public void submit(IoBatch batch) {
            batch.resetResults();
            for (int i = 0; i < batch.size(); i++) {
                batch.started(i);
                if (batch.isWrite(i)) {
                    write(batch.block(i), batch.buffer(i));
                } else {
                    inner.read(batch.block(i), batch.buffer(i));
                }
                batch.completed(i, 0);
            }
        }

        @Override
        public void discard(long block, long count) {
            if (logEnd < 0) {
                inner.discard(block, count);
            }
        }

        @Override
        public void close() {
        }
    }
}
