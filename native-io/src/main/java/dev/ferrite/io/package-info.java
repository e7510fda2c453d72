/**
 * native-io: the only part of Ferrite that talks to the operating system.
 *
 * <p>{@link dev.ferrite.io.BlockDevice} is the one abstraction above it: fixed-size blocks moved between
 * the device and aligned off-heap {@link java.lang.foreign.MemorySegment}s, batches with many requests
 * in flight, a flush that is a durability barrier. Implementations: {@link dev.ferrite.io.DirectDevice}
 * (O_DIRECT file or raw device through FFM downcalls, batches through io_uring),
 * {@link dev.ferrite.io.MappedDevice} (a mapped file) and {@link dev.ferrite.io.MemoryDevice} (RAM).
 * The recording device (records every write and flush, materializes crash images and injects faults;
 * the base of every crash test) is a test tool: it ships in native-io's test jar, package
 * {@code dev.ferrite.io.testkit}.
 *
 * <p>Invariants: every request is validated (alignment, range, read-only, closed) before any I/O, so a
 * rejected request changes nothing; errno becomes a {@link dev.ferrite.io.DeviceException} naming device,
 * operation, offset and errno; no write is retried in a way that could move it across a flush. All
 * downcalls live in {@code Posix}.
 */
package dev.ferrite.io;
