package dev.ferrite.dir;

/**
 * When a table commit becomes durable (survives a crash). Whatever the choice, a commit is atomic: after a
 * crash all of it is there or none of it, and commits are recovered in order (one that survives implies
 * every earlier one does).
 */
public enum Durability {
    /** Durable when the commit returns; committers at the same moment share one log write and flush. */
    SYNC,
    /**
     * Durable at most {@link VolumeOptions#asyncCommitMillis} after the commit returns (a background thread
     * forces the log), or at the next SYNC commit or {@link Volume#sync()}.
     */
    ASYNC,
    /** Durable with the next SYNC commit, {@link Volume#sync()}, checkpoint of a full log, or unmount. */
    NONE
}
