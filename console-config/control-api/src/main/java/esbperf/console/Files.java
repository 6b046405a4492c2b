package esbperf.console;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import net.grinder.console.communication.ProcessControl;
import net.grinder.console.distribution.FileDistribution;
import net.grinder.console.distribution.FileDistributionHandler;

/** /files/*: distribution of the distribution directory to the agents' caches. */
final class Files {

  private final FileDistribution distribution;
  /** Distributions run one at a time, in the order asked for. */
  private final ExecutorService worker = Executors.newSingleThreadExecutor(r -> {
    final Thread t = new Thread(r, "esbperf-file-distribution");
    t.setDaemon(true);
    return t;
  });
  private final Object reportCycle = new Object();
  private long reportCycles;
  private int nextId;
  private volatile Map<String, Object> last;

  Files(FileDistribution distribution, ProcessControl processControl) {
    this.distribution = distribution;
    processControl.addProcessStatusListener(reports -> {
      synchronized (reportCycle) {
        reportCycles++;
        reportCycle.notifyAll();
      }
    });
  }

  /**
   * The console applies a scan's new file times to the agents' cache state only on its next
   * agent report cycle; distributing before that sends nothing for files just changed.
   */
  private void awaitReportCycles(int cycles) throws InterruptedException {
    final long deadline = System.currentTimeMillis() + 5000;
    synchronized (reportCycle) {
      final long target = reportCycles + cycles;
      long left;
      while (reportCycles < target && (left = deadline - System.currentTimeMillis()) > 0) {
        reportCycle.wait(left);
      }
    }
  }

  synchronized Object distribute() {
    final int id = ++nextId;
    final Map<String, Object> queued = result(id, "started", new ArrayList<>(), 0);
    worker.submit(() -> run(id));
    return queued;
  }

  private void run(int id) {
    final List<String> files = new ArrayList<>();
    last = result(id, "started", files, 0);
    try {
      // Pick up files changed since the console's last periodic scan.
      distribution.scanDistributionFiles();
      awaitReportCycles(2);
      final FileDistributionHandler handler = distribution.getHandler();
      FileDistributionHandler.Result r;
      while ((r = handler.sendNextFile()) != null) {
        files.add(r.getFileName());
        last = result(id, "sending", new ArrayList<>(files), r.getProgressInCents());
      }
      last = result(id, "finished", new ArrayList<>(files), 100);
    }
    catch (Exception e) {
      final Map<String, Object> failed = result(id, "error", new ArrayList<>(files), 0);
      failed.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
      last = failed;
    }
  }

  Object status() {
    final Map<String, Object> m = new LinkedHashMap<>();
    m.put("stale", distribution.getAgentCacheState().getOutOfDate());
    m.put("last-distribution", last);
    return m;
  }

  private static Map<String, Object> result(int id, String state, List<String> files, int percent) {
    final Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", id);
    m.put("state", state);
    m.put("files", files);
    m.put("per-cent-complete", percent);
    return m;
  }
}
