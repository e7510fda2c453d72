package dev.ferrite.journal;

/**
 * A transaction logged more than it reserved: a programming error in the caller's reservation
 * arithmetic. The journal shuts down when it happens, because the in-memory metadata now holds changes
 * that cannot be logged.
 */
public class ReservationExceededException extends IllegalStateException {
    public ReservationExceededException(String message) {
        super(message);
    }
}
