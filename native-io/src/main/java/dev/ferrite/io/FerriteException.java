package dev.ferrite.io;

/**
 * Root of every exception Ferrite throws on purpose. Unchecked: a storage engine's callers cannot
 * meaningfully recover from most of these at the call site, and the FFM idiom is unchecked too.
 * Messages always name the object and the value that was wrong.
 */
public class FerriteException extends RuntimeException {
    public FerriteException(String message) {
        super(message);
    }

    public FerriteException(String message, Throwable cause) {
        super(message, cause);
    }
}
