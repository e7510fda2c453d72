package dev.ferrite.dir;

import java.util.Arrays;

/**
 * A file's extents in memory, decoded from and encoded into its record by {@link ExtentFormat}, or a
 * window of its extent tree ({@link ExtentMap}): sorted by file block, not overlapping, and kept merged
 * (neighbours contiguous in the file and on the device, in the same state, merge while the length
 * fits). A window holds every extent that overlaps the range it was loaded for, the one before and the
 * one after, so that everything a change inside the range reads or merges with is there. Not
 * thread-safe: a copy made under the inode's record.
 */
final class ExtentList {
    private static final int INITIAL = 4;
    private final int capacity;
    /** The tree's header block for a window of one, 0 for an inline list. */
    final long header;
    /** A tree window as loaded: what {@link ExtentMap#store} compares it with; null for an inline list. */
    ExtentList loaded;
    private long[] fileBlock, deviceBlock;
    private int[] length;
    private boolean[] unwritten;
    private int count;

    ExtentList(int capacity) {
        this(capacity, 0);
    }

    ExtentList(int capacity, long header) {
        this.capacity = capacity;
        this.header = header;
        int n = INITIAL; // most files map an extent or two: the arrays start small and double as needed
        fileBlock = new long[n];
        deviceBlock = new long[n];
        length = new int[n];
        unwritten = new boolean[n];
    }

    /** Forgets every extent, to be decoded into again ({@link ExtentFormat#decodeInto}). */
    void clear() {
        count = 0;
    }

    /** True for a window of a tree. */
    boolean inTree() {
        return loaded != null;
    }

    /** True if the extents fit where they came from: the record for an inline list; any number in a tree. */
    boolean fits() {
        return fits(0);
    }

    /** {@link #fits} with {@code more} extents added. */
    boolean fits(long more) {
        return count + more <= capacity;
    }

    ExtentList copy() {
        ExtentList c = new ExtentList(capacity, header);
        for (int i = 0; i < count; i++) {
            c.add(fileBlock[i], deviceBlock[i], length[i], unwritten[i]);
        }
        return c;
    }

    int count() {
        return count;
    }

    long fileBlock(int i) {
        return fileBlock[i];
    }

    long deviceBlock(int i) {
        return deviceBlock[i];
    }

    int length(int i) {
        return length[i];
    }

    boolean unwritten(int i) {
        return unwritten[i];
    }

    long end(int i) {
        return fileBlock[i] + length[i];
    }

    /** Blocks mapped. */
    long blocks() {
        long n = 0;
        for (int i = 0; i < count; i++) {
            n += length[i];
        }
        return n;
    }

    /** Appends an extent past the last (decoding). */
    void add(long fb, long dev, int len, boolean unw) {
        insertAt(count, fb, dev, len, unw);
    }

