package dev.ferrite.perf.jmh;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import dev.ferrite.dir.InodeStat;
import dev.ferrite.dir.Namespace;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.MemoryDevice;

/**
 * Path resolution as dbench's clients do it: {@code lookup} and {@code lstat} of a file five components
 * deep ({@code /clients/client0/~dmtmp/PWRPNT/<file>}), whose directory holds a few entries (inline in its
 * inode) or many (a directory tree). Run with {@code -prof gc} for the bytes allocated per lookup.
 */
@State(Scope.Benchmark)
public class PathLookupBench extends JmhDefaults {
    private static final int BLOCK = 4096;
    private static final String DIR = "/clients/client0/~dmtmp/PWRPNT";

    /** Entries in the last directory: 8 stay inline, 2000 make a tree. */
    @Param({"8", "2000"})
    int entries;

    private MemoryDevice device;
    private Volume volume;
    private Namespace ns;
    private String path;

    @Setup(Level.Trial)
    public void setup() {
        device = MemoryDevice.create(32_768, BLOCK);
        VolumeOptions options = VolumeOptions.defaults().withLogBlocks(2048);
        Volume.format(device, options);
        volume = Volume.open(device, options);
        ns = volume.namespace();
        StringBuilder d = new StringBuilder();
        for (String c : DIR.substring(1).split("/")) {
            ns.mkdir(d.append('/').append(c).toString(), 0755);
        }
        for (int i = 0; i < entries; i++) {
            ns.create(DIR + "/PPTC" + i + ".TMP", 0644, true);
        }
        path = DIR + "/PPTC" + entries / 2 + ".TMP";
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        volume.close();
        device.close();
    }

    @Benchmark
    public long lookup() {
        return ns.lookup(path);
    }

    @Benchmark
    public InodeStat lstat() {
        return ns.lstat(path);
    }
}
