package dev.ferrite.perf.bench;

import java.util.Arrays;
import java.util.concurrent.ConcurrentMap;

/**
 * A session on a store that is a concurrent map of {@code byte[]} keys to {@code byte[]} values, ordered by
 * its comparator ({@link MemoryKv}, {@link MvStoreKv}): each write is a change of the map by itself. A put
 * copies the key and the value in, as the map keeps them; a get copies the value out, as the other
 * stores' gets do. Gets and deletes look keys up through a reused array per key length: the map compares
 * whole arrays, and copying each probe into a new one would allocate on every call.
 */
abstract class ByteArrayMapSession implements KvStore.Session {
    private final ConcurrentMap<byte[], byte[]> map;
    private final ExactKeys probes = new ExactKeys();

    ByteArrayMapSession(ConcurrentMap<byte[], byte[]> map) {
        this.map = map;
    }

    private byte[] probe(byte[] key, int length) {
        return probes.of(key, length);
    }

    @Override
    public void put(byte[] key, int keyLength, byte[] value) {
        map.put(Arrays.copyOf(key, keyLength), value.clone());
    }

    @Override
    public void delete(byte[] key, int keyLength) {
        map.remove(probe(key, keyLength));
    }

    @Override
    public void commit() {
    }

    @Override
    public int get(byte[] key, int keyLength, byte[] value) {
        byte[] found = map.get(probe(key, keyLength));
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
