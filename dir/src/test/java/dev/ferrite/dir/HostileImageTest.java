package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.io.FerriteException;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.OverlayDevice;
import dev.ferrite.io.testkit.TestSeed;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import static dev.ferrite.io.internal.OnDisk.U16;
import static dev.ferrite.io.internal.OnDisk.U32;
import static dev.ferrite.io.internal.OnDisk.U64;
import static dev.ferrite.io.internal.OnDisk.U8;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Crafted images: a volume with inline and tree directories, files, and short and long symlinks is
 * unmounted; then, many times over, one field of one of its inode records, inline directory entries,
 * directory tree values, symlink blocks, allocation group headers or the superblock gets a hostile value and the block its checksum again, so every
 * header check passes. The volume is mounted over an overlay (the image stays pristine) and walked,
 * looked into, changed and checked: only Ferrite's own exceptions may come out, never an
 * IndexOutOfBounds, NullPointer, NegativeArraySize or Arithmetic exception, and nothing may hang.
 *
 * <p>Values inside directory tree leaves are found by their bytes (a child's inode number and type);
 * the node's own fields (slots, lengths, counts) are the B-tree's to check and are left alone here.
 */
@ExtendWith(TestSeed.class)
class HostileImageTest {
    private static final long SEED = TestSeed.get(14);
    private static final int BS = 4096;
    private static final long ITERATION_BOUND_S = 30;

    /** A field to corrupt: {@code width} bytes at {@code offset} of {@code block}. */
    private record Field(String name, long block, int offset, int width) {
    }

    @Test
    void corruptedFieldsGiveFerriteExceptionsOnly() throws Exception {
        run(300, 1);
    }

    /** Ten times as many images, each with one to three fields corrupted. */
    @Test
    @Tag("stress")
    void manyMoreCorruptions() throws Exception {
        run(3000, 3);
    }

    private static void run(int iterations, int mostFields) throws Exception {
        try (MemoryDevice dev = MemoryDevice.create(8192, BS); Arena arena = Arena.ofConfined()) {
            List<Field> fields = buildImage(dev);
            MemorySegment buf = arena.allocate(BS, BS);
            for (int it = 0; it < iterations; it++) {
                Random rnd = new Random(SEED * 1_000_003 + it);
                StringBuilder what = new StringBuilder("iteration " + it + " (-Dferrite.seed=" + SEED + ")");
                try (OverlayDevice view = OverlayDevice.over(dev)) {
                    for (int n = 1 + rnd.nextInt(mostFields); n > 0; n--) {
                        Field f = fields.get(rnd.nextInt(fields.size()));
                        view.read(f.block, buf);
                        long value = hostile(rnd, read(buf, f), f.width);
                        write(buf, f, value);
                        BlockHeaderFormat.stamp(buf, BlockHeaderFormat.lsn(buf));
                        view.write(f.block, buf);
                        what.append(", ").append(f).append(" = 0x").append(Long.toHexString(value));
                    }
                    exercise(view, what.toString());
                }
            }
        }
    }

    /** Formats {@code dev}, fills it, unmounts it; returns the fields worth corrupting. */
    private static List<Field> buildImage(MemoryDevice dev) {
        List<Field> fields = new ArrayList<>();
        Volume.format(dev, VolumeFixtures.OPTIONS);
        try (Volume v = Volume.open(dev, VolumeFixtures.OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/inline", 0755);
            ns.create("/inline/f", 0644, true);
            ns.symlink("f", "/inline/short");
            ns.symlink("x".repeat(1500), "/inline/long");
            ns.mkdir("/inline/sub", 0755);
            ns.create("/inline/sub/g", 0644, true);
            ns.mkdir("/tree", 0755);
            for (int i = 0; i < 120; i++) {
                switch (i % 4) {
                    case 0 -> ns.mkdir("/tree/d" + i, 0755);
                    case 1 -> ns.symlink("target-" + i, "/tree/s" + i);
                    default -> ns.create("/tree/f" + i, 0644, true);
                }
            }
            ns.link("/inline/f", "/tree/hard");
            List<String> paths = new ArrayList<>(List.of("/", "/inline", "/inline/f", "/inline/short", "/inline/long",
                    "/inline/sub", "/tree", "/tree/s1", "/tree/f2"));
            for (int i = 0; i < 40; i += 4) { // directories on consecutive inodes: some records end their block
                ns.symlink("z".repeat(200), "/tree/d" + i + "/z");
                paths.add("/tree/d" + i);
            }
            Geometry g = v.geometry();
            for (String p : paths) {
                recordFields(fields, g, p, ns.lstat(p).ino(), ns);
            }
            v.quiesce();
            valuesInTreeLeaves(fields, dev, g, ns.lookup("/tree"), ns.list("/tree"));
            for (int ag = 0; ag < g.agCount(); ag++) {
                groupHeaderFields(fields, g, ag);
            }
            long[][] superblock = {{SuperblockFormat.BLOCK_SIZE, 4}, {SuperblockFormat.DEVICE_BLOCKS, 8},
                    {SuperblockFormat.LOG_START, 8}, {SuperblockFormat.LOG_BLOCKS, 4}, {SuperblockFormat.AG_COUNT, 4},
                    {SuperblockFormat.AG_BLOCKS, 4}, {SuperblockFormat.INODE_SIZE, 4}, {SuperblockFormat.DATA_START, 8},
                    {SuperblockFormat.CLEAN, 4}, {SuperblockFormat.FREE_BLOCKS, 8}, {SuperblockFormat.FREE_INODES, 8},
                    {SuperblockFormat.INODES, 8}, {SuperblockFormat.ROOT, 8}};
            for (long[] f : superblock) { // in the primary: the mirror is read only when the primary is unreadable
                fields.add(new Field("superblock field at " + f[0], SuperblockFormat.PRIMARY, (int) f[0], (int) f[1]));
            }
        }
        return fields;
    }

    /** The fields of inode {@code ino}'s record, and of what its inline area holds. */
    private static void recordFields(List<Field> fields, Geometry g, String path, long ino, Namespace ns) {
        long blk = g.inodeBlock(ino);
        int rec = InodeFormat.recordOffset(BS, Geometry.inodeSlot(ino));
        String at = "inode " + ino + " (" + path + ") ";
        fields.add(new Field(at + "mode", blk, rec + InodeFormat.MODE, 2));
        fields.add(new Field(at + "fork", blk, rec + InodeFormat.FORK, 1));
        fields.add(new Field(at + "nlink", blk, rec + InodeFormat.NLINK, 4));
        fields.add(new Field(at + "size", blk, rec + InodeFormat.SIZE, 8));
        fields.add(new Field(at + "generation", blk, rec + InodeFormat.GENERATION, 4));
        fields.add(new Field(at + "blocks", blk, rec + InodeFormat.BLOCKS, 8));
        fields.add(new Field(at + "inline used", blk, rec + InodeFormat.INLINE_USED, 2));
        fields.add(new Field(at + "parent", blk, rec + InodeFormat.PARENT, 8));
        int area = rec + InodeFormat.INLINE;
        InodeStat s = ns.lstat(path);
        if (path.equals("/tree")) {
            fields.add(new Field(at + "tree header", blk, area + DirEntryFormat.TREE_HEADER, 8));
            fields.add(new Field(at + "reserve count", blk, area + DirEntryFormat.RESERVE_COUNT, 4));
            for (int i = 0; i < 4; i++) {
                fields.add(new Field(at + "reserve entry " + i, blk, DirEntryFormat.reserveOffset(area, i), 8));
            }
        } else if (s.isDirectory()) {
            int entryAt = area;
            for (DirEntry e : ns.list(path)) {
                String entry = at + "inline entry '" + e.name() + "' ";
                fields.add(new Field(entry + "name length", blk, entryAt, 1));
                fields.add(new Field(entry + "type", blk, entryAt + 1, 1));
                fields.add(new Field(entry + "inode", blk, entryAt + 2, 8));
                entryAt += DirEntryFormat.inlineSize(DirEntryFormat.HASH + e.name().length());
            }
        } else if ((s.mode() & InodeFormat.S_IFMT) == InodeFormat.S_IFLNK && s.size() > InodeFormat.inlineCapacity(BS)) {
            fields.add(new Field(at + "remote block", blk, area, 8));
        }
    }

    /** The fields of group {@code ag}'s two headers, and the first entries of their free lists. */
    private static void groupHeaderFields(List<Field> fields, Geometry g, int ag) {
        long agf = g.agStart(ag) + AgHeaderFormat.AGF_BLOCK, agi = g.agStart(ag) + AgHeaderFormat.AGI_BLOCK;
        Object[][] agfFields = {{"group number", AgHeaderFormat.AG_NUMBER, 4}, {"length", AgHeaderFormat.AG_LENGTH, 4},
                {"by-start tree", AgHeaderFormat.BNO_TREE, 4}, {"by-length tree", AgHeaderFormat.CNT_TREE, 4},
                {"free blocks", AgHeaderFormat.FREE_BLOCKS, 8}, {"free list count", AgHeaderFormat.AGF_LIST_COUNT, 4},
                {"refcount tree", AgHeaderFormat.REFCOUNT_TREE, 4}};
        Object[][] agiFields = {{"group number", AgHeaderFormat.AG_NUMBER, 4}, {"inode tree", AgHeaderFormat.INO_TREE, 4},
                {"free inode tree", AgHeaderFormat.FINO_TREE, 4}, {"inodes", AgHeaderFormat.INODES, 8},
                {"free inodes", AgHeaderFormat.FREE_INODES, 8}, {"orphan tree", AgHeaderFormat.ORPHAN_TREE, 4},
                {"free list count", AgHeaderFormat.AGI_LIST_COUNT, 4}};
        for (Object[] f : agfFields) {
            fields.add(new Field("AGF of group " + ag + " " + f[0], agf, (int) f[1], (int) f[2]));
        }
        for (Object[] f : agiFields) {
            fields.add(new Field("AGI of group " + ag + " " + f[0], agi, (int) f[1], (int) f[2]));
        }
        for (int e = 0; e < 3; e++) {
            fields.add(new Field("AGF of group " + ag + " free list entry " + e, agf, AgHeaderFormat.listEntryOffset(e), 4));
            fields.add(new Field("AGI of group " + ag + " free list entry " + e, agi, AgHeaderFormat.listEntryOffset(e), 4));
        }
    }

    /** End of the bytes of a tree block corrupted as 4-byte words: header, slot array and the first cells. */
    private static final int NODE_FIELDS_END = 512;

    /**
     * Directory tree values (a child's inode and type) in the leaves of {@code dir}'s tree, found by their
     * bytes in the blocks the tree owns, and the leading words of those blocks; each long symlink's
     * length field.
     */
    private static void valuesInTreeLeaves(List<Field> fields, MemoryDevice dev, Geometry g, long dir, List<DirEntry> entries) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(BS, BS);
            for (long blk = g.dataStart(); blk < g.deviceBlocks(); blk++) {
                dev.read(blk, b);
                if (!BlockHeaderFormat.checksumValid(b)) {
                    continue;
                }
                if (BlockHeaderFormat.magic(b) == SymlinkFormat.MAGIC) {
                    fields.add(new Field("symlink block of inode " + BlockHeaderFormat.owner(b) + " length", blk, SymlinkFormat.LENGTH, 4));
                }
                if (BlockHeaderFormat.owner(b) != dir || BlockHeaderFormat.magic(b) == InodeFormat.MAGIC) {
                    continue;
                }
                // the tree's own fields (node header, slots, first cells): what readdir met as IndexOutOfBounds
                for (int off = BlockHeaderFormat.SIZE; off + 4 <= NODE_FIELDS_END; off += 4) {
                    fields.add(new Field("tree block " + blk + " bytes", blk, off, 4));
                }
                for (DirEntry e : entries) {
                    for (int off = BlockHeaderFormat.SIZE; off + DirEntryFormat.VALUE <= BS; off++) {
                        if (b.get(U64, off) == e.ino() && Byte.toUnsignedInt(b.get(U8, off + 8)) == e.type() >>> 12) {
                            fields.add(new Field("tree value of '" + e.name() + "' inode", blk, off, 8));
                            fields.add(new Field("tree value of '" + e.name() + "' type", blk, off + 8, 1));
                            break;
                        }
                    }
                }
            }
        }
    }

    private static long read(MemorySegment b, Field f) {
        return switch (f.width) {
            case 1 -> Byte.toUnsignedLong(b.get(U8, f.offset));
            case 2 -> Short.toUnsignedLong(b.get(U16, f.offset));
            case 4 -> Integer.toUnsignedLong(b.get(U32, f.offset));
            default -> b.get(U64, f.offset);
        };
    }

    private static void write(MemorySegment b, Field f, long v) {
        switch (f.width) {
            case 1 -> b.set(U8, f.offset, (byte) v);
            case 2 -> b.set(U16, f.offset, (short) v);
            case 4 -> b.set(U32, f.offset, (int) v);
            default -> b.set(U64, f.offset, v);
        }
    }

    /** A value that differs from {@code old}: an edge, a neighbour, a flipped bit or noise. */
    private static long hostile(Random rnd, long old, int width) {
        long mask = width == 8 ? -1L : (1L << 8 * width) - 1;
        for (;;) {
            long v = switch (rnd.nextInt(8)) {
                case 0 -> 0;
                case 1 -> mask;
                case 2 -> mask >>> 1;
                case 3 -> old + 1;
                case 4 -> old - 1;
                case 5 -> old ^ 1L << rnd.nextInt(8 * width);
                case 6 -> rnd.nextInt(4 * BS);
                default -> rnd.nextLong();
            } & mask;
            if (v != old) {
                return v;
            }
        }
    }

    /** Mounts the crafted image and puts it through every kind of use, bounded in time. */
    private static void exercise(OverlayDevice view, String what) throws InterruptedException {
        CompletableFuture<Void> done = new CompletableFuture<>();
        Thread t = Thread.ofPlatform().daemon().name("hostile-image").start(() -> {
            try {
                use(view);
                done.complete(null);
            } catch (Throwable e) {
                done.completeExceptionally(e);
            }
        });
        try {
            done.get(ITERATION_BOUND_S, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            StringBuilder stack = new StringBuilder();
            for (StackTraceElement s : t.getStackTrace()) {
                stack.append("\n\tat ").append(s);
            }
            fail(what + ": still running after " + ITERATION_BOUND_S + " s" + stack);
        } catch (ExecutionException e) {
            throw new AssertionError(what + ": " + e.getCause(), e.getCause());
        }
    }

    private static void use(OverlayDevice view) {
        Volume v;
        try {
            v = Volume.open(view, VolumeFixtures.OPTIONS);
        } catch (FerriteException e) {
            return;
        }
        try {
            Namespace ns = v.namespace();
            for (String dir : List.of("/", "/inline", "/inline/sub", "/tree")) {
                attempt(() -> {
                    for (DirEntry e : ns.list(dir)) {
                        String p = (dir.equals("/") ? "" : dir) + "/" + e.name();
                        attempt(() -> ns.lstat(p));
                        attempt(() -> ns.stat(p));
                        attempt(() -> ns.readlink(p));
                        attempt(() -> ns.open(p).close());
                    }
                });
                String p = dir.equals("/") ? "" : dir;
                attempt(() -> ns.lookup(p + "/f"));
                attempt(() -> ns.readlink(p + "/short"));
                attempt(() -> ns.readlink(p + "/long"));
                attempt(() -> ns.create(p + "/new", 0644, true));
                attempt(() -> ns.mkdir(p + "/newdir", 0755));
                attempt(() -> ns.symlink("y".repeat(2000), p + "/newlong"));
                attempt(() -> ns.rename(p + "/new", p + "/renamed"));
                attempt(() -> ns.unlink(p + "/renamed"));
                attempt(() -> ns.unlink(p + "/f"));
                attempt(() -> ns.unlink(p + "/long"));
                attempt(() -> ns.rmdir(p + "/newdir"));
                attempt(() -> ns.rmdir(p + "/sub"));
                attempt(() -> ns.link("/tree/f2", p + "/linked"));
                attempt(() -> ns.setattr(p.isEmpty() ? "/" : p, 0700, -1, -1, -1, -1));
            }
            attempt(() -> ns.rename("/inline/sub", "/tree/moved"));
            attempt(() -> ns.rename("/tree/d0", "/inline/moved"));
            attempt(ns::check);
            attempt(v::check);
        } finally {
            attempt(v::close);
        }
    }

    private static void attempt(Runnable r) {
        try {
            r.run();
        } catch (FerriteException e) {
            // the answer a crafted image may get
        }
    }
}
