package dev.ferrite.perf;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;

/** {@code --targets} names read as a command's target enum: any case, duplicates dropped, in the order given. */
final class TargetNames {
    private TargetNames() {
    }

    static <E extends Enum<E>> List<E> parse(CommandSpec spec, Class<E> type, List<String> names) {
        return names.stream().map(n -> parse(spec, type, n)).distinct().toList();
    }

    private static <E extends Enum<E>> E parse(CommandSpec spec, Class<E> type, String name) {
        try {
            return Enum.valueOf(type, name.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            String known = Arrays.stream(type.getEnumConstants()).map(c -> c.name().toLowerCase(Locale.ROOT))
                    .collect(Collectors.joining(", "));
            throw new ParameterException(spec.commandLine(), "--targets: '" + name + "' is not one of " + known);
        }
    }
}
