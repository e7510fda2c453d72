package dev.ferrite.btree;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A forward or reverse range cursor. It reads leaves optimistically, moving along the sibling links,
 * and survives concurrent changes: whenever the leaf it stands on changed, it finds its place again by
 * the last key it returned. Each key is returned at most once and in order; a key inserted or deleted
 * while the cursor runs may or may not be seen. Not thread-safe.
 */
public final class Cursor {
    private static final int BEFORE_END = Integer.MAX_VALUE;

    private final BTree tree;
    private final boolean reverse;
    private final byte[] start;
    /**
     * The current key, and a spare that the next candidate is copied into: a copy that then fails
     * validation must not touch the key the cursor finds its place again by. They swap on success.
     */
    private byte[] keyBuf = new byte[BTreeNodeFormat.MAX_KEY];
    private byte[] spareBuf = new byte[BTreeNodeFormat.MAX_KEY];
    private MemorySegment keySeg = MemorySegment.ofArray(keyBuf);
    private MemorySegment spareSeg = MemorySegment.ofArray(spareBuf);
    private final byte[] valueBuf = new byte[BTreeNodeFormat.MAX_VALUE];
    private final MemorySegment valueSeg = MemorySegment.ofArray(valueBuf);
    private int keyLen;
    private int valueLen;
    private boolean started;
    private boolean exhausted;
    private Buffer leaf;
    private long version;
    /** Position of the current entry in the leaf; -1 before the first, BEFORE_END after the last. */
    private int index;

    Cursor(BTree tree, byte[] start, boolean reverse) {
        this.tree = tree;
        this.reverse = reverse;
        this.start = start == null ? null : start.clone();
        if (start != null) {
            BTree.checkKey(MemorySegment.ofArray(start));
        }
    }

    /** Moves to the next entry; false when there is none. */
    public boolean next() {
        if (exhausted) {
            return false;
        }
        for (;;) {
            if (leaf == null || !leaf.validate(version)) {
                seek();
            }
            try {
                MemorySegment n = leaf.data();
                int c = BTreeNodeFormat.count(n);
                int i = reverse ? Math.min(index, c) - 1 : index + 1;
                if (i >= 0 && i < c) {
                    int kl = BTreeNodeFormat.keyLength(n, i);
                    int vl = BTreeNodeFormat.valueLength(n, i);
                    MemorySegment.copy(n, BTreeNodeFormat.keyOffset(n, i), spareSeg, 0, kl);
                    MemorySegment.copy(n, BTreeNodeFormat.valueOffset(n, i), valueSeg, 0, vl);
                    if (leaf.validate(version)) {
                        byte[] b = keyBuf;
                        keyBuf = spareBuf;
                        spareBuf = b;
                        MemorySegment seg = keySeg;
                        keySeg = spareSeg;
                        spareSeg = seg;
                        keyLen = kl;
                        valueLen = vl;
                        index = i;
                        started = true;
                        return true;
                    }
                    leaf = null;
                    continue;
                }
                long sibling = reverse ? BTreeNodeFormat.left(n) : BTreeNodeFormat.right(n);
                if (!leaf.validate(version)) {
                    leaf = null;
                    continue;
                }
                if (sibling == 0) {
                    exhausted = true;
                    leaf = null;
                    return false;
                }
                Buffer s = tree.nodeForCursor(sibling);
                long sv = s.readVersion();
                if (sv < 0 || !leaf.validate(version)) {
                    leaf = null;
                    continue;
                }
                leaf = s;
                version = sv;
                index = reverse ? BEFORE_END : -1;
            } catch (RuntimeException e) {
                if (leaf != null && leaf.validate(version)) {
                    throw e;
                }
                leaf = null;
            }
        }
    }

    /** Finds the leaf and position from which the next entry follows: after the last key returned, or from the start key. */
    private void seek() {
        for (;;) {
            byte[] target = started ? Arrays.copyOf(keyBuf, keyLen) : start;
            MemorySegment t = target == null ? null : MemorySegment.ofArray(target);
            BTree.Seen s = tree.leafFor(t, reverse);
            Buffer b = s.buffer();
            long v = s.version();
            int pos;
            try {
                MemorySegment n = b.data();
                if (t == null) {
                    pos = reverse ? BEFORE_END : -1;
                } else {
                    int r = BTreeNodeFormat.search(n, t);
                    boolean found = r >= 0;
                    int at = found ? r : -r - 1; // found: its index; else: the insertion point
                    if (!reverse) {
                        pos = found && !started ? at - 1 : found ? at : at - 1;
                    } else {
                        pos = found && !started ? at + 1 : at;
                    }
                }
                if (!b.validate(v)) {
                    continue;
                }
            } catch (RuntimeException e) {
                if (b.validate(v)) {
                    throw e;
                }
                continue;
            }
            leaf = b;
            version = v;
            index = pos;
            return;
        }
    }

    /** The current key (a copy). */
    public byte[] key() {
        return Arrays.copyOf(keyBuf, keyLen);
    }

    /** The current value (a copy). */
    public byte[] value() {
        return Arrays.copyOf(valueBuf, valueLen);
    }

    /** The current key, valid until the next move: a view of the cursor's own buffer. */
    public MemorySegment keySegment() {
        return keySeg.asSlice(0, keyLen);
    }

    /** The current value, valid until the next move. */
    public MemorySegment valueSegment() {
        return valueSeg.asSlice(0, valueLen);
    }
}
