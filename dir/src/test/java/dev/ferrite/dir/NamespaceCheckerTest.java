package dev.ferrite.dir;

import java.util.Optional;
import java.util.OptionalLong;
import java.util.function.Predicate;

import dev.ferrite.btree.internal.Buffer;
import dev.ferrite.btree.internal.Txn;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The namespace check's report: each problem's kind, inode and path, and the counts of what it walked. */
class NamespaceCheckerTest {

    @Test
    void aSoundVolumeGivesACleanReportWithItsCounts() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/a", 0755);
            ns.mkdir("/a/b", 0755);
            ns.create("/a/b/f", 0644, true);
            CheckReport report = ns.check();
            assertTrue(report.clean(), report.toString());
            assertEquals(3, report.directories(), report.toString());
            assertEquals(4, report.inodes(), report.toString());
        }
    }

    @Test
    void aWrongLinkCountIsAnInodeProblemNamingTheFileAndItsPath() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/a", 0755);
            long ino = ns.create("/a/f", 0644, true);
            setNlink(v, ns, ino, 2);
            CheckReport report = ns.check();
            assertHas(report, CheckProblem.Kind.INODE, ino, "/a/f", p -> p.detail().contains("2 links but 1 names"));
        }
    }

    @Test
    void anEntryNamingAFreeInodeIsADirectoryProblemNamingItsPath() {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/d", 0755);
            long ino = ns.create("/d/x", 0644, true);
            try (Txn txn = Txn.begin(v.cache(), 2)) { // the record freed behind the entry's back
                Buffer b = ns.records.lockRecord(txn, ino);
                int rec = ns.records.rec(ino);
                b.data().asSlice(rec + InodeFormat.MODE, 2).fill((byte) 0);
                txn.log(b, rec, InodeFormat.INLINE);
                txn.commit();
            }
            CheckReport report = ns.check();
            assertHas(report, CheckProblem.Kind.DIRECTORY, ino, "/d/x", p -> p.detail().contains("names free inode " + ino));
        }
    }

    private static void setNlink(Volume v, Namespace ns, long ino, int nlink) {
        try (Txn txn = Txn.begin(v.cache(), 2)) {
            Buffer b = ns.records.lockRecord(txn, ino);
            int rec = ns.records.rec(ino);
            InodeFormat.setNlink(b.data(), rec, nlink);
            txn.log(b, rec, InodeFormat.INLINE);
            txn.commit();
        }
    }

    private static void assertHas(CheckReport report, CheckProblem.Kind kind, long ino, String path, Predicate<CheckProblem> detail) {
        assertTrue(report.problems().stream().anyMatch(p -> p.kind() == kind && p.inode().equals(OptionalLong.of(ino))
                && p.path().equals(Optional.of(path)) && detail.test(p)), report.toString());
    }
}
