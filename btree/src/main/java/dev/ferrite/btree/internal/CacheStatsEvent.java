package dev.ferrite.btree.internal;

import dev.ferrite.btree.CacheStats;

import jdk.jfr.Category;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Period;
import jdk.jfr.StackTrace;

/** The counters of one buffer cache ({@link CacheStats}), recorded every second while a recording runs. */
@Name("dev.ferrite.btree.CacheStatistics")
@Label("Buffer cache statistics")
@Category({"Ferrite", "Buffer cache"})
@Period("1 s")
@StackTrace(false)
final class CacheStatsEvent extends Event {
    @Label("Frames")
    int frames;
    @Label("Cached")
    int cached;
    @Label("Hits")
    long hits;
    @Label("Misses")
    long misses;
    @Label("Read ahead")
    long readAhead;
    @Label("Leaf evictions")
    long leafEvictions;
    @Label("Interior evictions")
    long interiorEvictions;
    @Label("Write-backs")
    long writeBacks;
    @Label("Dirty waits")
    long dirtyWaits;

    static void emit(CacheStats s) {
        CacheStatsEvent e = new CacheStatsEvent();
        e.frames = s.frames();
        e.cached = s.cached();
        e.hits = s.hits();
        e.misses = s.misses();
        e.readAhead = s.readAhead();
        e.leafEvictions = s.leafEvictions();
        e.interiorEvictions = s.interiorEvictions();
        e.writeBacks = s.writeBacks();
        e.dirtyWaits = s.dirtyWaits();
        e.commit();
    }
}
