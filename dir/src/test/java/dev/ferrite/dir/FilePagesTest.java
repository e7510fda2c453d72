package dev.ferrite.dir;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

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

    @Test
    void aTableExtentStripeKeepsAValuesPagesInAdjacentSlots() {
        FilePages files = new FilePages(new Inode(7, 1));
        FilePages values = new FilePages(null, 4); // pages first block * 16 + i, as TableExtentCache numbers them
        int slots = 1 << 12;
        int apart = 0;
        for (long b = 1000; b < 1100; b++) {
            for (int i = 1; i < 4; i++) {
                assertEquals((values.home(b * 16, slots) + i) & (slots - 1), values.home(b * 16 + i, slots));
                if (files.home(b * 16 + i, slots) != ((files.home(b * 16, slots) + i) & (slots - 1))) {
                    apart++;
                }
            }
        }
        assertNotEquals(0, apart, "a file's blocks keep a home slot each");
    }

    /**
     * A run of pages mapped at once (a table blob's, {@link BufferedIo#mapRun}) resizes the table once, up
     * front, keeping what was mapped: 256 pages grew it five times over, rehashing each time.
     */
    @Test
    void aReservedRunResizesTheTableOnceAndKeepsWhatWasMapped() throws ReflectiveOperationException {
        FilePages p = new FilePages(new Inode(7, 1));
        p.put(1_000, 99);
        p.reserve(256);
        java.lang.reflect.Field keys = FilePages.class.getDeclaredField("keys");
        keys.setAccessible(true);
        Object table = keys.get(p);
        assertEquals(1024, ((long[]) table).length, "room for 257 pages at most half full");
        for (int b = 0; b < 256; b++) {
            p.put(b, 500 + b);
        }
        assertSame(table, keys.get(p), "no resize while the run was mapped");
        assertEquals(99, p.get(1_000));
        for (int b = 0; b < 256; b++) {
            assertEquals(500 + b, p.get(b));
        }
        p.reserve(10);
        assertSame(table, keys.get(p), "room enough already");
    }

    /** Random maps, lookups and unmaps (backward shifts across runs) against a HashMap. */
    @Test
    void aStripeWithRunsAgreesWithAHashMap() {
        Random rnd = new Random(17);
        FilePages p = new FilePages(null, 4);
        Map<Long, Integer> model = new HashMap<>();
        for (int op = 0; op < 200_000; op++) {
            long page = rnd.nextInt(2_000) * 16L + rnd.nextInt(4);
            Integer had = model.get(page);
            if (had == null && rnd.nextInt(3) > 0) {
                p.put(page, op);
                model.put(page, op);
            } else if (had != null && rnd.nextBoolean()) {
                assertEquals(had, p.remove(page));
                model.remove(page);
            } else {
                assertEquals(had == null ? -1 : had, p.get(page));
            }
        }
        assertEquals(model.size(), p.size());
        for (Map.Entry<Long, Integer> e : model.entrySet()) {
            assertEquals(e.getValue(), p.get(e.getKey()));
        }
    }

    /**
     * Clearing a file whose pages are blocks {@code [0, n)} (a blob's, mapped from a run of frames) returns
     * its frames in block order, ascending for a run, so the page cache gives them back with no sort; any
     * other file's come out in the table's order, every one of them.
     */
    @Test
    void clearingAFileCachedFromItsStartReturnsItsFramesInBlockOrder() {
        FilePages p = new FilePages(new Inode(7, 1));
        Integer[] order = new Integer[256];
        for (int b = 0; b < order.length; b++) {
            order[b] = b;
        }
        java.util.Collections.shuffle(Arrays.asList(order), new Random(5));
        for (int b : order) {
            p.put(b, 1000 + b);
        }
        int[] expected = new int[order.length];
        Arrays.setAll(expected, b -> 1000 + b);
        assertArrayEquals(expected, p.clear());
        assertEquals(0, p.size());
        long[] sparse = {3, 900, 5, 1};
        for (int k = 0; k < sparse.length; k++) {
            p.put(sparse[k], k);
        }
        int[] frames = p.clear();
        Arrays.sort(frames);
        assertArrayEquals(new int[] {0, 1, 2, 3}, frames);
    }
}
