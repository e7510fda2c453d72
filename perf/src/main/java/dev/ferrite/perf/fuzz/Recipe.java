package dev.ferrite.perf.fuzz;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;

import dev.ferrite.btree.internal.BlockHeaderFormat;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.MemoryDevice;
import dev.ferrite.io.OverlayDevice;
import dev.ferrite.journal.internal.LogRecordFormat;
import dev.ferrite.perf.fuzz.BaseImage.Kind;
import dev.ferrite.perf.fuzz.BaseImage.Role;
import dev.ferrite.perf.fuzz.Mutation.Flip;
import dev.ferrite.perf.fuzz.Mutation.Graft;
import dev.ferrite.perf.fuzz.Mutation.LogField;
import dev.ferrite.perf.fuzz.Mutation.SetField;
import dev.ferrite.perf.fuzz.Mutation.Swap;
import dev.ferrite.perf.fuzz.Mutation.Truncate;
import dev.ferrite.perf.fuzz.Mutation.Zero;

/**
 * A hostile image as one line: the base it starts from and the mutations applied in order, e.g.
 * {@code dirty flipc:4711:130:5 graft:900:912}. Generated from a case seed ({@link #generate}), it is
 * what a failure prints and what the corpus keeps: it rebuilds the image from the deterministic base.
 */
record Recipe(Kind base, List<Mutation> mutations) {
    private static final int BS = BaseImage.BLOCK_SIZE;
    /** More blocks than a log record spans (the header's stamp table bounds one of 4 KiB blocks at 124). */
    private static final long MAX_RECORD_BLOCKS = 256;

    static Recipe parse(String line) {
        String[] t = line.trim().split("\\s+");
        Kind base = Kind.valueOf(t[0].toUpperCase(Locale.ROOT));
        List<Mutation> ms = new ArrayList<>();
        for (int i = 1; i < t.length; i++) {
            ms.add(Mutation.parse(t[i]));
        }
        return new Recipe(base, List.copyOf(ms));
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder(base.name().toLowerCase(Locale.ROOT));
        for (Mutation m : mutations) {
            sb.append(' ').append(m);
        }
        return sb.toString();
    }

