package esbperf.monitor;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import oshi.SystemInfo;
import oshi.hardware.CentralProcessor;
import oshi.hardware.CentralProcessor.TickType;
import oshi.hardware.GlobalMemory;
import oshi.hardware.HardwareAbstractionLayer;
import oshi.hardware.NetworkIF;
import oshi.software.os.OSProcess;
import oshi.software.os.OperatingSystem;

/**
 * Readings through OSHI (pure Java over JNA; it runs where sigar's native library does not, e.g.
 * ARM hosts), with sigar's metrics and subjects: CPU percentages are computed here from the
 * tick counters between consecutive calls, split as sigar's are; mem.used is total minus what
 * the OS says is available; network counters come from /proc/net/dev where it exists (Linux:
 * every interface, as sigar lists them; OSHI would list only those with an address), from OSHI
 * elsewhere.
 */
final class OshiProbe implements Probe {

  private static final Path PROC_NET_DEV = Path.of("/proc/net/dev");

  private final HardwareAbstractionLayer hardware;
  private final CentralProcessor cpu;
  private final GlobalMemory memory;
  private final OperatingSystem os;
  private final boolean procNetDev = Files.isReadable(PROC_NET_DEV);
  private long[] previousTotal;
  private long[][] previousCores;
  private int[] hostCores = new int[0];   // empty: the whole machine

  OshiProbe() {
    final SystemInfo system = new SystemInfo();
    hardware = system.getHardware();
    cpu = hardware.getProcessor();
    memory = hardware.getMemory();
    os = system.getOperatingSystem();
    // The first CPU reading has no previous one to compare with: take it now, not on tick 1.
    previousTotal = cpu.getSystemCpuLoadTicks();
    previousCores = cpu.getProcessorCpuLoadTicks();
    memory.getTotal();
  }

  @Override
  public String name() {
    return "oshi";
  }

  @Override
  public void sampleHost(Tick.Builder out) throws ReadingFailed {
    try {
      final long[] total = cpu.getSystemCpuLoadTicks();
      final long[][] cores = cpu.getProcessorCpuLoadTicks();
      final Split all = hostCores.length == 0 ? Split.between(previousTotal, total)
          : Split.between(sum(previousCores), sum(cores));
      out.add("cpu.user", "", all.user);
      out.add("cpu.sys", "", all.sys);
      out.add("cpu.idle", "", all.idle);
      out.add("cpu.total", "", 100.0 - all.idle);
      for (int i = 0; i < cores.length; i++) {
        final long[] before = i < previousCores.length ? previousCores[i] : cores[i];
        out.add("cpu.core", Integer.toString(i), 100.0 - Split.between(before, cores[i]).idle);
      }
      previousTotal = total;
      previousCores = cores;

      final long totalBytes = memory.getTotal();
      out.add("mem.used", "", totalBytes - memory.getAvailable());   // the page cache counts as available
      out.add("mem.total", "", totalBytes);

      if (procNetDev) {
        netFromProc(out);
      }
      else {
        for (NetworkIF net : hardware.getNetworkIFs(true)) {
          out.add("net.rx_bytes", net.getName(), net.getBytesRecv());
          out.add("net.tx_bytes", net.getName(), net.getBytesSent());
          out.add("net.rx_packets", net.getName(), net.getPacketsRecv());
          out.add("net.tx_packets", net.getName(), net.getPacketsSent());
        }
      }
    }
    catch (IOException | RuntimeException e) {
      throw new ReadingFailed(e.toString(), e);
    }
  }

  @Override
  public int cores() {
    return cpu.getLogicalProcessorCount();
  }

  @Override
  public void useCores(List<Integer> cores) {
    hostCores = cores.stream().mapToInt(Integer::intValue).toArray();
  }

  /** The host's cores' tick counters added up, type by type. */
  private long[] sum(long[][] cores) {
    final long[] total = new long[TickType.values().length];
    for (int core : hostCores) {
      for (int type = 0; type < total.length && core < cores.length; type++) {
        total[type] += cores[core][type];
      }
    }
    return total;
  }

  /** CPU time shares since the previous reading, in percent, split as sigar's are: user with
   * nice, sys with irq and softirq, idle with iowait (steal is in none, so it counts as busy). */
  private record Split(double user, double sys, double idle) {
    static Split between(long[] before, long[] now) {
      long all = 0;
      for (int i = 0; i < now.length; i++) {
        all += now[i] - before[i];
      }
      if (all <= 0) {
        return new Split(0, 0, 100);   // no time passed on that counter: nothing ran
      }
      final double whole = all;
      return new Split(
          Probe.percent((delta(before, now, TickType.USER) + delta(before, now, TickType.NICE)) / whole),
          Probe.percent((delta(before, now, TickType.SYSTEM) + delta(before, now, TickType.IRQ)
              + delta(before, now, TickType.SOFTIRQ)) / whole),
          Probe.percent((delta(before, now, TickType.IDLE) + delta(before, now, TickType.IOWAIT)) / whole));
    }

    private static long delta(long[] before, long[] now, TickType type) {
      return now[type.getIndex()] - before[type.getIndex()];
    }
  }

  /** "  eth0: rxBytes rxPackets errs drop fifo frame compressed multicast txBytes txPackets ..." */
  private static void netFromProc(Tick.Builder out) throws IOException {
    final List<String> lines = Files.readAllLines(PROC_NET_DEV);
    for (String line : lines.subList(Math.min(2, lines.size()), lines.size())) {
      final int colon = line.indexOf(':');
      if (colon < 0) {
        continue;
      }
      final String name = line.substring(0, colon).trim();
      final String[] f = line.substring(colon + 1).trim().split("\\s+");
      if (f.length < 10) {
        continue;
      }
      out.add("net.rx_bytes", name, Long.parseLong(f[0]));
      out.add("net.tx_bytes", name, Long.parseLong(f[8]));
      out.add("net.rx_packets", name, Long.parseLong(f[1]));
      out.add("net.tx_packets", name, Long.parseLong(f[9]));
    }
  }

  @Override
  public long selfPid() {
    return ProcessHandle.current().pid();
  }

  private OSProcess process(long pid) {
    return pid > Integer.MAX_VALUE ? null : os.getProcess((int) pid);   // null when there is none
  }

  @Override
  public boolean exists(long pid) {
    return process(pid) != null;
  }

  @Override
  public long parent(long pid) {
    final OSProcess p = process(pid);
    return p == null ? -1 : p.getParentProcessID();
  }

  @Override
  public long[] processes() {
    return ProcessHandle.allProcesses().mapToLong(ProcessHandle::pid).toArray();
  }

  @Override
  public String commandLine(long pid) {
    final OSProcess p = process(pid);
    return p == null ? null : String.join(" ", p.getArguments());
  }

  @Override
  public Usage usage(long pid) {
    final OSProcess p = process(pid);
    return p == null ? null : new Usage(p.getKernelTime() + p.getUserTime(), p.getResidentSetSize());
  }

  @Override
  public void close() {
    // OSHI holds nothing to release
  }
}
