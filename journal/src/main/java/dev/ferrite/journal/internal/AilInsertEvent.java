package dev.ferrite.journal.internal;

import jdk.jfr.Category;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

@Name("dev.ferrite.journal.AilInsert")
@Label("AIL bulk insert")
@Category({"Ferrite", "Journal"})
@StackTrace(false)
final class AilInsertEvent extends Event {
    @Label("Items")
    int items;
    @Label("Checkpoints")
    int checkpoints;

    static void emit(int items, int checkpoints) {
        AilInsertEvent e = new AilInsertEvent();
        if (e.shouldCommit()) {
            e.items = items;
            e.checkpoints = checkpoints;
            e.commit();
        }
    }
}
