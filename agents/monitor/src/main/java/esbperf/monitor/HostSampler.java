package esbperf.monitor;

import java.util.LinkedHashSet;
import java.util.Set;

import org.hyperic.sigar.CpuPerc;
import org.hyperic.sigar.Mem;
import org.hyperic.sigar.NetInterfaceStat;
import org.hyperic.sigar.Sigar;
import org.hyperic.sigar.SigarException;

/**
 * The whole host's readings: CPU (total and per core, in percent), memory (bytes) and each
 * network interface's cumulative byte and packet counters. sigar computes CPU percentages
 * between two consecutive calls, so each value covers the interval since the previous tick.
 */
final class HostSampler {

  private final Sigar sigar;

  HostSampler(Sigar sigar) throws SigarException {
    this.sigar = sigar;
    // sigar's first CPU reading has no previous one to compare with: take it now, not on tick 1.
    sigar.getCpuPerc();
    sigar.getCpuPercList();
  }

  void sample(Tick.Builder out) throws SigarException {
    final CpuPerc cpu = sigar.getCpuPerc();
    // iowait is time a core had nothing to run, so it counts as idle; steal is left out of
    // user and sys but, not being idle, is in the total.
    final double idle = percent(cpu.getIdle() + cpu.getWait());
    out.add("cpu.user", "", percent(cpu.getUser() + cpu.getNice()));
    out.add("cpu.sys", "", percent(cpu.getSys() + cpu.getIrq() + cpu.getSoftIrq()));
    out.add("cpu.idle", "", idle);
    out.add("cpu.total", "", 100.0 - idle);
    final CpuPerc[] cores = sigar.getCpuPercList();
    for (int i = 0; i < cores.length; i++) {
      out.add("cpu.core", Integer.toString(i), 100.0 - percent(cores[i].getIdle() + cores[i].getWait()));
    }

    final Mem mem = sigar.getMem();
    out.add("mem.used", "", mem.getActualUsed());   // without the page cache, which the kernel gives back
    out.add("mem.total", "", mem.getTotal());

    for (String name : interfaces()) {
      final NetInterfaceStat net;
      try {
        net = sigar.getNetInterfaceStat(name);
      }
      catch (SigarException e) {
        continue;   // the interface went away between listing and reading (veths come and go)
      }
      out.add("net.rx_bytes", name, net.getRxBytes());
      out.add("net.tx_bytes", name, net.getTxBytes());
      out.add("net.rx_packets", name, net.getRxPackets());
      out.add("net.tx_packets", name, net.getTxPackets());
    }
  }

  /** Interface names without aliases (eth0:1 shares eth0's counters). */
  private Set<String> interfaces() throws SigarException {
    final Set<String> names = new LinkedHashSet<>();
    for (String name : sigar.getNetInterfaceList()) {
      names.add(name.contains(":") ? name.substring(0, name.indexOf(':')) : name);
    }
    return names;
  }

  /** sigar's fractions to percent, clamped: rounding can give a hair below 0 or above 100. */
  private static double percent(double fraction) {
    return Math.max(0.0, Math.min(100.0, fraction * 100.0));
  }
}