    /**
     * The recipe of case {@code seed}: one mutation mostly, up to four, aimed by block role and magic; a
     * quarter of the cases change several fields of one block, checksum recomputed (a node whose counts,
     * lengths and pointers disagree with each other while each looks plausible).
     */
    static Recipe generate(long seed, BaseImage clean, BaseImage dirty) {
        Random r = new Random(seed);
        if (r.nextInt(100) < 12 && dirty.logRecords.length > 0) {
            return new Recipe(dirty.kind, List.of(logField(r, dirty)));
        }
        BaseImage img = r.nextInt(100) < 65 ? clean : dirty;
        List<Mutation> ms = new ArrayList<>();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            if (r.nextInt(4) == 0) {
                long block = target(r, img);
                for (int i = 2 + r.nextInt(3); i > 0; i--) {
                    ms.add(one(r, img, buf, block, 72 + r.nextInt(28)));
                }
            } else {
                for (int i = r.nextInt(3) == 0 ? 2 + r.nextInt(2) : 1; i > 0; i--) {
                    ms.add(one(r, img, buf, target(r, img), r.nextInt(100)));
                }
            }
        }
        return new Recipe(img.kind, List.copyOf(ms));
    }

    /** A mutation of {@code block}; {@code k} (0..99) picks the kind: truncation, zero, swap, graft, flip, flip with checksum, field. */
    private static Mutation one(Random r, BaseImage img, MemorySegment buf, long block, int k) {
        if (k < 4) {
            long end = r.nextBoolean() ? 3 + r.nextInt((int) img.dataStart) : img.dataStart + r.nextInt((int) (BaseImage.BLOCKS - img.dataStart));
            return new Truncate(end);
        }
        if (k < 14) {
            return new Zero(block);
        }
        if (k < 22) {
            return new Swap(block, sameKind(r, img, block));
        }
        if (k < 34) {
            return new Graft(sameKind(r, img, block), block);
        }
        int offset = r.nextBoolean() ? r.nextInt(96) : r.nextInt(BS);
        if (k < 44) {
            return new Flip(block, offset, r.nextInt(8), false);
        }
        if (k < 72) {
            return new Flip(block, offset, r.nextInt(8), true);
        }
        int width = 1 << r.nextInt(4);
        offset = Math.min(offset, BS - width) / width * width;
        img.device.read(block, buf);
        long old = 0;
        for (int i = width - 1; i >= 0; i--) {
            old = old << 8 | (buf.get(ValueLayout.JAVA_BYTE, offset + i) & 0xFF);
        }
        long mask = width == 8 ? -1L : (1L << (8 * width)) - 1;
        long value = switch (r.nextInt(8)) {
            case 0 -> 0;
            case 1 -> -1L;
            case 2 -> old + 1;
            case 3 -> old - 1;
            case 4 -> old ^ (1L << r.nextInt(8 * width));
            case 5 -> mask >>> 1; // the largest signed value
            case 6 -> r.nextInt(BaseImage.BLOCKS); // a block number, inode number or length inside the device
            default -> r.nextLong();
        };
        return new SetField(block, offset, width, value & mask);
    }

    /**
     * A field of one of the dirty image's log records (the records recovery replays) changed and the record
     * sealed again: set to a hostile value, moved by one or a block's worth, or a bit flipped.
     */
    private static LogField logField(Random r, BaseImage dirty) {
        long block = dirty.logRecords[r.nextInt(dirty.logRecords.length)];
        int field = r.nextInt(1 << 16);
        return switch (r.nextInt(8)) {
            case 0 -> new LogField(block, field, "set", 0);
            case 1 -> new LogField(block, field, "set", -1L);
            case 2 -> new LogField(block, field, "add", 1);
            case 3 -> new LogField(block, field, "add", -1L);
            case 4 -> new LogField(block, field, "add", r.nextBoolean() ? BS : -BS);
            case 5 -> new LogField(block, field, "xor", 1L << r.nextInt(64));
            case 6 -> new LogField(block, field, "set", r.nextInt(BaseImage.BLOCKS));
            default -> new LogField(block, field, "set", r.nextLong());
        };
    }

    /** A block to mutate: metadata mostly (spread over its magics), else superblocks, log, anchor or data. */
    private static long target(Random r, BaseImage img) {
        int k = r.nextInt(100);
        Role role = k < 70 ? Role.METADATA : k < 78 ? Role.SUPERBLOCK : k < 82 ? Role.LOG_ANCHOR : k < 94 ? Role.LOG : Role.DATA;
        if (role == Role.METADATA) {
            List<long[]> kinds = new ArrayList<>(img.byMagic.values());
            long[] blocks = kinds.get(r.nextInt(kinds.size()));
            return blocks[r.nextInt(blocks.length)];
        }
        long[] blocks = img.byRole.get(role);
        if (blocks == null || blocks.length == 0) {
            blocks = img.byRole.get(Role.SUPERBLOCK);
        }
        return blocks[r.nextInt(blocks.length)];
    }

    /** Another block of {@code block}'s magic mostly, else any metadata block. */
    private static long sameKind(Random r, BaseImage img, long block) {
        if (r.nextInt(5) > 0) {
            for (long[] blocks : img.byMagic.values()) {
                for (long b : blocks) {
                    if (b == block && blocks.length > 1) {
                        long o;
                        do {
                            o = blocks[r.nextInt(blocks.length)];
                        } while (o == block);
                        return o;
                    }
                }
            }
        }
        long[] meta = img.byRole.get(Role.METADATA);
        return meta[r.nextInt(meta.length)];
    }

    /**
     * The mutated image over {@code base}: an overlay (the base stays pristine), or with a truncation a
     * shorter copy. The caller closes it.
     */
    BlockDevice apply(MemoryDevice base) {
        long length = base.blockCount();
        for (Mutation m : mutations) {
            if (m instanceof Truncate t) {
                length = Math.min(length, Math.max(1, t.blocks()));
            }
        }
        BlockDevice dev;
        if (length < base.blockCount()) {
            MemoryDevice cut = MemoryDevice.create(base.name() + "-cut", length, BS);
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
                for (long blk = 0; blk < length; blk++) {
                    base.read(blk, b);
                    cut.write(blk, b);
                }
            }
            dev = cut;
        } else {
            dev = OverlayDevice.over(base);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            MemorySegment b = arena.allocate(BS, BlockDevice.BUFFER_ALIGNMENT);
            for (Mutation m : mutations) {
                applyOne(dev, m, a, b, length);
            }
        }
        return dev;
    }

    private static void applyOne(BlockDevice dev, Mutation m, MemorySegment a, MemorySegment b, long length) {
        switch (m) {
            case Flip f when f.block() < length -> {
                dev.read(f.block(), a);
                boolean headed = headed(a);
                int off = Math.floorMod(f.offset(), BS);
                a.set(ValueLayout.JAVA_BYTE, off, (byte) (a.get(ValueLayout.JAVA_BYTE, off) ^ (1 << (f.bit() & 7))));
                if (f.restamp() && headed) {
                    Mutation.restamp(a);
                }
                dev.write(f.block(), a);
            }
            case SetField s when s.block() < length -> {
                dev.read(s.block(), a);
                boolean headed = headed(a);
                int width = Math.clamp(s.width(), 1, 8);
                Mutation.put(a, Math.clamp(s.offset(), 0, BS - width), width, s.value());
                if (headed) {
                    Mutation.restamp(a);
                }
                dev.write(s.block(), a);
            }
            case Zero z when z.block() < length -> {
                a.fill((byte) 0);
                dev.write(z.block(), a);
            }
            case Swap s when s.a() < length && s.b() < length -> {
                dev.read(s.a(), a);
                dev.read(s.b(), b);
                dev.write(s.a(), b);
                dev.write(s.b(), a);
            }
            case Graft g when g.from() < length && g.to() < length -> {
                dev.read(g.from(), a);
                if (headed(a)) {
                    long lsn = BlockHeaderFormat.lsn(a);
                    BlockHeaderFormat.init(a, BlockHeaderFormat.magic(a), g.to(), BlockHeaderFormat.owner(a));
                    BlockHeaderFormat.stamp(a, lsn);
                }
                dev.write(g.to(), a);
            }
            case LogField l when l.block() < length -> {
                dev.read(l.block(), a);
                long blocks = LogRecordFormat.isRecordHeader(a) ? LogRecordFormat.recordBlocks(a) : 0;
                if (blocks < 1 || blocks > MAX_RECORD_BLOCKS || l.block() + blocks > length) { // 1: an inline record
                    return; // no record there in this build (their places vary), or one cut off
                }
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment rec = arena.allocate(blocks * BS, BlockDevice.BUFFER_ALIGNMENT);
                    dev.read(l.block(), rec);
                    if (LogRecordFormat.rewriteField(rec, BS, l.field(), l::change)) {
                        dev.write(l.block(), rec);
                    }
                }
            }
            default -> { } // a truncation (done), or a block cut off by one
        }
    }

    private static boolean headed(MemorySegment b) {
        return BlockHeaderFormat.magic(b) != 0 && BlockHeaderFormat.checksumValid(b);
    }
}
