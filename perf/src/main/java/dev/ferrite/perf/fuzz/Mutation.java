package dev.ferrite.perf.fuzz;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Locale;

import dev.ferrite.btree.internal.BlockHeaderFormat;

/**
 * One change to an image, written and parsed as one token of a {@link Recipe}:
 * <ul>
 *   <li>{@code flip:B:OFF:BIT} a bit flipped, checksum left stale (the header check must catch it);
 *   <li>{@code flipc:B:OFF:BIT} the same, then the block's header checksum recomputed, so the block's
 *       own validation must;
 *   <li>{@code set:B:OFF:W:HEX} {@code W} bytes (1, 2, 4 or 8) at {@code OFF} set to a hostile value,
 *       checksum recomputed;
 *   <li>{@code zero:B} the block zeroed;
 *   <li>{@code swap:B1:B2} two blocks exchanged;
 *   <li>{@code graft:B1:B2} block {@code B1} copied over {@code B2} with its header renamed to {@code B2}
 *       and its checksum recomputed: a valid-looking node in the wrong place (shared subtrees, cycles);
 *   <li>{@code trunc:N} the image cut to its first {@code N} blocks;
 *   <li>{@code logf:B:K:OP:HEX} field {@code K} (modulo their number: the header's, then every op's) of the
 *       log record whose header is block {@code B} set to ({@code set}), increased by ({@code add}) or
 *       xored with ({@code xor}) {@code HEX}, and the record sealed again, stamps and CRC32C valid, so that
 *       recovery parses past the checksum; nothing changes if no intact record starts at {@code B}.
 * </ul>
 * Checksums are recomputed with the block header's format; blocks without one (the anchor, file data)
 * keep their bytes as mutated, and so do log blocks except through {@code logf}.
 */
sealed interface Mutation {
    record Flip(long block, int offset, int bit, boolean restamp) implements Mutation {
        @Override
        public String toString() {
            return (restamp ? "flipc:" : "flip:") + block + ":" + offset + ":" + bit;
        }
    }

    record SetField(long block, int offset, int width, long value) implements Mutation {
        @Override
        public String toString() {
            return "set:" + block + ":" + offset + ":" + width + ":" + Long.toHexString(value);
        }
    }

    record Zero(long block) implements Mutation {
        @Override
        public String toString() {
            return "zero:" + block;
        }
    }

    record Swap(long a, long b) implements Mutation {
        @Override
        public String toString() {
            return "swap:" + a + ":" + b;
        }
    }

    record Graft(long from, long to) implements Mutation {
        @Override
        public String toString() {
            return "graft:" + from + ":" + to;
        }
    }

    record Truncate(long blocks) implements Mutation {
        @Override
        public String toString() {
            return "trunc:" + blocks;
        }
    }

    record LogField(long block, int field, String op, long value) implements Mutation {
        public LogField {
            if (!op.equals("set") && !op.equals("add") && !op.equals("xor")) {
                throw new IllegalArgumentException("log field change '" + op + "': set, add or xor");
            }
        }

        /** The field's new value given its old one. */
        long change(long old) {
            return switch (op) {
                case "set" -> value;
                case "add" -> old + value;
                default -> old ^ value;
            };
        }

        @Override
        public String toString() {
            return "logf:" + block + ":" + field + ":" + op + ":" + Long.toHexString(value);
        }
    }

    /** Parses one token as {@link #toString} writes it. */
    static Mutation parse(String token) {
        String[] f = token.split(":");
        try {
            return switch (f[0].toLowerCase(Locale.ROOT)) {
                case "flip" -> new Flip(Long.parseLong(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3]), false);
                case "flipc" -> new Flip(Long.parseLong(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3]), true);
                case "set" -> new SetField(Long.parseLong(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3]),
                        Long.parseUnsignedLong(f[4], 16));
                case "zero" -> new Zero(Long.parseLong(f[1]));
                case "swap" -> new Swap(Long.parseLong(f[1]), Long.parseLong(f[2]));
                case "graft" -> new Graft(Long.parseLong(f[1]), Long.parseLong(f[2]));
                case "trunc" -> new Truncate(Long.parseLong(f[1]));
                case "logf" -> new LogField(Long.parseLong(f[1]), Integer.parseInt(f[2]), f[3].toLowerCase(Locale.ROOT),
                        Long.parseUnsignedLong(f[4], 16));
                default -> throw new IllegalArgumentException("unknown mutation '" + f[0] + "'");
            };
        } catch (ArrayIndexOutOfBoundsException | NumberFormatException e) {
            throw new IllegalArgumentException("malformed mutation '" + token + "'", e);
        }
    }

    /** Recomputes the header checksum of {@code b} if it has a header (a known magic). */
    static void restamp(MemorySegment b) {
        BlockHeaderFormat.stamp(b, BlockHeaderFormat.lsn(b));
    }

    /** Sets {@code width} little-endian bytes at {@code offset}. */
    static void put(MemorySegment b, int offset, int width, long value) {
        for (int i = 0; i < width; i++) {
            b.set(ValueLayout.JAVA_BYTE, offset + i, (byte) (value >>> (8 * i)));
        }
    }
}
