package dev.ferrite.btree.internal;

import jdk.jfr.Category;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/** A block read into the cache and verified; its duration is the read's. */
@Name("dev.ferrite.btree.CacheMiss")
@Label("Buffer cache miss")
@Category({"Ferrite", "Buffer cache"})
@StackTrace(false)
final class CacheMissEvent extends Event {
    @Label("Block")
    long block;
    @Label("Structure")
    String structure;
}
