package dev.ferrite.dir;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

import static dev.ferrite.dir.DirEntryFormat.HASH;

/**
 * The path walks' name cache (the role of Linux's dcache): (directory inode, name) → (child inode, its
 * type) for names the walks found lately, so that a walk that meets a name again reads neither the
 * directory's record nor its tree. Positive entries only: a name missing is looked up every time, so no
 * create has anything to invalidate. Names up to {@value #MAX_NAME} bytes; longer ones are never cached.
 *
 * <p>A fixed table of buckets in one {@code long[]}, each a version word, a word of the ways' tags (32 bits
 * each of the hash that chose the bucket, never 0; 0: the way is empty) and two ways (directory, key word:
 * the name's hash, length and the child's type, child, the name's bytes). A bucket is chosen by the
 * directory and the name's hash; a miss reads only its first two words, which share a cache line, and a
 * hit the way its tag matches as well. An entry replaces an empty way, else one chosen by the bucket's version.
 * Entries are keyed by the directory's inode number, never by a path: a directory renamed keeps its
 * number, so only its own entry changes and the names below it stay right.
 *
 * <p><b>The version word</b> (bit 0 LOCKED, bits 1–15 the removals in progress, bits 16– a count bumped by
 * every change) protects its bucket's ways. A reader takes no lock: it reads the word (acquire), uses the
 * bucket only if it is neither locked nor being removed from, reads the way, and reads the word again
 * after a load fence; any difference is a miss. A walk that misses keeps the word it read (its stamp),
 * looks the name up in the directory, and then inserts only by moving the word from that stamp to LOCKED,
 * so an insert fails if anything changed the bucket since the walk's lookup began. Every change that
 * takes a name away from a directory (unlink, rmdir, either name of a rename or exchange, a table's
 * removal or rename) is bracketed by {@link #beginRemove} before its transaction and {@link #endRemove}
 * after it: the first clears the name's entry and counts a removal in progress, during which no walk uses
 * the bucket and no insert succeeds; the second ends it with the version moved on. So a walk that hits
 * met an entry inserted from a lookup that began after the last removal of that name ended, with no
 * removal begun since: the name named that inode all along, and an inode freed by an unlink and reused
 * since is never returned under its old name.
 *
 * <p>Only {@link #beginRemove}, {@link #endRemove} and {@link #clear} ever wait, spinning on a LOCKED
 * word that an insert or another removal holds for a few stores.
 */
final class NameCache {
    /** Longest name cached, in bytes. */
    static final int MAX_NAME = 40;
    private static final int NAME_WORDS = MAX_NAME / Long.BYTES;
    private static final int WAYS = 2;
    /** A bucket's words: its version, its ways' tags, then the ways. */
    private static final int TAGS = 1, WAY0 = 2;
    /** A way's words: its directory, key word, child, then the name's bytes. */
    private static final int DIR = 0, KEY = 1, CHILD = 2, NAME = 3, WAY_WORDS = NAME + NAME_WORDS;
    private static final int BUCKET_WORDS = WAY0 + WAYS * WAY_WORDS;

    private static final long LOCKED = 1, REMOVAL = 2, REMOVALS = 0xFFFE, VERSION = 1 << 16;
    /** The key word's bits that identify a name: its hash (0–31) and length (32–39); the type is above. */
    private static final long NAME_BITS = (1L << 40) - 1;
    private static final int TYPE_SHIFT = 40;
    /** A walk's stamp when the bucket it read may not be inserted into. */
    static final long NO_STAMP = -1;

    private static final VarHandle WORD = MethodHandles.arrayElementVarHandle(long[].class);
    private static final VarHandle LONG_AT = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INT_AT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private final long[] table;
    private final int buckets;

    /** A cache of at least {@code entries} names (rounded up to a power of two, two at least). */
    NameCache(int entries) {
        int ways = Integer.highestOneBit(Math.max(WAYS, entries) - 1) << 1;
        this.buckets = ways / WAYS;
        this.table = new long[buckets * BUCKET_WORDS];
    }

