package esbperf.console;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

import net.grinder.common.GrinderProperties;

/**
 * The worker properties the control API passes on to the agents: the console's start message
 * overrides every property of an agent, `grinder.jvm` and `grinder.jvm.arguments` included, so
 * whatever could post any property could choose the program every agent host runs. Only the
 * esbperf.* settings of the scenario scripts and the properties listed, with the kind of value
 * each takes, in the resource {@value #LIST} pass (the runner's Python side reads the same file);
 * anything else is refused by name.
 */
final class WorkerProperties {

  static final String LIST = "/esbperf/console/worker-properties.txt";
  private static final String ESBPERF = "esbperf.";
  /** name -> kind: count, factor, switch, path or script. */
  private static final Map<String, String> KINDS = load();

  static Map<String, String> load() {
    final Map<String, String> kinds = new LinkedHashMap<>();
    try (InputStream in = WorkerProperties.class.getResourceAsStream(LIST)) {
      if (in == null) {
        throw new IllegalStateException(LIST + " is missing from the control API's jar");
      }
      final BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
      for (String line; (line = reader.readLine()) != null; ) {
        final String[] fields = line.strip().split("\\s+");
        if (fields[0].isEmpty() || fields[0].startsWith("#")) {
          continue;
        }
        if (fields.length < 2 || !Set.of("count", "factor", "switch", "path", "script").contains(fields[1])) {
          throw new IllegalStateException(LIST + ": not NAME KIND [runner]: " + line);
        }
        kinds.put(fields[0], fields[1]);
      }
    }
    catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return Collections.unmodifiableMap(kinds);
  }

  private final File distribution;

  WorkerProperties(File distribution) {
    this.distribution = distribution;
  }

  void check(GrinderProperties properties) throws ApiError {
    for (Map.Entry<Object, Object> e : properties.entrySet()) {
      final String name = String.valueOf(e.getKey());
      final String value = String.valueOf(e.getValue()).trim();
      if (name.startsWith(ESBPERF)) {
        continue;
      }
      final String kind = KINDS.get(name);
      if (kind == null) {
        throw new ApiError(400, "worker property " + name + " is not allowed (allowed: the runner's "
            + "grinder.processes/threads/runs/duration/logDirectory/script, esbperf.*, and the settings "
            + "listed in docs/grinder.md)");
      }
      switch (kind) {
        case "count":
          if (!value.matches("[0-9]{1,18}")) {
            throw refused(name, "must be a whole number, 0 or more, got '" + value + "'");
          }
          break;
        case "factor":
          if (!value.matches("[0-9]{1,9}(\\.[0-9]{1,9})?")) {
            throw refused(name, "must be a number, 0 or more, got '" + value + "'");
          }
          break;
        case "switch":
          if (!value.equals("true") && !value.equals("false")) {
            throw refused(name, "must be true or false, got '" + value + "'");
          }
          break;
        case "path":
          relative(name, value);
          break;
        default:   // script
          final Path script = relative(name, value);
          final File file = distribution.toPath().resolve(script).toFile();
          if (!file.isFile() || !inside(file)) {
            throw refused(name, "'" + value + "' is not a file of the distribution directory");
          }
      }
    }
  }

  private Path relative(String name, String value) throws ApiError {
    final Path path = Path.of(value).normalize();
    if (value.isEmpty() || path.isAbsolute() || path.startsWith("..") || value.contains("..")) {
      throw refused(name, "must be a relative path without '..', got '" + value + "'");
    }
    return path;
  }

  private boolean inside(File file) {
    try {
      return file.getCanonicalPath().startsWith(distribution.getCanonicalPath() + File.separator);
    }
    catch (IOException e) {
      return false;
    }
  }

  private static ApiError refused(String name, String why) {
    return new ApiError(400, "worker property " + name + " " + why);
  }
}
