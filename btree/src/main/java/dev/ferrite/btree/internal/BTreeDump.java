package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;

/**
 * Readable descriptions of B-tree blocks for dump tools: a header's root and height, a node's level,
 * siblings and first entries. Works on whatever bytes it is given (a raw read, unchecked), so every
 * field is read through bounds-checked accessors and a damaged node yields a description saying so,
 * not an exception.
 */
public final class BTreeDump {
    private static final HexFormat HEX = HexFormat.of();
    private static final int ENTRIES_SHOWN = 8;
    private static final int BYTES_SHOWN = 24;

    private BTreeDump() {
    }

    /** True if the block's magic is a B-tree header's or node's (live or freed). */
    public static boolean isTreeBlock(MemorySegment block) {
        int m = BlockHeaderFormat.magic(block);
        return m == BTreeHeaderFormat.MAGIC || m == BTreeHeaderFormat.FREED_MAGIC
                || m == BTreeNodeFormat.MAGIC || m == BTreeNodeFormat.FREED_MAGIC;
    }

    /**
     * Describes a B-tree header or node in a few lines; see {@link #isTreeBlock}. {@code wideCells}: the
     * volume's leaves bound a cell's key and value together ({@link BufferCache#wideCells(boolean)}).
     */
    public static String describe(MemorySegment block, boolean wideCells) {
        int m = BlockHeaderFormat.magic(block);
        StringBuilder sb = new StringBuilder();
        try {
            if (m == BTreeHeaderFormat.MAGIC) {
                sb.append("B-tree header of tree ").append(BlockHeaderFormat.owner(block))
                        .append(": root block ").append(BTreeHeaderFormat.root(block))
                        .append(", height ").append(BTreeHeaderFormat.height(block)).append('\n');
            } else if (m == BTreeHeaderFormat.FREED_MAGIC || m == BTreeNodeFormat.FREED_MAGIC) {
                sb.append("freed B-tree block (tree ").append(BlockHeaderFormat.owner(block)).append(")\n");
            } else if (m == BTreeNodeFormat.MAGIC) {
                node(block, wideCells, sb);
            } else {
                sb.append("not a B-tree block\n");
            }
        } catch (RuntimeException e) {
            sb.append("  (damaged: ").append(e.getMessage()).append(")\n");
        }
        return sb.toString();
    }

    private static void node(MemorySegment n, boolean wideCells, StringBuilder sb) {
        String unsound = BTreeNodeFormat.unsound(n, (int) n.byteSize(), Long.MAX_VALUE, wideCells);
        if (unsound != null) {
            sb.append("B-tree node of tree ").append(BlockHeaderFormat.owner(n)).append(", damaged: ").append(unsound).append('\n');
            return;
        }
        boolean leaf = BTreeNodeFormat.isLeaf(n);
        int count = BTreeNodeFormat.count(n);
        sb.append(leaf ? "B-tree leaf" : "B-tree interior node").append(" of tree ").append(BlockHeaderFormat.owner(n))
                .append(": level ").append(BTreeNodeFormat.level(n)).append(", ").append(count)
                .append(leaf ? " entries" : " separators").append(", left sibling ").append(BTreeNodeFormat.left(n))
                .append(", right sibling ").append(BTreeNodeFormat.right(n))
                .append(", ").append(BTreeNodeFormat.used(n, (int) n.byteSize())).append(" bytes used, keys share ")
                .append(BTreeNodeFormat.skip(n)).append(" leading bytes").append(leaf ? ", slots from offset " + BTreeNodeFormat.base(n) : "")
                .append('\n');
        if (!leaf) {
            sb.append("  leftmost child ").append(BTreeNodeFormat.leftmost(n)).append('\n');
        }
        for (int i = 0; i < Math.min(count, ENTRIES_SHOWN); i++) {
            sb.append("  [").append(i).append("] key ").append(bytes(BTreeNodeFormat.key(n, i)));
            if (leaf) {
                sb.append(" -> value ").append(bytes(BTreeNodeFormat.value(n, i)));
            } else {
                sb.append(" -> child ").append(BTreeNodeFormat.childAt(n, i));
            }
            sb.append('\n');
        }
        if (count > ENTRIES_SHOWN) {
            sb.append("  ... ").append(count - ENTRIES_SHOWN).append(" more\n");
        }
    }

    /** Hex of the first bytes, with the length: {@code 3f00a1... (40 bytes)}. */
    static String bytes(MemorySegment s) {
        long n = s.byteSize();
        byte[] head = s.asSlice(0, Math.min(n, BYTES_SHOWN)).toArray(ValueLayout.JAVA_BYTE);
        return HEX.formatHex(head) + (n > BYTES_SHOWN ? "..." : "") + " (" + n + " bytes)";
    }
}
