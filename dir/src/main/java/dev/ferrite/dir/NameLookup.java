package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.util.zip.CRC32C;

import dev.ferrite.btree.internal.BTree;
import dev.ferrite.btree.internal.Cursor;
import dev.ferrite.dir.InodeRecords.RecordReader;

import static dev.ferrite.dir.InodeFormat.S_IFDIR;
import static dev.ferrite.dir.InodeFormat.S_IFMT;

/**
 * A thread's scratch for directory lookups, so that looking a name up allocates nothing: the key being
 * looked up (a name encoded in place), the record readers that search an inline directory for it, and
 * what the lookup found. One per thread; a lookup fills it and reads its answer before the next starts
 * (nothing between the two looks another name up).
 */
final class NameLookup {
    private static final ThreadLocal<NameLookup> CURRENT = ThreadLocal.withInitial(NameLookup::new);

    /** What reading the directory's record found: see {@link #state}. */
    static final int ABSENT = 0, INLINE = 1, TREE = 2, NOT_A_DIRECTORY = 3;

    private final byte[] key = new byte[DirEntryFormat.HASH + DirEntryFormat.MAX_NAME];
    private final MemorySegment keySpace = MemorySegment.ofArray(key);
    /** Views of the key's first n bytes, made once each: a tree takes a key as a segment of its size. */
    private final MemorySegment[] keyOfLength = new MemorySegment[key.length + 1];
    private final CRC32C crc = new CRC32C();
    private int keyLength;

    final MemorySegment value = MemorySegment.ofArray(new byte[DirEntryFormat.VALUE]);
    /** The directory a listing ({@link DirContents#fill}) reads and the buffer it fills; null between listings. */
    long listDir;
    DirBuffer listInto;
    /** The key of the last entry a readdir returns (its cookie), its first {@link #listedKeyLength} bytes. */
    final byte[] listedKey = new byte[DirEntryFormat.HASH + DirEntryFormat.MAX_NAME];
    int listedKeyLength;
    /** The cursor a readdir of a tree directory runs, reopened for each ({@link BTree#cursor(Cursor, byte[], byte[], boolean)}); null until the first. */
    Cursor listing;
    /** ABSENT, INLINE (found: {@link #ino}, {@link #type}), TREE ({@link #header}) or NOT_A_DIRECTORY. */
    int state;
    long ino;
    int type;
    long header;
    /** What a {@link NameCache} miss read of the name's bucket, to insert the directory's answer with. */
    long cacheStamp = NameCache.NO_STAMP;
    /** The tree header the record names when it is read again after a tree lookup (-1: inline now). */
    long headerAgain;

    /** Reads a directory's record: the entry if it is inline, else its tree's header. */
    final RecordReader<NameLookup> entry = (b, rec) -> read(b, rec, false);
    /** As {@link #entry}, and {@link #NOT_A_DIRECTORY} unless the record is a directory still linked. */
    final RecordReader<NameLookup> dirEntry = (b, rec) -> read(b, rec, true);
    final RecordReader<NameLookup> treeHeader = (b, rec) -> {
        headerAgain = DirContents.isTree(b, rec) ? DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE) : -1;
        return this;
    };

    private NameLookup() {
    }

    static NameLookup current() {
        return CURRENT.get();
    }

    private NameLookup read(MemorySegment b, int rec, boolean requireDir) {
        if (requireDir && ((InodeFormat.mode(b, rec) & S_IFMT) != S_IFDIR || InodeFormat.nlink(b, rec) == 0)) {
            state = NOT_A_DIRECTORY;
        } else if (DirContents.isTree(b, rec)) {
            state = TREE;
            header = DirEntryFormat.treeHeader(b, rec + InodeFormat.INLINE);
        } else {
            int at = DirContents.inlineFind(b, rec, keySpace, keyLength);
            state = at < 0 ? ABSENT : INLINE;
            if (at >= 0) {
                ino = DirEntryFormat.entryInode(b, at);
                type = DirEntryFormat.entryType(b, at);
            }
        }
        return this;
    }

    /**
     * Takes the name {@code path[from, to)} if it is plain: 1 to {@link DirEntryFormat#MAX_NAME} ASCII
     * characters, none of them NUL or '/', its bytes those characters. False, with nothing
     * taken, for any other name: the caller measures it as {@link PathResolver#requireName} does.
     */
    boolean plainName(String path, int from, int to) {
        int n = to - from;
        if (n < 1 || n > DirEntryFormat.MAX_NAME) {
            return false;
        }
        for (int i = 0; i < n; i++) {
            char c = path.charAt(from + i);
            if (c == 0 || c == '/' || c >= 0x80) {
                return false;
            }
            key[DirEntryFormat.HASH + i] = (byte) c;
        }
        keyLength = DirEntryFormat.keyInPlace(key, n, crc);
        return true;
    }

    /** Takes {@code name}, a valid name's bytes. */
    void name(byte[] name) {
        System.arraycopy(name, 0, key, DirEntryFormat.HASH, name.length);
        keyLength = DirEntryFormat.keyInPlace(key, name.length, crc);
    }

    /** Takes a whole key. */
    void key(EntryKey k) {
        System.arraycopy(k.bytes(), 0, key, 0, k.length());
        keyLength = k.length();
    }

    /** The key taken: the first {@link #keyLength} bytes. */
    byte[] keyBytes() {
        return key;
    }

    int keyLength() {
        return keyLength;
    }

    /** The key taken, as a segment of its length. */
    MemorySegment key() {
        MemorySegment k = keyOfLength[keyLength];
        if (k == null) {
            k = keyOfLength[keyLength] = keySpace.asSlice(0, keyLength);
        }
        return k;
    }
}
