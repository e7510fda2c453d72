package dev.ferrite.perf.bench;

/**
 * A reusable array per key length, for calls that take a key as a whole array (a map lookup, a RocksDB
 * write batch, a scan's start): copying each key into a new array of its length would allocate on every
 * operation. One per thread; an array returned is overwritten by the next call for its length.
 */
final class ExactKeys {
    private final byte[][] arrays = new byte[KvKeys.KEY_MAX + 1][];

    /** The first {@code length} bytes of {@code key} in this holder's array of that length. */
    byte[] of(byte[] key, int length) {
        byte[] a = arrays[length];
        if (a == null) {
            a = arrays[length] = new byte[length];
        }
        System.arraycopy(key, 0, a, 0, length);
        return a;
    }
}
