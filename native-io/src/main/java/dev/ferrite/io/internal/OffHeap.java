package dev.ferrite.io.internal;

import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.NoSpaceException;
import dev.ferrite.io.sys.Posix;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Large off-heap regions from the kernel's anonymous memory, which arrives zeroed: {@link #reserve}d, they
 * cost memory only as they are used (a page at a time, on first touch), where {@link Arena#allocate}
 * zeroes what it returns, touching every page of a gigabyte cache at startup; parts of them can be
 * {@link #populate}d just ahead of use; {@link #resident}, for memory that will all be used, they are
 * supplied at once, in huge pages where the kernel has them.
 */
public final class OffHeap {
    private static final long SMALL_PAGE = 4096;
    /** The huge pages {@link #reserveHuge} aligns to: 2 MiB on x86-64 and on arm64 with 4 KiB pages. */
    public static final long HUGE_PAGE = 2L << 20;

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

    /**
     * As {@link #reserve}, aligned to {@link #HUGE_PAGE} and advised to take huge pages where the kernel
     * has them, for memory used a part at a time: each {@link #HUGE_PAGE}-aligned part {@link #populate}d
     * as it is first needed then arrives as one huge page. On this project's virtual machines the first
     * touch of each 4 KiB page by user code cost about 6 us even after a populate (256 MiB: 0.04 s to
     * populate, 0.4 s to write once, 0.01 s to write again), and huge pages populated cost 0.03 s for both.
     * Huge pages off (or none free) only cost speed: the pages then arrive 4 KiB at a time.
     *
     * @throws NoSpaceException if the address space cannot take it
     */
    public static MemorySegment reserveHuge(long bytes, Arena arena) {
        long whole = Math.ceilDiv(bytes, HUGE_PAGE) * HUGE_PAGE;
        MemorySegment m = reserve(whole + HUGE_PAGE, arena);
        long skip = Math.ceilDiv(m.address(), HUGE_PAGE) * HUGE_PAGE - m.address();
        Posix.madvise(m.asSlice(skip, whole), whole, Posix.MADV_HUGEPAGE);
        return m.asSlice(skip, bytes);
    }

    /**
     * Supplies the pages of {@code region}, a page-aligned part of a {@link #reserve}d one, now and in one
     * call, ahead of their first use: faulting 4 KiB pages in one at a time costs 11-30 us each on some
     * virtual machines (each a trap through the hypervisor), where one madvise populating them costs
     * about 0.7 us a page. Best effort: false if the kernel did not (before Linux 5.14, short of memory,
     * a region not page-aligned); the pages then arrive on first touch, as without it.
     */
    public static boolean populate(MemorySegment region) {
        return Posix.madvise(region, region.byteSize(), Posix.MADV_POPULATE_WRITE) == 0;
    }

    /**
     * As {@link #reserve}, with every page supplied now, in huge pages where the kernel has them: for
     * memory that will all be used (a device in RAM). Faulting in 4 KiB pages one by one costs 15-30 us
     * each on some virtual machines, a third of a second for 64 MiB; huge pages populated by one
     * madvise take a few milliseconds. Either advice unknown to the kernel (before Linux 5.14, huge pages
     * off) only costs speed: the pages are then touched one by one.
     *
     * @throws NoSpaceException if the address space cannot take it, or the system has not the memory
     */
    public static MemorySegment resident(long bytes, Arena arena) {
        MemorySegment m = reserve(bytes, arena);
        if (bytes >= HUGE_PAGE) {
            Posix.madvise(m, bytes, Posix.MADV_HUGEPAGE);
        }
        if (!populate(m)) {
            int errno = Posix.errno();
            if (errno == Errno.ENOMEM) {
                throw new NoSpaceException("cannot make " + bytes + " bytes of memory resident: " + Errno.name(errno) + " ("
                        + Errno.describe(errno) + ")");
            }
            for (long at = 0; at < bytes; at += SMALL_PAGE) {
                m.set(ValueLayout.JAVA_BYTE, at, (byte) 0);
            }
        }
        return m;
    }
}
