package dev.ferrite.dir;

import java.util.Arrays;
import java.util.HexFormat;

/**
 * Where a readdir stopped: the key (name hash, then name) of the last entry it returned. Entries come
 * in key order, so resuming after the key returns every entry that existed throughout the walk exactly
 * once, whatever was created or removed meanwhile, and in whichever form the directory is stored.
 */
public final class DirCookie {
    /** Before the first entry. */
    public static final DirCookie START = new DirCookie(null);

    private final byte[] key;

    private DirCookie(byte[] key) {
        this.key = key;
    }

    static DirCookie after(byte[] key, int length) {
        return new DirCookie(java.util.Arrays.copyOf(key, length));
    }

    /** The cookie's bytes (empty for {@link #START}), to store it. */
    public byte[] toBytes() {
        return key == null ? new byte[0] : key.clone();
    }

    /**
     * A cookie from {@link #toBytes()}.
     *
     * @throws NamespaceException EINVAL if {@code bytes} cannot be a cookie's (a length no entry key has)
     */
    public static DirCookie fromBytes(byte[] bytes) {
        if (bytes.length == 0) {
            return START;
        }
        if (bytes.length <= DirEntryFormat.HASH || bytes.length > DirEntryFormat.HASH + DirEntryFormat.MAX_NAME) {
            throw new NamespaceException(dev.ferrite.io.Errno.EINVAL, "a readdir cookie of " + bytes.length + " bytes");
        }
        return new DirCookie(bytes.clone());
    }

    byte[] key() {
        return key;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof DirCookie c && Arrays.equals(key, c.key);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(key);
    }

    @Override
    public String toString() {
        return key == null ? "DirCookie[start]" : "DirCookie[" + HexFormat.of().formatHex(key) + "]";
    }
}
