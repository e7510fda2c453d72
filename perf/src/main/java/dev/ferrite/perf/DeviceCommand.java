package dev.ferrite.perf;

import dev.ferrite.io.IoEngineKind;
import dev.ferrite.perf.bench.DeviceBench;
import dev.ferrite.perf.bench.Fio;
import dev.ferrite.perf.bench.Machine;
import dev.ferrite.perf.bench.Result;
import dev.ferrite.perf.bench.ResultTable;
import dev.ferrite.perf.bench.Storage;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

@Command(name = "device", header = "A file or block device through native-io, beside fio.",
        description = {
                "Measures a file or block device through native-io (O_DIRECT), next to fio.",
                "Each phase is followed by fio's equivalent job on the same file for as long,",
                "when fio is on the PATH:",
                "",
                "  seq-write       1 MiB writes in order, covering the whole file at least once",
                "                  fio: rw=write bs=1M ioengine=psync",
                "  randwrite-qd1   4 KiB writes to random blocks, one at a time",
                "                  fio: rw=randwrite bs=4k ioengine=psync",
                "  randwrite-qd32  4 KiB random writes kept 32 in flight (IoBatch of 1024)",
                "                  fio: rw=randwrite bs=4k ioengine=io_uring iodepth=32",
                "  randread-qd32   4 KiB random reads kept 32 in flight",
                "                  fio: rw=randread bs=4k ioengine=io_uring iodepth=32",
                "  fdatasync       4 KiB write then flush; the flush's latency, pairs per second",
                "                  fio: rw=write bs=4k ioengine=psync fdatasync=1",
                "",
                "The file's contents are overwritten. Without --device a temporary file is",
                "used and deleted afterwards.",
                ""})
final class DeviceCommand implements Callable<Integer> {
    /** The JSON/table target fio's rows carry. */
    private static final String FIO = "fio";

    enum Engine {
        AUTO(IoEngineKind.AUTO), IO_URING(IoEngineKind.IO_URING), THREADS(IoEngineKind.THREADS), SYNC(IoEngineKind.SYNC),
        BOTH(IoEngineKind.IO_URING, IoEngineKind.THREADS);

        final List<IoEngineKind> kinds;

        Engine(IoEngineKind... kinds) {
            this.kinds = List.of(kinds);
        }
    }

    @Option(names = "--size", paramLabel = "SIZE", defaultValue = "1G", converter = ByteSize.Converter.class,
            description = "bytes of the file or device to use, a whole number of MiB; K/M/G/T suffixes (default: ${DEFAULT-VALUE})")
    long size;

    @Option(names = "--engine", paramLabel = "ENGINE", defaultValue = "auto",
            description = "I/O engine for the queue-depth phases: auto (sync for a file on tmpfs, else io_uring where"
                    + " the kernel allows it), io_uring, threads, sync, or both to run them once with io_uring and"
                    + " once with threads (default: ${DEFAULT-VALUE})")
    Engine engine;

    @Mixin
    BenchDeviceOptions device;

    @Mixin
    BenchOptions options;

    @Mixin
    FioOption fioOption;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        return run(spec, options, fioOption.noFio);
    }

    /** Runs with this command's device options and the given common ones; {@code spec} is the command invoked. */
    int run(CommandSpec invoked, BenchOptions common, boolean noFio) throws IOException {
        common.validate(invoked);
        if (size < DeviceBench.SEQ_BYTES || size % DeviceBench.SEQ_BYTES != 0) {
            throw new ParameterException(invoked.commandLine(), "--size " + ByteSize.format(size)
                    + " is not a whole number of MiB (the sequential phase writes 1 MiB at a time)");
        }
        Fio fio = noFio ? null : Fio.find().orElse(null);
        return device.run(invoked, "ferrite-bench-", (path, temporary) -> bench(invoked, common, path, temporary, fio, noFio));
    }

    private int bench(CommandSpec invoked, BenchOptions common, Path path, boolean temporary, Fio fio, boolean noFio)
            throws IOException {
        PrintWriter out = invoked.commandLine().getOut();
        Storage storage = Storage.of(path);
        out.printf(Locale.ROOT, "device: %s (%s%s), %s, %s s per phase%n", storage.path(), storage.describe(),
                temporary ? ", temporary" : "", ByteSize.format(size), common.seconds);
        out.println(fio != null ? "fio:    " + fio.version() + ", same file, after each phase"
                : noFio ? "fio:    skipped (--no-fio)" : "fio:    not on the PATH, ferrite only");
        out.flush();
        Machine machine = Machine.collect(storage);
        List<Result> results = new DeviceBench(path, size, common.seconds, engine.kinds, fio)
                .run(new ProgressLine(invoked.commandLine().getErr()));
        out.println();
        out.print(ResultTable.render(results, FIO));
        common.json.write(out, machine, results);
        out.flush();
        return 0;
    }
}
