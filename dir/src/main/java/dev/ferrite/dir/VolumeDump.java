package dev.ferrite.dir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.BTreeDump;
import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.btree.internal.TreeWalk;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.CorruptionException;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.journal.internal.Lsn;

/**
 * Readable dumps of a volume's on-disk structures, for {@code ferrite dump} (a small xfs_db): the
 * superblock copies and any block, read raw and described whatever state it is in; an inode, a path or
 * the tables through a mounted volume. Nothing here writes.
 */
public final class VolumeDump {
    private static final HexFormat HEX = HexFormat.of();
    private static final int ENTRIES_SHOWN = 32;
    private static final int RAW_BYTES_SHOWN = 128;

    private VolumeDump() {
    }

    /**
     * Both superblock copies: whether each verifies, and what the primary (or else the mirror) says.
     *
     * @throws dev.ferrite.io.DeviceException if the device fails a read
     */
    public static String superblock(BlockDevice device) {
        StringBuilder sb = new StringBuilder();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(device.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            boolean shown = false;
            for (long copy : new long[] {SuperblockFormat.PRIMARY, SuperblockFormat.MIRROR}) {
                device.read(copy, b);
                String problem = superblockProblem(b, copy);
                sb.append(copy == SuperblockFormat.PRIMARY ? "primary" : "mirror").append(" superblock (block ")
                        .append(copy).append("): ").append(problem == null ? "valid" : problem).append('\n');
                if (problem == null && !shown) {
                    superblockFields(b, sb);
                    shown = true;
                }
            }
        }
        return sb.toString();
    }

