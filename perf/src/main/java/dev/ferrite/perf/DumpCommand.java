package dev.ferrite.perf;

import java.io.PrintWriter;
import java.util.concurrent.Callable;

import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeDump;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.OverlayDevice;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "dump", header = "Prints a volume's on-disk structures without changing it.",
        description = {
        "Prints on-disk structures of the volume on DEVICE without changing it. With",
        "no option: both superblock copies. --block N: block N read raw, described by",
        "its magic (superblock, group header, inode block, B-tree node, log region)",
        "whatever its state. --inode N and --path P mount the volume read-only (a log",
        "left by a crash is replayed in memory) and print the inode: where it lives,",
        "its attributes, a directory's entries, a symlink's target or a table's tree.",
        "--tables mounts it so and prints the table catalog's inode and each table:",
        "inode, tree height, estimated keys, blocks, tree header block. --refcounts",
        "mounts it so and prints each group's refcount tree: the shared blocks of",
        "cloned files and how many files map them.", ""})
final class DumpCommand implements Callable<Integer> {
    @Mixin
    VolumeDeviceParameter device;

    @ArgGroup(exclusive = true)
    What what;

    static final class What {
        @Option(names = "--block", paramLabel = "N", description = "a block by number")
        Long block;

        @Option(names = "--inode", paramLabel = "N", description = "an inode by number")
        Long inode;

        @Option(names = "--path", paramLabel = "P", description = "an absolute path in the volume")
        String path;

        @Option(names = "--tables", description = "the table catalog and every table")
        boolean tables;

        @Option(names = "--refcounts", description = "every group's refcount tree (blocks cloned files share)")
        boolean refcounts;
    }

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        try (BlockDevice dev = device.openReadOnly()) {
            if (what == null) {
                out.print(VolumeDump.superblock(dev));
            } else if (what.block != null) {
                out.print(VolumeDump.block(dev, what.block));
            } else {
                try (OverlayDevice view = OverlayDevice.over(dev);
                     Volume v = Volume.open(view, VolumeOptions.defaults().withCacheBytes(64L << 20))) {
                    out.print(what.tables ? VolumeDump.tables(v) : what.refcounts ? VolumeDump.refcounts(v)
                            : what.inode != null ? VolumeDump.inode(v, what.inode) : VolumeDump.path(v, what.path));
                }
            }
        }
        out.flush();
        return 0;
    }
}
