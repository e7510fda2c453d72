package dev.ferrite.perf;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import dev.ferrite.dir.CheckProblem;
import dev.ferrite.dir.CheckReport;
import dev.ferrite.dir.MountReport;
import dev.ferrite.dir.Volume;
import dev.ferrite.dir.VolumeOptions;
import dev.ferrite.io.BlockDevice;
import dev.ferrite.io.FerriteException;
import dev.ferrite.io.OverlayDevice;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

@Command(name = "check", header = "Checks a volume without changing it.",
        description = {
        "Checks the Ferrite volume on DEVICE without changing it: superblock copies,",
        "allocation group headers, every B-tree, free space against used space,",
        "inodes against directory entries and link counts, orphans, counters, the",
        "table catalog and every table's tree. A log left by a crash is replayed in",
        "memory only. Prints every problem found (one in a table names it",
        "'tables:NAME') and how many directories, inodes, trees and tables it walked.",
        "Exit status: 0 clean, 1 problems found or the volume cannot be read, 2 usage.",
        "A volume in use by another process is refused.", ""})
final class CheckCommand implements Callable<Integer> {
    @Mixin
    VolumeDeviceParameter device;

    @Mixin
    HelpOption help;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        try (BlockDevice dev = device.openReadOnly();
             OverlayDevice view = OverlayDevice.over(dev)) {
            CheckReport report;
            MountReport mount;
            try (Volume v = Volume.open(view, VolumeOptions.defaults().withCacheBytes(64L << 20))) {
                mount = v.mountReport();
                report = v.namespace().check();
            } catch (FerriteException e) {
                out.println(device + ": cannot be checked: " + e.getMessage());
                out.flush();
                return 1;
            }
            for (String note : mount.notes()) {
                out.println(device + ": " + note);
            }
            for (CheckProblem p : report.problems()) {
                out.println(device + ": " + p);
            }
            out.println(device + ": " + (report.clean() ? "clean" : report.problems().size() + " problems")
                    + " in " + report.directories() + " directories, " + report.inodes() + " inodes, " + report.trees() + " trees, "
                    + report.tables() + " tables"
                    + (view.blocksWritten() > 0 ? " (recovery and mount wrote " + view.blocksWritten()
                    + " blocks, in memory only; the device is unchanged)" : ""));
            out.flush();
            return report.clean() ? 0 : 1;
        }
    }
}
