package dev.ferrite.journal;

import dev.ferrite.io.FerriteException;

/**
 * The journal (and with it the volume) stopped after an error it cannot survive, such as a failed log
 * write, or was closed. Every later operation fails with this exception, naming the original cause, so
 * nothing is acknowledged that might not be durable. It lives with the journal, the lowest layer that
 * shuts down; the volume above throws it too once it is closed.
 */
public class VolumeShutdownException extends FerriteException {
    public VolumeShutdownException(String message, Throwable cause) {
        super(message, cause);
    }
}