    /**
     * Block {@code block} read raw: its header, then what its magic says it is.
     *
     * @throws InvalidArgumentException if {@code block} is outside the device
     * @throws dev.ferrite.io.DeviceException if the device fails a read
     */
    public static String block(BlockDevice device, long block) {
        if (block < 0 || block >= device.blockCount()) {
            throw new InvalidArgumentException("block " + block + " is outside the device's " + device.blockCount() + " blocks");
        }
        StringBuilder sb = new StringBuilder();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(device.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            long[] log = logRegion(device, b);
            boolean wideCells = (log[2] & SuperblockFormat.INCOMPAT_WIDE_CELLS) != 0;
            if (block >= log[0] && block < log[1]) {
                sb.append("block ").append(block).append(": in the log region [").append(log[0]).append(", ")
                        .append(log[1]).append(") (the anchor and log records; the journal verifies them on recovery)\n");
                return sb.toString();
            }
            device.read(block, b);
            int magic = BlockHeaderFormat.magic(b);
            sb.append("block ").append(block).append(": magic ").append(magicText(magic))
                    .append(", says block ").append(BlockHeaderFormat.blockNo(b))
                    .append(BlockHeaderFormat.blockNo(b) == block ? "" : " (MISPLACED)")
                    .append(", owner ").append(BlockHeaderFormat.owner(b))
                    .append(", lsn ").append(lsn(BlockHeaderFormat.lsn(b)))
                    .append(", crc32c ").append(BlockHeaderFormat.checksumValid(b) ? "valid" : "INVALID").append('\n');
            if (magic == SuperblockFormat.MAGIC) {
                superblockFields(b, sb);
            } else if (magic == AgHeaderFormat.AGF_MAGIC) {
                sb.append("allocation group ").append(AgHeaderFormat.u32(b, AgHeaderFormat.AG_NUMBER))
                        .append(" free-space header (AGF): ").append(AgHeaderFormat.u32(b, AgHeaderFormat.AG_LENGTH))
                        .append(" blocks, ").append(AgHeaderFormat.u64(b, AgHeaderFormat.FREE_BLOCKS))
                        .append(" free in the trees, by-start tree header at group block ")
                        .append(AgHeaderFormat.u32(b, AgHeaderFormat.BNO_TREE)).append(", by-length at ")
                        .append(AgHeaderFormat.u32(b, AgHeaderFormat.CNT_TREE)).append(", free list of ")
                        .append(AgHeaderFormat.u32(b, AgHeaderFormat.AGF_LIST_COUNT));
                int refcounts = AgHeaderFormat.u32(b, AgHeaderFormat.REFCOUNT_TREE);
                sb.append(refcounts == 0 ? ", no refcount tree" : ", refcount tree at group block " + refcounts)
                        .append(", ").append(Integer.toUnsignedString(AgHeaderFormat.u32(b, AgHeaderFormat.REFCOUNT_PAID)))
                        .append(" of its blocks paid from the reservation, ")
                        .append(Integer.toUnsignedString(AgHeaderFormat.u32(b, AgHeaderFormat.PENDING_COUNT))).append(" pending frees").append('\n');
            } else if (magic == AgHeaderFormat.AGI_MAGIC) {
                sb.append("allocation group ").append(AgHeaderFormat.u32(b, AgHeaderFormat.AG_NUMBER))
                        .append(" inode header (AGI): ").append(AgHeaderFormat.u64(b, AgHeaderFormat.INODES))
                        .append(" inodes, ").append(AgHeaderFormat.u64(b, AgHeaderFormat.FREE_INODES))
                        .append(" free, inode tree header at group block ").append(AgHeaderFormat.u32(b, AgHeaderFormat.INO_TREE))
                        .append(", free-inode tree at ").append(AgHeaderFormat.u32(b, AgHeaderFormat.FINO_TREE))
                        .append(", orphan tree at ").append(AgHeaderFormat.u32(b, AgHeaderFormat.ORPHAN_TREE))
                        .append(", free list of ").append(AgHeaderFormat.u32(b, AgHeaderFormat.AGI_LIST_COUNT));
                if (AgHeaderFormat.u32(b, AgHeaderFormat.AG_NUMBER) == 0) {
                    long catalog = AgHeaderFormat.u64(b, AgHeaderFormat.CATALOG);
                    sb.append(catalog == 0 ? ", no table catalog" : ", table catalog inode " + catalog);
                }
                sb.append('\n');
            } else if (magic == InodeFormat.MAGIC) {
                inodeBlock(b, sb);
            } else if (magic == SymlinkFormat.MAGIC) {
                int length = SymlinkFormat.length(b);
                sb.append("symlink target of inode ").append(BlockHeaderFormat.owner(b)).append(", ").append(length).append(" bytes");
                if (length >= 0 && length <= SymlinkFormat.capacity((int) b.byteSize())) {
                    sb.append(": ").append(new String(SymlinkFormat.target(b, length), java.nio.charset.StandardCharsets.UTF_8));
                } else {
                    sb.append(" (MORE THAN THE BLOCK HOLDS)");
                }
                sb.append('\n');
            } else if (BTreeDump.isTreeBlock(b)) {
                sb.append(BTreeDump.describe(b, wideCells));
            } else {
                sb.append("not a Ferrite metadata block (a log block, a free block, or damaged); first ")
                        .append(RAW_BYTES_SHOWN).append(" bytes:\n");
                MemorySegment head = b.asSlice(0, Math.min(RAW_BYTES_SHOWN, b.byteSize()));
                byte[] bytes = head.toArray(ValueLayout.JAVA_BYTE);
                for (int off = 0; off < bytes.length; off += 32) {
                    sb.append(String.format("  %04x  ", off)).append(HEX.formatHex(bytes, off, Math.min(bytes.length, off + 32))).append('\n');
                }
            }
        }
        return sb.toString();
    }

