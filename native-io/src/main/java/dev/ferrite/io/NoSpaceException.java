package dev.ferrite.io;

/**
 * A request can never be satisfied by the space there is: a reservation larger than the whole log, no
 * free blocks or inodes left. Thrown before anything changed.
 */
public class NoSpaceException extends FerriteException {
    public NoSpaceException(String message) {
        super(message);
    }
}