    /** The index of the extent holding {@code fb}, or {@code -(index of the first extent after it) - 1}. */
    int find(long fb) {
        int lo = 0, hi = count - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (end(mid) <= fb) {
                lo = mid + 1;
            } else if (fileBlock[mid] > fb) {
                hi = mid - 1;
            } else {
                return mid;
            }
        }
        return -lo - 1;
    }

    /** The index of the first extent ending past file block {@code fb} (holding it or after it); {@link #count} if none. */
    int firstEndingAfter(long fb) {
        int i = find(fb);
        return i >= 0 ? i : -i - 1;
    }

    /** The index of the first extent starting past file block {@code fb}; {@link #count} if none. */
    int firstStartingAfter(long fb) {
        int i = find(fb);
        return i >= 0 ? i + 1 : -i - 1;
    }

    /** A copy of extents {@code [from, to)}, in the same place (an inline list's capacity, a tree's header). */
    ExtentList slice(int from, int to) {
        ExtentList c = new ExtentList(capacity, header);
        for (int i = from; i < to; i++) {
            c.add(fileBlock[i], deviceBlock[i], length[i], unwritten[i]);
        }
        return c;
    }

    /** Replaces extents {@code [from, to)} with those of {@code with}, which fall between their neighbours. */
    void splice(int from, int to, ExtentList with) {
        while (to > from) {
            removeAt(--to);
        }
        for (int i = 0; i < with.count; i++) {
            insertAt(from + i, with.fileBlock[i], with.deviceBlock[i], with.length[i], with.unwritten[i]);
        }
    }

    /**
     * The first hole (or unwritten extent, with {@code orUnwritten}) in {@code [from, to)}, as
     * {@code {start, length}}, or null if there is none.
     */
    long[] firstGap(long from, long to, boolean orUnwritten) {
        for (long fb = from; fb < to; ) {
            int i = find(fb);
            if (i >= 0 && !(orUnwritten && unwritten[i])) {
                fb = end(i);
                continue;
            }
            long gapEnd = i >= 0 ? end(i) : -i - 1 < count ? fileBlock[-i - 1] : Long.MAX_VALUE;
            return new long[] {fb, Math.min(gapEnd, to) - fb};
        }
        return null;
    }

    /**
     * The first file block this list maps that {@code after} (this list after one unmapping step) no
     * longer maps as this one does: where that step's piece starts.
     */
    long firstChange(ExtentList after) {
        for (int i = 0; i < count; i++) {
            if (i == after.count || after.fileBlock[i] != fileBlock[i] || after.deviceBlock[i] != deviceBlock[i]) {
                return fileBlock[i];
            }
            if (after.length[i] != length[i]) {
                return after.end(i);
            }
        }
        throw new IllegalStateException(after + " unmaps nothing of " + this);
    }

    /** Maps the hole {@code [fb, fb + len)} to {@code dev}, merging with neighbours. */
    void insert(long fb, long dev, int len, boolean unw) {
        int i = find(fb);
        if (i >= 0 || -i - 1 < count && fileBlock[-i - 1] < fb + len) {
            throw new IllegalStateException("[" + fb + ", +" + len + ") is not a hole");
        }
        insertAt(-i - 1, fb, dev, len, unw);
        merge();
    }

    /** Marks every unwritten block in {@code [from, to)} written, splitting and merging extents. */
    void setWritten(long from, long to) {
        setState(from, to, false);
    }

    /** Marks every mapped block in {@code [from, to)} unwritten or written, splitting and merging extents. */
    void setState(long from, long to, boolean unw) {
        for (int i = 0; i < count; i++) {
            if (unwritten[i] == unw || end(i) <= from || fileBlock[i] >= to) {
                continue;
            }
            if (fileBlock[i] < from) { // split off the head that keeps its state
                int head = (int) (from - fileBlock[i]);
                insertAt(i, fileBlock[i], deviceBlock[i], head, !unw);
                shift(i + 1, head);
                continue;
            }
            if (end(i) > to) { // split off the tail that keeps its state
                int keep = (int) (to - fileBlock[i]);
                insertAt(i + 1, to, deviceBlock[i] + keep, length[i] - keep, !unw);
                length[i] = keep;
            }
            unwritten[i] = unw;
        }
        merge();
    }

    /**
     * Unmaps the first mapped run of {@code [from, to)} that lies in one extent (splitting it if the range
     * ends inside); returns it as {@code {device block, length}}, or null if nothing there is mapped.
     */
    long[] punch(long from, long to) {
        int i = find(from);
        if (i < 0) {
            i = -i - 1;
            if (i == count || fileBlock[i] >= to) {
                return null;
            }
        }
        long start = Math.max(from, fileBlock[i]), stop = Math.min(to, end(i));
        long[] piece = {deviceBlock[i] + (start - fileBlock[i]), stop - start};
        if (stop < end(i)) { // the tail past the range stays
            insertAt(i + 1, stop, deviceBlock[i] + (stop - fileBlock[i]), (int) (end(i) - stop), unwritten[i]);
        }
        if (start > fileBlock[i]) {
            length[i] = (int) (start - fileBlock[i]);
        } else {
            removeAt(i);
        }
        return piece;
    }

    /**
     * Removes up to {@code max} pieces of the mapping at or past file block {@code from}, last first (an
     * extent straddling {@code from} loses its tail); returns them as {@code {device block, length}}.
     */
    long[][] trimFrom(long from, int max) {
        long[][] out = new long[Math.min(max, count)][];
        int n = 0;
        while (n < out.length && count > 0 && end(count - 1) > from) {
            int i = count - 1;
            if (fileBlock[i] >= from) {
                out[n++] = new long[] {deviceBlock[i], length[i]};
                count--;
            } else {
                int keep = (int) (from - fileBlock[i]);
                out[n++] = new long[] {deviceBlock[i] + keep, length[i] - keep};
                length[i] = keep;
            }
        }
        return Arrays.copyOf(out, n);
    }

    private void shift(int i, int by) {
        fileBlock[i] += by;
        deviceBlock[i] += by;
        length[i] -= by;
    }

    private void insertAt(int i, long fb, long dev, int len, boolean unw) {
        if (count == fileBlock.length) {
            int n = count * 2;
            fileBlock = Arrays.copyOf(fileBlock, n);
            deviceBlock = Arrays.copyOf(deviceBlock, n);
            length = Arrays.copyOf(length, n);
            unwritten = Arrays.copyOf(unwritten, n);
        }
        System.arraycopy(fileBlock, i, fileBlock, i + 1, count - i);
        System.arraycopy(deviceBlock, i, deviceBlock, i + 1, count - i);
        System.arraycopy(length, i, length, i + 1, count - i);
        System.arraycopy(unwritten, i, unwritten, i + 1, count - i);
        fileBlock[i] = fb;
        deviceBlock[i] = dev;
        length[i] = len;
        unwritten[i] = unw;
        count++;
    }

    private void removeAt(int i) {
        System.arraycopy(fileBlock, i + 1, fileBlock, i, count - i - 1);
        System.arraycopy(deviceBlock, i + 1, deviceBlock, i, count - i - 1);
        System.arraycopy(length, i + 1, length, i, count - i - 1);
        System.arraycopy(unwritten, i + 1, unwritten, i, count - i - 1);
        count--;
    }

    /** Merges neighbours contiguous in the file and on the device, in one state, while the length fits. */
    private void merge() {
        for (int i = 0; i + 1 < count; ) {
            if (end(i) == fileBlock[i + 1] && deviceBlock[i] + length[i] == deviceBlock[i + 1]
                    && unwritten[i] == unwritten[i + 1] && (long) length[i] + length[i + 1] <= ExtentFormat.MAX_LENGTH) {
                length[i] += length[i + 1];
                removeAt(i + 1);
            } else {
                i++;
            }
        }
    }

    @Override
    public String toString() {
        return head(count);
    }

    /** The first {@code n} extents, as {@link #toString} shows them all. */
    String head(int n) {
        StringBuilder s = new StringBuilder("[");
        for (int i = 0; i < Math.min(n, count); i++) {
            s.append(i == 0 ? "" : ", ").append(fileBlock[i]).append('+').append(length[i]).append('@').append(deviceBlock[i])
                    .append(unwritten[i] ? "u" : "");
        }
        return s.append(']').toString();
    }
}
