package dev.ferrite.perf.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

import dev.ferrite.perf.bench.DbenchLoadfile.Kind;
import dev.ferrite.perf.bench.DbenchLoadfile.Op;

import org.junit.jupiter.api.Test;

class DbenchLoadfileTest {
    static String sample() throws IOException {
        try (InputStream in = DbenchLoadfileTest.class.getResourceAsStream("dbench-loadfile.txt")) {
            return new String(in.readAllBytes(), StandardCharsets.ISO_8859_1);
        }
    }

    @Test
    void parsesEveryOperationWithItsPathsNumbersAndStatus() throws IOException {
        DbenchLoadfile load = DbenchLoadfile.parse(sample(), "sample");
        List<Op> ops = load.ops();
        assertEquals(53, ops.size()); // 55 lines less the two comments
        Op first = ops.getFirst();
        assertEquals(new Op(3, Kind.DELTREE, 0, -1, 0, 0, 0, 0, NtStatus.OK), first);
        assertEquals("/clients/client1", load.paths().get(first.path()));

        Op create = ops.get(2);
        assertEquals(Kind.NTCREATEX, create.kind());
        assertEquals(0x1, create.a());
        assertEquals(2, create.b());
        assertEquals(700, create.c());
        assertEquals(first.path(), create.path(), "a path named again is the same interned path");

        Op write = ops.stream().filter(o -> o.kind() == Kind.WRITEX).findFirst().orElseThrow();
        assertEquals(new Op(15, Kind.WRITEX, -1, -1, 703, 9999, 1, 1, NtStatus.OK), write);
        Op rename = ops.stream().filter(o -> o.kind() == Kind.RENAME).findFirst().orElseThrow();
        assertEquals("/clients/client1/notes/draft.txt", load.paths().get(rename.path()));
        assertEquals("/clients/client1/notes/final.txt", load.paths().get(rename.path2()));
        assertEquals(NtStatus.OBJECT_PATH_NOT_FOUND, ops.get(7).expected());
        Op unlock = ops.get(22);
        assertEquals(new Op(25, Kind.UNLOCKX, -1, -1, 703, 17000, 300, 0, NtStatus.RANGE_NOT_LOCKED), unlock);

        Op stamped = ops.get(ops.size() - 3); // "0.125 QUERY_PATH_INFORMATION ... 0x00000000"
        assertEquals(Kind.QUERY_PATH_INFORMATION, stamped.kind());
        assertEquals(1004, stamped.a());
        assertEquals(NtStatus.OK, stamped.expected());
        assertEquals(10000, load.maxIoSize());
        assertEquals(Arrays.stream(Kind.values()).toList(),
                Arrays.stream(Kind.values()).filter(k -> ops.stream().anyMatch(o -> o.kind() == k)).toList(),
                "the sample holds every operation");
    }

    @Test
    void eachClientReplaysThePathsInItsOwnTree() {
        DbenchLoadfile load = DbenchLoadfile.parse("""
                NTCreateX "\\clients\\client1\\a\\client10.doc" 0x40 0x2 7 NT_STATUS_OK
                Rename "\\clients\\client1\\x" "\\clients\\client1\\y" NT_STATUS_OK
                """, "t");
        assertArrayEquals(new String[] {"/mnt/clients/client3/a/client30.doc", "/mnt/clients/client3/x",
                "/mnt/clients/client3/y"}, load.clientPaths("/mnt", "client3"));
    }

    @Test
    void namesCaseInsensitiveAndBothSpellings() {
        DbenchLoadfile load = DbenchLoadfile.parse("qpathinfo \"\\a\" 1004 NT_STATUS_OK\nWRITEX 1 0 1 1 NT_STATUS_OK\n", "t");
        assertEquals(List.of(Kind.QUERY_PATH_INFORMATION, Kind.WRITEX), load.ops().stream().map(Op::kind).toList());
    }

    @Test
    void refusesWhatItCannotReplayNamingTheLine() {
        assertEquals("t:2: 'SMBopenX' is not a NetBench operation this replay knows: SMBopenX \"\\a\" NT_STATUS_OK",
                refused("Close 1 NT_STATUS_OK\nSMBopenX \"\\a\" NT_STATUS_OK\n"));
        assertEquals("t:1: WriteX takes 4 numbers then a status, not 3 fields: WriteX 1 0 5 NT_STATUS_OK",
                refused("WriteX 1 0 5 NT_STATUS_OK"));
        assertEquals("t:1: Rename takes 2 paths then a status, not 1 field: Rename \"\\a\" NT_STATUS_OK",
                refused("Rename \"\\a\" NT_STATUS_OK"));
        assertEquals("t:1: random or relative number '*%1024' (dbench's scripted loadfiles) is not supported:"
                + " ReadX 1 *%1024 4096 4096 NT_STATUS_OK", refused("ReadX 1 *%1024 4096 4096 NT_STATUS_OK"));
        assertEquals("t:1: unknown status NT_STATUS_BOGUS: Close 1 NT_STATUS_BOGUS", refused("Close 1 NT_STATUS_BOGUS"));
        assertEquals("t:1: status OK is neither NT_STATUS_<NAME> nor a 0x code: Close 1 OK", refused("Close 1 OK"));
        assertEquals("t:1: path 'a/b' does not start with a backslash: Unlink \"a\\b\" 0x6 NT_STATUS_OK",
                refused("Unlink \"a\\b\" 0x6 NT_STATUS_OK"));
        assertEquals("t:1: unbalanced quote: Unlink \"\\a 0x6 NT_STATUS_OK", refused("Unlink \"\\a 0x6 NT_STATUS_OK"));
        assertEquals("t:1: offset 0, size 100 and returned size 200 must be 0 <= returned <= size <= 16777216, offset >= 0:"
                + " ReadX 1 0 100 200 NT_STATUS_OK", refused("ReadX 1 0 100 200 NT_STATUS_OK"));
        assertEquals("t:1: 'ten' is not a number: Close ten NT_STATUS_OK", refused("Close ten NT_STATUS_OK"));
        assertEquals("t: no operations", refused("# nothing\n\n"));
    }

    private static String refused(String text) {
        return assertThrows(IllegalArgumentException.class, () -> DbenchLoadfile.parse(text, "t")).getMessage();
    }
}
