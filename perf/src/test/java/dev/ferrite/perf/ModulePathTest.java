package dev.ferrite.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.StringWriter;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What an application on the module path can reach. A small application module that requires
 * {@code dev.ferrite.dir} is compiled against the engine modules' descriptors and run in its own JVM; then
 * one-line programs that touch each kind of internal (node formats, buffers, the journal, the
 * downcalls) must fail to compile. perf itself is on the class path, where descriptors do not apply.
 */
class ModulePathTest {
    private static final String APP_INFO = """
            module app {
                requires dev.ferrite.dir;
            }
            """;

    private static final String APP_MAIN = """
            package app;

            import dev.ferrite.btree.CacheStats;
            import dev.ferrite.dir.InodeStat;
            import dev.ferrite.dir.Namespace;
            import dev.ferrite.dir.NamespaceException;
            import dev.ferrite.dir.Volume;
            import dev.ferrite.dir.VolumeOptions;
            import dev.ferrite.io.FerriteException;
            import dev.ferrite.io.MemoryDevice;
            import dev.ferrite.journal.JournalOptions;
            import dev.ferrite.journal.JournalStats;

            public class Main {
                public static void main(String[] args) {
                    VolumeOptions options = VolumeOptions.defaults().withJournal(JournalOptions.defaults());
                    try (MemoryDevice device = MemoryDevice.create(16_384, 4096)) {
                        Volume.format(device, options);
                        try (Volume volume = Volume.open(device, options)) {
                            Namespace ns = volume.namespace();
                            ns.mkdir("/docs", 0755);
                            ns.create("/docs/readme", 0644, true);
                            InodeStat st = ns.stat("/docs/readme");
                            try {
                                ns.mkdir("/docs", 0755);
                                throw new AssertionError("mkdir of an existing directory succeeded");
                            } catch (NamespaceException expected) {
                                FerriteException asBase = expected;
                                System.out.println("errno " + asBase.getClass().getSimpleName());
                            }
                            JournalStats js = volume.journalStats();
                            CacheStats cs = volume.cacheStats();
                            System.out.println("ok " + ns.list("/docs").size() + " " + st.isRegularFile() + " "
                                    + (js.commits() > 0) + " " + (cs.frames() > 0));
                        }
                    }
                }
            }
            """;

    @Test
    void anApplicationOnTheModulePathUsesTheVolumeAPI(@TempDir Path tmp) throws Exception {
        Path src = tmp.resolve("src/app");
        Files.createDirectories(src.resolve("app"));
        Files.writeString(src.resolve("module-info.java"), APP_INFO);
        Files.writeString(src.resolve("app/Main.java"), APP_MAIN);
        Path out = tmp.resolve("out");
        String errors = compile(out, src.resolve("module-info.java"), src.resolve("app/Main.java"));
        assertEquals("", errors, "the application module does not compile against the public API");

        List<String> command = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=dev.ferrite.io", "--module-path", modulePath() + File.pathSeparator + out,
                "--module", "app/app.Main");
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the application did not finish in 60 s");
        String output = new String(p.getInputStream().readAllBytes());
        assertEquals(0, p.exitValue(), "the application failed:\n" + output);
        assertTrue(output.contains("ok 1 true true true"), output);
        assertTrue(output.contains("errno NamespaceException"), output);
    }

    @Test
    void internalsAreNotReachable(@TempDir Path tmp) throws IOException {
        Map<String, String> internals = Map.of(
                "dev.ferrite.io.internal.OffHeap", "io's off-heap regions",
                "dev.ferrite.io.internal.OnDisk", "the on-disk byte order",
                "dev.ferrite.io.sys.Posix", "the downcalls",
                "dev.ferrite.journal.internal.Journal", "the log",
                "dev.ferrite.btree.internal.BTreeNodeFormat", "the node format",
                "dev.ferrite.btree.internal.Buffer", "cached buffers",
                "dev.ferrite.btree.internal.BufferCache", "the buffer cache",
                "dev.ferrite.btree.internal.TreeWalk", "tree walks");
        for (Map.Entry<String, String> e : internals.entrySet()) {
            String type = e.getKey();
            Path src = tmp.resolve(type);
            Files.createDirectories(src.resolve("app"));
            Files.writeString(src.resolve("module-info.java"), APP_INFO);
            Files.writeString(src.resolve("app/Probe.java"),
                    "package app;\npublic class Probe {\n    Class<?> c = " + type + ".class;\n}\n");
            String errors = compile(tmp.resolve(type + ".out"), src.resolve("module-info.java"), src.resolve("app/Probe.java"));
            assertTrue(errors.contains("is not visible") || errors.contains("does not export"),
                    e.getValue() + " (" + type + ") is reachable from an application module; compiler said: [" + errors + "]");
        }
    }

    /**
     * The packages each engine module exports to everyone, and those it exports only to named modules; and
     * that no main module holds a test kit package.
     */
    @Test
    void eachModuleExportsItsApiAndQualifiesItsInternals() {
        Map<String, String> exports = new TreeMap<>();
        for (ModuleReference ref : ModuleFinder.of(modulePathEntries().toArray(Path[]::new)).findAll()) {
            ModuleDescriptor d = ref.descriptor();
            if (d.name().startsWith("dev.ferrite.")) {
                assertTrue(d.packages().stream().noneMatch(p -> p.endsWith(".testkit")),
                        d.name() + " holds test code: " + d.packages());
                exports.put(d.name(), d.exports().stream()
                        .map(x -> x.source() + (x.isQualified() ? " to " + new TreeSet<>(x.targets()) : ""))
                        .sorted().collect(Collectors.joining("; ")));
            }
        }
        assertEquals(Map.of(
                "dev.ferrite.io", "dev.ferrite.io; dev.ferrite.io.internal to [dev.ferrite.btree, dev.ferrite.dir, dev.ferrite.journal]",
                "dev.ferrite.journal", "dev.ferrite.journal; dev.ferrite.journal.internal to [dev.ferrite.btree, dev.ferrite.dir]",
                "dev.ferrite.btree", "dev.ferrite.btree; dev.ferrite.btree.internal to [dev.ferrite.dir]",
                "dev.ferrite.dir", "dev.ferrite.dir",
                "dev.ferrite.fuse", ""), exports); // fuse only provides dir's FileSystemProvider
    }

    private static String compile(Path out, Path... sources) {
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        StringWriter diagnostics = new StringWriter();
        List<String> args = new ArrayList<>(List.of("-d", out.toString(), "--module-path", modulePath()));
        javac.getTask(diagnostics, null, null, args, null,
                javac.getStandardFileManager(null, null, null).getJavaFileObjects(sources)).call();
        return diagnostics.toString().strip();
    }

    private static String modulePath() {
        return modulePathEntries().stream().map(Path::toString).collect(Collectors.joining(File.pathSeparator));
    }

    /** The engine modules (class directories or jars holding a descriptor) and the libraries they require. */
    private static List<Path> modulePathEntries() {
        Set<String> libraries = Set.of("jctools-core", "disruptor");
        List<Path> entries = new ArrayList<>();
        for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
            Path p = Path.of(e);
            String name = p.getFileName().toString();
            boolean engine = Files.isDirectory(p) ? Files.exists(p.resolve("module-info.class"))
                    : name.startsWith("ferrite-") && !name.contains("tests");
            if (engine || libraries.stream().anyMatch(name::startsWith)) {
                entries.add(p);
            }
        }
        return entries;
    }
}
