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
 * ranges applied and is stamped with their LSN. A block initialisation record
 * ({@link BlockInitFormat}) rebuilds each of its blocks that is not newer than it, before the rest of
 * its checkpoint is replayed. Replayed blocks are kept in memory and written, in block
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
        return type == BufferCache.ITEM_TYPE || type == BufferCache.INIT_TYPE;
    }

    @Override
    public boolean replaysFirst(int type) {
        return type == BufferCache.INIT_TYPE;
    }

    /** A block's ranges: 1; a block initialisation record: its count, if it is one range of the record's layout. */
    @Override
    public int blocks(ReplayItem item) {
        if (item.type() != BufferCache.INIT_TYPE) {
            return 1;
        }
        if (item.rangeCount() != 1 || item.rangeOffset(0) != 0 || item.rangeLength(0) < BlockInitFormat.SIZE || item.zeroed()) {
            return 0;
        }
        return BlockInitFormat.count(item.rangeData(0));
    }

    @Override
    public boolean replay(ReplayItem item) {
        return switch (item.type()) {
            case BufferCache.ITEM_TYPE -> replayRanges(item);
            case BufferCache.INIT_TYPE -> replayInit(item);
            default -> throw new IllegalStateException("log item of type " + item.type() + " for block " + item.home()
                    + " is neither a cached block (type " + BufferCache.ITEM_TYPE + ") nor a block initialisation (type "
                    + BufferCache.INIT_TYPE + ")");
        };
    }

    private boolean replayRanges(ReplayItem item) {
        MemorySegment b = block(item.home());
        if (newer(b, item.lsn())) {
            return false;
        }
        item.applyTo(b);
        BlockHeaderFormat.stamp(b, item.lsn());
        return true;
    }

    /**
     * Rebuilds each block of the record that is not newer than it: zeros and a fresh header, stamped one
     * LSN before the record's, so that every later op of the block, those of the record's own checkpoint
     * included, still applies (recovery replays records before the rest of their checkpoint).
     */
    private boolean replayInit(ReplayItem item) {
        MemorySegment r = item.rangeData(0);
        int count = BlockInitFormat.count(r);
        boolean applied = false;
        for (int i = 0; i < count; i++) {
            long blockNo = item.home() + i;
            MemorySegment b = block(blockNo);
            if (newer(b, item.lsn())) {
                continue;
            }
            b.fill((byte) 0);
            BlockHeaderFormat.init(b, BlockInitFormat.magic(r), blockNo, BlockInitFormat.owner(r));
            BlockHeaderFormat.stamp(b, item.lsn() - 1);
            applied = true;
        }
        return applied;
    }

    /** The image of {@code blockNo} replay works on, read from home the first time. */
    private MemorySegment block(long blockNo) {
        MemorySegment b = blocks.get(blockNo);
        if (b == null) {
            b = arena.allocate(device.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            device.read(blockNo, b);
            blocks.put(blockNo, b);
        }
        return b;
    }

    /**
     * True if {@code b} already holds what the log's copy of {@code lsn} would give it: written home at
     * or after that checkpoint, as a checksum that holds vouches (a torn write-back is replayed).
     */
    private static boolean newer(MemorySegment b, long lsn) {
        return BlockHeaderFormat.checksumValid(b) && BlockHeaderFormat.lsn(b) >= lsn;
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
