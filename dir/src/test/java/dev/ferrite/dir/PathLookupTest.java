package dev.ferrite.dir;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Consumer;
import java.util.zip.CRC32C;

import dev.ferrite.io.Errno;
import dev.ferrite.io.MemoryDevice;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

import static dev.ferrite.dir.NamespaceTest.assertErrno;
import static dev.ferrite.dir.VolumeFixtures.OPTIONS;
import static dev.ferrite.dir.VolumeFixtures.assertChecked;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Path resolution read in place: slashes, dots, names at and past the length limit, non-ASCII names,
 * symlinks in the middle and at the end, errno precedence; each in an inline directory and in a tree
 * directory. And the per-thread lookup scratch: a name never sees the one looked up before it.
 */
class PathLookupTest {
    /** Entries that keep /d inline, and enough to make it a tree. */
    private static final int INLINE = 0, TREE = 300;

    /** Builds /d (with {@code filler} extra files), /d/f, /d/sub/g, /file and some symlinks. */
    private static void populate(Namespace ns, int filler) {
        ns.mkdir("/d", 0755);
        for (int i = 0; i < filler; i++) {
            ns.create("/d/filler" + i, 0644, true);
        }
        ns.create("/d/f", 0644, true);
        ns.mkdir("/d/sub", 0755);
        ns.create("/d/sub/g", 0644, true);
        ns.create("/file", 0644, true);
        ns.symlink("d", "/rel");            // relative, to a directory
        ns.symlink("/d/sub", "/abs");       // absolute, to a directory
        ns.symlink("sub/", "/d/slashed");   // target ending in a slash
        ns.symlink("/", "/root");
        ns.symlink("../f", "/d/sub/up");    // through ".."
        ns.symlink("rel", "/chain");        // a symlink to a symlink
        ns.symlink("missing", "/dangling");
        ns.symlink("/file", "/tofile");
        ns.symlink("loop2", "/loop1");
        ns.symlink("loop1", "/loop2");
    }

