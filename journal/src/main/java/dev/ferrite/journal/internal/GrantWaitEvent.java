package dev.ferrite.journal.internal;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Timespan;

@Name("dev.ferrite.journal.GrantWait")
@Label("Log space wait")
@Category({"Ferrite", "Journal"})
final class GrantWaitEvent extends Event {
    @Label("Grant head")
    String head;
    @Label("Bytes")
    @DataAmount
    long bytes;
    @Label("Waited")
    @Timespan
    long nanos;

    static void emit(String head, long bytes, long nanos) {
        GrantWaitEvent e = new GrantWaitEvent();
        if (e.shouldCommit()) {
            e.head = head;
            e.bytes = bytes;
            e.nanos = nanos;
            e.commit();
        }
    }
}
