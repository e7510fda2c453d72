package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Every store's scan reads each value whole: its fold is the fold of the bytes that were put. */
class KvScanFoldTest {
    private static final int[] LENGTHS = {8, 13, 64, 1_000, 5_003, 12_291, 65_536, 70_001};

    @ParameterizedTest
    @EnumSource(KvTarget.class)
    void aScanFoldsEveryByteOfEveryValue(KvTarget target, @TempDir Path dir) {
        byte[] key = new byte[KvKeys.KEY_MAX];
        List<Long> expected = new ArrayList<>(), folded = new ArrayList<>();
        try (KvStore store = target.open(dir, LENGTHS.length, 70_001, 16L << 20); KvStore.Session s = store.session()) {
            for (int i = 0; i < LENGTHS.length; i++) {
                byte[] v = KvKeys.newValue(LENGTHS[i]);
                KvKeys.value(i, v);
                // the scan goes in key order: key i starts with the byte i, so order is index order
                key[0] = (byte) i;
                s.put(key, KvKeys.KEY_MIN, v);
                expected.add(KvKeys.fold(v, v.length));
            }
            s.commit();
            try (KvStore.Scan scan = s.scan(null, null)) {
                while (scan.next() >= 0) {
                    folded.add(scan.fold());
                }
            }
        }
        assertEquals(expected, folded, target.name());
    }
}