    /**
     * Inode {@code ino} of a mounted volume: where it lives, its attributes, a directory's size, a file's extents, a table's tree.
     *
     * @throws InvalidArgumentException if {@code ino} names no inode slot of the volume
     * @throws dev.ferrite.io.CorruptionException if a block read on the way is damaged
     */
    public static String inode(Volume volume, long ino) {
        Geometry g = volume.geometry();
        if (!g.isValidInode(ino)) {
            throw new InvalidArgumentException("inode " + ino + " names no inode slot of this volume");
        }
        InodeStat s = volume.stat(ino);
        StringBuilder sb = new StringBuilder();
        sb.append("inode ").append(ino).append(": group ").append(g.agOfInode(ino)).append(", block ")
                .append(g.inodeBlock(ino)).append(", slot ").append(Geometry.inodeSlot(ino)).append('\n');
        sb.append("  type ").append(type(s)).append(", mode ").append(Integer.toOctalString(s.mode() & 07777))
                .append(", uid ").append(s.uid()).append(", gid ").append(s.gid()).append(", links ").append(s.nlink())
                .append(", size ").append(s.size()).append('\n');
        sb.append("  mtime ").append(time(s.mtimeNanos())).append(", ctime ").append(time(s.ctimeNanos()))
                .append(", atime ").append(time(s.atimeNanos())).append('\n');
        if (s.isDirectory()) {
            Namespace ns = volume.namespace();
            long entries = 0;
            StringBuilder shown = new StringBuilder();
            DirCookie c = DirCookie.START;
            for (;;) {
                DirPage page = ns.dirs.readdirIno(ino, c, 1024);
                for (DirEntry e : page.entries()) {
                    if (entries++ < ENTRIES_SHOWN) {
                        shown.append("    ").append(e.name()).append(" -> inode ").append(e.ino())
                                .append(e.isDirectory() ? " (directory)" : "").append('\n');
                    }
                }
                if (page.end()) {
                    break;
                }
                c = page.next();
            }
            sb.append("  directory of ").append(entries).append(" entries").append(entries > ENTRIES_SHOWN
                    ? ", the first " + ENTRIES_SHOWN + " in hash order:\n" : ":\n").append(shown);
        } else if (s.isTable()) {
            sb.append("  ");
            tableTree(volume, ino, s, sb, true, ino != volume.group(0).overflowTree());
        } else if (s.isSymlink()) {
            sb.append("  symlink to ").append(volume.namespace().records.readlinkIno(ino)).append('\n');
        } else if (s.isRegularFile()) {
            Namespace ns = volume.namespace();
            ExtentList x = ns.extents.all(ino);
            if (x.inTree()) {
                int area = ns.records.rec(ino) + InodeFormat.INLINE;
                long[] tree = ns.records.readRecord(ino, (b, rec) -> new long[] {DirEntryFormat.reserveCount(b, area),
                        ExtentTreeFormat.count(b, area)});
                sb.append("  extent tree: header block ").append(x.header).append(", ").append(tree[1]).append(" extents counted, ")
                        .append(s.blocks() - x.blocks()).append(" blocks of tree and reserve (").append(tree[0])
                        .append(" in the reserve)\n");
            }
            sb.append("  ").append(s.blocks()).append(" blocks in ").append(x.count())
                    .append(" extents (file block+length@device block, u unwritten)").append(x.count() > ENTRIES_SHOWN
                    ? ", the first " + ENTRIES_SHOWN : "").append(": ").append(x.count() > ENTRIES_SHOWN ? x.head(ENTRIES_SHOWN) : x).append('\n');
        }
        return sb.toString();
    }

    /**
     * What {@code path} names (a final symlink itself, not followed), as {@link #inode}.
     *
     * @throws NamespaceException with the errno a lookup of {@code path} gives (ENOENT, ENOTDIR, ...)
     */
    public static String path(Volume volume, String path) {
        return path + ":\n" + inode(volume, volume.namespace().lstat(path).ino());
    }

    /**
     * Each group's refcount tree ({@link RefcountFormat}): its header block and its records (device blocks,
     * length, count; count 0 a copy on write's staging blocks), up to {@value #ENTRIES_SHOWN} a group.
     * Blocks no record covers are used by one file at most.
     */
    public static String refcounts(Volume volume) {
        StringBuilder sb = new StringBuilder();
        for (int g = 0; g < volume.geometry().agCount(); g++) {
            Refcounts r = volume.group(g).refcounts;
            if (r.tree == null) {
                continue;
            }
            List<Refcounts.Entry> all = r.all();
            sb.append("group ").append(g).append(": refcount tree header at block ").append(r.tree.headerBlock()).append(", ")
                    .append(all.size()).append(all.size() == 1 ? " record\n" : " records\n");
            long start = volume.group(g).start;
            for (Refcounts.Entry e : all.subList(0, Math.min(all.size(), ENTRIES_SHOWN))) {
                sb.append("  blocks [").append(start + e.start()).append(", +").append(e.length()).append(") ")
                        .append(e.count() == RefcountFormat.STAGING ? "staging (a copy on write in flight)" : "shared by " + e.count())
                        .append('\n');
            }
            if (all.size() > ENTRIES_SHOWN) {
                sb.append("  ... ").append(all.size() - ENTRIES_SHOWN).append(" more\n");
            }
        }
        return sb.isEmpty() ? "no refcount tree: no file in this volume ever shared a block\n" : sb.toString();
    }