    /** Names the cache holds at most. */
    int capacity() {
        return buckets * WAYS;
    }

    /**
     * The entry of the name {@code l} holds in directory {@code dir}, into {@code l.ino} and {@code l.type}:
     * true on a hit. On a miss {@code l.cacheStamp} is what {@link #put} inserts the uncached lookup's answer with.
     */
    boolean get(long dir, NameLookup l) {
        l.cacheStamp = NO_STAMP;
        byte[] key = l.keyBytes();
        int length = l.keyLength() - HASH;
        if (length > MAX_NAME) {
            return false;
        }
        long name = nameBits(key, length);
        long h = mix(dir, name);
        int b = bucket(h), tag = tag(h);
        long w = (long) WORD.getAcquire(table, b);
        if ((w & (LOCKED | REMOVALS)) != 0) {
            return false;
        }
        long tags = table[b + TAGS];
        for (int i = 0; i < WAYS; i++) {
            int way = b + WAY0 + i * WAY_WORDS;
            if ((int) (tags >>> (i * Integer.SIZE)) != tag) {
                continue;
            }
            long k = table[way + KEY];
            if (table[way + DIR] == dir && (k & NAME_BITS) == name && sameName(way, key, length)) {
                long child = table[way + CHILD];
                VarHandle.loadLoadFence();
                if ((long) WORD.getOpaque(table, b) != w) {
                    return false; // changed while read: the uncached walk decides
                }
                l.ino = child;
                l.type = (int) (k >>> TYPE_SHIFT);
                return true;
            }
        }
        l.cacheStamp = w;
        return false;
    }

    /**
     * Inserts what the uncached lookup of {@code l}'s name in {@code dir} found ({@code l.ino}, {@code l.type})
     * after {@link #get} missed, unless the bucket changed since the miss (then nothing: the name may have
     * been removed after the lookup read it).
     */
    void put(long dir, NameLookup l) {
        long w = l.cacheStamp;
        l.cacheStamp = NO_STAMP;
        if (w == NO_STAMP || l.type >>> (Long.SIZE - TYPE_SHIFT) != 0) { // a type the key word cannot hold: not cached
            return;
        }
        byte[] key = l.keyBytes();
        int length = l.keyLength() - HASH;
        long name = nameBits(key, length);
        long h = mix(dir, name);
        int b = bucket(h);
        if (!WORD.compareAndSet(table, b, w, w | LOCKED)) {
            return;
        }
        long tags = table[b + TAGS];
        int i = (int) tags == 0 ? 0 : (int) (tags >>> Integer.SIZE) == 0 ? 1 : (int) (w / VERSION & 1);
        int way = b + WAY0 + i * WAY_WORDS;
        table[way + DIR] = dir;
        table[way + CHILD] = l.ino;
        for (int j = 0; j < NAME_WORDS; j++) {
            table[way + NAME + j] = j * Long.BYTES < length ? nameWord(key, j, length) : 0;
        }
        table[way + KEY] = name | (long) l.type << TYPE_SHIFT;
        table[b + TAGS] = withTag(tags, i, tag(h));
        WORD.setRelease(table, b, w + VERSION);
    }

    /**
     * Before a change that may take {@code key}'s name away from directory {@code dir}: clears its entry, and
     * until {@link #endRemove} no walk uses its bucket and no insert into it succeeds.
     */
    void beginRemove(long dir, EntryKey key) {
        int length = key.length() - HASH;
        if (length > MAX_NAME) {
            return;
        }
        byte[] k = key.bytes();
        long name = nameBits(k, length);
        int b = bucket(mix(dir, name));
        long w = lock(b);
        long tags = table[b + TAGS];
        for (int i = 0; i < WAYS; i++) {
            int way = b + WAY0 + i * WAY_WORDS;
            if (table[way + DIR] == dir && (table[way + KEY] & NAME_BITS) == name && sameName(way, k, length)) {
                tags = withTag(tags, i, 0);
            }
        }
        table[b + TAGS] = tags;
        WORD.setRelease(table, b, w + REMOVAL + VERSION);
    }