    /** Runs {@code test} on a fresh volume {@link #populate}d with {@code filler}, and checks the volume after. */
    private static void onPopulated(int filler, Consumer<Namespace> test) {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            populate(ns, filler);
            test.accept(ns);
            assertChecked(ns);
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {INLINE, TREE})
    void slashesDotsAndSymlinksInTheMiddle(int filler) {
        onPopulated(filler, ns -> {
            long d = ns.lookup("/d"), f = ns.lookup("/d/f"), sub = ns.lookup("/d/sub"), g = ns.lookup("/d/sub/g");
            long root = ns.lookup("/");
            assertEquals(root, ns.lookup("//"));
            assertEquals(root, ns.lookup("/./d/.."));
            assertErrno(Errno.EINVAL, () -> ns.lookup("/./..")); // Ferrite's answer above the root
            assertEquals(f, ns.lookup("//d//f"));
            assertEquals(d, ns.lookup("/d/"));
            assertEquals(d, ns.lookup("/d//."));
            assertEquals(g, ns.lookup("/d/./sub/../sub/g"));
            assertEquals(d, ns.lookup("/d/sub/.."));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/d/f/"));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/d/f/."));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/d/f/.."));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/d/f/x"));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/d/x/f"));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/d/F"));

            assertEquals(f, ns.lookup("/rel/f"));
            assertEquals(f, ns.lookup("/rel//f"));
            assertEquals(g, ns.lookup("/abs/g"));
            assertEquals(g, ns.lookup("/d/slashed/g"));
            assertEquals(sub, ns.lookup("/d/slashed"));
            assertEquals(f, ns.lookup("/chain/sub/up"));
            assertEquals(g, ns.lookup("/root/root/d/sub/g"));
            assertEquals(f, ns.lookup("/abs/up"));
            assertTrue(ns.lstat("/abs/up").isSymlink());
            assertTrue(ns.lstat("/chain").isSymlink());
            assertEquals(d, ns.lstat("/chain/").ino()); // a trailing slash follows the last symlink
            assertEquals(d, ns.lstat("/chain/.").ino());
            assertEquals(sub, ns.lstat("/d/slashed/").ino());
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/tofile/"));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/tofile/x"));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/dangling"));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/dangling/x"));
            assertTrue(ns.lstat("/dangling").isSymlink());
            assertErrno(Errno.ELOOP, () -> ns.lookup("/loop1"));
            assertErrno(Errno.ELOOP, () -> ns.lookup("/loop1/x"));
            assertTrue(ns.lstat("/loop1").isSymlink());

            // a parent's walk, through symlinks, and a create that follows a final dangling symlink
            long made = ns.create("/rel/sub/new", 0644, true);
            assertEquals(made, ns.lookup("/d/sub/new"));
            assertEquals(made, ns.lookup("/abs/new"));
            long dir = ns.mkdir("/abs/newdir/", 0755);
            assertEquals(dir, ns.lookup("/d/sub/newdir"));
            ns.symlink("d/sub/viadangling", "/dangling2");
            long followed = ns.create("/dangling2", 0644, false);
            assertEquals(followed, ns.lookup("/d/sub/viadangling"));
            assertErrno(Errno.EEXIST, () -> ns.mkdir("/abs/g/", 0755));
            assertErrno(Errno.ENOTDIR, () -> ns.create("/tofile/x", 0644, true));
            assertErrno(Errno.ENOENT, () -> ns.create("/dangling/x", 0644, true));
        });
    }

    @ParameterizedTest
    @ValueSource(ints = {INLINE, TREE})
    void longAndNonAsciiNames(int filler) {
        onPopulated(filler, ns -> {
            String max = "n".repeat(255);
            long atMax = ns.create("/d/" + max, 0644, true);
            assertEquals(atMax, ns.lookup("/d/" + max));
            assertEquals(atMax, ns.lookup("/rel/" + max));
            // names that agree in their first 255 bytes are too long, never the name they start with
            assertErrno(Errno.ENAMETOOLONG, () -> ns.lookup("/d/" + max + "x"));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.lookup("/d/" + max + "y/f"));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.create("/d/" + max + "x", 0644, true));

            String accents = "é".repeat(127); // 254 bytes
            long e = ns.create("/d/" + accents, 0644, true);
            assertEquals(e, ns.lookup("/d/" + accents));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.lookup("/d/" + accents + "é")); // 256 bytes, 128 characters
            assertErrno(Errno.ENOENT, () -> ns.lookup("/d/" + accents + "e")); // 255 bytes
            // create and unlink read the last name in place: measured as precisely as a lookup
            assertErrno(Errno.ENAMETOOLONG, () -> ns.create("/d/" + accents + "é", 0644, true));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.unlink("/d/" + accents + "é"));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.unlink("/d/" + max + "x"));
            assertErrno(Errno.EINVAL, () -> ns.create("/d/a\0b", 0644, true));
            assertErrno(Errno.EINVAL, () -> ns.unlink("/d/" + accents + "\0"));
            ns.unlink("/d/" + accents);
            assertErrno(Errno.ENOENT, () -> ns.lookup("/d/" + accents));
            long again = ns.create("/d/" + accents, 0644, true);
            assertEquals(again, ns.lookup("/d/" + accents));
            String mixed = "Ünïcødé-日本語-\uD83D\uDE00"; // 2-, 3- and 4-byte characters
            long m = ns.mkdir("/d/" + mixed, 0755);
            long inner = ns.create("/d/" + mixed + "/" + mixed, 0644, true);
            assertEquals(m, ns.lookup("/d/" + mixed + "/"));
            assertEquals(inner, ns.lookup("/rel/" + mixed + "/./" + mixed));
            ns.symlink(mixed + "/" + mixed, "/d/pointer");
            assertEquals(inner, ns.lookup("/d/pointer"));
            assertTrue(ns.list("/d/" + mixed).stream().anyMatch(x -> x.name().equals(mixed)));

            // precedence: the directory is checked before the name is measured, the name before its lookup
            String tooLong = "x".repeat(300);
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/file/" + tooLong));
            assertErrno(Errno.ENOTDIR, () -> ns.lookup("/file/" + mixed));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/missing/" + tooLong));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.lookup("/d/" + tooLong + "/missing"));
            assertErrno(Errno.ENAMETOOLONG, () -> ns.lookup("/d/sub/../" + tooLong));
            assertErrno(Errno.ENOENT, () -> ns.lookup("/dangling/../" + tooLong)); // the symlink is followed first
            assertErrno(Errno.EINVAL, () -> ns.lookup("/d/a\0b"));
            assertErrno(Errno.EINVAL, () -> ns.lookup("d/f"));
        });
    }

    /**
     * The scratch a thread looks names up with holds the last name: a shorter name after a longer one,
     * a name that is a prefix of the one before, an encoded name after a plain one, must each be looked
     * up as itself.
     */
    @ParameterizedTest
    @ValueSource(ints = {INLINE, TREE})
    void aLookupNeverSeesTheNameBeforeIt(int filler) {
        onPopulated(filler, ns -> {
            String longName = "ab".repeat(120);
            long abc = ns.create("/d/abc", 0644, true);
            long lng = ns.create("/d/" + longName, 0644, true);
            long accented = ns.create("/d/abé", 0644, true);
            for (int round = 0; round < 3; round++) {
                assertEquals(lng, ns.lookup("/d/" + longName));
                assertErrno(Errno.ENOENT, () -> ns.lookup("/d/ab")); // a prefix of both names before
                assertEquals(abc, ns.lookup("/d/abc"));
                assertErrno(Errno.ENOENT, () -> ns.lookup("/d/" + longName.substring(1)));
                assertEquals(accented, ns.lookup("/d/abé"));
                assertErrno(Errno.ENOENT, () -> ns.lookup("/d/ab"));
                assertErrno(Errno.ENAMETOOLONG, () -> ns.lookup("/d/" + "z".repeat(256)));
                assertEquals(abc, ns.lookup("/d/abc"));
                assertEquals(lng, ns.lookup("/d/" + longName));
            }
        });
    }

    /** A name looked up in a directory handle answers as the same name at the end of a path. */
    @ParameterizedTest
    @ValueSource(ints = {INLINE, TREE})
    void namesInADirectoryHandle(int filler) {
        onPopulated(filler, ns -> {
            String mixed = "Ünïcødé-日本語";
            long m = ns.create("/d/" + mixed, 0644, true);
            try (Handle d = ns.open("/d", Namespace.O_RDONLY); Handle file = ns.open("/file", Namespace.O_RDONLY);
                 Handle root = ns.openRoot()) {
                assertEquals(ns.lookup("/d/f"), ns.lstat(d, "f").ino());
                assertEquals(m, ns.lstat(d, mixed).ino());
                assertEquals(ns.lookup("/d"), ns.lstat(d, ".").ino());
                assertEquals(ns.lookup("/"), ns.lstat(d, "..").ino());
                assertTrue(ns.lstat(root, "rel").isSymlink());
                assertErrno(Errno.ENOENT, () -> ns.lstat(d, "F"));
                assertErrno(Errno.EINVAL, () -> ns.lstat(d, ""));
                assertErrno(Errno.EINVAL, () -> ns.lstat(d, null));
                assertErrno(Errno.EINVAL, () -> ns.lstat(d, "sub/g"));
                assertErrno(Errno.EINVAL, () -> ns.lstat(d, "a\0b"));
                assertErrno(Errno.ENAMETOOLONG, () -> ns.lstat(d, "x".repeat(256)));
                assertErrno(Errno.ENOTDIR, () -> ns.lstat(file, "x".repeat(256)));
                assertErrno(Errno.ENOTDIR, () -> ns.lstat(file, ""));
                assertErrno(Errno.ENOTDIR, () -> ns.lstat(file, "f"));
                assertErrno(Errno.ENOTDIR, () -> ns.lstat(file, ".."));
            }
        });
    }

    /** readdir decodes each inline name through one buffer: names of every length and encoding, paged by cookies. */
    @ParameterizedTest
    @ValueSource(ints = {INLINE, TREE})
    void readdirPagesThroughNamesOfEveryLength(int filler) {
        onPopulated(filler, ns -> {
            ns.mkdir("/d/list", 0755);
            java.util.Set<String> made = new java.util.HashSet<>();
            for (String name : List.of("z".repeat(255), "a", "é".repeat(127), "bb", "日本語\uD83D\uDE00", "c".repeat(40))) {
                ns.create("/d/list/" + name, 0644, true);
                made.add(name);
            }
            java.util.Set<String> listed = new java.util.HashSet<>();
            DirCookie after = DirCookie.START;
            for (boolean end = false; !end; ) {
                DirPage page = ns.readdir("/d/list", after, 4);
                page.entries().forEach(e -> assertTrue(listed.add(e.name()), "listed twice: " + e.name()));
                after = page.next();
                end = page.end();
            }
            assertEquals(made, listed);
            assertTrue(ns.list("/d").stream().anyMatch(e -> e.name().equals("list")));
        });
    }

    /**
     * A thread's readdirs share its cursor and key buffers: paging through a tree directory, with a listing
     * of another tree directory between pages and names inserted meanwhile, returns each name once, with its
     * inode, every name there throughout, and nothing of the other directory.
     */
    @Test
    void readdirPagesStayExactWithTheThreadsCursorReusedAndNamesInserted() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            ns.mkdir("/t", 0755);
            ns.mkdir("/other", 0755);
            java.util.Map<String, Long> stable = new java.util.HashMap<>();
            for (int i = 0; i < TREE; i++) {
                stable.put("stable-" + i, ns.create("/t/stable-" + i, 0644, true));
                ns.create("/other/o" + "x".repeat(i % 200) + i, 0644, true);
            }
            java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
            ExecutorService pool = Executors.newSingleThreadExecutor();
            try {
                Future<Integer> inserter = pool.submit(() -> {
                    int n = 0;
                    while (!stop.get() && n < 3000) {
                        ns.create("/t/new-" + "y".repeat(n % 100) + n, 0644, true);
                        n++;
                    }
                    return n;
                });
                for (int round = 0; round < 10; round++) {
                    java.util.Set<String> seen = new java.util.HashSet<>();
                    DirCookie after = DirCookie.START;
                    for (boolean end = false; !end; ) {
                        DirPage page = ns.readdir("/t", after, 7);
                        for (DirEntry e : page.entries()) {
                            assertTrue(seen.add(e.name()), "listed twice: " + e.name() + ", round " + round);
                            Long ino = stable.get(e.name());
                            assertTrue(ino != null ? ino == e.ino() : e.name().startsWith("new-"), e + ", round " + round);
                        }
                        // the thread's cursor and buffers go to another directory between the pages
                        assertTrue(ns.readdir("/other", DirCookie.START, 5).entries().stream().allMatch(e -> e.name().startsWith("o")));
                        after = page.next();
                        end = page.end();
                    }
                    assertTrue(seen.containsAll(stable.keySet()), "round " + round + " missed a name there throughout");
                }
                stop.set(true);
                int inserted = inserter.get();
                assertEquals(TREE + inserted, ns.list("/t").size());
            } finally {
                pool.shutdownNow();
            }
            assertChecked(ns);
        }
    }

    /** Threads looking up names of different lengths in the same directories each find their own. */
    @Test
    void concurrentLookupsKeepTheirOwnNames() throws Exception {
        try (MemoryDevice dev = VolumeFixtures.formatted(); Volume v = Volume.open(dev, OPTIONS)) {
            Namespace ns = v.namespace();
            populate(ns, TREE);
            ns.mkdir("/i", 0755);
            List<String> names = new ArrayList<>();
            for (int len = 1; len <= 255; len += 23) {
                names.add("q".repeat(len));
            }
            long[] inTree = new long[names.size()], inline = new long[names.size()];
            for (int i = 0; i < names.size(); i++) {
                inTree[i] = ns.create("/d/" + names.get(i), 0644, true);
                inline[i] = ns.create("/i/" + names.get(i), 0644, true);
            }
            int threads = 4;
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            try {
                List<Future<?>> done = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int first = t;
                    done.add(pool.submit(() -> {
                        for (int k = 0; k < 2000; k++) {
                            int i = (first + k * (first + 1)) % names.size();
                            assertEquals(inTree[i], ns.lookup("/d/" + names.get(i)), names.get(i).length() + " bytes in the tree");
                            assertEquals(inline[i], ns.lookup("/i/" + names.get(i)), names.get(i).length() + " bytes inline");
                        }
                        return null;
                    }));
                }
                for (Future<?> f : done) {
                    f.get();
                }
            } finally {
                pool.shutdownNow();
            }
        }
    }

    @Test
    void keysMadeInPlaceAreTheKeysOfTheirNames() {
        CRC32C crc = new CRC32C();
        for (String name : List.of("a", "abc", "x".repeat(255), "Ünïcødé", "日本語\uD83D\uDE00")) {
            byte[] bytes = name.getBytes(StandardCharsets.UTF_8);
            byte[] key = new byte[DirEntryFormat.HASH + DirEntryFormat.MAX_NAME];
            System.arraycopy(bytes, 0, key, DirEntryFormat.HASH, bytes.length);
            int length = DirEntryFormat.keyInPlace(key, bytes.length, crc);
            assertArrayEquals(DirEntryFormat.key(bytes), Arrays.copyOf(key, length), name);
        }
    }

    @Test
    void inlineEntriesCompareAsTheirKeys() {
        MemorySegment b = MemorySegment.ofArray(new byte[64]);
        byte[] entry = DirEntryFormat.key("abc".getBytes(StandardCharsets.UTF_8));
        DirEntryFormat.writeEntry(b, 0, entry, entry.length, 7, InodeFormat.S_IFREG);
        byte[] higher = entry.clone(), lower = entry.clone();
        higher[entry.length - 1]++;
        lower[entry.length - 1]--;
        List<byte[]> probes = List.of(entry, Arrays.copyOf(entry, entry.length - 1), Arrays.copyOf(entry, entry.length + 1),
                higher, lower, DirEntryFormat.key("abd".getBytes(StandardCharsets.UTF_8)));
        for (byte[] probe : probes) {
            byte[] padded = Arrays.copyOf(probe, probe.length + 8); // bytes past the key's length are not compared
            Arrays.fill(padded, probe.length, padded.length, (byte) 0x7f);
            assertEquals(Integer.signum(Arrays.compareUnsigned(entry, probe)),
                    Integer.signum(DirEntryFormat.compareEntryKey(b, 0, MemorySegment.ofArray(padded), probe.length)),
                    Arrays.toString(probe));
        }
    }
}