    /**
     * The table catalog's inode and each table it names, by name: inode, tree height, estimated keys, the
     * blocks it holds and its tree's header block; the same of the overflow tree holding the medium values'
     * chunks, if there is one. A table whose tree cannot be read says why.
     */
    public static String tables(Volume volume) {
        long catalog = volume.group(0).catalog();
        if (catalog == 0) {
            return "no table catalog: no table was ever made in this volume\n";
        }
        List<DirEntry> entries = new ArrayList<>(volume.namespace().dirs.allEntries(catalog));
        entries.sort(Comparator.comparing(DirEntry::name));
        StringBuilder sb = new StringBuilder("table catalog: inode ").append(catalog).append(", ").append(entries.size())
                .append(entries.size() == 1 ? " table" : " tables").append(entries.isEmpty() ? "\n" : ":\n");
        for (DirEntry e : entries) {
            sb.append("  ").append(e.name()).append(": inode ").append(e.ino()).append(", ");
            try {
                tableTree(volume, e.ino(), volume.stat(e.ino()), sb, false, true);
            } catch (CorruptionException | NamespaceException x) {
                sb.append("cannot be read: ").append(x.getMessage()).append('\n');
            }
        }
        long overflow = volume.group(0).overflowTree();
        if (overflow != 0) { // keys are chunks of medium values
            sb.append("overflow tree (medium values): inode ").append(overflow).append(", ");
            try {
                tableTree(volume, overflow, volume.stat(overflow), sb, false, false);
            } catch (CorruptionException | NamespaceException x) {
                sb.append("cannot be read: ").append(x.getMessage()).append('\n');
            }
        }
        return sb.toString();
    }

    /**
     * A table's tree: height, estimated keys, blocks, with {@code values} (a table's, not the overflow tree's
     * chunks) its extent values and their blocks, header block; with {@code nodes} the blocks it occupies.
     */
    private static void tableTree(Volume volume, long ino, InodeStat s, StringBuilder sb, boolean nodes, boolean values) {
        InodeRecords records = volume.namespace().records;
        int area = records.rec(ino) + InodeFormat.INLINE;
        long header = records.readRecord(ino, (b, rec) -> DirContents.isTree(b, rec) ? DirEntryFormat.treeHeader(b, area) : 0L);
        if (header == 0) { // a crash came between the table's creation and its tree's; its next open makes it
            sb.append("no tree yet, ").append(s.blocks()).append(" blocks\n");
            return;
        }
        Inode i = volume.inodeCache().acquire(ino);
        try {
            BTree t = volume.namespace().dirs.tree(i, header);
            long keys = t.countEstimate(); // reads nodes: a damaged one throws before the line is begun
            sb.append("height ").append(t.height()).append(", ~").append(keys).append(" keys, ").append(s.blocks()).append(" blocks, ");
            if (values) {
                try { // a scan of the leaves: a damaged one leaves the rest of the line
                    long[] extents = Tables.extentFigures(t, volume.geometry().blockSize());
                    sb.append(extents[0]).append(" extent values in ").append(extents[1]).append(" blocks, ");
                } catch (CorruptionException damaged) {
                    sb.append("extent values not counted (").append(damaged.getMessage()).append("), ");
                }
            }
            sb.append("tree header block ").append(header).append('\n');
            if (nodes) {
                List<Long> blocks = new ArrayList<>();
                TreeWalk.blocks(t, blocks::add);
                sb.append("  tree blocks, the header then the nodes, parents first").append(blocks.size() > ENTRIES_SHOWN
                        ? " (the first " + ENTRIES_SHOWN + " of " + blocks.size() + ")" : "").append(": ")
                        .append(blocks.subList(0, Math.min(ENTRIES_SHOWN, blocks.size()))).append('\n');
            }
        } finally {
            volume.inodeCache().release(i);
        }
    }

    /**
     * The log's blocks as the first valid superblock copy gives them, or an empty range, and the volume's
     * incompatible features (with none found, {@link SuperblockFormat#INCOMPAT_WIDE_CELLS}).
     */
    private static long[] logRegion(BlockDevice device, MemorySegment scratch) {
        for (long copy : new long[] {SuperblockFormat.PRIMARY, SuperblockFormat.MIRROR}) {
            device.read(copy, scratch);
            if (superblockProblem(scratch, copy) == null) {
                try {
                    SuperblockFormat.Fields f = SuperblockFormat.read(scratch);
                    Geometry g = f.geometry();
                    return new long[] {g.logStart(), g.logStart() + g.logBlocks(), f.incompat()};
                } catch (RuntimeException inconsistent) {
                    // try the other copy
                }
            }
        }
        return new long[] {0, 0, SuperblockFormat.INCOMPAT_WIDE_CELLS}; // no superblock: judge leaves by the wider bound
    }

