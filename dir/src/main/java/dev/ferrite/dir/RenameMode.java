package dev.ferrite.dir;

/**
 * What a {@link Namespace#rename(String, String, RenameMode) rename} does to an entry already at the new name:
 * {@code renameat2(2)}'s flags. Each mode is one transaction, all or nothing after a crash.
 */
public enum RenameMode {
    /** Replaces a compatible entry at the new name ({@code rename(2)}). */
    REPLACE,
    /** EEXIST if the new name exists, checked under the directories' locks ({@code RENAME_NOREPLACE}). */
    NO_REPLACE,
    /**
     * Swaps the two entries, both of which must exist (ENOENT otherwise), of any types: a directory moved to the
     * other parent takes its {@code ..} with it, and the parents' link counts follow ({@code RENAME_EXCHANGE}).
     */
    EXCHANGE
}
