package dev.ferrite.dir;

import java.util.Arrays;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/** A file's page map lists its cached blocks of a range in ascending order, into a new array or a caller's. */
class FilePagesTest {
    @Test
    void blocksOfARangeAscendingIntoAnArrayOrANewOne() {
        FilePages p = new FilePages(new Inode(7, 1));
        long[] cached = {900, 3, 17, 5, 64, 1_000_000, 4};
        for (int k = 0; k < cached.length; k++) {
            p.put(cached[k], k);
        }
        long[] out = new long[p.blocksBound(0, Long.MAX_VALUE) + 3]; // a reused array longer than needed
        Arrays.fill(out, -7);
        int n = p.blocks(0, Long.MAX_VALUE, out); // a range wider than the table: its keys, sorted
        assertArrayEquals(new long[] {3, 4, 5, 17, 64, 900, 1_000_000}, Arrays.copyOf(out, n));
        assertEquals(-7, out[n]);
        assertEquals(3, p.blocks(4, 18, out)); // a narrow one: probed block by block
        assertArrayEquals(new long[] {4, 5, 17}, Arrays.copyOf(out, 3));
        assertArrayEquals(new long[] {17, 64, 900}, p.blocks(6, 1000));
        assertArrayEquals(new long[0], p.blocks(6, 17));
    }
}
