package dev.ferrite.journal.internal;

import jdk.jfr.Category;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

@Name("dev.ferrite.journal.Recovery")
@Label("Log recovery")
@Category({"Ferrite", "Journal"})
@StackTrace(false)
final class RecoveryEvent extends Event {
    @Label("Records scanned")
    long records;
    @Label("Checkpoints replayed")
    long checkpoints;
    @Label("Items replayed")
    long items;
    @Label("Discarded")
    String discarded;
    @Label("Duration")
    @Timespan
    long nanos;

    static void emit(RecoveryReport r) {
        RecoveryEvent e = new RecoveryEvent();
        if (e.shouldCommit()) {
            e.records = r.recordsScanned();
            e.checkpoints = r.checkpointsReplayed();
            e.items = r.itemsReplayed();
            e.discarded = r.discarded();
            e.nanos = r.nanos();
            e.commit();
        }
    }
}
