package dev.ferrite.perf;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URI;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.ToolProvider;

import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Compiles and runs every {@code ```java} block of README.md and docs/*.md, so that no snippet rots.
 * The convention (stated in docs/README.md): a block is a whole compilation unit, imports and one
 * top-level class with {@code public static void main(String[] args)}; {@code args[0]} is an empty
 * scratch directory for the snippet's files. A block is compiled against this test's class path (every
 * engine module) and its {@code main} run in this JVM; a failure names the Markdown file and line.
 */
class DocSnippetsTest {
    private static final Pattern CLASS = Pattern.compile("(?m)^(?:public\\s+)?(?:final\\s+)?class\\s+(\\w+)");

    @TempDir
    Path scratch;

    /** One fenced block: its file relative to the repository root, the line of its opening fence, its text. */
    record Snippet(String file, int line, String source) {
        String where() {
            return file + ":" + line;
        }
    }

    @TestFactory
    Stream<DynamicTest> everySnippetCompilesAndRuns() throws IOException {
        Path root = repositoryRoot();
        List<Path> files = new ArrayList<>();
        files.add(root.resolve("README.md"));
        try (Stream<Path> docs = Files.list(root.resolve("docs"))) {
            docs.filter(p -> p.getFileName().toString().endsWith(".md")).sorted().forEach(files::add);
        }
        List<Snippet> snippets = new ArrayList<>();
        for (Path f : files) {
            snippets.addAll(snippets(root, f));
        }
        assertFalse(snippets.isEmpty(), "no ```java blocks found in README.md or docs/*.md under " + root);
        return snippets.stream().map(s -> DynamicTest.dynamicTest(s.where(), () -> compileAndRun(s)));
    }

    /** The repository root: the nearest directory from the working directory up holding README.md and docs/. */
    private static Path repositoryRoot() {
        for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
            if (Files.isRegularFile(d.resolve("README.md")) && Files.isDirectory(d.resolve("docs"))) {
                return d;
            }
        }
        return fail("no directory holding README.md and docs/ above " + Path.of("").toAbsolutePath());
    }

    static List<Snippet> snippets(Path root, Path file) throws IOException {
        String name = root.relativize(file).toString();
        List<String> lines = Files.readAllLines(file);
        List<Snippet> out = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            if (!lines.get(i).strip().equals("```java")) {
                continue;
            }
            int start = i + 1;
            StringBuilder sb = new StringBuilder();
            for (i = start; i < lines.size() && !lines.get(i).strip().equals("```"); i++) {
                sb.append(lines.get(i)).append('\n');
            }
            if (i == lines.size()) {
                fail(name + ":" + start + ": ```java block never closed");
            }
            out.add(new Snippet(name, start, sb.toString())); // start: the fence's line, 1-based
        }
        return out;
    }

    private void compileAndRun(Snippet s) throws Exception {
        Matcher m = CLASS.matcher(s.source());
        if (!m.find()) {
            fail(s.where() + ": a snippet must be one top-level class with main(String[]) (see docs/README.md)");
        }
        String name = m.group(1);
        Path dir = Files.createTempDirectory(scratch, name);
        Path classes = Files.createDirectory(dir.resolve("classes"));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        assertNotNull(javac, "no system Java compiler: run the tests on a JDK");
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        JavaFileObject unit = new SimpleJavaFileObject(URI.create("string:///" + name + ".java"), JavaFileObject.Kind.SOURCE) {
            @Override
            public CharSequence getCharContent(boolean ignoreEncodingErrors) {
                return s.source();
            }
        };
        List<String> options = List.of("-proc:none", "-classpath", System.getProperty("java.class.path"), "-d", classes.toString());
        Boolean ok = javac.getTask(null, null, diagnostics, options, null, List.of(unit)).call();
        if (!ok) {
            StringBuilder msg = new StringBuilder(s.where() + ": snippet " + name + " does not compile");
            for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
                if (d.getKind() == Diagnostic.Kind.ERROR) {
                    msg.append("\n  ").append(s.file()).append(':').append(s.line() + d.getLineNumber())
                            .append(": ").append(d.getMessage(Locale.ROOT));
                }
            }
            fail(msg.toString());
        }
        Path work = Files.createDirectory(dir.resolve("work"));
        try (URLClassLoader loader = new URLClassLoader(new URL[] {classes.toUri().toURL()}, getClass().getClassLoader())) {
            Method main = loader.loadClass(name).getMethod("main", String[].class);
            main.invoke(null, (Object) new String[] {work.toString()});
        } catch (NoSuchMethodException e) {
            fail(s.where() + ": snippet " + name + " has no public static main(String[])");
        } catch (InvocationTargetException e) {
            Throwable t = e.getCause();
            throw new AssertionError(s.file() + ":" + failingLine(s, name, t) + ": snippet " + name
                    + " failed: " + t, t);
        }
    }

    /** The Markdown line of the innermost frame of {@code t} in the snippet's code, else the fence's. */
    private static int failingLine(Snippet s, String name, Throwable t) {
        for (StackTraceElement f : t.getStackTrace()) {
            if ((f.getClassName().equals(name) || f.getClassName().startsWith(name + "$")) && f.getLineNumber() > 0) {
                return s.line() + f.getLineNumber();
            }
        }
        return s.line();
    }
}
