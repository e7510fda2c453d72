package dev.ferrite.dir;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;

import dev.ferrite.io.MemoryDevice;

import org.junit.jupiter.api.Test;

/**
 * A closed volume is not kept alive by the threads that used it: per-thread state of one volume's parts
 * must not be held in a ThreadLocal that the volume itself owns, as such an entry's value reaches back to
 * its own key, and the thread then keeps every volume it ever used (the crash test opens thousands).
 */
class VolumeRetentionTest {
    @Test
    void volumesClosedAfterPathTableAndFileWorkOnOneThreadAreCollected() throws InterruptedException {
        List<WeakReference<Volume>> closed = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            try (MemoryDevice device = VolumeFixtures.formatted()) {
                Volume v = Volume.open(device, VolumeFixtures.OPTIONS);
                try {
                    Namespace ns = v.namespace();
                    ns.mkdir("/d", 0755);
                    ns.create("/d/f", 0644, true);
                    ns.stat("/d/f");
                    ns.statIfExists("/d/missing", new StatBuffer());
                    try (Table t = v.tables().create("t")) {
                        t.put(new byte[] {1}, new byte[] {2});
                        t.get(new byte[] {1});
                    }
                } finally {
                    v.close();
                }
                closed.add(new WeakReference<>(v));
            }
        }
        long alive = 0;
        for (int round = 0; round < 50 && (alive = closed.stream().filter(r -> r.get() != null).count()) > 1; round++) {
            System.gc();
            Thread.sleep(20);
        }
        // the thread's scratch state may keep the last volume it used until it uses another
        assertTrue(alive <= 1, alive + " of 8 closed volumes are still reachable from the thread that used them");
    }
}
