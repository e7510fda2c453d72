package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * What a full walk of a tree found: its shape and every problem. Verifies each node's block header
 * (checksum, magic, block number, owner), levels, key order inside nodes and against the separators
 * above them, cell layout and space accounting, that no block appears twice, that the leaf chain links
 * the leaves in key order both ways, that every block is marked in use by the allocator, and the header's
 * height. Run it while nothing changes or reads the tree (a reader's misses could evict the node it is
 * reading, whose frame would then hold another block); it never writes.
 *
 * @param nodes    nodes reached
 * @param leaves   leaves reached
 * @param keys     keys in the leaves
 * @param height   levels found
 * @param leafFill the share of the leaves' room (block less node header) their cells and slots take, over
 *                 all leaves: about 0.5 to 0.7 for a tree filled by random inserts, near 1 for appends
 * @param problems what is wrong, in the order found; empty for a sound tree
 */
public record TreeCheck(long nodes, long leaves, long keys, int height, double leafFill, List<Problem> problems) {
    /**
     * One thing wrong with the tree.
     *
     * @param block  the node or header block the problem was found in
     * @param detail what is wrong there, naming the kind of block (header, node, leaf)
     */
    public record Problem(long block, String detail) {
        @Override
        public String toString() {
            return "block " + block + ": " + detail;
        }
    }

    public boolean ok() {
        return problems.isEmpty();
    }

    @Override
    public String toString() {
        StringBuilder s = new StringBuilder("tree check: ").append(nodes).append(" nodes, ").append(leaves)
                .append(" leaves, ").append(keys).append(" keys, height ").append(height)
                .append(", leaves ").append(Math.round(leafFill * 100)).append("% full");
        if (problems.isEmpty()) {
            return s.append(", no problems").toString();
        }
        s.append(", ").append(problems.size()).append(" problems:");
        for (Problem p : problems) {
            s.append("\n  ").append(p);
        }
        return s.toString();
    }

    static TreeCheck run(BTree tree, BufferCache cache, BitmapAllocator allocator) {
        Walk w = new Walk(tree, cache.blockSize(), allocator);
        Buffer h;
        try {
            h = tree.header();
        } catch (RuntimeException e) {
            return new TreeCheck(0, 0, 0, 0, 0, List.of(new Problem(tree.headerBlock(), "header: " + e.getMessage())));
        }
        MemorySegment hd = h.data();
        long root = BTreeHeaderFormat.root(hd);
        int height = BTreeHeaderFormat.height(hd);
        w.used(tree.headerBlock(), "header");
        if (height < 1 || height > 48) {
            w.problem(tree.headerBlock(), "header: height " + height);
        } else {
            w.visit(root, height - 1, null, null);
            w.checkChain();
        }
        double fill = w.leaves == 0 ? 0 : (double) w.leafBytes / (w.leaves * (w.blockSize - BTreeNodeFormat.SLOTS));
        return new TreeCheck(w.nodes, w.leaves, w.keys, height, fill, List.copyOf(w.problems));
    }

    private static final class Walk {
        final BTree tree;
        final int blockSize;
        final BitmapAllocator allocator;
        final List<Problem> problems = new ArrayList<>();
        final Set<Long> seen = new HashSet<>();
        final List<long[]> chain = new ArrayList<>(); // {block, left, right} of each leaf, in key order
        long nodes, leaves, keys;
        /** Bytes the leaves' live cells and their slots take. */
        long leafBytes;

        Walk(BTree tree, int blockSize, BitmapAllocator allocator) {
            this.tree = tree;
            this.blockSize = blockSize;
            this.allocator = allocator;
        }

        void problem(long block, String detail) {
            problems.add(new Problem(block, detail));
        }

        void used(long block, String what) {
            if (!seen.add(block)) {
                problem(block, what + " reached twice");
            }
            if (allocator != null && (block < allocator.firstBlock() || block >= allocator.firstBlock() + allocator.blockCount()
                    || !allocator.isAllocated(block))) {
                problem(block, what + " not marked in use by the allocator");
            }
        }

