package dev.ferrite.dir;

import dev.ferrite.io.FerriteException;

/**
 * The device holds a Ferrite volume this code cannot mount: a newer format version, or incompatible
 * features it does not know. Nothing was changed.
 */
public class IncompatibleVolumeException extends FerriteException {
    public IncompatibleVolumeException(String message) {
        super(message);
    }
}
