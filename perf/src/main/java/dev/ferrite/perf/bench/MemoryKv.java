package dev.ferrite.perf.bench;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;

/**
 * The ceiling: the kv workload on the JDK's {@link ConcurrentSkipListMap} of {@code byte[]} keys in
 * unsigned lexicographic order (the other stores' order), with nothing logged and nothing durable —
 * what an ordered store costs when the device and the log are free. A put copies the key and the value
 * in, as any store must keep them; a get copies the value out, as the other stores' gets do. Gets and
 * scans take no lock.
 */
final class MemoryKv implements KvStore {
    static final String DESCRIPTION = "ConcurrentSkipListMap, no durability (unsigned lexicographic byte[] keys;"
            + " puts copy key and value in, gets copy the value out)";
    private static final VarHandle BE_LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    private final ConcurrentSkipListMap<byte[], byte[]> map = new ConcurrentSkipListMap<>(Arrays::compareUnsigned);

    @Override
    public String describe() {
        return DESCRIPTION;
    }

    @Override
    public int writeBatch() {
        return 1;
    }

    @Override
    public KvStore.Session session() {
        return new Session();
    }

    @Override
    public void sync() {
        // nothing is durable: the ceiling pays for no device
    }

    @Override
    public void check() {
        // the map keeps its own order; the workload checks the data
    }

    @Override
    public void close() {
        // nothing held outside the heap
    }

    private final class Session extends ByteArrayMapSession {
        @Override
        void write(byte[] key, byte[] value) {
            map.put(key, value);
        }

        @Override
        void remove(byte[] key) {
            map.remove(key);
        }

        @Override
        byte[] read(byte[] key) {
            return map.get(key);
        }

        @Override
        public KvStore.Scan scan(byte[] from, byte[] to) {
            NavigableMap<byte[], byte[]> range = from == null && to == null ? map
                    : from == null ? map.headMap(to, false)
                    : to == null ? map.tailMap(from, true)
                    : map.subMap(from, true, to, false);
            Iterator<byte[]> values = range.values().iterator();
            return new KvStore.Scan() {
                private byte[] current;

                @Override
                public int next() {
                    if (!values.hasNext()) {
                        return -1;
                    }
                    current = values.next();
                    return current.length;
                }

                @Override
                public long word() {
                    return current.length >= 8 ? (long) BE_LONG.get(current, 0) : 0;
                }

                @Override
                public long fold() {
                    return KvKeys.fold(current, current.length);
                }

                @Override
                public void close() {
                }
            };
        }
    }
}
