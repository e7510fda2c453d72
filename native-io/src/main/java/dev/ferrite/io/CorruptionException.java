package dev.ferrite.io;

/**
 * Something read from a device is not what it must be: a bad magic number, a checksum mismatch, a block
 * that claims to be another block or to belong to another owner. Names the block, the structure, and the
 * expected and found values; raised instead of ever acting on damaged or foreign data.
 */
public class CorruptionException extends FerriteException {
    private final long block;
    private final String structure;

    public CorruptionException(long block, String structure, String detail) {
        super(structure + " at block " + block + " is corrupt: " + detail);
        this.block = block;
        this.structure = structure;
    }

    /** The device block the damaged structure was read from. */
    public long block() {
        return block;
    }

    /** What was being read: "log record", "B-tree node", "superblock", ... */
    public String structure() {
        return structure;
    }
}
