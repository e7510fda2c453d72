package dev.ferrite.io.internal;

import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The value layouts every on-disk structure is read and written with. Ferrite's on-disk byte order is
 * little-endian, everywhere, stated here once; fields are unaligned-safe so a format never depends on
 * the alignment of the buffer it is decoded from.
 */
public final class OnDisk {
    public static final ValueLayout.OfByte U8 = ValueLayout.JAVA_BYTE;
    public static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    public static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    public static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private OnDisk() {
    }
}
