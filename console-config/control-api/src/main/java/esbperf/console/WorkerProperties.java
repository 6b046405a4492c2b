package esbperf.console;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;

import net.grinder.common.GrinderProperties;

/**
 * The worker properties the control API passes on to the agents: the console's start message
 * overrides every property of an agent, `grinder.jvm` and `grinder.jvm.arguments` included, so
 * whatever could post any property could choose the program every agent host runs. Only these
 * pass: what the runner sets, the esbperf.* settings of the scenario scripts, and a few harmless
 * settings of The Grinder that a user's own script may come with; anything else is refused by name.
 */
final class WorkerProperties {

  /** Whole numbers, 0 or more: what the runner sets, and Grinder's timing and ramp-up settings. */
  private static final Set<String> COUNTS = Set.of(
      "grinder.processes", "grinder.threads", "grinder.runs", "grinder.duration",
      // A user's script: sleep before the first run, processes started at once and by how many
      // at what interval (ramp-up), how often workers report. They shape the load, never what runs.
      "grinder.initialSleepTime", "grinder.initialProcesses", "grinder.processIncrement",
      "grinder.processIncrementInterval", "grinder.reportToConsole.interval");
  /** Numbers 0 or more: the scaling and variation of a script's grinder.sleep() calls. */
  private static final Set<String> FACTORS = Set.of("grinder.sleepTimeFactor", "grinder.sleepTimeVariation");
  /** true or false: how times are taken and reported, whether process output is logged. */
  private static final Set<String> SWITCHES = Set.of(
      "grinder.useNanoTime", "grinder.reportTimesToConsole", "grinder.logProcessStreams");
  /** Paths inside a folder: the log folder (under each agent's own), the script (in the distribution). */
  private static final String LOG_DIRECTORY = "grinder.logDirectory";
  private static final String SCRIPT = "grinder.script";
  private static final String ESBPERF = "esbperf.";

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
      if (COUNTS.contains(name)) {
        if (!value.matches("[0-9]{1,18}")) {
          throw refused(name, "must be a whole number, 0 or more, got '" + value + "'");
        }
      }
      else if (FACTORS.contains(name)) {
        if (!value.matches("[0-9]{1,9}(\\.[0-9]{1,9})?")) {
          throw refused(name, "must be a number, 0 or more, got '" + value + "'");
        }
      }
      else if (SWITCHES.contains(name)) {
        if (!value.equals("true") && !value.equals("false")) {
          throw refused(name, "must be true or false, got '" + value + "'");
        }
      }
      else if (name.equals(LOG_DIRECTORY)) {
        relative(name, value);
      }
      else if (name.equals(SCRIPT)) {
        final Path script = relative(name, value);
        final File file = distribution.toPath().resolve(script).toFile();
        if (!file.isFile() || !inside(file)) {
          throw refused(name, "'" + value + "' is not a file of the distribution directory");
        }
      }
      else {
        throw new ApiError(400, "worker property " + name + " is not allowed (allowed: the runner's "
            + "grinder.processes/threads/runs/duration/logDirectory/script, esbperf.*, and the settings "
            + "listed in docs/grinder.md)");
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
