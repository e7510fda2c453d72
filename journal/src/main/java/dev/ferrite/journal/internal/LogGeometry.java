package dev.ferrite.journal.internal;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.InvalidArgumentException;

/**
 * Where the log lives on its device: {@code blocks} device blocks from {@code start}. The first is the
 * anchor ({@link LogAnchorFormat}); the rest are the circular area records are written into.
 *
 * @param start  first device block of the log region
 * @param blocks size of the region in device blocks, anchor included
 */
public record LogGeometry(long start, int blocks) {
    /** Smallest region: the anchor plus room for a few checkpoints of a few items. */
    public static final int MIN_BLOCKS = 64;

    public LogGeometry {
        if (start < 0) {
            throw new InvalidArgumentException("log start block " + start + " is negative");
        }
        if (blocks < MIN_BLOCKS) {
            throw new InvalidArgumentException("a log of " + blocks + " blocks is smaller than the minimum " + MIN_BLOCKS);
        }
    }

    /** Device block of the anchor. */
    long anchorBlock() {
        return start;
    }

    /** Device block of circular-area block 0. */
    long areaStart() {
        return start + 1;
    }

    int areaBlocks() {
        return blocks - 1;
    }

    /** Throws unless the region lies inside {@code device}. */
    void requireWithin(BlockDevice device) {
        if (start + blocks > device.blockCount()) {
            throw new InvalidArgumentException("log blocks [" + start + ", " + (start + blocks) + ") lie outside "
                    + device.name() + " of " + device.blockCount() + " blocks");
        }
    }
}
