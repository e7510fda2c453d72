package dev.ferrite.io.testkit;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.DeviceException;
import dev.ferrite.io.Errno;
import dev.ferrite.io.InvalidArgumentException;
import dev.ferrite.io.IoBatch;
import dev.ferrite.io.MemoryDevice;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/**
 * A device that records every write, discard and flush made through it, in one total order, and turns
 * the recording back into device images: the state after any prefix of events, or a crash state in
 * which a durable prefix survived plus some of the writes that were in flight, possibly reordered and
 * torn at {@link BlockDevice#SECTOR_SIZE 512-byte} sector boundaries. It also injects faults and counts
 * operations. The base of every crash test.
 *
 * <h2>Recording</h2>
 * {@link #wrap(BlockDevice)} takes ownership of a device; its contents at that moment are the
 * <em>base image</em>. Rather than copying the whole device, the recorder saves a block's base contents
 * just before the first write or discard that touches it. Every write is kept as a heap copy of its data
 * (one copy per write). Reads are passed through and not recorded.
 *
 * <h2>Flush epochs</h2>
 * Flushes are numbered from 0 in recording order. <em>Epoch</em> {@code k} holds the events after flush
 * {@code k - 1} (or the start) and before flush {@code k}; epoch {@link #flushCount()} is the unflushed
 * tail. After flush {@code k} returned, everything up to it is durable and the writes of epoch
 * {@code k + 1} may have reached the medium in any subset and order.
 *
 * <h2>Images</h2>
 * {@link #imageAt(int)} and {@link #materialize(CrashState)} build a fresh {@link MemoryDevice} that the
 * caller owns and closes. In images a discarded block reads as zeros (one of the contents the
 * {@link BlockDevice#discard contract} allows). Untouched blocks come from the wrapped device, so images
 * can only be built while this device is open.
 *
 * <h2>Faults</h2>
 * {@link #failOnce} and {@link #failFrom} make the n-th operation of a kind, counted from the call, fail
 * with an errno; {@code failFrom} also fails every later one, like a dead device. (The count is exact
 * when no operation of that kind runs during the call.) A failed operation changes nothing on the
 * wrapped device and records nothing; a failure of the wrapped device itself propagates and records
 * nothing either. {@link #issued(Op)} counts operations, e.g. the flushes a group commit issued.
 * {@link #stall(Op)} holds every operation of a kind before it reaches the device until
 * {@link #resume(Op)}: a device that has stopped answering, e.g. a log device that is behind.
 *
 * <h2>Concurrency</h2>
 * One lock serializes every mutation: "apply to the wrapped device, then append the event" is one
 * critical section, so the recorded order is the order applied. Reads take no lock. Inspection and image
 * building take the lock, so they see a consistent recording even while writers run.
 *
 * <p>A test tool, so it lives in native-io's test kit and checks its arguments itself, as every device
 * does: a rejected call reaches neither the fault counters nor the wrapped device.
 */
public final class RecordingDevice implements BlockDevice {
    /** Images are built through a staging buffer of this many bytes (or one block, if larger). */
    private static final int STAGE_BYTES = 1 << 20;
    /** How long a {@linkplain #stall(Op) stalled} operation waits before it fails. */
    public static final int STALL_LIMIT_SECONDS = 60;

    private static final MemorySegment NO_DATA = MemorySegment.ofArray(new byte[0]).asReadOnly();

    private final BlockDevice inner;
    private final String name;
    private final int blockSize;
    private final int blockShift;
    private final long blockCount;
    /** Held shared by every call in progress and exclusively by {@link #close()}, which so waits for them. */
    private final ReentrantReadWriteLock inFlight = new ReentrantReadWriteLock();
    private volatile boolean closed;
    private final Arena arena = Arena.ofShared(); // owns the scratch buffer; freed on close
    private final AtomicLongArray issued = new AtomicLongArray(Op.values().length);
    private final AtomicReferenceArray<Fault> faults = new AtomicReferenceArray<>(Op.values().length);
    /** Per operation kind, the gate a stalled operation waits at; null when that kind is not stalled. */
    private final AtomicReferenceArray<CountDownLatch> stalls = new AtomicReferenceArray<>(Op.values().length);