    private static String superblockProblem(MemorySegment b, long blockNo) {
        if (SuperblockFormat.magic(b) != SuperblockFormat.MAGIC) {
            return "no Ferrite superblock (magic " + magicText(SuperblockFormat.magic(b)) + ")";
        }
        if (!BlockHeaderFormat.checksumValid(b)) {
            return "DAMAGED (crc32c mismatch)";
        }
        if (BlockHeaderFormat.blockNo(b) != blockNo) {
            return "DAMAGED (says it is block " + BlockHeaderFormat.blockNo(b) + ")";
        }
        return null;
    }

    private static void superblockFields(MemorySegment b, StringBuilder sb) {
        try {
            SuperblockFormat.Fields f = SuperblockFormat.read(b);
            Geometry g = f.geometry();
            sb.append("  version ").append(f.version()).append(", uuid ").append(f.uuid())
                    .append(", ").append(f.clean() ? "clean" : "NOT unmounted cleanly (mounted, or crashed)")
                    .append(", mounted ").append(f.mounts()).append(" times\n");
            sb.append("  ").append(g.deviceBlocks()).append(" blocks of ").append(g.blockSize()).append(" bytes; log blocks [")
                    .append(g.logStart()).append(", ").append(g.logStart() + g.logBlocks()).append("); ")
                    .append(g.agCount()).append(" allocation groups of ").append(g.agBlocks()).append(" blocks from block ")
                    .append(g.dataStart()).append("; inodes of ").append(g.inodeSize()).append(" bytes\n");
            sb.append("  counters at last unmount: ").append(f.freeBlocks()).append(" free blocks, ")
                    .append(f.inodes()).append(" inodes, ").append(f.freeInodes()).append(" free; root inode ")
                    .append(f.rootInode()).append("; features compat 0x").append(Long.toHexString(f.compat()))
                    .append(", incompat 0x").append(Long.toHexString(f.incompat())).append('\n');
        } catch (RuntimeException e) {
            sb.append("  fields inconsistent: ").append(e.getMessage()).append('\n');
        }
    }

    private static void inodeBlock(MemorySegment b, StringBuilder sb) {
        int bs = (int) b.byteSize();
        int slots = (bs - InodeFormat.BLOCK_HEADER) / InodeFormat.recordSize(bs);
        sb.append("inode block: ").append(slots).append(" slots\n");
        for (int slot = 0; slot < slots; slot++) {
            int rec = InodeFormat.recordOffset(bs, slot);
            int mode = InodeFormat.mode(b, rec);
            sb.append("  slot ").append(slot).append(": ");
            if (mode == 0) {
                sb.append("free (generation ").append(InodeFormat.generation(b, rec)).append(")\n");
            } else {
                InodeStat s = InodeFormat.stat(0, b, rec);
                sb.append(type(s)).append(", links ").append(s.nlink()).append(", size ").append(s.size())
                        .append(", generation ").append(InodeFormat.generation(b, rec)).append('\n');
            }
        }
    }

    private static String type(InodeStat s) {
        return s.isDirectory() ? "directory" : s.isRegularFile() ? "regular file" : s.isSymlink() ? "symlink"
                : s.isTable() ? "table" : "type 0x" + Integer.toHexString(s.mode() & InodeStat.S_IFMT);
    }

    private static String magicText(int magic) {
        StringBuilder t = new StringBuilder("'");
        for (int i = 0; i < 4; i++) {
            char c = (char) ((magic >>> (8 * i)) & 0xFF);
            t.append(c >= 0x20 && c < 0x7F ? c : '.');
        }
        return t.append("' (0x").append(Integer.toHexString(magic)).append(')').toString();
    }

    private static String lsn(long lsn) {
        return Lsn.cycle(lsn) + ":" + Lsn.block(lsn);
    }

    private static String time(long nanos) {
        return Instant.ofEpochSecond(0, nanos).toString();
    }
}
