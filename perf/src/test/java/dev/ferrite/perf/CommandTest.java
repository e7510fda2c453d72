package dev.ferrite.perf;

import java.io.PrintWriter;
import java.io.StringWriter;

/** Runs {@code ferrite} commands in-process for a test, keeping what the last one printed in {@link #out} and {@link #err}. */
abstract class CommandTest {
    protected final StringWriter out = new StringWriter();
    protected final StringWriter err = new StringWriter();

    protected int run(String... args) {
        out.getBuffer().setLength(0);
        err.getBuffer().setLength(0);
        return Main.commandLine().setOut(new PrintWriter(out)).setErr(new PrintWriter(err)).execute(args);
    }
}