    /**
     * Guards the wrapped device's contents as seen through this recorder and everything below: the
     * event list, the flush index, the saved base blocks and the scratch buffer. Taken alone; the
     * wrapped device's own locks nest inside it.
     */
    private final ReentrantLock lock = new ReentrantLock();
    private final ArrayList<Event> events = new ArrayList<>();
    private int[] flushEvents = new int[16];
    private int flushCount;
    private final Map<Long, byte[]> base = new HashMap<>();
    private final MemorySegment scratch;

    private RecordingDevice(BlockDevice inner) {
        this.inner = inner;
        this.name = inner.name();
        this.blockSize = inner.blockSize();
        this.blockShift = Integer.numberOfTrailingZeros(blockSize);
        this.blockCount = inner.blockCount();
        this.scratch = arena.allocate(inner.blockSize(), BUFFER_ALIGNMENT);
    }

    /**
     * Starts recording on {@code inner}, whose current contents become the base image. The recorder
     * owns {@code inner} from now on: closing it closes {@code inner}, and every change to
     * {@code inner} must go through the recorder.
     */
    public static RecordingDevice wrap(BlockDevice inner) {
        if (inner == null) {
            throw new InvalidArgumentException("cannot record on a null device");
        }
        return new RecordingDevice(inner);
    }

    // ---------------------------------------------------------------------------------------- events

    /**
     * One recorded operation.
     *
     * @param index      position in the recording, from 0
     * @param kind       what happened
     * @param block      first block written or discarded; -1 for a flush
     * @param blockCount blocks written or discarded; 0 for a flush
     * @param data       a read-only copy of the bytes written; empty unless {@code kind} is {@code WRITE}
     */
    public record Event(int index, Kind kind, long block, long blockCount, MemorySegment data) {
        /** What an event did to the device. */
        public enum Kind { WRITE, FLUSH, DISCARD }

        /** Number of 512-byte sectors the write covers (what a torn-write mask indexes); 0 for other kinds. */
        public int sectorCount() {
            return (int) (data.byteSize() / SECTOR_SIZE);
        }

        @Override
        public String toString() {
            return kind == Kind.FLUSH
                    ? "Event[" + index + " FLUSH]"
                    : "Event[" + index + " " + kind + " block " + block + " x" + blockCount + "]";
        }
    }

    /** Number of events recorded so far. */
    public int eventCount() {
        lock.lock();
        try {
            return events.size();
        } finally {
            lock.unlock();
        }
    }

    /** Event {@code i}, from 0. */
    public Event event(int i) {
        lock.lock();
        try {
            if (i < 0 || i >= events.size()) {
                throw new InvalidArgumentException(name + ": event " + i + " does not exist; "
                        + events.size() + " events recorded");
            }
            return events.get(i);
        } finally {
            lock.unlock();
        }
    }

    /** A snapshot of every event recorded so far, in order. */
    public List<Event> events() {
        lock.lock();
        try {
            return List.copyOf(events);
        } finally {
            lock.unlock();
        }
    }

    /** Number of flushes recorded so far; there are {@code flushCount() + 1} epochs. */
    public int flushCount() {
        lock.lock();
        try {
            return flushCount;
        } finally {
            lock.unlock();
        }
    }

    /** Event index of flush {@code k}, from 0. */
    public int flushEvent(int k) {
        lock.lock();
        try {
            if (k < 0 || k >= flushCount) {
                throw new InvalidArgumentException(name + ": flush " + k + " does not exist; "
                        + flushCount + " flushes recorded");
            }
            return flushEvents[k];
        } finally {
            lock.unlock();
        }
    }

