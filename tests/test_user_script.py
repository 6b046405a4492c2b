"""A user's own Grinder 3 script through the runner (`esbperf run --script FILE --properties FILE`):
a script in the style of the thesis era (the stock HTTP plugin's HTTPRequest and NVPair POSTing a
SOAP envelope) runs as steps of users through the real console, agents and echo, and reports."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from conftest import ECHO_PORTS, HOST
from esbperf.core.errors import EsbperfError
from esbperf.run import user_script

THESIS_ERA_SCRIPT = '''\
# The Grinder 3, as scripts were written for the 2012 thesis: the HTTP plugin, one test, a SOAP POST.
from net.grinder.script import Test
from net.grinder.script.Grinder import grinder
from net.grinder.plugin.http import HTTPRequest
from HTTPClient import NVPair

URL = "http://%(host)s:%(port)d/echo"
ENVELOPE = ('<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" '
            'xmlns:ws="http://ws.webservice.korsdrag.datanizze.se/"><soapenv:Header/><soapenv:Body>'
            '<ws:echoMessage><id>7</id><message>hello thesis</message></ws:echoMessage>'
            '</soapenv:Body></soapenv:Envelope>')
HEADERS = (NVPair("Content-Type", "text/xml; charset=UTF-8"), NVPair("SOAPAction", '""'))

test1 = Test(1, "echoMessage")
request1 = HTTPRequest()
test1.record(request1)


class TestRunner:
    def __init__(self):
        grinder.statistics.delayReports = 1

    def __call__(self):
        result = request1.POST(URL, ENVELOPE, HEADERS)
        if result.getStatusCode() != 200 or result.getText().find("7 hello thesis") < 0:
            grinder.statistics.forLastTest.success = 0

    def __del__(self):   # per-thread clean-up, as Grinder calls it when a worker thread ends
        grinder.logger.info("thesis script: thread %%d cleaned up" %% grinder.threadNumber)
'''

# A collection now and then, as a busy worker's heap has: Jython runs the __del__ of a TestRunner
# it collects, so a step's runners, cleaned up as their step ended, would clean up again in the
# next one (the warm variant once counted 3 clean-ups in its 2-user step).
COLLECTING = '''
from java.lang import System
_run = TestRunner.__call__


def _collecting(self):
    if grinder.runNumber % 50 == 0:
        System.gc()
    return _run(self)
TestRunner.__call__ = _collecting
'''

PROPERTIES = """\
# as it came with the script
grinder.processes = 4
grinder.threads = 10
grinder.runs = 0
grinder.consoleHost = 10.0.0.1
grinder.sleepTimeFactor = 0.5
"""


def write_script(folder: Path, port: int = ECHO_PORTS["ws1"]) -> Path:
    path = folder / "thesis_echo.py"
    path.write_text(THESIS_ERA_SCRIPT % {"host": HOST, "port": port})
    return path


def test_properties_are_read_as_java_reads_them_and_the_runners_own_are_ignored(tmp_path):
    props = tmp_path / "grinder.properties"
    props.write_text(PROPERTIES + "esbperf.message : long \\\n    text\n! a comment\n")
    script = user_script.load(write_script(tmp_path), props)
    assert script.properties == {"grinder.sleepTimeFactor": "0.5", "esbperf.message": "long text"}
    assert script.ignored == ["grinder.consoleHost", "grinder.processes", "grinder.runs", "grinder.threads"]


@pytest.mark.parametrize("line, message", [
    ("grinder.jvm.arguments = -javaagent:x.jar", "grinder.jvm.arguments is not taken"),
    ("grinder.jvm = /bin/sh", "grinder.jvm is not taken"),
    ("myapp.url = http://x", "myapp.url is not passed to workers.*esbperf.myapp.url"),
])
def test_properties_the_control_api_refuses_are_one_line_naming_them(tmp_path, line, message):
    props = tmp_path / "grinder.properties"
    props.write_text(line + "\n")
    with pytest.raises(EsbperfError, match=message):
        user_script.load(write_script(tmp_path), props)


def test_a_file_that_is_not_a_grinder_script_is_refused(tmp_path):
    other = tmp_path / "other.py"
    other.write_text("print('hello')\n")
    with pytest.raises(EsbperfError, match="defines no TestRunner"):
        user_script.load(other)
    with pytest.raises(EsbperfError, match="no such script"):
        user_script.load(tmp_path / "missing.py")


def test_a_plan_for_a_script_has_no_scenarios(tmp_path):
    from esbperf.core import plan as plans

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"name": "p", "scenarios": ["proxy"], "users": [1], "duration_s": 1}))
    with pytest.raises(EsbperfError, match="'scenarios' does not apply with --script"):
        plans.load(path, script="thesis_echo")
    path.write_text(yaml.safe_dump({"name": "p", "users": [1, 3], "duration_s": 1}))
    plan = plans.load(path, script="thesis_echo")
    assert [str(s.relative_dir()) for s in plan.steps(["direct"])] == ["direct/thesis_echo/script/1/iter-1",
                                                                     "direct/thesis_echo/script/3/iter-1"]
    assert plans.Plan.from_dict(plan.to_dict(), "run.json").steps(["direct"]) == plan.steps(["direct"])


@pytest.mark.slow
@pytest.mark.parametrize("takes_steps", [False, True], ids=["fresh", "warm"])
def test_a_thesis_era_script_runs_through_the_runner_and_reports(grinder, echoes, testbed_file, tmp_path, takes_steps):
    script = write_script(tmp_path)
    if takes_steps:   # it says warm workers may carry it: a TestRunner per step and thread
        script.write_text(script.read_text() + "\nTAKES_STEPS = True\n" + COLLECTING)
    props = tmp_path / "grinder.properties"
    props.write_text(PROPERTIES)
    plan = tmp_path / "script-plan.yaml"
    users = [3, 2] if takes_steps else [3]
    plan.write_text(yaml.safe_dump({"name": "script-plan", "users": users, "duration_s": 3, "warmup_s": 2}))
    out = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(plan), "--target", "direct",
                          "--testbed", str(testbed_file), "--script", str(script), "--properties", str(props),
                          "--out", str(tmp_path / "results")],
                         capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ignored (set per step by the runner, or by the testbed): grinder.consoleHost" in out.stdout
    [run_dir] = (tmp_path / "results").iterdir()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["finished"] and record["plan"]["script"] == "thesis_echo"
    assert record["workers"]["mode"] == ("warm" if takes_steps else "fresh")
    assert record["script"]["takes_steps"] is takes_steps
    assert record["script"]["properties"] == {"grinder.sleepTimeFactor": "0.5"}
    assert (run_dir / "script" / "thesis_echo.py").read_text() == script.read_text()
    assert not (Path(record["script"]["staged"])).is_absolute()

    step_dir = run_dir / "direct" / "thesis_echo" / "script" / "3" / "iter-1"
    meta = json.loads((step_dir / "step.json").read_text())
    assert meta["threads_seen"] == 3, "3 users over 2 agents: the 4th thread stopped at once"
    header, *rows = [line for log in (step_dir / "logs").glob("*-data.log") for line in log.read_text().splitlines()
                     if line][:2]
    assert "HTTP response code" in header, header
    for count in users:
        step_dir = run_dir / "direct" / "thesis_echo" / "script" / str(count) / "iter-1"
        worker_logs = [log.read_text() for log in (step_dir / "logs").glob("*.log") if not log.name.endswith("-data.log")]
        assert sum(text.count("thesis script: thread") for text in worker_logs) == count, \
            "the script's __del__ ran once per user's thread and step (issue 23.11)"
    summary = pl.read_csv(run_dir / "report" / "summary.csv").filter(pl.col("users") == 3)
    [row] = summary.rows(named=True)
    assert row["scenario"] == "thesis_echo" and row["users"] == 3 and row["transactions"] > 100
    assert row["errors"] == 0 and row["tps"] > 50
    assert (run_dir / "report" / "report.html").is_file()


def test_the_workers_report_interval_is_the_steps_property_else_the_distributions(tmp_path):
    """step.json `report_interval_ms`, what the console-count check allows at the window's edges:
    a user's script may set grinder.reportToConsole.interval; else the distributed
    grinder.properties says it (500 ms); else Grinder's default."""
    from esbperf.core.project import ROOT
    from esbperf.run.workers import report_interval_ms

    assert report_interval_ms({}, ROOT / "grinder-scripts") == 500
    assert report_interval_ms({"grinder.reportToConsole.interval": "250"}, ROOT / "grinder-scripts") == 250
    (tmp_path / "grinder.properties").write_text("grinder.reportToConsole.interval = 2000\n")
    assert report_interval_ms({}, tmp_path) == 2000
    assert report_interval_ms({}, tmp_path / "nowhere") == 500


