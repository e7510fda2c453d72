package dev.ferrite.journal.internal;

import jdk.jfr.Category;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

@Name("dev.ferrite.journal.AilPush")
@Label("AIL write-back")
@Category({"Ferrite", "Journal"})
@StackTrace(false)
final class AilPushEvent extends Event {
    @Label("Items written home")
    int items;

    static void emit(int items) {
        AilPushEvent e = new AilPushEvent();
        if (e.shouldCommit()) {
            e.items = items;
            e.commit();
        }
    }
}
