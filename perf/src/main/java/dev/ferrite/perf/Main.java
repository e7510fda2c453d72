package dev.ferrite.perf;

import java.io.PrintWriter;
import java.nio.file.FileSystemException;
import java.util.concurrent.Callable;

import dev.ferrite.perf.fuzz.FuzzCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.IVersionProvider;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine.Spec;

/**
 * The {@code ./ferrite} command line. Exit codes: 0 success, 1 the command failed, 2 usage error. Every
 * error is one line on stderr; {@code --verbose} adds the stack trace.
 */
@Command(name = "ferrite", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
        description = "Ferrite: an off-heap block-device storage engine for the JVM. Benchmarks and tools.",
        subcommands = {BenchCommand.class, JmhCommand.class, FormatCommand.class, CheckCommand.class, DumpCommand.class,
                TableCommand.class, MountCommand.class, UmountCommand.class, CrashtestCommand.class, FuzzCommand.class},
        footer = {"", "The launcher also runs:",
                "  ./ferrite test [maven args]   the whole test suite (mvn -B verify)",
                "  ./ferrite build               build now, skipping tests"})
public final class Main implements Callable<Integer> {
    @Option(names = "--verbose", scope = ScopeType.INHERIT, description = "print the stack trace of an error")
    boolean verbose;

    @Spec
    CommandSpec spec;

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    /** The configured command line; tests redirect its output with {@code setOut}/{@code setErr}. */
    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new Main())
                .setExecutionStrategy(Main::execute)
                .setCaseInsensitiveEnumValuesAllowed(true)
                .setParameterExceptionHandler(Main::usageError)
                .setExecutionExceptionHandler((e, failed, parsed) -> failure(e, failed.getErr(), parsed));
        cl.getSubcommands().get("jmh").setUnmatchedOptionsArePositionalParams(true).setStopAtPositional(true);
        return cl;
    }

    @Override
    public Integer call() {
        throw new ParameterException(spec.commandLine(), "a command is required: bench, jmh, format, check, dump, table, mount, umount, crashtest or fuzz");
    }

    /**
     * Runs the command given; with {@code --jfr FILE} (any bench command) inside a JDK Flight Recording
     * of the "profile" settings, written to FILE when the command ends, for JDK Mission Control.
     */
    private static int execute(ParseResult parsed) {
        java.nio.file.Path jfr = null;
        for (ParseResult p = parsed; p != null; p = p.subcommand()) {
            if (p.hasMatchedOption("--jfr")) {
                jfr = p.matchedOptionValue("--jfr", null);
            }
        }
        if (jfr == null) {
            return new CommandLine.RunLast().execute(parsed);
        }
        try (jdk.jfr.Recording recording = new jdk.jfr.Recording(jdk.jfr.Configuration.getConfiguration("profile"))) {
            recording.setDestination(jfr);
            recording.start();
            int code = new CommandLine.RunLast().execute(parsed);
            recording.stop();
            parsed.commandSpec().commandLine().getOut().println("recording: " + jfr.toAbsolutePath());
            return code;
        } catch (java.io.IOException | java.text.ParseException e) {
            throw new CommandLine.ExecutionException(parsed.commandSpec().commandLine(), "--jfr " + jfr + ": " + e.getMessage(), e);
        }
    }

    private static int usageError(ParameterException e, String[] args) {
        CommandLine cl = e.getCommandLine();
        String name = cl.getCommandSpec().qualifiedName();
        cl.getErr().println(name + ": " + e.getMessage() + " (see '" + name + " --help')");
        cl.getErr().flush();
        return 2;
    }

    private static int failure(Exception e, PrintWriter err, ParseResult parsed) {
        // A FileSystemException's message is often just the path; its type says what went wrong.
        String message = e.getMessage() == null ? e.getClass().getName()
                : e instanceof FileSystemException ? e.getClass().getSimpleName() + ": " + e.getMessage()
                : e.getMessage();
        err.println("ferrite: " + message);
        if (verbose(parsed)) {
            e.printStackTrace(err);
        }
        err.flush();
        return 1;
    }

    private static boolean verbose(ParseResult parsed) {
        for (ParseResult p = parsed; p != null; p = p.subcommand()) {
            if (p.hasMatchedOption("--verbose")) {
                return true;
            }
        }
        return false;
    }

    /** {@code ferrite 0.1.0-SNAPSHOT} from the jar manifest, with the JVM and OS it runs on. */
    static final class Version implements IVersionProvider {
        @Override
        public String[] getVersion() {
            String v = Main.class.getPackage().getImplementationVersion();
            return new String[] {
                    "ferrite " + (v == null ? "(development build)" : v),
                    "JVM " + Runtime.version() + " (" + System.getProperty("java.vm.vendor") + "), "
                            + System.getProperty("os.name") + " " + System.getProperty("os.version") + " "
                            + System.getProperty("os.arch")};
        }
    }
}