def test_the_http_plugins_status_column_is_read_as_the_status(tmp_path):
    from esbperf.results.datalog import log_stats

    log = tmp_path / "host-0-data.log"
    log.write_text("Thread, Run, Test, Start time (ms since Epoch), Test time, Errors, HTTP response code, "
                   "HTTP response length, HTTP response errors, Time to resolve host, Time to establish connection, "
                   "Time to first byte, New connections\n"
                   "0, 0, 1, 1000, 2, 0, 200, 512, 0, 0, 0, 1, 1\n"
                   "0, 1, 1, 1010, 3, 1, 500, 40, 1, 0, 0, 2, 0\n"
                   "0, 2, 1, 1020, 2, 0, 200, 512, 0, 0, 0, 1, 0\n")
    stats = log_stats([log], 1000, 2000)
    assert (stats.transactions, stats.errors, stats.error_statuses) == (2, 1, {"500": 1})


def test_the_step_line_names_the_first_tests_figures_never_a_sum_of_tests(tmp_path):
    """A page test (1) wrapping two request tests (2, 3): a page every 100 ms, each 8 ms, its
    requests 3 ms each. The step's line and step.json `summary` give the page's 10 TPS and 8 ms,
    and each request test on its own line, where the step's totals said 30 TPS and a mean of
    4.7 ms that no test had."""
    from esbperf.results.datalog import log_stats
    from esbperf.run.runner import _summary_lines
    from esbperf.run.step import window_summary

    lines = ["Thread, Run, Test, Start time (ms since Epoch), Test time, Errors"]
    for run, start in enumerate(range(1000, 11_000, 100)):
        lines += [f"0, {run}, 2, {start}, 3, 0", f"0, {run}, 3, {start + 4}, 3, 0", f"0, {run}, 1, {start}, 8, 0"]
    log = tmp_path / "host-0-data.log"
    log.write_text("\n".join(lines) + "\n")
    summary = window_summary(log_stats([log], 1000, 11_000), 10.0)
    assert (summary["test"], summary["transactions"], summary["tps"], summary["mean_ms"]) == (1, 100, 10.0, 8.0)
    assert [(t["test"], t["tps"], t["mean_ms"]) for t in summary["tests"]] == [(1, 10.0, 8.0), (2, 10.0, 3.0),
                                                                               (3, 10.0, 3.0)]
    first, *more = _summary_lines({"summary": summary})
    assert first.startswith("test 1: 100 transactions, 0 errors, TPS 10.0, mean 8.000 ms")
    assert [line.split(",")[0] for line in more] == ["test 2: 100 transactions", "test 3: 100 transactions"]


