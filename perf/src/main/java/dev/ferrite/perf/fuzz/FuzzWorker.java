package dev.ferrite.perf.fuzz;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferrite.io.BlockDevice;

/**
 * The child JVM's main: builds the two base images once, then runs one case per line of standard input
 * and answers on standard output (the images are built by the first case). Commands: {@code gen SEED} (the case that seed generates) and
 * {@code run RECIPE}. Answers: {@code ready} once, then per case {@code case RECIPE} before it runs and
 * {@code ok OUTCOME} or {@code fail DETAIL} after it. After a failure the worker exits (a JDK exception
 * may have left threads or locks broken) and the runner starts another. {@code selftest npe|hang|crash}
 * fail on purpose, so the runner's own tests see each kind of failure handled.
 */
public final class FuzzWorker {
    private FuzzWorker() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err); // nothing else may write into the protocol
        AtomicReference<Throwable> escaped = new AtomicReference<>();
        Thread.setDefaultUncaughtExceptionHandler((t, e) -> escaped.compareAndSet(null, new IllegalStateException(
                "uncaught in thread " + t.getName() + ": " + e, e)));
        out.println("ready");
        BaseImage clean = null, dirty = null; // built by the first case (within its time limit), not by a selftest
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String cmd = line.strip();
            if (cmd.startsWith("selftest ")) {
                out.println("case " + cmd);
                selftest(cmd.substring(9).strip(), out);
                continue;
            }
            if (clean == null) {
                clean = BaseImage.build(BaseImage.Kind.CLEAN);
                dirty = BaseImage.build(BaseImage.Kind.DIRTY);
            }
            Recipe recipe = cmd.startsWith("gen ") ? Recipe.generate(Long.parseLong(cmd.substring(4).strip()), clean, dirty)
                    : Recipe.parse(cmd.substring(4));
            out.println("case " + recipe);
            String outcome;
            try (BlockDevice image = recipe.apply((recipe.base() == BaseImage.Kind.CLEAN ? clean : dirty).device)) {
                outcome = Exercise.run(image);
            } catch (Throwable t) {
                t.printStackTrace(); // the whole trace, for whoever runs the worker by hand (echo 'run RECIPE' | java ... FuzzWorker)
                out.println("fail " + oneLine(t instanceof Exercise.Failure f ? f.getCause() : t,
                        t instanceof Exercise.Failure ? t.getMessage() : "outside any step"));
                System.exit(3);
                return;
            }
            Throwable bg = escaped.getAndSet(null);
            if (bg != null) {
                out.println("fail " + oneLine(bg.getCause(), bg.getMessage()));
                System.exit(3);
            }
            out.println("ok " + outcome);
        }
    }

    private static void selftest(String what, PrintStream out) throws InterruptedException {
        switch (what) {
            case "npe" -> {
                out.println("fail " + oneLine(new NullPointerException("selftest"), "selftest"));
                System.exit(3);
            }
            case "hang" -> Thread.sleep(Long.MAX_VALUE);
            case "crash" -> Runtime.getRuntime().halt(134);
            default -> out.println("ok selftest " + what);
        }
    }

    /** The exception, where it came from (its first frames) and the step: one line for the protocol. */
    static String oneLine(Throwable t, String step) {
        StringBuilder sb = new StringBuilder(t.getClass().getName());
        if (t.getMessage() != null) {
            String m = t.getMessage().replaceAll("\\s+", " ");
            sb.append(": ").append(m, 0, Math.min(m.length(), 240));
        }
        StackTraceElement[] st = t.getStackTrace();
        for (int i = 0; i < Math.min(4, st.length); i++) {
            sb.append(i == 0 ? " at " : " < ").append(st[i].getClassName().replaceFirst("^.*\\.", "")).append('.')
                    .append(st[i].getMethodName()).append(':').append(st[i].getLineNumber());
        }
        String s = step.replaceAll("\\s+", " ");
        return sb.append(" [").append(s, 0, Math.min(s.length(), 160)).append(']').toString();
    }
}
