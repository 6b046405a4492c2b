package esbperf.monitor;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.Optional;
import java.util.Set;

import org.hyperic.jni.ArchNotSupportedException;
import org.hyperic.sigar.CpuPerc;
import org.hyperic.sigar.Mem;
import org.hyperic.sigar.NetInterfaceStat;
import org.hyperic.sigar.Sigar;
import org.hyperic.sigar.SigarException;
import org.hyperic.sigar.SigarLoader;

/**
 * Readings through sigar's native library: CPU (total and per core, in percent), memory (bytes),
 * each network interface's cumulative byte and packet counters, and processes. sigar computes
 * CPU percentages between two consecutive calls, so each value covers the interval since the
 * previous tick.
 */
final class SigarProbe implements Probe {

  private final Sigar sigar;
  private int[] hostCores = new int[0];   // empty: the whole machine

  /** Throws LinkageError when the native library cannot load, SigarException when it loads but
   * cannot read this host. */
  SigarProbe() throws SigarException {
    sigar = new Sigar();
    try {
      sigar.getMem();   // the first native call: a missing or broken library shows here
      // sigar's first CPU reading has no previous one to compare with: take it now, not on tick 1.
      sigar.getCpuPerc();
      sigar.getCpuPercList();
      sigar.getNetInterfaceList();
    }
    catch (SigarException | LinkageError e) {
      sigar.close();
      throw e;
    }
  }

  /**
   * Why sigar's library cannot load from the folder named by -Dorg.hyperic.sigar.path, or null
   * when it may. Checked before sigar tries: without its library there, sigar goes on to load its
   * own jar as one, and the JVM prints warnings about that file into the monitor's log.
   */
  static String whyNotLoadable() {
    final String folder = System.getProperty("org.hyperic.sigar.path");
    if (folder == null) {
      return null;   // sigar searches java.library.path itself
    }
    // e.g. libsigar-amd64-linux.so; the build unpacks it as libsigar-amd64-linux-1.6.4.so
    final String name;
    try {
      name = new SigarLoader(Sigar.class).getLibraryName();   // does not initialise Sigar
    }
    catch (ArchNotSupportedException e) {
      return "sigar 1.6.4 has no library for this platform: " + e.getMessage();   // e.g. ARM Linux
    }
    final int dot = name.lastIndexOf('.');
    final String glob = dot < 0 ? name + "*" : name.substring(0, dot) + "*" + name.substring(dot);
    if (!Files.isDirectory(Path.of(folder))) {
      return "no folder " + folder;
    }
    try (DirectoryStream<Path> found = Files.newDirectoryStream(Path.of(folder), glob)) {
      for (Path library : found) {
        return isLinux() && !isElf(library) ? library + " is not a shared library" : null;
      }
    }
    catch (IOException | RuntimeException e) {
      return "cannot read " + folder + ": " + e.getMessage();
    }
    return "no " + glob + " in " + folder;
  }

  private static boolean isLinux() {
    return System.getProperty("os.name", "").toLowerCase().contains("linux");
  }

  private static boolean isElf(Path library) {
    final byte[] magic = new byte[4];
    try (InputStream in = Files.newInputStream(library)) {
      return in.readNBytes(magic, 0, 4) == 4 && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
    }
    catch (IOException e) {
      return false;
    }
  }

  @Override
  public String name() {
    return "sigar";
  }

  @Override
  public void sampleHost(Tick.Builder out) throws ReadingFailed {
    try {
      sample(out);
    }
    catch (SigarException e) {
      throw new ReadingFailed(e.getMessage(), e);
    }
  }

  @Override
  public int cores() {
    try {
      return sigar.getCpuPercList().length;
    }
    catch (SigarException e) {
      return 0;
    }
  }

  @Override
  public void useCores(java.util.List<Integer> cores) {
    hostCores = cores.stream().mapToInt(Integer::intValue).toArray();
  }

  private void sample(Tick.Builder out) throws SigarException {
    // Both calls share sigar's previous reading per list, so each covers the time since the last tick.
    final CpuPerc machine = sigar.getCpuPerc();
    final CpuPerc[] cores = sigar.getCpuPercList();
    // iowait is time a core had nothing to run, so it counts as idle; steal is left out of
    // user and sys but, not being idle, is in the total. A pinned host: the mean of its cores.
    double user = 0;
    double sys = 0;
    double idle = 0;
    final CpuPerc[] counted = hostCores.length == 0 ? new CpuPerc[] {machine} : pick(cores);
    for (CpuPerc cpu : counted) {
      user += Probe.percent(cpu.getUser() + cpu.getNice()) / counted.length;
      sys += Probe.percent(cpu.getSys() + cpu.getIrq() + cpu.getSoftIrq()) / counted.length;
      idle += Probe.percent(cpu.getIdle() + cpu.getWait()) / counted.length;
    }
    out.add("cpu.user", "", user);
    out.add("cpu.sys", "", sys);
    out.add("cpu.idle", "", idle);
    out.add("cpu.total", "", 100.0 - idle);
    for (int i = 0; i < cores.length; i++) {
      out.add("cpu.core", Integer.toString(i), 100.0 - Probe.percent(cores[i].getIdle() + cores[i].getWait()));
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

  private CpuPerc[] pick(CpuPerc[] cores) {
    final CpuPerc[] chosen = new CpuPerc[hostCores.length];
    for (int i = 0; i < hostCores.length; i++) {
      chosen[i] = cores[hostCores[i]];   // checked against cores() at start
    }
    return chosen;
  }

  /** Interface names without aliases (eth0:1 shares eth0's counters). */
  private Set<String> interfaces() throws SigarException {
    final Set<String> names = new LinkedHashSet<>();
    for (String name : sigar.getNetInterfaceList()) {
      names.add(name.contains(":") ? name.substring(0, name.indexOf(':')) : name);
    }
    return names;
  }

  @Override
  public long selfPid() {
    return sigar.getPid();
  }

  @Override
  public boolean exists(long pid) {
    try {
      sigar.getProcState(pid);
      return true;
    }
    catch (SigarException e) {
      return false;
    }
  }

  @Override
  public long parent(long pid) {
    try {
      return sigar.getProcState(pid).getPpid();
    }
    catch (SigarException e) {
      return -1;
    }
  }

  @Override
  public long[] processes() {
    try {
      return sigar.getProcList();
    }
    catch (SigarException e) {
      return new long[0];
    }
  }

  @Override
  public String commandLine(long pid) {
    try {
      return String.join(" ", sigar.getProcArgs(pid));
    }
    catch (SigarException e) {
      return null;   // exited while we looked, or not ours to read
    }
  }

  /**
   * The CPU time from the JDK, which reads the kernel's count afresh (/proc/PID/stat on Linux):
   * sigar keeps one process's /proc data for the rest of the next whole second, so two of its
   * readings 2 s apart may be 1 s or 3 s apart in what they count. sigar's count is used only where
   * the JDK has none for the process.
   */
  @Override
  public Usage usage(long pid) {
    try {
      final Optional<Duration> fresh = ProcessHandle.of(pid).flatMap(p -> p.info().totalCpuDuration());
      final long cpuMs = fresh.isPresent() ? fresh.get().toMillis() : sigar.getProcTime(pid).getTotal();
      return new Usage(cpuMs, sigar.getProcMem(pid).getResident());
    }
    catch (SigarException e) {
      return null;
    }
  }

  @Override
  public void close() {
    sigar.close();
  }
}
