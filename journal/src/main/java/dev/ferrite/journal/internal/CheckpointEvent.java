package dev.ferrite.journal.internal;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

@Name("dev.ferrite.journal.Checkpoint")
@Label("Checkpoint")
@Category({"Ferrite", "Journal"})
@StackTrace(false)
final class CheckpointEvent extends Event {
    @Label("Sequence")
    long seq;
    @Label("LSN")
    String lsn;
    @Label("Items")
    int items;
    @Label("Records")
    int records;
    @Label("Bytes")
    @DataAmount
    long bytes;
    @Label("Write and flush time")
    @Timespan
    long nanos;

    static void emit(long seq, long lsn, int items, int records, long bytes, long nanos) {
        CheckpointEvent e = new CheckpointEvent();
        if (e.shouldCommit()) {
            e.seq = seq;
            e.lsn = Lsn.toString(lsn);
            e.items = items;
            e.records = records;
            e.bytes = bytes;
            e.nanos = nanos;
            e.commit();
        }
    }
}
