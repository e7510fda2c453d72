package dev.ferrite.perf;

import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.Reader;
import java.lang.management.ManagementFactory;
import java.nio.charset.Charset;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import picocli.CommandLine;

/**
 * A run of this command line in a JVM of its own, started with this JVM's flags and class path: what the
 * default suite does for each workload ({@link BenchSuite}) and {@code bench kv} for each store, so that
 * what ran before leaves nothing behind (a grown heap, JIT code compiled for other profiles, threads).
 */
final class ChildJvm {
    private ChildJvm() {
    }

    /** This JVM's flags, as a child gets them before its own. */
    static List<String> flags() {
        return ManagementFactory.getRuntimeMXBean().getInputArguments();
    }

    /**
     * Runs the CLI with {@code args} in a new JVM with this one's flags and {@code extraFlags} after them,
     * its output copied to {@code cli}'s as it comes (progress lines included); returns its exit status.
     * A signal that stops this JVM stops the child too; an interrupt does not abandon it half-way (its loop
     * devices and files are its own to remove).
     */
    static int run(CommandLine cli, List<String> extraFlags, List<String> args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(flags());
        command.addAll(extraFlags);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), Main.class.getName()));
        command.addAll(args);
        Process child = new ProcessBuilder(command).redirectInput(ProcessBuilder.Redirect.INHERIT).start();
        Thread stop = new Thread(child::destroy);
        Runtime.getRuntime().addShutdownHook(stop);
        Thread errors = Thread.ofPlatform().daemon().name("ferrite-child-stderr").start(() -> copy(child.getErrorStream(), cli.getErr()));
        copy(child.getInputStream(), cli.getOut());
        boolean interrupted = false;
        while (true) {
            try {
                child.waitFor();
                errors.join();
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        Runtime.getRuntime().removeShutdownHook(stop);
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        return child.exitValue();
    }

    private static void copy(InputStream from, PrintWriter to) {
        try (Reader in = new InputStreamReader(from, Charset.defaultCharset())) {
            char[] chunk = new char[8192];
            for (int n; (n = in.read(chunk)) >= 0; ) {
                to.write(chunk, 0, n);
                to.flush();
            }
        } catch (IOException e) {
            to.println("ferrite: a child JVM's output was cut short: " + e.getMessage());
            to.flush();
        }
    }
}
