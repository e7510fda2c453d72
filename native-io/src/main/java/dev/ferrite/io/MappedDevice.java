package dev.ferrite.io;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * A regular file mapped into memory in one mapping owned by a shared {@link Arena}. Reads and writes are
 * memory copies; durability comes from {@link MemorySegment#force()} ({@code msync}) over the regions
 * written since the last flush, tracked in {@value #REGION_SHIFT}-bit (64 MiB) regions so a flush of a
 * large, mostly clean file does not walk all of it. Discard zeroes.
 */
public final class MappedDevice extends AbstractBlockDevice {
    private static final int REGION_SHIFT = 26;

    private final Arena arena;
    private final MemorySegment map;
    private final AtomicIntegerArray dirtyRegions;

    private MappedDevice(String name, int blockSize, long blockCount, boolean readOnly, Arena arena, MemorySegment map) {
        super(name, blockSize, blockCount, readOnly);
        this.arena = arena;
        this.map = map;
        this.dirtyRegions = new AtomicIntegerArray((int) ((map.byteSize() >>> REGION_SHIFT) + 1));
    }

    /** Maps {@code path}; see {@link DeviceOptions} for sizing. {@code ioDepth} and {@code engine} are unused. */
    public static MappedDevice open(Path path, DeviceOptions options) {
        String name = path.toString();
        StandardOpenOption[] modes = options.readOnly()
                ? new StandardOpenOption[] {StandardOpenOption.READ}
                : new StandardOpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE, StandardOpenOption.CREATE};
        if (options.readOnly() || options.size() == 0) {
            if (!Files.exists(path)) {
                throw new DeviceException(name, "open", -1, Errno.ENOENT,
                        options.readOnly() ? "file does not exist" : "file does not exist; give a size to create it");
            }
        }
        try (FileChannel channel = FileChannel.open(path, modes)) {
            long fileSize = channel.size();
            long size = options.size() == 0 ? fileSize : options.size();
            if (size > fileSize) {
                if (options.readOnly()) {
                    throw new DeviceException(name, "open", -1, Errno.EROFS,
                            "file has " + fileSize + " bytes, fewer than the " + size + " asked for, and is opened read-only");
                }
                // Grow by writing the last byte: the file becomes sparse up to there, like ftruncate.
                channel.write(java.nio.ByteBuffer.allocate(1), size - 1);
            }
            long blockCount = size / options.blockSize();
            if (blockCount < 1) {
                throw new InvalidArgumentException(name + ": " + size + " bytes hold no block of " + options.blockSize() + " bytes");
            }
            Arena arena = Arena.ofShared();
            try {
                MemorySegment map = channel.map(options.readOnly() ? FileChannel.MapMode.READ_ONLY : FileChannel.MapMode.READ_WRITE,
                        0, blockCount * options.blockSize(), arena);
                return new MappedDevice(name, options.blockSize(), blockCount, options.readOnly(), arena, map);
            } catch (IOException | RuntimeException e) {
                arena.close();
                throw e;
            }
        } catch (NoSuchFileException e) {
            throw new DeviceException(name, "open", -1, Errno.ENOENT, "no such file");
        } catch (AccessDeniedException e) {
            throw new DeviceException(name, "open", -1, Errno.EACCES, "permission denied");
        } catch (FileSystemException e) {
            throw new DeviceException(name, "open", -1, Errno.EIO, e.getMessage());
        } catch (IOException e) {
            throw new DeviceException(name, "open", -1, Errno.EIO, e.getMessage());
        }
    }

    @Override
    void doRead(long offset, MemorySegment dst) {
        MemorySegment.copy(map, offset, dst, 0, dst.byteSize());
    }

    @Override
    void doWrite(long offset, MemorySegment src) {
        MemorySegment.copy(src, 0, map, offset, src.byteSize());
        markDirty(offset, src.byteSize());
    }

    @Override
    void doSubmit(IoBatch batch) {
        for (int i = 0, n = batch.size(); i < n; i++) {
            batch.started(i);
            long offset = batch.block(i) * blockSize();
            if (batch.isWrite(i)) {
                doWrite(offset, batch.buffer(i));
            } else {
                doRead(offset, batch.buffer(i));
            }
            batch.completed(i, 0);
        }
    }

    @Override
    void doFlush() {
        for (int r = 0, n = dirtyRegions.length(); r < n; r++) {
            // Clear before forcing: a write racing with this flush re-marks the region for the next one.
            if (dirtyRegions.get(r) != 0 && dirtyRegions.getAndSet(r, 0) != 0) {
                long start = (long) r << REGION_SHIFT;
                long len = Math.min(1L << REGION_SHIFT, map.byteSize() - start);
                try {
                    map.asSlice(start, len).force();
                } catch (java.io.UncheckedIOException e) {
                    dirtyRegions.set(r, 1);
                    throw failure("flush", start, Errno.EIO, e.getMessage());
                }
            }
        }
    }

    @Override
    void doDiscard(long offset, long length) {
        map.asSlice(offset, length).fill((byte) 0);
        markDirty(offset, length);
    }

    @Override
    void doClose() {
        arena.close();
    }

    private void markDirty(long offset, long length) {
        for (long r = offset >>> REGION_SHIFT, last = (offset + length - 1) >>> REGION_SHIFT; r <= last; r++) {
            if (dirtyRegions.get((int) r) == 0) {
                dirtyRegions.set((int) r, 1);
            }
        }
    }

    @Override
    public String toString() {
        return "MappedDevice[" + name() + ", " + blockCount() + " x " + blockSize() + "]";
    }
}
