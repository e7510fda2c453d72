package dev.ferrite.perf.fuzz;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.stream.LongStream;

import dev.ferrite.io.BlockDevice;
import dev.ferrite.journal.internal.LogRecordFormat;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The fuzzer in the default suite: every recipe of the corpus (images that once failed), then a few
 * hundred generated cases, in child JVMs; and the runner's handling of each kind of failure.
 */
class FuzzTest {
    private static final long SEED = Long.getLong("ferrite.seed", 1);

    @Test
    void corpusReplaysWithoutFailures() throws Exception {
        List<String> recipes;
        try (InputStream in = FuzzTest.class.getResourceAsStream("/fuzz-corpus.txt")) {
            recipes = FuzzCommand.corpus(Arrays.asList(new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n")));
        }
        for (String r : recipes) {
            assertEquals(r, Recipe.parse(r).toString(), "a corpus line that does not read back as itself");
        }
        assertNoFailures(run(recipes.stream().map(r -> "run " + r).toList(), 2, 30_000), "corpus");
    }

    @Test
    void generatedCasesGiveFerriteAnswersOnly() throws Exception {
        List<String> cmds = LongStream.range(0, 200).mapToObj(i -> "gen " + (SEED * 1_000_000 + i)).toList();
        assertNoFailures(run(cmds, 2, 30_000), "generated cases from -Dferrite.seed=" + SEED);
    }

    @Test
    @Tag("stress")
    void manyMoreGeneratedCases() throws Exception {
        List<String> cmds = LongStream.range(0, 20_000).mapToObj(i -> "gen " + (SEED * 1_000_000 + i)).toList();
        assertNoFailures(run(cmds, 2, 30_000), "generated cases from -Dferrite.seed=" + SEED);
    }

    /** An escaped exception, a hang and a JVM crash are each reported, and the next case runs in a fresh child. */
    @Test
    void runnerReportsEachKindOfFailureAndGoesOn() throws Exception {
        List<FuzzRunner.Result> rs = run(List.of("selftest npe", "selftest ok", "selftest hang", "selftest crash", "selftest ok"), 1, 3_000);
        assertEquals(5, rs.size(), rs.toString());
        assertTrue(rs.get(0).failed() && rs.get(0).outcome().startsWith("java.lang.NullPointerException: selftest"), rs.get(0).toString());
        assertTrue(!rs.get(1).failed(), rs.get(1).toString());
        assertTrue(rs.get(2).failed() && rs.get(2).outcome().startsWith("hang: "), rs.get(2).toString());
        assertTrue(rs.get(3).failed() && rs.get(3).outcome().startsWith("child JVM died (exit code 134)"), rs.get(3).toString());
        assertTrue(!rs.get(4).failed(), rs.get(4).toString());
    }

    /** A recipe names blocks: each build of a base image must put every metadata block and file block in the same place. */
    @Test
    void baseImagesPlaceBlocksTheSameEveryTime() {
        for (BaseImage.Kind kind : BaseImage.Kind.values()) {
            BaseImage a = BaseImage.build(kind), b = BaseImage.build(kind);
            try (var da = a.device; var db = b.device) {
                assertEquals(a.byMagic.keySet(), b.byMagic.keySet(), kind.toString());
                a.byMagic.forEach((magic, blocks) -> assertArrayEquals(blocks, b.byMagic.get(magic), kind + " magic 0x" + Integer.toHexString(magic)));
                assertArrayEquals(a.byRole.get(BaseImage.Role.DATA), b.byRole.get(BaseImage.Role.DATA), kind + " file data");
            }
        }
    }

    @Test
    void recipesReadBackAsWritten() {
        String line = "dirty flip:3:17:2 flipc:900:40:7 set:1:72:8:ffffffffffffffff zero:88 swap:300:301 graft:400:410 trunc:5000"
                + " logf:12:7:set:0 logf:12:30:add:ffffffffffffffff logf:40:3:xor:80";
        assertEquals(line, Recipe.parse(line).toString());
    }

    /** A log-field mutation changes the field and seals the record again: its stamps and CRC32C still verify. */
    @Test
    void logFieldMutationsKeepTheRecordsChecksumValid() {
        BaseImage dirty = BaseImage.build(BaseImage.Kind.DIRTY);
        try (var base = dirty.device; Arena arena = Arena.ofConfined()) {
            assertTrue(dirty.logRecords.length > 0, "the dirty image has log records");
            long header = dirty.logRecords[0];
            MemorySegment before = arena.allocate(BaseImage.BLOCK_SIZE, BlockDevice.BUFFER_ALIGNMENT);
            base.read(header, before);
            long blocks = LogRecordFormat.recordBlocks(before);
            // field 10 is the header's op count (u32 at byte 64), which no sector stamp covers
            try (BlockDevice mutated = Recipe.parse("dirty logf:" + header + ":10:set:7").apply(base)) {
                MemorySegment rec = arena.allocate(blocks * BaseImage.BLOCK_SIZE, BlockDevice.BUFFER_ALIGNMENT);
                mutated.read(header, rec);
                assertEquals(7, rec.get(ValueLayout.JAVA_INT_UNALIGNED, 64));
                assertTrue(LogRecordFormat.rewriteField(rec, BaseImage.BLOCK_SIZE, 10, v -> v), "the mutated record unseals intact");
                MemorySegment flipped = arena.allocate(blocks * BaseImage.BLOCK_SIZE, BlockDevice.BUFFER_ALIGNMENT);
                base.read(header, flipped);
                flipped.set(ValueLayout.JAVA_BYTE, 100, (byte) (flipped.get(ValueLayout.JAVA_BYTE, 100) ^ 1));
                assertTrue(!LogRecordFormat.rewriteField(flipped, BaseImage.BLOCK_SIZE, 10, v -> 7), "a damaged record is left alone");
                assertEquals(before.get(ValueLayout.JAVA_INT_UNALIGNED, 64), flipped.get(ValueLayout.JAVA_INT_UNALIGNED, 64));
            }
        }
    }

    /** Inline records (one block: a small checkpoint's payload in its header block) are forged too. */
    @Test
    void logFieldMutationsReachInlineRecords() {
        BaseImage dirty = BaseImage.build(BaseImage.Kind.DIRTY);
        try (var base = dirty.device; Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(BaseImage.BLOCK_SIZE, BlockDevice.BUFFER_ALIGNMENT);
            long inline = -1;
            for (long header : dirty.logRecords) {
                base.read(header, b);
                if (LogRecordFormat.recordBlocks(b) == 1) {
                    inline = header;
                    break;
                }
            }
            assertTrue(inline >= 0, "the dirty image has an inline record");
            try (BlockDevice mutated = Recipe.parse("dirty logf:" + inline + ":10:set:7").apply(base)) {
                mutated.read(inline, b);
                assertEquals(7, b.get(ValueLayout.JAVA_INT_UNALIGNED, 64), "the op count forged");
                assertTrue(LogRecordFormat.rewriteField(b, BaseImage.BLOCK_SIZE, 10, v -> v), "the forged record unseals intact");
            }
        }
    }

    /**
     * Every header field and the first ops' fields of the first, a middle and the last log record of the
     * dirty image, each set to all ones and moved by one, CRC recomputed: recovery refuses the log with a
     * Ferrite exception or recovers a volume that passes the checks.
     */
    @Test
    void logRecordFieldMutationsWithValidChecksumsGiveFerriteAnswersOnly() throws Exception {
        long[] records;
        BaseImage dirty = BaseImage.build(BaseImage.Kind.DIRTY);
        try (var base = dirty.device) {
            records = dirty.logRecords;
        }
        List<String> cmds = new ArrayList<>();
        for (long header : new long[] {records[0], records[records.length / 2], records[records.length - 1]}) {
            for (int field = 0; field < 24; field++) {
                cmds.add("run dirty logf:" + header + ":" + field + ":set:ffffffffffffffff");
                cmds.add("run dirty logf:" + header + ":" + field + ":add:1");
            }
        }
        assertNoFailures(run(cmds, 2, 30_000), "log record fields");
    }

    private static List<FuzzRunner.Result> run(List<String> cmds, int threads, long caseLimitMillis) throws IOException, InterruptedException {
        List<FuzzRunner.Result> results = Collections.synchronizedList(new ArrayList<>());
        new FuzzRunner(threads, caseLimitMillis, cmds.size()).run(cmds.iterator(), System.nanoTime() + 3_600_000_000_000L, results::add);
        return results;
    }

    private static void assertNoFailures(List<FuzzRunner.Result> results, String what) {
        List<String> failed = results.stream().filter(FuzzRunner.Result::failed).map(r -> r.recipe() + "  # " + r.outcome()).toList();
        assertTrue(failed.isEmpty(), what + ": " + failed.size() + " of " + results.size() + " cases failed:\n" + String.join("\n", failed));
    }
}
