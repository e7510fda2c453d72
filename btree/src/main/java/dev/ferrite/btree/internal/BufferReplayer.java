package dev.ferrite.btree.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.TreeMap;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.IoBatch;
import dev.ferrite.journal.internal.ReplayItem;
import dev.ferrite.journal.internal.Replayer;

/**
 * Journal recovery for blocks kept in the buffer cache (every one starts with a
 * {@link BlockHeaderFormat}): a block whose checksum holds and whose LSN is at least the logged copy's
 * is skipped; any other (older, never written, or torn by a crash during write-back) gets the logged
 * ranges applied and is stamped with their LSN. Replayed blocks are kept in memory and written, in block
 * order, then flushed, by {@link #finish()}; except a block the log leaves freed (its header's magic one a
 * free gives): a free is never written home at run time either, and once free the block may have been
 * handed out for file data, which the layer above writes without logging it; writing the block's logged
 * history over it would destroy the data (the job of XFS's buffer cancel records).
 */
public final class BufferReplayer implements Replayer, AutoCloseable {
    private final BlockDevice device;
    private final Arena arena = Arena.ofConfined();
    private final Map<Long, MemorySegment> blocks = new TreeMap<>();
    private final int[] freedMagics;

    public BufferReplayer(BlockDevice device) {
        this(device, new int[0]);
    }

    /**
     * A replayer that also knows {@code freedMagics}, the header magics the layer above gives the blocks it
     * frees through {@link BufferCache#free} (the B-tree's own are always known): see {@link #finish()}.
     */
    public BufferReplayer(BlockDevice device, int... freedMagics) {
        this.device = device;
        this.freedMagics = freedMagics.clone();
    }

    @Override
    public boolean knows(int type) {
        return type == BufferCache.ITEM_TYPE;
    }

    @Override
    public boolean replay(ReplayItem item) {
        if (item.type() != BufferCache.ITEM_TYPE) {
            throw new IllegalStateException("log item of type " + item.type() + " for block " + item.home()
                    + " is not a cached block (type " + BufferCache.ITEM_TYPE + ")");
        }
        MemorySegment b = blocks.get(item.home());
        if (b == null) {
            b = arena.allocate(device.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            device.read(item.home(), b);
            blocks.put(item.home(), b);
        }
        if (BlockHeaderFormat.checksumValid(b) && BlockHeaderFormat.lsn(b) >= item.lsn()) {
            return false;
        }
        item.applyTo(b);
        BlockHeaderFormat.stamp(b, item.lsn());
        return true;
    }

    @Override
    public void finish() {
        IoBatch batch = new IoBatch(Math.max(1, Math.min(blocks.size(), 1024)));
        for (Map.Entry<Long, MemorySegment> e : blocks.entrySet()) {
            if (freed(BlockHeaderFormat.magic(e.getValue()))) {
                continue;
            }
            if (batch.size() == batch.capacity()) {
                device.submit(batch);
                batch.clear();
            }
            batch.write(e.getKey(), e.getValue());
        }
        if (batch.size() > 0) {
            device.submit(batch);
        }
        device.flush();
    }

    private boolean freed(int magic) {
        if (magic == BTreeNodeFormat.FREED_MAGIC || magic == BTreeHeaderFormat.FREED_MAGIC) {
            return true;
        }
        for (int m : freedMagics) {
            if (m == magic) {
                return true;
            }
        }
        return false;
    }

    /** Blocks replayed so far. */
    public int blocks() {
        return blocks.size();
    }

    @Override
    public void close() {
        arena.close();
    }
}