SLOW_ECHO_PORT = 16085   # this file's own echo that answers after 20 ms
HALF_IDLE_SCRIPT = THESIS_ERA_SCRIPT.replace(
    '''            grinder.statistics.forLastTest.success = 0
''', '''            grinder.statistics.forLastTest.success = 0
        if grinder.threadNumber %% 2 == 1:
            grinder.sleep(700, 0)   # idled on purpose: one transaction now and then, not a user's load
''')


@pytest.mark.slow
def test_littles_law_warns_when_half_the_threads_idle(grinder, echoes, testbed_file, tmp_path, request):
    # 4 users over 2 agents: thread 1 of each agent's worker idles 0.7 s after each transaction, so
    # every thread is seen in the window (the users check passes) but only about 2 load the target.
    # The echo waits 20 ms: the script's whole-ms times are then at most 5 % short, so the law's
    # tolerance band cannot swallow the idle half (with a 1 ms echo it could, on a fast machine).
    from esbperf.analysis.report import build_report
    from esbperf.services.echo import start_echo

    slow_echo = start_echo("ws1", HOST, SLOW_ECHO_PORT, delay_ms=20, workdir=tmp_path / "slow-echo")
    request.addfinalizer(slow_echo.stop)
    script = tmp_path / "half_idle.py"
    script.write_text(HALF_IDLE_SCRIPT % {"host": HOST, "port": SLOW_ECHO_PORT})
    plan = tmp_path / "idle-plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "idle-plan", "users": [4], "duration_s": 4, "warmup_s": 2}))
    out = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(plan), "--target", "direct",
                          "--testbed", str(testbed_file), "--script", str(script), "--out", str(tmp_path / "results"),
                          "--no-report"], capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [run_dir] = (tmp_path / "results").iterdir()
    meta = json.loads((run_dir / "direct/half_idle/script/4/iter-1/step.json").read_text())
    assert meta["threads_seen"] == 4
    _, analysis = build_report([run_dir], tmp_path / "report")
    [row] = analysis.summary.rows(named=True)
    assert row["little_ratio"] < 0.75, row["little_ratio"]
    assert any("Little's law does not hold" in w and "4 users" in w for w in analysis.warnings), analysis.warnings
