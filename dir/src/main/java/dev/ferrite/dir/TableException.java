package dev.ferrite.dir;

import dev.ferrite.io.FerriteException;

/** A table operation refused: what was wrong is {@link #kind()}, the message names the table or transaction. */
public final class TableException extends FerriteException {
    /** Why a table operation was refused. */
    public enum Kind {
        /** No table of that name. */
        NO_SUCH_TABLE,
        /** A table of that name exists already. */
        TABLE_EXISTS,
        /** The table was dropped, or this handle on it closed. */
        TABLE_CLOSED,
        /** The transaction was committed or rolled back already, or the snapshot closed. */
        TRANSACTION_DONE,
        /** The cursor was closed. */
        CURSOR_CLOSED,
        /**
         * The transaction's changes would not fit in the log at once, or their blocks in the buffer cache
         * (three quarters of it, with the blocks committed beside them); nothing was changed.
         */
        TOO_LARGE,
        /**
         * The log was full while the transaction applied, and could not be freed before it ended (the
         * write-back behind it was too slow, or waited for the transaction itself); nothing was changed, and
         * the same transaction may succeed when retried.
         */
        LOG_FULL
    }

    private final Kind kind;

    public TableException(Kind kind, String message) {
        super(message);
        this.kind = kind;
    }

    public Kind kind() {
        return kind;
    }
}
