package dev.ferrite.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class ByteSizeTest {
    @Test
    void parsesBinarySuffixes() {
        assertEquals(4096, ByteSize.parse("4096"));
        assertEquals(512 << 10, ByteSize.parse("512K"));
        assertEquals(16 << 20, ByteSize.parse("16m"));
        assertEquals(1L << 30, ByteSize.parse("1G"));
        assertEquals(1L << 30, ByteSize.parse("1GiB"));
        assertEquals(2L << 40, ByteSize.parse("2T"));
    }

    @Test
    void rejectsWhatIsNotASize() {
        for (String bad : new String[] {"", "G", "1.5G", "-1M", "12Q", "1 G B"}) {
            assertThrows(IllegalArgumentException.class, () -> ByteSize.parse(bad), bad);
        }
        assertEquals("'9999999999T' is too large a size",
                assertThrows(IllegalArgumentException.class, () -> ByteSize.parse("9999999999T")).getMessage());
    }

    @Test
    void formatsInTheLargestExactUnit() {
        assertEquals("1 GiB", ByteSize.format(1L << 30));
        assertEquals("1536 MiB", ByteSize.format(1536L << 20));
        assertEquals("4097 bytes", ByteSize.format(4097));
        assertEquals("0 bytes", ByteSize.format(0));
    }
}
