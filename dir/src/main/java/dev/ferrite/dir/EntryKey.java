package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.zip.CRC32C;

import static dev.ferrite.dir.DirEntryFormat.HASH;
import static dev.ferrite.dir.DirEntryFormat.MAX_NAME;

/**
 * A directory entry's key ({@link DirEntryFormat}: the name's hash, then the name) and value, made in
 * buffers that a thread reuses: a create or an unlink encodes its name here, and hands the B-tree views
 * made once, instead of new arrays and segments per operation. The child's attributes that an unlink
 * checks are read into {@link #stat()} the same way, and a create answers in {@link #made} and {@link #opened}.
 *
 * <p>An operation owns the thread's buffers from {@link #take} until {@link #close}: a {@code take} while
 * another operation of the same thread owns them (one running inside the other, as an orphan's freeing
 * may remove a name) gets buffers of its own. So no two operations ever share one, by construction.
 * Keys for operations off the hot paths (rename, link) come from {@link #of}, never shared.
 */
final class EntryKey implements AutoCloseable {
    private static final ThreadLocal<EntryKey> CURRENT = ThreadLocal.withInitial(() -> new EntryKey(new byte[HASH + MAX_NAME]));

    private final byte[] key;
    private final MemorySegment space;
    /** Views of the key's first n bytes, made once each (a tree takes a key as a segment of its size); null for a key of one size. */
    private final MemorySegment[] ofLength;
    private final byte[] value = new byte[DirEntryFormat.VALUE];
    private final MemorySegment valueSpace = MemorySegment.ofArray(value);
    private final CRC32C crc = new CRC32C();
    private int length;
    /** Owned by an operation, from take to close. */
    private boolean held;
    private StatBuffer stat;
    /** A create's answer: the inode made (or found, {@code Namespace.createEntry}), and the new inode opened for a handle, or null. */
    long made;
    Inode opened;
    /**
     * A create's ask: {@link InodeFormat} flags the new regular file's record starts with, written in the
     * create's transaction (a table blob is born {@link InodeFormat#FLAG_DOOMED}: {@link TableBlobs#write}).
     */
    int inodeFlags;

    private EntryKey(byte[] key) {
        this.key = key;
        this.space = MemorySegment.ofArray(key);
        this.ofLength = key.length == HASH + MAX_NAME ? new MemorySegment[key.length + 1] : null;
    }

    /**
     * The key of {@code name} in buffers for the caller alone, until it closes them; the name refused as
     * {@link PathResolver#requireName} refuses it ({@code forChange}: {@code .} and {@code ..} too).
     */
    static EntryKey take(CharSequence name, boolean forChange) {
        EntryKey k = take();
        try {
            k.name(name, forChange);
        } catch (RuntimeException e) {
            k.close();
            throw e;
        }
        return k;
    }

    /** Buffers for the caller alone, until it closes them, holding no key yet ({@link #name}). */
    static EntryKey take() {
        EntryKey k = CURRENT.get();
        if (k.held) {
            k = new EntryKey(new byte[HASH + MAX_NAME]); // another operation of this thread owns the thread's
        }
        k.held = true;
        k.made = 0;
        k.opened = null;
        k.inodeFlags = 0;
        return k;
    }

    /** The key of {@code name} (a valid name's bytes), in buffers of its own. */
    static EntryKey of(byte[] name) {
        EntryKey k = new EntryKey(DirEntryFormat.key(name));
        k.length = k.key.length;
        return k;
    }

    /** Lets the thread's buffers go, for the thread's next operation. */
    @Override
    public void close() {
        held = false;
    }

    /**
     * Makes this the key of {@code name}, refused as {@link PathResolver#requireName} refuses it: a plain
     * ASCII name encoded in place, char by char; any other through requireName.
     */
    void name(CharSequence name, boolean forChange) {
        int n = name == null ? 0 : name.length();
        boolean plain = n >= 1 && n <= MAX_NAME && !(forChange && PathResolver.isDots(name));
        for (int i = 0; plain && i < n; i++) {
            char c = name.charAt(i);
            plain = c != 0 && c != '/' && c < 0x80;
            key[HASH + i] = (byte) c;
        }
        if (!plain) {
            byte[] b = PathResolver.requireName(name == null ? null : name.toString(), forChange); // throws for a bad name
            System.arraycopy(b, 0, key, HASH, b.length);
            n = b.length;
        }
        length = DirEntryFormat.keyInPlace(key, n, crc);
    }

    int length() {
        return length;
    }

    /** The key's bytes: the first {@link #length} of the array. */
    byte[] bytes() {
        return key;
    }

    /** The key as a segment of its length, valid until the key changes. */
    MemorySegment segment() {
        if (ofLength == null) {
            return space;
        }
        MemorySegment k = ofLength[length];
        if (k == null) {
            k = ofLength[length] = space.asSlice(0, length);
        }
        return k;
    }

    /** A buffer for the attributes the operation reads (an unlink's child), for it alone. */
    StatBuffer stat() {
        if (stat == null) {
            stat = new StatBuffer();
        }
        return stat;
    }

    /** The entry value naming {@code ino} of {@code type}, in the key's own buffer. */
    MemorySegment value(long ino, int type) {
        DirEntryFormat.writeValue(valueSpace, ino, type);
        return valueSpace;
    }
}
