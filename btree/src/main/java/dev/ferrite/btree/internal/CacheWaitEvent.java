package dev.ferrite.btree.internal;

import jdk.jfr.Category;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** A thread that needed a frame and found every buffer dirty, locked or pinned: it waited for write-back. */
@Name("dev.ferrite.btree.CacheWait")
@Label("Buffer cache wait for write-back")
@Category({"Ferrite", "Buffer cache"})
final class CacheWaitEvent extends Event {
    @Label("Frames")
    int frames;
}