        /** Visits the subtree at {@code block}, whose keys must lie in [low, high). */
        void visit(long block, int level, byte[] low, byte[] high) {
            if (seen.contains(block)) {
                problem(block, "node reached twice (a cycle or a shared subtree)");
                return;
            }
            used(block, "node");
            Buffer b;
            try {
                b = tree.node(block);
            } catch (RuntimeException e) {
                problem(block, "node: " + e.getMessage());
                return;
            }
            MemorySegment n = b.data();
            nodes++;
            String where = "node (level " + level + ")";
            if (BTreeNodeFormat.level(n) != level) {
                problem(block, where + ": records level " + BTreeNodeFormat.level(n));
                return;
            }
            int count = BTreeNodeFormat.count(n);
            int cellStart = BTreeNodeFormat.cellStart(n);
            if (BTreeNodeFormat.slotsEnd(n) > cellStart || cellStart > blockSize) {
                problem(block, where + ": " + count + " slots overlap the cells from " + cellStart);
                return;
            }
            long live = 0;
            byte[] prev = null;
            for (int i = 0; i < count; i++) {
                int c = BTreeNodeFormat.slot(n, i);
                int size = BTreeNodeFormat.cellSize(n, i) - BTreeNodeFormat.SLOT;
                if (c < cellStart || c + size > blockSize) {
                    problem(block, where + ": cell " + i + " at " + c + " (" + size + " bytes) lies outside the cell area");
                    return;
                }
                live += size;
                if (!BTreeNodeFormat.sharesPrefix(n, i)) {
                    problem(block, where + ": key " + i + " does not start with the node's " + BTreeNodeFormat.skip(n) + "-byte prefix");
                } else if (BTreeNodeFormat.slotHead(n, i) != BTreeNodeFormat.computedHead(n, i)) {
                    problem(block, where + ": slot " + i + " holds head 0x" + Long.toHexString(BTreeNodeFormat.slotHead(n, i))
                            + ", its key's is 0x" + Long.toHexString(BTreeNodeFormat.computedHead(n, i)));
                }
                byte[] k = BTreeNodeFormat.key(n, i).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
                if (k.length == 0 || k.length > BTreeNodeFormat.MAX_KEY) {
                    problem(block, where + ": key " + i + " has " + k.length + " bytes");
                } else if (level == 0 && BTreeNodeFormat.valueLength(n, i) > tree.maxValue(k.length)) {
                    problem(block, where + ": value " + i + " has " + BTreeNodeFormat.valueLength(n, i) + " bytes beside a key of "
                            + k.length + " (at most " + tree.maxValue(k.length) + ")");
                }
                if (prev != null && Keys.compare(prev, k) >= 0) {
                    problem(block, where + ": key " + i + " is not above key " + (i - 1));
                }
                if (low != null && Keys.compare(k, low) < 0 || high != null && Keys.compare(k, high) >= 0) {
                    problem(block, where + ": key " + i + " lies outside the range its parent gives it");
                }
                prev = k;
            }
            if (live + BTreeNodeFormat.garbage(n) != blockSize - cellStart) {
                problem(block, where + ": " + live + " live and " + BTreeNodeFormat.garbage(n) + " dead cell bytes do not fill "
                        + (blockSize - cellStart));
            }
            if (level == 0) {
                leaves++;
                keys += count;
                leafBytes += live + (long) BTreeNodeFormat.SLOT * count;
                chain.add(new long[] {block, BTreeNodeFormat.left(n), BTreeNodeFormat.right(n)});
                return;
            }
            byte[][] seps = new byte[count][];
            long[] children = new long[count];
            for (int i = 0; i < count; i++) {
                seps[i] = BTreeNodeFormat.key(n, i).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
                children[i] = BTreeNodeFormat.child(n, i);
            }
            long leftmost = BTreeNodeFormat.leftmost(n);
            visit(leftmost, level - 1, low, count > 0 ? seps[0] : high);
            for (int i = 0; i < count; i++) {
                visit(children[i], level - 1, seps[i], i + 1 < count ? seps[i + 1] : high);
            }
        }

        void checkChain() {
            for (int i = 0; i < chain.size(); i++) {
                long[] leaf = chain.get(i);
                long expectLeft = i == 0 ? 0 : chain.get(i - 1)[0];
                long expectRight = i == chain.size() - 1 ? 0 : chain.get(i + 1)[0];
                if (leaf[1] != expectLeft) {
                    problem(leaf[0], "leaf: left link " + leaf[1] + ", expected " + expectLeft);
                }
                if (leaf[2] != expectRight) {
                    problem(leaf[0], "leaf: right link " + leaf[2] + ", expected " + expectRight);
                }
            }
        }
    }
}