    /** After the change {@link #beginRemove} announced, committed or not: the name's bucket serves walks again. */
    void endRemove(long dir, EntryKey key) {
        int length = key.length() - HASH;
        if (length > MAX_NAME) {
            return;
        }
        int b = bucket(mix(dir, nameBits(key.bytes(), length)));
        for (int spins = 0; ; spins++) {
            long w = (long) WORD.getVolatile(table, b);
            if ((w & LOCKED) == 0 && WORD.compareAndSet(table, b, w, w - REMOVAL + VERSION)) {
                return;
            }
            backOff(spins);
        }
    }

    /** Empties the cache (at unmount). */
    void clear() {
        for (int b = 0; b < table.length; b += BUCKET_WORDS) {
            long w = lock(b);
            table[b + TAGS] = 0;
            WORD.setRelease(table, b, w + VERSION);
        }
    }

    /** Takes bucket {@code b}'s word from unlocked to LOCKED; returns it as it was. */
    private long lock(int b) {
        for (int spins = 0; ; spins++) {
            long w = (long) WORD.getVolatile(table, b);
            if ((w & LOCKED) == 0 && WORD.compareAndSet(table, b, w, w | LOCKED)) {
                return w;
            }
            backOff(spins);
        }
    }

    /** A holder of a LOCKED word does a few stores; if it was descheduled meanwhile, let it run. */
    private static void backOff(int spins) {
        if (spins < 64) {
            Thread.onSpinWait();
        } else {
            Thread.yield();
        }
    }

    /** The hash of {@code name} (its {@link #nameBits}) in {@code dir}: its low bits choose the bucket, its high ones the tag. */
    private static long mix(long dir, long name) {
        long h = dir * 0x9E3779B97F4A7C15L + name;
        h = (h ^ (h >>> 33)) * 0xFF51AFD7ED558CCDL;
        return h ^ (h >>> 33);
    }

    /** The start of the bucket of hash {@code h}. */
    private int bucket(long h) {
        return (int) (h & (buckets - 1)) * BUCKET_WORDS;
    }

    /** The tag of hash {@code h} in its bucket's tag word: never 0, which marks an empty way. */
    private static int tag(long h) {
        return (int) (h >>> Integer.SIZE) | 1;
    }

    /** {@code tags} with way {@code i}'s tag set to {@code tag}. */
    private static long withTag(long tags, int i, int tag) {
        int shift = i * Integer.SIZE;
        return tags & ~(0xFFFF_FFFFL << shift) | Integer.toUnsignedLong(tag) << shift;
    }

    /** A key's name bits for the key word: its hash and its name's length. */
    private static long nameBits(byte[] key, int length) {
        return Integer.toUnsignedLong((int) INT_AT.get(key, 0)) | (long) length << 32;
    }

    private boolean sameName(int way, byte[] key, int length) {
        for (int i = 0; i * Long.BYTES < length; i++) {
            if (table[way + NAME + i] != nameWord(key, i, length)) {
                return false;
            }
        }
        return true;
    }

    /** The {@code i}th 8 bytes of a key's name of {@code length} bytes, zero past its end. */
    private static long nameWord(byte[] key, int i, int length) {
        int at = HASH + i * Long.BYTES;
        int n = Math.min(Long.BYTES, length - i * Long.BYTES);
        if (at + Long.BYTES <= key.length) {
            long x = (long) LONG_AT.get(key, at);
            return n == Long.BYTES ? x : x & (1L << (n * Byte.SIZE)) - 1;
        }
        long x = 0;
        for (int j = 0; j < n; j++) {
            x |= (key[at + j] & 0xFFL) << (j * Byte.SIZE);
        }
        return x;
    }
}
