package dev.ferrite.journal.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.journal.testkit.TestItem;

/**
 * Replays {@link TestItem}s: read home, skip if its checksum holds and its LSN is as new, else apply the
 * ranges and stamp; write all back at finish.
 */
final class TestReplayer implements Replayer, AutoCloseable {
    private final BlockDevice device;
    private final Arena arena = Arena.ofConfined();
    private final Map<Long, MemorySegment> blocks = new HashMap<>();
    int replayed;
    int skipped;

    TestReplayer(BlockDevice device) {
        this.device = device;
    }

    @Override
    public boolean replay(ReplayItem item) {
        if (item.type() != TestItem.TYPE) {
            throw new AssertionError("unexpected item type " + item.type());
        }
        MemorySegment b = blocks.computeIfAbsent(item.home(), h -> {
            MemorySegment s = arena.allocate(device.blockSize(), BlockDevice.BUFFER_ALIGNMENT);
            device.read(h, s);
            return s;
        });
        if (TestItem.blockValid(b) && TestItem.blockLsn(b) >= item.lsn()) {
            skipped++;
            return false;
        }
        item.applyTo(b);
        replayed++;
        new TestItem(item.home(), device.blockSize(), arena).stamp(b, item.lsn());
        return true;
    }

    @Override
    public void finish() {
        for (Map.Entry<Long, MemorySegment> e : blocks.entrySet()) {
            device.write(e.getKey(), e.getValue());
        }
        device.flush();
    }

    @Override
    public void close() {
        arena.close();
    }
}
