/**
 * btree: the buffer cache and the concurrent B+tree every namespace structure is built from. What an
 * application sees of it is {@link dev.ferrite.btree.CacheStats}, the cache's figures; the cache and the
 * tree live in {@code dev.ferrite.btree.internal}, exported only to the volume layer.
 */
package dev.ferrite.btree;
