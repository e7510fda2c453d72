package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;

/**
 * A caller's reusable readdir buffer: {@link Namespace#readdir(Handle, DirBuffer)} fills it with the next
 * entries of a directory, names as bytes, and remembers where it stopped, as {@link DirCookie} does for a
 * {@link DirPage}. Once its arrays have grown to the longest names it meets, a fill allocates nothing per
 * entry (a few dozen bytes a fill of a large directory, its cursor's reopening): the listing a server does to
 * find a name case-insensitively, or a scan matching patterns, makes next to no garbage.
 * <p>
 * Not thread-safe: one thread fills and reads it at a time. The entries are valid until the next fill. Its
 * place is a key, not tied to a directory: {@link #rewind()} it before listing another one.
 */
public final class DirBuffer {
    /**
     * Entries made room for at first, doubled as fills need more up to the capacity: a buffer asked for with
     * room for thousands (as a page readdir is) costs what the directory holds, not what was asked for.
     */
    private static final int PRESIZED = 16;
    private final int capacity;
    /** Entry i's name is {@code names[nameStart[i], nameStart[i + 1])}. */
    private byte[] names;
    private int[] nameStart;
    private long[] inos;
    private int[] types;
    private int size;
    private boolean end;
    /** The key of the last entry returned (null: before the first), as an exact-length array a tree cursor takes. */
    private byte[] after;
    private MemorySegment afterSegment;
    /** Arrays for {@link #after}, and their segments, by length: made once each (the tables at the first resumable fill). */
    private byte[][] keyOfLength;
    private MemorySegment[] segmentOfLength;

    /**
     * A buffer a fill puts up to {@code capacity} entries in.
     *
     * @throws IllegalArgumentException if {@code capacity < 1}
     */
    public DirBuffer(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("a readdir buffer of " + capacity + " entries");
        }
        this.capacity = capacity;
        int n = Math.min(capacity, PRESIZED) + 1; // one more: a listing reads past a full buffer to learn if it ended
        this.nameStart = new int[n + 1];
        this.inos = new long[n];
        this.types = new int[n];
        this.names = new byte[n * 16]; // grown too: names average far less than their 255-byte bound
    }

    /** The next fill starts again at the directory's first entry. */
    public void rewind() {
        after = null;
        afterSegment = null;
        size = 0;
        end = false;
    }

    /** Entries a fill puts in at most. */
    public int capacity() {
        return capacity;
    }

    /** Entries the last fill put in. */
    public int size() {
        return size;
    }

    /** True if the directory held nothing after the last fill's entries when it read them. */
    public boolean end() {
        return end;
    }

    /** Entry {@code i}'s inode number. */
    public long ino(int i) {
        return inos[Objects.checkIndex(i, size)];
    }

    /** Entry {@code i}'s type: the S_IFMT bits of its mode ({@link InodeStat#S_IFDIR} and so on). */
    public int type(int i) {
        return types[Objects.checkIndex(i, size)];
    }

    /** Entry {@code i}'s name's length in bytes. */
    public int nameLength(int i) {
        Objects.checkIndex(i, size);
        return nameStart[i + 1] - nameStart[i];
    }

    /**
     * Copies entry {@code i}'s name (UTF-8, at most 255 bytes) into {@code dst};
     * returns its length.
     *
     * @throws IndexOutOfBoundsException if {@code dst} is shorter than the name
     */
    public int copyName(int i, byte[] dst) {
        int length = nameLength(i);
        System.arraycopy(names, nameStart[i], dst, 0, length);
        return length;
    }

    /** Entry {@code i}'s name, decoded (allocates: {@link #copyName} does not). */
    public String name(int i) {
        return new String(names, nameStart[i], nameLength(i), StandardCharsets.UTF_8);
    }

    /** The key to list after (null: from the start): the last entry's of the fill before. */
    byte[] after() {
        return after;
    }

    /** {@link #after} as a segment. */
    MemorySegment afterSegment() {
        return afterSegment;
    }

    /** Lists after {@code key} (null: from the start), which the buffer only reads. */
    void startAfter(byte[] key) {
        after = key;
        afterSegment = key == null ? null : MemorySegment.ofArray(key);
    }

    /** Ends a fill: {@code end} as the listing found it, resuming after {@code key[0, length)} if any entry came. */
    void filled(boolean end, byte[] key, int length) {
        this.end = end;
        if (length > 0) {
            if (keyOfLength == null) {
                keyOfLength = new byte[DirEntryFormat.HASH + DirEntryFormat.MAX_NAME + 1][];
                segmentOfLength = new MemorySegment[keyOfLength.length];
            }
            byte[] k = keyOfLength[length];
            if (k == null) {
                k = keyOfLength[length] = new byte[length];
                segmentOfLength[length] = MemorySegment.ofArray(k);
            }
            System.arraycopy(key, 0, k, 0, length);
            after = k;
            afterSegment = segmentOfLength[length];
        }
    }

    /** Drops every entry: a listing starts (again). */
    void clear() {
        size = 0;
    }

    /** Entries a listing may add: the capacity and one more. */
    int room() {
        return capacity + 1;
    }

    /** Adds the entry whose name is {@code length} bytes of {@code src} at {@code at}. */
    void add(MemorySegment src, long at, int length, long ino, int type) {
        if (size == inos.length) {
            int n = (int) Math.min(capacity + 1L, 2L * size);
            nameStart = Arrays.copyOf(nameStart, n + 1);
            inos = Arrays.copyOf(inos, n);
            types = Arrays.copyOf(types, n);
        }
        int from = nameStart[size];
        if (from + length > names.length) {
            names = Arrays.copyOf(names, Math.max(names.length * 2, from + length));
        }
        MemorySegment.copy(src, ValueLayout.JAVA_BYTE, at, names, from, length);
        nameStart[size + 1] = from + length;
        inos[size] = ino;
        types[size] = type;
        size++;
    }

    /** Drops the last entry added (the one read past a full buffer). */
    void removeLast() {
        size--;
    }
}
