package net.grinder.util;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import net.grinder.common.GrinderBuild;
import net.grinder.common.GrinderException;

import org.slf4j.Logger;

/**
 * Replacement for The Grinder 3.11's JVM check, same public API.
 *
 * <p>The original compares the major and minor numbers of {@code java.version} separately,
 * so "17.0.15" (major 17, minor 0) fails "at least 1.6", and "25" (no minor) does not parse.
 * This version reduces both the running version and the requested one to a Java SE
 * feature release (legacy "1.x" means feature x) and compares (feature, minor) in order.</p>
 */
public final class JVM {

  /** Leading "N" or "N.M" of a version string; vendor suffixes such as "+7-LTS" are ignored. */
  private static final Pattern VERSION = Pattern.compile("^\\s*(\\d+)(?:\\.(\\d+))?(?:\\.(\\d+))?");

  public static JVM getInstance() {
    return new JVM();
  }

  private JVM() {
  }

  /**
   * Check that the JVM can run The Grinder; report problems to the logger.
   *
   * @return {@code true} if it can.
   * @throws VersionException if {@code java.version} cannot be parsed.
   */
  public boolean haveRequisites(Logger logger) throws VersionException {
    if (!isAtLeastVersion(1, 6)) {
      logger.error("Fatal Error - incompatible version of Java ({})%n{} requires at least Java SE 6.",
                   this, "The Grinder " + GrinderBuild.getVersionString());
      return false;
    }
    return true;
  }

  /** Whether the running JVM is at least the given version ("1, 6" and "6, 0" both mean Java SE 6). */
  public boolean isAtLeastVersion(int minimumMajor, int minimumMinor) throws VersionException {
    return isAtLeast(System.getProperty("java.version"), minimumMajor, minimumMinor);
  }

  /** Whether {@code version} (a {@code java.version} value) is at least the given one. */
  static boolean isAtLeast(String version, int minimumMajor, int minimumMinor) throws VersionException {
    final int[] have = featureAndMinor(version);
    final int[] want = minimumMajor == 1
        ? new int[] {minimumMinor, 0}
        : new int[] {minimumMajor, minimumMinor};
    return have[0] != want[0] ? have[0] > want[0] : have[1] >= want[1];
  }

  /**
   * {feature release, minor} of a {@code java.version} value: "1.8.0_392" gives {8, 0},
   * "17.0.15" gives {17, 0}, "25" gives {25, 0}.
   */
  static int[] featureAndMinor(String version) throws VersionException {
    final Matcher m = version == null ? null : VERSION.matcher(version);
    if (m == null || !m.find()) {
      throw new VersionException("Could not parse JVM version " + version);
    }
    final int first = Integer.parseInt(m.group(1));
    final int second = m.group(2) == null ? 0 : Integer.parseInt(m.group(2));
    final int third = m.group(3) == null ? 0 : Integer.parseInt(m.group(3));
    if (first == 1 && m.group(2) != null) {
      return new int[] {second, third};   // legacy scheme: 1.<feature>.<minor>_<update>
    }
    return new int[] {first, second};     // JEP 223 scheme: <feature>.<interim>.<update>
  }

  @Override
  public String toString() {
    return System.getProperty("java.runtime.name") + " "
        + System.getProperty("java.runtime.version") + ": "
        + System.getProperty("java.vm.name") + " ("
        + System.getProperty("java.vm.version") + ", "
        + System.getProperty("java.vm.info") + ") on "
        + System.getProperty("os.name") + " "
        + System.getProperty("os.arch") + " "
        + System.getProperty("os.version");
  }

  /** The running JVM's version could not be parsed. */
  public static final class VersionException extends GrinderException {
    public VersionException(String reason) {
      super(reason);
    }
  }
}
