package dev.ferrite.dir;

import java.util.List;

/**
 * What {@link Volume#open} found and did on the way in.
 *
 * @param usedMirror       the primary superblock was damaged, the mirror was used (and the primary rewritten)
 * @param wasClean         the volume had been unmounted cleanly
 * @param replayedBlocks   metadata blocks journal recovery rewrote
 * @param rebuiltCounters  the free and inode counts were rebuilt from the group headers (after an unclean shutdown)
 * @param notes            one line per thing worth telling an operator, empty for an uneventful mount
 */
public record MountReport(boolean usedMirror, boolean wasClean, int replayedBlocks, boolean rebuiltCounters,
                          List<String> notes) {
}
