package dev.ferrite.perf;

import dev.ferrite.perf.bench.MetaApi;

import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;

/** {@code --api handle|path} of the metadata workloads, applied to every target alike (a picocli mixin). */
final class ApiOption {
    @Option(names = "--api", paramLabel = "API", defaultValue = "handle",
            description = "handle (directories opened once, files named relative to them: Ferrite's Handle calls,"
                    + " openat/fstatat/unlinkat/getdents64 on the host) or path (full paths: Ferrite's path calls,"
                    + " java.nio.file on the host), for every target (default: ${DEFAULT-VALUE})")
    String api;

    MetaApi resolve(CommandSpec spec) {
        try {
            return MetaApi.parse(api);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage());
        }
    }
}