    /**
     * The write events of epoch {@code k}: after flush {@code k - 1} (or the start) and before flush
     * {@code k}; {@code k == flushCount()} gives the unflushed tail.
     */
    public List<Event> epochWrites(int k) {
        lock.lock();
        try {
            if (k < 0 || k > flushCount) {
                throw new InvalidArgumentException(name + ": epoch " + k + " does not exist; epochs are 0.."
                        + flushCount + " with " + flushCount + " flushes recorded");
            }
            List<Event> writes = new ArrayList<>();
            for (int i = epochStart(k), end = epochEnd(k); i < end; i++) {
                Event e = events.get(i);
                if (e.kind() == Event.Kind.WRITE) {
                    writes.add(e);
                }
            }
            return List.copyOf(writes);
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------------------------- crash states

    /**
     * A device state to materialize: the first {@code prefix} events applied in order, then the
     * {@code extras} (later write events) applied in list order, each whole or torn. A plain value, so
     * a crash suite can print it to reproduce a failure; checked against the recording when
     * materialized or built by {@link #crashAfterFlush} or {@link #crashTornAt}.
     *
     * @param prefix how many events, from the start of the recording, survived in full
     * @param extras writes after the prefix that also reached the medium, in the order they landed
     */
    public record CrashState(int prefix, List<Extra> extras) {
        public CrashState {
            if (prefix < 0) {
                throw new InvalidArgumentException("crash state prefix " + prefix + " is negative");
            }
            if (extras == null) {
                throw new InvalidArgumentException("crash state extras must be a list, not null");
            }
            for (int i = 0; i < extras.size(); i++) {
                if (extras.get(i) == null) {
                    throw new InvalidArgumentException("crash state extra #" + i + " is null");
                }
            }
            extras = List.copyOf(extras);
        }

        /** The first {@code prefix} events and nothing else. */
        public CrashState(int prefix) {
            this(prefix, List.of());
        }

        /** This state with write {@code event} applied whole after the current extras. */
        public CrashState plus(int event) {
            return plus(Extra.whole(event));
        }

        /** This state with only the {@code sectors} of write {@code event} applied after the current extras. */
        public CrashState plusTorn(int event, BitSet sectors) {
            return plus(Extra.torn(event, sectors));
        }

        private CrashState plus(Extra extra) {
            List<Extra> more = new ArrayList<>(extras.size() + 1);
            more.addAll(extras);
            more.add(extra);
            return new CrashState(prefix, more);
        }

        @Override
        public String toString() {
            return "CrashState[prefix " + prefix + ", extras " + extras + "]";
        }

        /**
         * A write event applied beyond the prefix.
         *
         * @param event   the write's event index
         * @param sectors which of the write's 512-byte sectors reached the medium (bit {@code i} covers
         *                bytes {@code [512 i, 512 (i + 1))} of its data; the others keep their previous
         *                contents), or null for the whole write
         */
        public record Extra(int event, BitSet sectors) {
            public Extra {
                if (event < 0) {
                    throw new InvalidArgumentException("crash state extra event " + event + " is negative");
                }
                sectors = sectors == null ? null : (BitSet) sectors.clone();
            }

            /** Write {@code event}, all of it. */
            public static Extra whole(int event) {
                return new Extra(event, null);
            }

            /** Only the {@code sectors} of write {@code event}. */
            public static Extra torn(int event, BitSet sectors) {
                if (sectors == null) {
                    throw new InvalidArgumentException("torn write of event " + event + " needs a sector mask");
                }
                return new Extra(event, sectors);
            }

            /** A copy of the sector mask, or null for a whole write. */
            @Override
            public BitSet sectors() {
                return sectors == null ? null : (BitSet) sectors.clone();
            }

            @Override
            public String toString() {
                return sectors == null ? Integer.toString(event) : event + " torn " + sectors;
            }
        }
    }

    /**
     * The crash right after flush {@code k} returned (k = -1: before any flush, i.e. the base image),
     * plus the given writes of epoch {@code k + 1}, whole, in the given order.
     */
    public CrashState crashAfterFlush(int k, int... epochWrites) {
        lock.lock();
        try {
            if (k < -1 || k >= flushCount) {
                throw new InvalidArgumentException(name + ": flush " + k + " does not exist; " + flushCount
                        + " flushes recorded (-1 means before the first)");
            }
            int start = epochStart(k + 1);
            int end = epochEnd(k + 1);
            List<CrashState.Extra> extras = new ArrayList<>(epochWrites.length);
            for (int e : epochWrites) {
                if (e < start || e >= end) {
                    throw new InvalidArgumentException(name + ": event " + e + " is not in epoch " + (k + 1)
                            + ", which holds events [" + start + ", " + end + ")");
                }
                extras.add(CrashState.Extra.whole(e));
            }
            return validated(new CrashState(start, extras));
        } finally {
            lock.unlock();
        }
    }

    /** The crash in which every event before write {@code event} survived and only its {@code sectors} landed. */
    public CrashState crashTornAt(int event, BitSet sectors) {
        CrashState.Extra torn = CrashState.Extra.torn(event, sectors);
        lock.lock();
        try {
            return validated(new CrashState(event, List.of(torn)));
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------------------------------- images

    /** A new device holding the base image with the first {@code n} events applied. */
    public MemoryDevice imageAt(int n) {
        return materialize(new CrashState(n));
    }

    /**
     * A new device holding {@code state}.
     *
     * @throws InvalidArgumentException if the prefix is longer than the recording, or an extra is not a
     *                                  recorded write after the prefix, appears twice, or names a sector
     *                                  the write does not cover
     * @throws DeviceException          EBADF once this device is closed
     */
    public MemoryDevice materialize(CrashState state) {
        lock.lock();
        try {
            validated(state);
            if (closed) {
                throw failure("materialize", -1, Errno.EBADF,
                        "device is closed; the base image of untouched blocks lived on the wrapped device");
            }
            MemoryDevice image = MemoryDevice.create(name + "@" + state.prefix() + "+" + state.extras().size(),
                    blockCount, blockSize);
            try (Arena staging = Arena.ofConfined()) {
                MemorySegment stage = staging.allocate(Math.max(STAGE_BYTES, blockSize), BUFFER_ALIGNMENT);
                copyBase(image, stage);
                for (int i = 0; i < state.prefix(); i++) {
                    apply(image, stage, events.get(i));
                }
                for (CrashState.Extra x : state.extras()) {
                    Event e = events.get(x.event());
                    BitSet sectors = x.sectors();
                    if (sectors == null) {
                        apply(image, stage, e);
                    } else {
                        applySectors(image, stage, e, sectors);
                    }
                }
                return image;
            } catch (RuntimeException | Error e) {
                image.close();
                throw e;
            }
        } finally {
            lock.unlock();
        }
    }

    /** Checks {@code state} against the recording; lock held. */
    private CrashState validated(CrashState state) {
        int count = events.size();
        if (state.prefix() > count) {
            throw new InvalidArgumentException(name + ": crash state prefix " + state.prefix()
                    + " exceeds the " + count + " recorded events");
        }
        BitSet seen = new BitSet();
        List<CrashState.Extra> extras = state.extras();
        for (int i = 0; i < extras.size(); i++) {
            CrashState.Extra x = extras.get(i);
            int e = x.event();
            String what = name + ": crash state extra #" + i + " (event " + e + ")";
            if (e >= count) {
                throw new InvalidArgumentException(what + " does not exist; " + count + " events recorded");
            }
            if (e < state.prefix()) {
                throw new InvalidArgumentException(what + " lies inside the prefix of " + state.prefix()
                        + " events; extras must come after it");
            }
            Event ev = events.get(e);
            if (ev.kind() != Event.Kind.WRITE) {
                throw new InvalidArgumentException(what + " is a " + ev.kind() + ", not a WRITE");
            }
            if (seen.get(e)) {
                throw new InvalidArgumentException(what + " is listed more than once");
            }
            seen.set(e);
            BitSet sectors = x.sectors();
            if (sectors != null && sectors.length() > ev.sectorCount()) {
                throw new InvalidArgumentException(what + ": torn mask " + sectors + " names sector "
                        + (sectors.length() - 1) + " but the write covers sectors 0.." + (ev.sectorCount() - 1));
            }
        }
        return state;
    }

    /** Puts the base image on {@code image}: the wrapped device's contents with the saved base blocks put back; lock held. */
    private void copyBase(MemoryDevice image, MemorySegment stage) {
        long chunk = stage.byteSize() >>> blockShift;
        for (long b = 0; b < blockCount; b += chunk) {
            MemorySegment part = stage.asSlice(0, Math.min(chunk, blockCount - b) << blockShift);
            inner.read(b, part);
            image.write(b, part);
        }
        MemorySegment one = stage.asSlice(0, blockSize);
        for (Map.Entry<Long, byte[]> saved : base.entrySet()) {
            MemorySegment.copy(saved.getValue(), 0, one, JAVA_BYTE, 0, blockSize);
            image.write(saved.getKey(), one);
        }
    }

    /** Applies event {@code e} to {@code image} (a discarded block reads as zeros, as a memory device's does). */
    private void apply(MemoryDevice image, MemorySegment stage, Event e) {
        switch (e.kind()) {
            case WRITE -> {
                long chunk = stage.byteSize() >>> blockShift;
                for (long b = 0; b < e.blockCount(); b += chunk) {
                    MemorySegment part = stage.asSlice(0, Math.min(chunk, e.blockCount() - b) << blockShift);
                    MemorySegment.copy(e.data(), b << blockShift, part, 0, part.byteSize());
                    image.write(e.block() + b, part);
                }
            }
            case DISCARD -> image.discard(e.block(), e.blockCount());
            case FLUSH -> { }
        }
    }

    /** Applies only the {@code sectors} of write {@code e}, block by block; its other sectors keep what the image holds. */
    private void applySectors(MemoryDevice image, MemorySegment stage, Event e, BitSet sectors) {
        MemorySegment one = stage.asSlice(0, blockSize);
        int perBlock = blockSize / SECTOR_SIZE;
        for (long b = 0; b < e.blockCount(); b++) {
            int first = (int) b * perBlock;
            int s = sectors.nextSetBit(first);
            if (s < 0 || s >= first + perBlock) {
                continue;
            }
            image.read(e.block() + b, one);
            for (; s >= 0 && s < first + perBlock; s = sectors.nextSetBit(s + 1)) {
                MemorySegment.copy(e.data(), (long) s * SECTOR_SIZE, one, (long) (s - first) * SECTOR_SIZE, SECTOR_SIZE);
            }
            image.write(e.block() + b, one);
        }
    }

    // ---------------------------------------------------------------------------------------- faults

    /** Operation kinds that can be counted and failed. Each request of a batch counts as one read or write. */
    public enum Op {
        READ, WRITE, FLUSH, DISCARD;

        final String label = name().toLowerCase(Locale.ROOT);
    }

    /** An armed fault: the operation of its kind numbered {@code target} fails, and with {@code sticky} every later one. */
    private record Fault(long target, int errno, boolean sticky) {
    }

    /**
     * Makes the {@code nth} {@code op} from now (1 = the next) fail with {@code errno}, once. Replaces
     * any fault armed for {@code op}.
     */
    public void failOnce(Op op, long nth, int errno) {
        arm(op, nth, errno, false);
    }

    /**
     * Makes the {@code nth} {@code op} from now (1 = the next) and every later one fail with
     * {@code errno}, until {@link #clearFaults()}. Replaces any fault armed for {@code op}.
     */
    public void failFrom(Op op, long nth, int errno) {
        arm(op, nth, errno, true);
    }

    /** Disarms every fault. */
    public void clearFaults() {
        for (int i = 0; i < faults.length(); i++) {
            faults.set(i, null);
        }
    }

    /**
     * Makes every {@code op} from now wait, before it is counted or reaches the device and holding no
     * lock of this device, until {@link #resume(Op)}. One that waits {@link #STALL_LIMIT_SECONDS} fails
     * with EIO, so a test that forgets to resume ends instead of hanging.
     */
    public void stall(Op op) {
        stalls.compareAndSet(op.ordinal(), null, new CountDownLatch(1));
    }

    /** Lets every {@code op} held by {@link #stall(Op)} go on, and those after it pass. */
    public void resume(Op op) {
        CountDownLatch gate = stalls.getAndSet(op.ordinal(), null);
        if (gate != null) {
            gate.countDown();
        }
    }

    /**
     * Lets the {@code op}s held by {@link #stall(Op)} now go on while the stall stays for those after
     * them: a test steps a thread through the operations before the one it means to catch.
     */
    public void releaseHeld(Op op) {
        CountDownLatch held = stalls.get(op.ordinal());
        if (held != null && stalls.compareAndSet(op.ordinal(), held, new CountDownLatch(1))) {
            held.countDown();
        }
    }

    private void awaitStall(Op op, long offset) {
        CountDownLatch gate = stalls.get(op.ordinal());
        if (gate == null) {
            return;
        }
        try {
            if (gate.await(STALL_LIMIT_SECONDS, TimeUnit.SECONDS)) {
                return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        throw failure(op.label, offset, Errno.EIO, "stalled and never resumed");
    }

    /**
     * How many {@code op}s reached this device, including those failed by an injected fault or by the
     * wrapped device (not those rejected for bad arguments or a closed device).
     */
    public long issued(Op op) {
        return issued.get(op.ordinal());
    }

    private void arm(Op op, long nth, int errno, boolean sticky) {
        if (nth < 1) {
            throw new InvalidArgumentException(name + ": fault on " + op.label + " number " + nth
                    + " from now; the next one is 1");
        }
        if (errno < 1) {
            throw new InvalidArgumentException(name + ": errno " + errno + " is not an error");
        }
        faults.set(op.ordinal(), new Fault(issued.get(op.ordinal()) + nth, errno, sticky));
    }

    /** Counts one {@code op} and throws if an armed fault hits it. */
    private void admit(Op op, long offset) {
        long n = issued.incrementAndGet(op.ordinal());
        Fault f = faults.get(op.ordinal());
        if (f != null && (n == f.target || f.sticky && n > f.target)) {
            throw failure(op.label, offset, f.errno, "injected fault" + (f.sticky ? " (sticky)" : ""));
        }
    }

    // ------------------------------------------------------------------------------------ device ops

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
        return inner.isReadOnly();
    }

    @Override
    public void read(long block, MemorySegment dst) {
        BlockDevice.requireTransfer(this, "read", block, dst);
        enter("read", block << blockShift);
        try {
            doRead(block, dst);
        } finally {
            exit();
        }
    }

    @Override
    public void write(long block, MemorySegment src) {
        BlockDevice.requireTransfer(this, "write", block, src);
        BlockDevice.requireWritable(this, "write", block << blockShift);
        enter("write", block << blockShift);
        try {
            doWrite(block, src);
        } finally {
            exit();
        }
    }

    /** Runs the requests one at a time, in order, each recorded (or failed) as a lone read or write would be. */
    @Override
    public void submit(IoBatch batch) {
        int n = batch.size();
        BlockDevice.requireSubmittable(this, batch);
        batch.resetResults();
        enter("submit", -1); // even for an empty batch: every call on a closed device fails
        try {
            for (int i = 0; i < n; i++) {
                batch.started(i);
                int errno = 0;
                try {
                    if (batch.isWrite(i)) {
                        doWrite(batch.block(i), batch.buffer(i));
                    } else {
                        doRead(batch.block(i), batch.buffer(i));
                    }
                } catch (DeviceException e) {
                    errno = e.errno();
                }
                batch.completed(i, errno);
            }
        } finally {
            exit();
        }
        int first = batch.firstError();
        if (first >= 0) {
            String op = batch.isWrite(first) ? "write" : "read";
            throw failure(op, batch.block(first) << blockShift, batch.error(first),
                    "batch request " + first + " of " + n + " (" + batch.errorCount() + " failed)");
        }
    }

    @Override
    public void flush() {
        enter("flush", -1);
        try {
            awaitStall(Op.FLUSH, -1);
            lock.lock();
            try {
                admit(Op.FLUSH, -1);
                inner.flush();
                if (flushCount == flushEvents.length) {
                    flushEvents = Arrays.copyOf(flushEvents, flushCount * 2);
                }
                flushEvents[flushCount++] = events.size();
                append(Event.Kind.FLUSH, -1, 0, NO_DATA);
            } finally {
                lock.unlock();
            }
        } finally {
            exit();
        }
    }

    @Override
    public void discard(long block, long count) {
        if (count < 1) {
            throw new InvalidArgumentException(name + ": discard of " + count + " blocks at block " + block
                    + ": the count must be at least 1");
        }
        BlockDevice.requireInside(this, "discard", block, count);
        long offset = block << blockShift;
        BlockDevice.requireWritable(this, "discard", offset);
        enter("discard", offset);
        try {
            awaitStall(Op.DISCARD, offset);
            lock.lock();
            try {
                admit(Op.DISCARD, offset);
                saveBase(block, count);
                inner.discard(block, count);
                append(Event.Kind.DISCARD, block, count, NO_DATA);
            } finally {
                lock.unlock();
            }
        } finally {
            exit();
        }
    }

    @Override
    public boolean tryLockExclusive() {
        return inner.tryLockExclusive();
    }

    @Override
    public void unlockExclusive() {
        inner.unlockExclusive();
    }

    /** Waits for the calls in progress (a stalled one included), then closes the wrapped device. Idempotent. */
    @Override
    public void close() {
        inFlight.writeLock().lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            try {
                inner.close();
            } finally {
                arena.close();
            }
        } finally {
            inFlight.writeLock().unlock();
        }
    }

    private void doRead(long block, MemorySegment dst) {
        long offset = block << blockShift;
        awaitStall(Op.READ, offset);
        admit(Op.READ, offset);
        inner.read(block, dst);
    }

    private void doWrite(long block, MemorySegment src) {
        long offset = block << blockShift;
        // The one copy of the data, made before taking the lock so writers do not queue behind it.
        byte[] data = src.toArray(JAVA_BYTE);
        awaitStall(Op.WRITE, offset);
        lock.lock();
        try {
            admit(Op.WRITE, offset);
            long count = src.byteSize() >>> blockShift;
            saveBase(block, count);
            inner.write(block, src);
            append(Event.Kind.WRITE, block, count, MemorySegment.ofArray(data).asReadOnly());
        } finally {
            lock.unlock();
        }
    }

    /** Marks a call in progress, failing with EBADF once closed; pair with {@link #exit()}. */
    private void enter(String op, long offset) {
        inFlight.readLock().lock();
        if (closed) {
            inFlight.readLock().unlock();
            throw failure(op, offset, Errno.EBADF, "device is closed");
        }
    }

    private void exit() {
        inFlight.readLock().unlock();
    }

    private DeviceException failure(String op, long offset, int errno, String detail) {
        return new DeviceException(name, op, offset, errno, detail);
    }

    /** Copy-on-first-write: saves the wrapped device's contents of each block not yet saved; lock held. */
    private void saveBase(long block, long count) {
        for (long b = block, end = block + count; b < end; b++) {
            if (!base.containsKey(b)) {
                inner.read(b, scratch);
                base.put(b, scratch.toArray(JAVA_BYTE));
            }
        }
    }

    private void append(Event.Kind kind, long block, long count, MemorySegment data) {
        events.add(new Event(events.size(), kind, block, count, data));
    }

    /** First event index of epoch {@code k} (0..flushCount); lock held. */
    private int epochStart(int k) {
        return k == 0 ? 0 : flushEvents[k - 1] + 1;
    }

    /** One past the last event index of epoch {@code k} (0..flushCount); lock held. */
    private int epochEnd(int k) {
        return k == flushCount ? events.size() : flushEvents[k];
    }

    /** Number of blocks whose base contents have been saved (for tests: copy-on-first-write, not a full copy). */
    int savedBaseBlocks() {
        lock.lock();
        try {
            return base.size();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        lock.lock();
        try {
            return "RecordingDevice[" + inner + ", " + events.size() + " events, " + flushCount + " flushes]";
        } finally {
            lock.unlock();
        }
    }
}
