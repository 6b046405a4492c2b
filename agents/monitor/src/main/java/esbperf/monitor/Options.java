package esbperf.monitor;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The monitor's command line. Every mistake is a {@link UsageError} with a one-line message.
 * {@code state} is the monitor's own folder (the spool lives in its {@code spool/}); the
 * sampler is "sigar" (the default, falling back to OSHI when it cannot load) or "oshi".
 */
record Options(String role, InetSocketAddress listen, List<Long> pids, List<String> matches, String sampler,
               Path state, long spoolMaxBytes, long spoolMaxAgeMs, List<Integer> cpus) {

  static final String USAGE = "usage: monitor --listen HOST:PORT [--role NAME] [--pid PID]... [--match TEXT]... "
      + "[--sampler sigar|oshi] [--state DIR] [--spool-max-bytes N] [--spool-max-age-s N] [--cpus LIST]";

  static final class UsageError extends Exception {
    UsageError(String message) {
      super(message);
    }
  }

  static Options parse(String[] args) throws UsageError {
    String role = "host";
    InetSocketAddress listen = null;
    final List<Long> pids = new ArrayList<>();
    final List<String> matches = new ArrayList<>();
    String sampler = "sigar";
    Path state = Path.of("");   // the working directory
    long spoolMaxBytes = Spool.DEFAULT_MAX_BYTES;
    long spoolMaxAgeMs = Spool.DEFAULT_MAX_AGE_MS;
    List<Integer> cpus = List.of();   // empty: the whole machine
    for (int i = 0; i < args.length; i++) {
      final String name = args[i];
      if (i + 1 >= args.length) {
        throw new UsageError(name.startsWith("--") ? name + " needs a value; " + USAGE : USAGE);
      }
      final String value = args[++i];
      switch (name) {
        case "--role" -> role = value;
        case "--listen" -> listen = listenAddress(value);
        case "--pid" -> pids.add(pid(value));
        case "--match" -> {
          if (value.isBlank()) {
            throw new UsageError("--match needs a non-empty text");
          }
          matches.add(value);
        }
        case "--sampler" -> {
          if (!value.equals("sigar") && !value.equals("oshi")) {
            throw new UsageError("--sampler must be sigar or oshi, got '" + value + "'");
          }
          sampler = value;
        }
        case "--state" -> {
          if (value.isBlank()) {
            throw new UsageError("--state needs a folder");
          }
          state = Path.of(value);
        }
        case "--spool-max-bytes" -> spoolMaxBytes = atLeast(name, value, Spool.MIN_MAX_BYTES);
        case "--spool-max-age-s" -> spoolMaxAgeMs = 1000 * atLeast(name, value, 1);
        case "--cpus" -> cpus = cpuList(value);
        default -> throw new UsageError("unknown option " + name + "; " + USAGE);
      }
    }
    if (listen == null) {
      throw new UsageError("--listen HOST:PORT is required; " + USAGE);
    }
    return new Options(role, listen, List.copyOf(pids), List.copyOf(matches), sampler, state, spoolMaxBytes,
        spoolMaxAgeMs, cpus);
  }

  /** "0-2,5" (the kernel's and taskset's CPU list) -> [0, 1, 2, 5], sorted, each once. */
  static List<Integer> cpuList(String value) throws UsageError {
    final java.util.TreeSet<Integer> cpus = new java.util.TreeSet<>();
    for (String part : value.split(",", -1)) {
      final String[] bounds = part.split("-", -1);
      try {
        final int low = Integer.parseInt(bounds[0]);
        final int high = bounds.length == 2 ? Integer.parseInt(bounds[1]) : low;
        if (bounds.length > 2 || low < 0 || high < low || high > 4095) {
          throw new NumberFormatException();
        }
        for (int cpu = low; cpu <= high; cpu++) {
          cpus.add(cpu);
        }
      }
      catch (NumberFormatException e) {
        throw new UsageError("--cpus must be a CPU list like 0-2,5, got '" + value + "'");
      }
    }
    return List.copyOf(cpus);
  }

  Path spool() {
    return state.resolve("spool");
  }

  private static long atLeast(String name, String value, long minimum) throws UsageError {
    try {
      final long n = Long.parseLong(value);
      if (n >= minimum && n < Long.MAX_VALUE / 1000) {
        return n;
      }
    }
    catch (NumberFormatException e) {
      // fall through to the message below
    }
    throw new UsageError(name + " must be a whole number of at least " + minimum + ", got '" + value + "'");
  }

  private static long pid(String value) throws UsageError {
    try {
      final long pid = Long.parseLong(value);
      if (pid > 0) {
        return pid;
      }
    }
    catch (NumberFormatException e) {
      // fall through to the message below
    }
    throw new UsageError("--pid must be a process id (a positive number), got '" + value + "'");
  }

  /** HOST:PORT or [IPv6]:PORT; HOST must be an IP address of this host, never the wildcard. */
  private static InetSocketAddress listenAddress(String value) throws UsageError {
    final int colon = value.lastIndexOf(':');
    if (colon <= 0) {
      throw new UsageError("--listen must be HOST:PORT, got '" + value + "'");
    }
    final String host = value.substring(0, colon).replaceAll("^\\[|\\]$", "");
    final int port;
    try {
      port = Integer.parseInt(value.substring(colon + 1));
    }
    catch (NumberFormatException e) {
      throw new UsageError("--listen port must be a number, got '" + value.substring(colon + 1) + "'");
    }
    if (port < 1 || port > 65535) {
      throw new UsageError("--listen port must be 1-65535, got " + port);
    }
    if (!host.matches("[0-9.]+|[0-9a-fA-F:]+")) {
      throw new UsageError("--listen host must be an IP address, got '" + host + "'");
    }
    final InetAddress address;
    try {
      address = InetAddress.getByName(host);   // a literal: no name lookup happens
    }
    catch (UnknownHostException e) {
      throw new UsageError("--listen host must be an IP address, got '" + host + "'");
    }
    if (address.isAnyLocalAddress()) {
      // Samples are served to the runner only: loopback or the testbed address, not every network.
      throw new UsageError("--listen must name one address (loopback or the testbed address), not all interfaces");
    }
    return new InetSocketAddress(address, port);
  }
}
