package dev.ferrite.io.internal;

import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.sys.Posix;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Large off-heap regions that cost memory only as they are used. {@link Arena#allocate} zeroes what it
 * returns, which for a cache of a gigabyte means touching every page at startup; anonymous memory from
 * the kernel arrives zeroed a page at a time, on first touch.
 */
public final class OffHeap {
    private OffHeap() {
    }

    /**
     * Zeroed, page-aligned memory of {@code bytes}, released when {@code arena} closes. Pages are supplied
     * on first touch (and not reserved against the system's commit limit up front), so a generous budget
     * costs RAM only as it fills.
     *
     * @throws NoSpaceException if the address space cannot take it
     */
    public static MemorySegment reserve(long bytes, Arena arena) {
        if (bytes <= 0) {
            throw new InvalidArgumentException("cannot reserve " + bytes + " bytes of memory");
        }
        MemorySegment m = Posix.mapAnonymous(bytes, arena);
        if (m.address() == Posix.MAP_FAILED) {
            int errno = Posix.errno();
            throw new NoSpaceException("cannot map " + bytes + " bytes of memory: " + Errno.name(errno) + " ("
                    + Errno.describe(errno) + ")");
        }
        return m;
    }
}
