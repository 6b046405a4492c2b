package esbperf.monitor;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;

/** The monitor's command line. Every mistake is a {@link UsageError} with a one-line message. */
record Options(String role, InetSocketAddress listen, List<Long> pids, List<String> matches) {

  static final String USAGE =
      "usage: monitor --listen HOST:PORT [--role NAME] [--pid PID]... [--match TEXT]...";

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
        default -> throw new UsageError("unknown option " + name + "; " + USAGE);
      }
    }
    if (listen == null) {
      throw new UsageError("--listen HOST:PORT is required; " + USAGE);
    }
    return new Options(role, listen, List.copyOf(pids), List.copyOf(matches));
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
