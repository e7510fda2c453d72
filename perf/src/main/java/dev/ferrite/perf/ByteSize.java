package dev.ferrite.perf;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.TypeConversionException;

/** Byte counts on the command line: {@code 4096}, {@code 512K}, {@code 16M}, {@code 1G}, {@code 2T} (powers of 1024). */
final class ByteSize {
    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([kKmMgGtT]?)(?:i?[bB])?");

    private ByteSize() {
    }

    /** @throws IllegalArgumentException saying what a size looks like */
    static long parse(String text) {
        Matcher m = SIZE.matcher(text.strip());
        if (!m.matches()) {
            throw new IllegalArgumentException("'" + text + "' is not a size: give bytes, or a whole number with"
                    + " K, M, G or T (powers of 1024), e.g. 16M or 1G");
        }
        int shift = switch (m.group(2).toUpperCase(Locale.ROOT)) {
            case "K" -> 10;
            case "M" -> 20;
            case "G" -> 30;
            case "T" -> 40;
            default -> 0;
        };
        try {
            long n = Long.parseLong(m.group(1));
            if (n > Long.MAX_VALUE >> shift) {
                throw new NumberFormatException();
            }
            return n << shift;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + text + "' is too large a size");
        }
    }

    /** The largest unit that shows {@code bytes} exactly: {@code 1 GiB}, {@code 1536 MiB}, {@code 4097 bytes}. */
    static String format(long bytes) {
        String[] units = {"bytes", "KiB", "MiB", "GiB", "TiB"};
        int u = 0;
        while (u < units.length - 1 && bytes != 0 && bytes % 1024 == 0) {
            bytes /= 1024;
            u++;
        }
        return bytes + " " + units[u];
    }

    /** A usage error unless {@code bytes}, given as {@code option}, is an I/O size for the direct path: a multiple of 4 KiB up to 1 MiB. */
    static void requireIoSize(CommandSpec spec, String option, long bytes) {
        if (bytes < 4096 || bytes % 4096 != 0 || bytes > 1 << 20) {
            throw new ParameterException(spec.commandLine(), option + " " + format(bytes) + ": give a multiple of 4 KiB up to 1 MiB");
        }
    }

    /** picocli's hook: a bad size becomes a usage error (exit code 2) with {@link #parse}'s message. */
    static final class Converter implements ITypeConverter<Long> {
        @Override
        public Long convert(String value) {
            try {
                return parse(value);
            } catch (IllegalArgumentException e) {
                throw new TypeConversionException(e.getMessage());
            }
        }
    }
}
