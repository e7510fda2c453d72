package dev.ferrite.btree.internal;

import java.lang.foreign.MemorySegment;

import static dev.ferrite.io.internal.OnDisk.U16;
import static dev.ferrite.io.internal.OnDisk.U64;

/**
 * A B-tree's header block: where its root is. Readers read it optimistically on every descent; only a
 * root split or a root collapse locks it.
 *
 * <pre>
 *  0  block header ({@link BlockHeaderFormat}): magic 'FBTH', crc, block, owner (tree id), LSN
 * 32  u64 root block
 * 40  u16 height: levels, 1 for a lone leaf
 * 42..63 zero
 * </pre>
 */
final class BTreeHeaderFormat {
    static final int MAGIC = 0x48544246; // "FBTH"
    static final int FREED_MAGIC = 0x58544246; // "FBTX"
    static final int ROOT = 32, HEIGHT = 40;

    private BTreeHeaderFormat() {
    }

    static long root(MemorySegment h) {
        return h.get(U64, ROOT);
    }

    static int height(MemorySegment h) {
        return Short.toUnsignedInt(h.get(U16, HEIGHT));
    }

    /** Why a header image read from the device cannot be a sound tree's, or null (see {@link BTreeNodeFormat#unsound}). */
    static String unsound(MemorySegment h, long blockCount) {
        int height = height(h);
        if (height < 1 || height > BTreeNodeFormat.MAX_LEVELS) {
            return "height " + height + " (1 to " + BTreeNodeFormat.MAX_LEVELS + ")";
        }
        if (!BTreeNodeFormat.onDevice(root(h), blockCount)) {
            return "root is block " + root(h) + " (the device has " + blockCount + ")";
        }
        return null;
    }

    static void set(MemorySegment h, long root, int height) {
        h.set(U64, ROOT, root);
        h.set(U16, HEIGHT, (short) height);
    }
}
