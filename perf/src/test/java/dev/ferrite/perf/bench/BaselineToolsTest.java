package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;

class BaselineToolsTest {
    /** A fresh Debian machine: ext4's mkfs and losetup only; each missing tool named with its package. */
    @Test
    void aFreshMachineIsToldWhatToInstall() {
        Set<String> present = Set.of("losetup", "mkfs.ext4");
        List<BaselineTools.Missing> missing = BaselineTools.missing(false, present::contains, p -> false);
        assertEquals(List.of(new BaselineTools.Missing("fio", "fio"), new BaselineTools.Missing("mkfs.xfs", "xfsprogs"),
                new BaselineTools.Missing("mkfs.btrfs", "btrfs-progs"), new BaselineTools.Missing("dbench", "dbench")), missing);
        List<String> note = BaselineTools.note(missing, true);
        assertEquals(1, note.size(), note.toString());
        assertTrue(note.getFirst().contains("lacks fio, mkfs.xfs, mkfs.btrfs, dbench"), note.toString());
        assertTrue(note.getFirst().endsWith("(Debian/Ubuntu: apt-get install fio xfsprogs btrfs-progs dbench)"), note.toString());
    }

    /** dbench's program without its loadfile (or the reverse) still leaves the dbench step nothing to compare. */
    @Test
    void dbenchNeedsItsProgramAndItsLoadfile() {
        Set<String> all = Set.of("fio", "losetup", "mkfs.xfs", "mkfs.ext4", "mkfs.btrfs", "dbench");
        assertEquals(List.of(), BaselineTools.missing(false, all::contains, BaselineTools.DBENCH_LOADFILE::equals));
        assertEquals(List.of(new BaselineTools.Missing("dbench", "dbench")),
                BaselineTools.missing(false, all::contains, p -> false));
        assertEquals(List.of(new BaselineTools.Missing("dbench", "dbench")),
                BaselineTools.missing(true, Set.of("fio", "losetup", "mkfs.xfs", "mkfs.ext4", "mkfs.btrfs")::contains,
                        (Path p) -> true));
    }

    /** --no-fio does not ask for fio; no losetup asks for util-linux; not root says why the kernel file systems are out. */
    @Test
    void noFioLosetupAndRoot() {
        Set<String> all = Set.of("mkfs.xfs", "mkfs.ext4", "mkfs.btrfs", "dbench");
        assertEquals(List.of(new BaselineTools.Missing("losetup", "util-linux")),
                BaselineTools.missing(true, all::contains, p -> true));
        assertEquals(List.of(), BaselineTools.note(List.of(), true));
        List<String> note = BaselineTools.note(List.of(), false);
        assertEquals(1, note.size());
        assertTrue(note.getFirst().startsWith("baselines: not root"), note.toString());
    }
}
