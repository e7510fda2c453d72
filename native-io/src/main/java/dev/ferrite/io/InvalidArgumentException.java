package dev.ferrite.io;

/**
 * A caller passed something the operation cannot accept: a misaligned buffer or offset, a range past
 * the end of a device, a bad name or path. Always thrown before anything is changed.
 */
public class InvalidArgumentException extends FerriteException {
    public InvalidArgumentException(String message) {
        super(message);
    }
}
