package dev.ferrite.perf;

import java.io.IOException;
import java.nio.file.Path;

import dev.ferrite.perf.bench.ScratchFile;
import dev.ferrite.perf.bench.Storage;

import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** {@code --device} and {@code --force}: what a device-level benchmark (bench device, bench journal) runs on (a picocli mixin). */
final class BenchDeviceOptions {
    @Option(names = "--device", paramLabel = "PATH",
            description = "file (created if missing, kept afterwards) or block device to run on"
                    + " (default: a temporary file in the directory java.io.tmpdir names)")
    Path device;

    @Option(names = "--force", description = "allow --device to name a block device, whose contents are destroyed")
    boolean force;

    /** A benchmark run on {@code path}, a temporary file when {@code temporary}. */
    interface Bench {
        int run(Path path, boolean temporary) throws IOException;
    }

    /**
     * Runs {@code bench} on {@code --device} (a block device only with {@code --force}), or on a temporary
     * file in java.io.tmpdir named {@code tempPrefix}..., deleted afterwards.
     */
    int run(CommandSpec invoked, String tempPrefix, Bench bench) throws IOException {
        if (device != null) {
            if (Storage.of(device).isBlockDevice() && !force) {
                throw new ParameterException(invoked.commandLine(), "--device " + device
                        + " is a block device; add --force to destroy its contents");
            }
            return bench.run(device, false);
        }
        try (ScratchFile scratch = ScratchFile.create(Path.of(System.getProperty("java.io.tmpdir")), tempPrefix, ".dev")) {
            return bench.run(scratch.path(), true);
        }
    }
}
