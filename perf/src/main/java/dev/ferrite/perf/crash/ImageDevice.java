package dev.ferrite.perf.crash;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.BitSet;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.testkit.RecordingDevice.Event;

/**
 * A device in RAM that is loaded again and again instead of made anew: one per worker per role (the
 * recording's prefix, the crash state, the state as recovery left it), each refilled by copying another
 * one's contents, which saves allocating and zeroing an image per crash state. Writes and discards are
 * serialized with {@link #load}, so a copy taken while a volume runs on the source holds every write
 * whole: the state of a crash at that moment. A load copies only the blocks that may differ: those
 * changed here since this device was last loaded from the same source, and those changed there since.
 * Each device so tracks its changes for one reader, the device that loads from it. Its owner
 * {@linkplain #free() frees} it; {@link #close()}, which a volume's owner calls when done with the
 * volume, leaves it usable.
 */
final class ImageDevice implements BlockDevice {
    private final String name;
    private final int blockSize;
    private final long blockCount;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment memory;
    /** Blocks changed here since the last load into this device; guarded by this. */
    private final BitSet written = new BitSet();
    /** Blocks changed here (by writes or a load) since the reader last loaded from this device; guarded by this. */
    private final BitSet unread = new BitSet();
    /** What this device was last loaded from (null: nothing yet, so the next load copies everything); guarded by this. */
    private Object source;

    ImageDevice(String name, long blockCount, int blockSize) {
        this.name = name;
        this.blockSize = blockSize;
        this.blockCount = blockCount;
        this.memory = arena.allocate(blockCount * blockSize, BUFFER_ALIGNMENT);
    }

    /** Makes this device hold what {@code from} holds now (whole writes only, if a volume writes to it meanwhile). */
    void load(ImageDevice from) {
        synchronized (from) {
            synchronized (this) {
                BitSet copy = changed(from, from.unread);
                for (int b = copy.nextSetBit(0); b >= 0; ) {
                    int end = copy.nextClearBit(b);
                    MemorySegment.copy(from.memory, (long) b * blockSize, memory, (long) b * blockSize, (long) (end - b) * blockSize);
                    b = copy.nextSetBit(end);
                }
                from.unread.clear();
            }
        }
    }

    /** Makes this device hold what {@code from} holds (a device no one writes to meanwhile). */
    synchronized void load(BlockDevice from) {
        BitSet copy = changed(from, new BitSet());
        for (int b = copy.nextSetBit(0); b >= 0; ) {
            int end = copy.nextClearBit(b);
            from.read(b, memory.asSlice((long) b * blockSize, (long) (end - b) * blockSize));
            b = copy.nextSetBit(end);
        }
    }

    /** The blocks a load from {@code from} copies, given what changed there; notes them as changed for this device's reader. */
    private BitSet changed(Object from, BitSet changedThere) {
        BitSet copy = new BitSet();
        if (from == source) {
            copy.or(written);
            copy.or(changedThere);
        } else {
            copy.set(0, (int) blockCount);
            source = from;
        }
        written.clear();
        unread.or(copy);
        return copy;
    }

    private void wrote(long block, long count) {
        written.set((int) block, (int) (block + count));
        unread.set((int) block, (int) (block + count));
    }

    /** Applies recorded event {@code e}: a write whole or only its {@code sectors} (null: all), a discard as zeros. */
    synchronized void apply(Event e, BitSet sectors) {
        long at = e.block() * blockSize;
        if (e.kind() != Event.Kind.FLUSH) {
            wrote(e.block(), e.blockCount());
        }
        switch (e.kind()) {
            case FLUSH -> { }
            case DISCARD -> memory.asSlice(at, e.blockCount() * blockSize).fill((byte) 0);
            case WRITE -> {
                if (sectors == null) {
                    MemorySegment.copy(e.data(), 0, memory, at, e.data().byteSize());
                } else {
                    for (int s = sectors.nextSetBit(0); s >= 0; s = sectors.nextSetBit(s + 1)) {
                        MemorySegment.copy(e.data(), (long) s * SECTOR_SIZE, memory, at + (long) s * SECTOR_SIZE, SECTOR_SIZE);
                    }
                }
            }
        }
    }

    /** The device's contents, to save as a file. */
    MemorySegment contents() {
        return memory;
    }

    void free() {
        arena.close();
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int blockSize() {
        return blockSize;
    }

    @Override
    public long blockCount() {
        return blockCount;
    }

    @Override
    public boolean isReadOnly() {
        return false;
    }

    @Override
    public void read(long block, MemorySegment dst) {
        BlockDevice.requireTransfer(this, "read", block, dst);
        MemorySegment.copy(memory, block * blockSize, dst, 0, dst.byteSize());
    }

    @Override
    public synchronized void write(long block, MemorySegment src) {
        BlockDevice.requireTransfer(this, "write", block, src);
        wrote(block, src.byteSize() / blockSize);
        MemorySegment.copy(src, 0, memory, block * blockSize, src.byteSize());
    }

    @Override
    public void submit(IoBatch batch) {
        BlockDevice.requireSubmittable(this, batch);
        batch.resetResults();
        synchronized (this) {
            for (int i = 0, n = batch.size(); i < n; i++) {
                batch.started(i);
                MemorySegment buf = batch.buffer(i);
                long offset = batch.block(i) * blockSize;
                if (batch.isWrite(i)) {
                    wrote(batch.block(i), buf.byteSize() / blockSize);
                    MemorySegment.copy(buf, 0, memory, offset, buf.byteSize());
                } else {
                    MemorySegment.copy(memory, offset, buf, 0, buf.byteSize());
                }
                batch.completed(i, 0);
            }
        }
    }

    @Override
    public void flush() {
    }

    @Override
    public synchronized void discard(long block, long count) {
        if (count < 1) {
            throw new InvalidArgumentException(name + ": discard of " + count + " blocks at block " + block
                    + ": the count must be at least 1");
        }
        BlockDevice.requireInside(this, "discard", block, count);
        wrote(block, count);
        memory.asSlice(block * blockSize, count * blockSize).fill((byte) 0);
    }

    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return "ImageDevice[" + name + ", " + blockCount + " x " + blockSize + "]";
    }
}
