/**
 * Ferrite's write-ahead log. An application sees only its knobs and figures ({@code JournalOptions},
 * {@code JournalStats}) and its exceptions ({@code VolumeShutdownException}, {@code ReservationExceededException}); the log itself (Journal, Transaction,
 * LogItem, recovery) is for the layers above, which implement its item and replay interfaces.
 */
@SuppressWarnings("module") // the modules named in "exports ... to" are built after this one
module dev.ferrite.journal {
    requires transitive dev.ferrite.io;
    requires org.jctools.core;
    requires com.lmax.disruptor;
    requires jdk.jfr;

    exports dev.ferrite.journal;
    exports dev.ferrite.journal.internal to dev.ferrite.btree, dev.ferrite.dir;
}
