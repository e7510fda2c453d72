package dev.ferrite.dir;

/**
 * One piece of a regular file's mapping, as {@link Namespace#extents} reports it (Linux's FIEMAP):
 * {@code length} bytes of the file from {@code offset} lie contiguous on the device from
 * {@code deviceOffset}. An unwritten extent is allocated but reads as zeros (fallocate, or space a
 * write mapped before its data was durable).
 */
public record FileExtent(long offset, long length, long deviceOffset, boolean unwritten) {
    /** The file offset just past this extent. */
    public long end() {
        return offset + length;
    }
}
