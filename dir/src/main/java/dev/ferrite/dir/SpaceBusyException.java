package dev.ferrite.dir;

import dev.ferrite.io.NoSpaceException;

/**
 * No space for a change inside a journal group but blocks that are busy: freed by commits in the log
 * context the group pins, which stay busy until the group has ended and that context is durable. Unlike
 * other {@link NoSpaceException}s, the same change may fit once the group is undone and the log forced
 * ({@link Tables}' commit applies once more then).
 */
final class SpaceBusyException extends NoSpaceException {
    SpaceBusyException(String message) {
        super(message);
    }
}
