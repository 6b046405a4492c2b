package esbperf.console;

import java.io.File;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import net.grinder.common.GrinderProperties;
import net.grinder.common.processidentity.ProcessIdentity;
import net.grinder.common.processidentity.ProcessReport;
import net.grinder.common.processidentity.WorkerProcessReport;
import net.grinder.console.communication.ProcessControl;
import net.grinder.console.model.ConsoleProperties;

/** /agents/*: agent and worker process control. */
final class Agents {

  private final ProcessControl processControl;
  private final ConsoleProperties properties;
  private final ObjectMapper json;
  private final WorkerProperties allowed;
  private volatile ProcessControl.ProcessReports[] lastReports = new ProcessControl.ProcessReports[0];

  Agents(ProcessControl processControl, ConsoleProperties properties, ObjectMapper json, WorkerProperties allowed) {
    this.processControl = processControl;
    this.properties = properties;
    this.json = json;
    this.allowed = allowed;
    processControl.addProcessStatusListener(reports -> lastReports = reports);
  }

  List<Object> status() {
    final List<Object> agents = new ArrayList<>();
    for (ProcessControl.ProcessReports r : lastReports) {
      final Map<String, Object> agent = report(r.getAgentProcessReport());
      final List<Object> workers = new ArrayList<>();
      for (WorkerProcessReport w : r.getWorkerProcessReports()) {
        final Map<String, Object> worker = report(w);
        worker.put("running-threads", (int) w.getNumberOfRunningThreads());
        worker.put("maximum-threads", (int) w.getMaximumNumberOfThreads());
        workers.add(worker);
      }
      agent.put("workers", workers);
      agents.add(agent);
    }
    return agents;
  }

  private static Map<String, Object> report(ProcessReport report) {
    final ProcessIdentity id = report.getProcessAddress().getIdentity();
    final Map<String, Object> m = new LinkedHashMap<>();
    m.put("id", id.getUniqueID());
    m.put("name", id.getName());
    m.put("number", id.getNumber());
    m.put("state", report.getState().toString());
    return m;
  }

  /**
   * The body is a JSON object of grinder properties, each on the allow-list (WorkerProperties);
   * they override the console's properties file (grinder.console.propertiesFile), whose folder
   * must be the distribution directory so that agents resolve the script in their file cache.
   */
  Object startWorkers(byte[] body) throws Exception {
    final GrinderProperties supplied = parseProperties(body);
    allowed.check(supplied);
    if (processControl.getNumberOfLiveAgents() == 0) {
      throw new ApiError(409, "no agent is connected to the console (port "
          + properties.getConsolePort() + "); start one with `esbperf agent`");
    }
    final File file = properties.getPropertiesFile();
    final GrinderProperties merged = file == null ? new GrinderProperties() : new GrinderProperties(file);
    merged.putAll(supplied);
    if (file == null) {
      processControl.startWorkerProcesses(merged);
    }
    else {
      processControl.startWorkerProcessesWithDistributedFiles(properties.getDistributionDirectory(), merged);
    }
    return success();
  }

  Object stopWorkers() {
    processControl.resetWorkerProcesses();
    return success();
  }

  Object stopAgents() {
    processControl.stopAgentAndWorkerProcesses();
    return success();
  }

  private GrinderProperties parseProperties(byte[] body) throws Exception {
    final GrinderProperties p = new GrinderProperties();
    if (body.length == 0 || ControlApi.text(body).isBlank()) {
      return p;
    }
    final JsonNode root = json.readTree(body);
    if (root == null || !root.isObject()) {
      throw new ApiError(400, "the body must be a JSON object of grinder properties, e.g. {\"grinder.threads\": 4}");
    }
    for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext();) {
      final Map.Entry<String, JsonNode> e = it.next();
      final JsonNode v = e.getValue();
      if (!v.isValueNode() || v.isNull()) {
        throw new ApiError(400, "property " + e.getKey() + " must be a string, number or boolean");
      }
      p.setProperty(e.getKey(), v.asText());
    }
    return p;
  }

  static Map<String, Object> success() {
    final Map<String, Object> m = new LinkedHashMap<>();
    m.put("result", "success");
    return m;
  }
}
