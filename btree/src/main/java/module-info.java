/**
 * Ferrite's buffer cache and concurrent B+tree. An application sees only {@code CacheStats}; the cache,
 * buffers, transactions, trees and their node formats are for the volume layer alone.
 */
@SuppressWarnings("module") // the modules named in "exports ... to" are built after this one
module dev.ferrite.btree {
    requires transitive dev.ferrite.journal;
    requires jdk.jfr;

    exports dev.ferrite.btree;
    exports dev.ferrite.btree.internal to dev.ferrite.dir;
}
