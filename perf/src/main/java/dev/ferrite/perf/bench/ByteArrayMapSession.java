package dev.ferrite.perf.bench;

import java.util.Arrays;

/**
 * A session on a store that is a map of whole {@code byte[]} keys to {@code byte[]} values ({@link
 * MemoryKv}, {@link MvStoreKv}), compared by the map's comparator; the store says how a value is written,
 * removed and read. A put copies the key and the value in, as the map keeps them; a get copies the value
 * out, as the other stores' gets do. Gets and deletes look keys up through a reused array per key length:
 * the map compares whole arrays, and copying each probe into a new one would allocate on every call.
 */
abstract class ByteArrayMapSession implements KvStore.Session {
    private final ExactKeys probes = new ExactKeys();

    /** Maps {@code key} to {@code value}, both copies the map may keep. */
    abstract void write(byte[] key, byte[] value);

    /** Removes {@code key}, an array this session reuses. */
    abstract void remove(byte[] key);

    /** The value of {@code key} (an array this session reuses), null if absent. */
    abstract byte[] read(byte[] key);

    @Override
    public void put(byte[] key, int keyLength, byte[] value) {
        write(Arrays.copyOf(key, keyLength), value.clone());
    }

    @Override
    public void delete(byte[] key, int keyLength) {
        remove(probes.of(key, keyLength));
    }

    @Override
    public void commit() {
    }

    @Override
    public int get(byte[] key, int keyLength, byte[] value) {
        byte[] found = read(probes.of(key, keyLength));
        if (found == null) {
            return -1;
        }
        System.arraycopy(found, 0, value, 0, Math.min(found.length, value.length));
        return found.length;
    }

    @Override
    public void close() {
    }
}
