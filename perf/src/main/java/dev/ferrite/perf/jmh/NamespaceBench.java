package dev.ferrite.perf.jmh;

import java.util.SplittableRandom;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import dev.ferrite.dir.Handle;
import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.StatBuffer;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.MemoryDevice;

/**
 * The namespace through directory handles ({@code bench meta}'s handle API) in a RAM volume whose cache
 * holds everything, one thread, in one directory of {@value #FILES} files: {@code createUnlink} creates a
 * new name and unlinks it (two operations, each a transaction of its own, not forced); {@code createUnlinkPath}
 * the same by path ({@code /d/new-N}); the directory holds {@value #FILES} names before and after each pair, so
 * every iteration measures the same steady state; {@code lstat} of a
 * random existing name, returning an {@link InodeStat}; {@code lstatInto} the same into a reused
 * {@link StatBuffer}. Names are made once. Run with {@code -prof gc} for the allocation per operation.
 */
@State(Scope.Benchmark)
public class NamespaceBench extends JmhDefaults {
    static final int FILES = 10_000;

    private MemoryDevice device;
    private Volume volume;
    private Namespace ns;
    private Handle root, dir;
    private String[] names, fresh, freshPaths;
    private SplittableRandom random;
    private final StatBuffer stat = new StatBuffer();
    private int next;

    @Setup(Level.Trial)
    public void setup() {
        device = MemoryDevice.create(65_536, 4096);
        VolumeOptions options = VolumeOptions.defaults().withLogBlocks(8192).withCacheBytes(128L << 20);
        Volume.format(device, options);
        volume = Volume.open(device, options);
        ns = volume.namespace();
        root = ns.openRoot();
        dir = ns.mkdir(root, "d", 0755);
        names = new String[FILES];
        fresh = new String[FILES];
        freshPaths = new String[FILES];
        for (int i = 0; i < FILES; i++) {
            names[i] = "file-" + i;
            fresh[i] = "new-" + i;
            freshPaths[i] = "/d/" + fresh[i];
            ns.create(dir, names[i], 0644, true).close();
        }
        volume.sync();
        random = new SplittableRandom(42);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        dir.close();
        root.close();
        volume.close();
        device.close();
    }

    @Benchmark
    @OperationsPerInvocation(2)
    public void createUnlink() {
        String name = fresh[next++ % FILES];
        ns.create(dir, name, 0644, true).close();
        ns.unlink(dir, name);
    }

    @Benchmark
    @OperationsPerInvocation(2)
    public long createUnlinkPath() {
        String path = freshPaths[next++ % FILES];
        long ino = ns.create(path, 0644, true);
        ns.unlink(path);
        return ino;
    }

    @Benchmark
    public long lstat() {
        InodeStat st = ns.lstat(dir, names[random.nextInt(FILES)]);
        return st.size();
    }

    @Benchmark
    public long lstatInto() {
        ns.lstat(dir, names[random.nextInt(FILES)], stat);
        return stat.size();
    }
}
