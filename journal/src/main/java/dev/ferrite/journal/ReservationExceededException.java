package dev.ferrite.journal;

import dev.ferrite.io.FerriteException;

/**
 * A transaction logged more than it reserved: a programming error in the caller's reservation
 * arithmetic. The journal shuts down when it happens, because the in-memory metadata now holds changes
 * that cannot be logged.
 */
public class ReservationExceededException extends FerriteException {
    public ReservationExceededException(String message) {
        super(message);
    }
}
