"""The host monitor (agents/monitor) and its collection into step folders (esbperf/run/monitors.py),
end to end: real JVMs, real sigar and OSHI, real load, real spools. Ports 17100-17199 are this
file's."""
from __future__ import annotations

import csv
import io
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from esbperf.core import topology
from esbperf.core.errors import EsbperfError
from esbperf.core.project import ROOT
from esbperf.analysis import bottleneck
from esbperf.analysis.monitor import host_stats
from esbperf.run import monitors
from esbperf.services import monitor

pytestmark = pytest.mark.slow

LOCAL = ROOT / "console-config" / "testbeds" / "local.yaml"
HEADER = ["time_ms", "phase", "metric", "subject", "value"]
# Our own ports for everything a testbed names, so no other test's services are touched.
OTHER_PORTS = {"console": 17190, "api": 17191, "echo": (17181, 17182, 17183), "esb": 17240}   # esb: one an engine, up to 17259


def now_ms() -> int:
    return int(time.time() * 1000)


def make_testbed(path: Path, monitor_ports: dict[str, int], link_mbit: dict[str, float] | None = None):
    """The local testbed with our ports, monitors only for `monitor_ports`' roles."""
    data = yaml.safe_load(LOCAL.read_text())
    data["console"].update(port=OTHER_PORTS["console"], api_port=OTHER_PORTS["api"])
    for role, host in data["hosts"].items():
        host.pop("monitor_port", None)
        if role in monitor_ports:
            host["monitor_port"] = monitor_ports[role]
        if "echo_port" in host:
            host["echo_port"] = OTHER_PORTS["echo"][int(role[-1]) - 1]
        if "esb_ports" in host:
            host["esb_ports"] = {name: OTHER_PORTS["esb"] + i for i, name in enumerate(host["esb_ports"])}
        if link_mbit and role in link_mbit:
            host["link_mbit"] = link_mbit[role]
    path.write_text(yaml.safe_dump(data))
    return topology.load(path)


def read_step_csv(path: Path) -> list[dict]:
    text = path.read_text()
    assert text.splitlines()[0] == ",".join(HEADER)
    return list(csv.DictReader(io.StringIO(text)))


def pull(port: int, from_ms: int, to_ms: int) -> list[dict]:
    """The monitor's own answer, read independently of esbperf.monitor."""
    url = f"http://127.0.0.1:{port}/samples?from={from_ms}&to={to_ms}"
    with urllib.request.urlopen(url, timeout=5) as response:
        return list(csv.DictReader(io.StringIO(response.read().decode())))


def values(rows: list[dict], metric: str, subject: str = "", after_ms: int = 0) -> list[float]:
    return [float(r["value"]) for r in rows
            if r["metric"] == metric and r["subject"] == subject and int(r["time_ms"]) >= after_ms]


def cpu_seconds(pid: int) -> float:
    """A process's CPU time (user + system) as the kernel counts it."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(*processes) -> None:
    for p in processes:
        if isinstance(p, subprocess.Popen):
            p.kill()
            p.wait()
        elif p is not None:
            p.stop()


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    """A monitor for every role of a testbed, all on loopback."""
    tmp = tmp_path_factory.mktemp("five")
    ports = {role: 17101 + i for i, role in enumerate(topology.ROLES)}
    testbed = make_testbed(tmp / "testbed.yaml", ports)
    started = []
    try:
        for role, port in ports.items():
            started.append(monitor.start_monitor(role, "127.0.0.1", port, workdir=tmp / role))
        yield testbed
    finally:
        stop(*started)


def test_collect_step_writes_every_role_with_the_phases_marked(five, tmp_path):
    warmup = now_ms()
    measure = warmup + 2000
    time.sleep(5)
    end = now_ms()
    step = tmp_path / "step-001"
    result = monitors.collect_step(five, step, warmup, measure, end)

    assert sorted(result["monitors"]) == sorted(topology.ROLES)
    assert sorted(p.name for p in step.glob("monitor-*.csv")) == sorted(f"monitor-{r}.csv" for r in topology.ROLES)
    for role in topology.ROLES:
        rows = read_step_csv(step / f"monitor-{role}.csv")
        summary = result["monitors"][role]
        assert summary["error"] is None and summary["gaps_ms"] == 0 and summary["sampler"] == "sigar", summary
        assert summary["rows"] == len(rows)
        ticks = sorted({int(r["time_ms"]) for r in rows if r["metric"] == "cpu.total"})
        # Once a second from the window's first second to its last.
        assert ticks[0] - warmup <= 1000 and end - ticks[-1] <= 1000, (warmup, ticks, end)
        assert all(b - a <= 1500 for a, b in zip(ticks, ticks[1:])), ticks
        assert all(warmup <= int(r["time_ms"]) < end for r in rows)
        for r in rows:
            assert r["phase"] == ("measure" if int(r["time_ms"]) >= measure else "warmup"), r
        assert {"warmup", "measure"} <= {r["phase"] for r in rows}
        metrics = {r["metric"] for r in rows}
        assert {"cpu.user", "cpu.sys", "cpu.idle", "cpu.total", "cpu.core", "mem.used", "mem.total",
                "net.rx_bytes", "net.tx_bytes", "net.rx_packets", "net.tx_packets"} <= metrics
        for r in rows:
            if r["metric"].startswith("cpu."):
                assert 0 <= float(r["value"]) <= 100, r
        cores = {r["subject"] for r in rows if r["metric"] == "cpu.core"}
        assert cores == {str(i) for i in range(os.cpu_count())}
        used, total = values(rows, "mem.used")[0], values(rows, "mem.total")[0]
        assert 0 < used < total


def proc_stat_busy() -> dict[int, tuple[int, int]]:
    """(busy, all) jiffies per CPU from /proc/stat, as mpstat reads them (iowait counts as idle)."""
    found = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name != "cpu":
            ticks = [int(f) for f in fields[:8]]   # user nice system idle iowait irq softirq steal
            found[int(name[3:])] = (sum(ticks) - ticks[3] - ticks[4], sum(ticks))
    return found


def at_next_second() -> int:
    """Sleep to just after the next whole second (the monitors stamp their samples there)."""
    time.sleep(1 - time.time() % 1 + 0.02)
    return now_ms() // 1000 * 1000


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs to pin two hosts apart")
@pytest.mark.parametrize("sampler", ["sigar", "oshi"])
def test_a_pinned_host_reads_the_cpu_of_its_own_cores(tmp_path, sampler):
    """A one-machine testbed gives the client core 0 and the esb host core 1: a busy loop on core
    0 is the client's CPU (~100 % of its cores), not the esb host's, and each host's figure is what
    the kernel counts for its own core over the same seconds (mpstat's source, /proc/stat)."""
    ports = {"client": 17111, "esb": 17112}
    make_testbed(tmp_path / "pinned.yaml", ports)
    data = yaml.safe_load((tmp_path / "pinned.yaml").read_text())
    data["cpus"] = "shared"
    data["hosts"]["client"]["cpus"], data["hosts"]["esb"]["cpus"] = [0], [1]
    (tmp_path / "pinned.yaml").write_text(yaml.safe_dump(data))
    testbed = topology.load(tmp_path / "pinned.yaml")
    started, busy = [], None
    try:
        for role, port in ports.items():
            started.append(monitor.start_monitor(role, "127.0.0.1", port, workdir=tmp_path / role,
                                                  testbed=testbed, sampler=sampler))
        busy = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c",
                                 "import time\nend = time.time() + 20\nwhile time.time() < end: pass"])
        time.sleep(1.5)   # the loop running, the monitors past their first sample
        begin, kernel_before = at_next_second(), proc_stat_busy()
        time.sleep(4)
        end, kernel_after = at_next_second(), proc_stat_busy()
        time.sleep(0.3)   # the sample stamped at the end is in the spool
        rows = {role: pull(port, begin + 1, end + 1) for role, port in ports.items()}
        statuses = {role: monitor.status("127.0.0.1", port) for role, port in ports.items()}
    finally:
        stop(*started, busy)

    kernel = {cpu: 100 * (kernel_after[cpu][0] - kernel_before[cpu][0]) / max(1, kernel_after[cpu][1] - kernel_before[cpu][1])
              for cpu in (0, 1)}
    mean = {role: sum(v := values(found, "cpu.total")) / len(v) for role, found in rows.items()}
    assert statuses["client"]["cpus"] == [0] and statuses["esb"]["cpus"] == [1]
    assert mean["client"] >= 90 and kernel[0] >= 90, (mean, kernel)
    assert mean["esb"] <= mean["client"] - 30, (mean, kernel)
    for role, cpu in (("client", 0), ("esb", 1)):
        assert abs(mean[role] - kernel[cpu]) <= 10, (role, mean, kernel)
        # Each core's own row is still the machine's per-core reading.
        core = values(rows[role], "cpu.core", str(cpu))
        assert abs(sum(core) / len(core) - mean[role]) <= 5, (role, core, mean)


def send_over_loopback(port: int, size: int) -> None:
    """`size` bytes through a TCP connection on 127.0.0.1."""
    with socket.create_server(("127.0.0.1", port)) as server:
        def sink():
            connection, _ = server.accept()
            with connection:
                while connection.recv(1 << 20):
                    pass
        receiver = threading.Thread(target=sink)
        receiver.start()
        with socket.create_connection(("127.0.0.1", port)) as sender:
            chunk = b"x" * (1 << 20)
            for _ in range(size // len(chunk)):
                sender.sendall(chunk)
        receiver.join(10)


def assert_lo_counters_grew_by(rows: list[dict], size: int) -> None:
    for metric in ("net.rx_bytes", "net.tx_bytes"):
        counter = values(rows, metric, "lo")
        assert counter[-1] - counter[0] >= size, (metric, counter)
    packets = values(rows, "net.rx_packets", "lo")
    assert packets[-1] - packets[0] >= size / 65536   # at most 64 KiB per loopback packet


def test_loopback_transfer_raises_lo_counters_by_at_least_the_bytes_sent(five, tmp_path):
    size = 64 * 1024 * 1024
    start = now_ms()
    time.sleep(1.2)   # a sample before the transfer ...
    send_over_loopback(17130, size)
    time.sleep(1.2)   # ... and one after it
    end = now_ms()
    result = monitors.collect_step(five, tmp_path, start, start, end, roles=["esb"])
    assert result["monitors"]["esb"]["error"] is None
    assert_lo_counters_grew_by(read_step_csv(tmp_path / "monitor-esb.csv"), size)


def test_busy_loop_raises_total_cpu_and_the_watched_processes_cpu_through_sigar_and_oshi(tmp_path):
    """The same load watched by a sigar monitor and by one forced onto OSHI: both see it, with
    the same metrics and subjects."""
    marker = f"esbperf-test-busy-{os.getpid()}"
    busy_loop = [sys.executable, "-c", "while True: pass", marker]
    ports = {"sigar": 17107, "oshi": 17108}
    # The testbeds first: a bad one must not leave the busy loops running (once they ran on for the
    # rest of a suite and spoiled its timings).
    testbeds = {sampler: make_testbed(tmp_path / f"{sampler}.yaml", {"esb": port}) for sampler, port in ports.items()}
    idle = subprocess.Popen(["sleep", "120"])
    busy = [subprocess.Popen(busy_loop) for _ in range(os.cpu_count())]   # every core
    started = []
    try:
        start = now_ms()
        watched_pid = busy[0].pid
        for sampler, port in ports.items():
            started.append(monitor.start_monitor("esb", "127.0.0.1", port, pids=[watched_pid, idle.pid],
                                                  matches=[marker], workdir=tmp_path / sampler, sampler=sampler))
        used_before, watch_start = cpu_seconds(watched_pid), time.monotonic()
        time.sleep(6.5)
        own_percent = 100 * (cpu_seconds(watched_pid) - used_before) / (time.monotonic() - watch_start)
        # The ESB "restarts": the match text must find the new process.
        for p in busy:
            p.kill()
            p.wait()
        restarted = now_ms()
        busy = [subprocess.Popen(busy_loop)]
        size = 64 * 1024 * 1024
        send_over_loopback(17131, size)
        time.sleep(5.5)
        end = now_ms()
        rows = {sampler: pull(port, start, end) for sampler, port in ports.items()}
        statuses = {sampler: monitor.status("127.0.0.1", port) for sampler, port in ports.items()}
        results = {sampler: monitors.collect_step(testbed, tmp_path / f"step-{sampler}", start, start + 2000, restarted)
                   for sampler, testbed in testbeds.items()}
    finally:
        stop(*started, idle, *busy)

    assert monitor.sampler_notice(started[1]) == "monitor: sampling through OSHI (--sampler oshi)"
    assert monitor.sampler_notice(started[0]) is None
    assert {r["metric"] for r in rows["sigar"]} >= {"cpu.core", "mem.used", "net.tx_packets", "proc.cpu", "proc.rss"}
    keys = {sampler: {(r["metric"], r["subject"]) for r in found} for sampler, found in rows.items()}
    assert keys["oshi"] == keys["sigar"], keys["oshi"] ^ keys["sigar"]
    for sampler, found in rows.items():
        assert statuses[sampler]["sampler"] == sampler and results[sampler]["monitors"]["esb"]["sampler"] == sampler
        before_restart = [float(r["value"]) for r in found if r["metric"] == "cpu.total"
                          and start + 2000 <= int(r["time_ms"]) < restarted]
        assert sorted(before_restart)[len(before_restart) // 2] >= 80, (sampler, before_restart)
        for r in found:
            if r["metric"].startswith("cpu."):
                assert 0 <= float(r["value"]) <= 100, (sampler, r)
        assert 0 < values(found, "mem.used")[0] < values(found, "mem.total")[0]

        # Percent of one core. The cores are shared with whatever else runs here (a busy loop
        # got under 10 % under load), so the floor only tells busy from asleep ...
        by_pid = values(found, "proc.cpu", str(watched_pid))
        assert by_pid and all(3 <= v <= 105 for v in by_pid), (sampler, by_pid)
        # ... and the kernel's own count over (almost) the same time pins value and unit.
        mean = sum(by_pid) / len(by_pid)
        assert 0.6 * own_percent <= mean <= 1.4 * own_percent + 5, (sampler, by_pid, own_percent)
        assert max(values(found, "proc.cpu", str(idle.pid))) <= 1
        assert values(found, "proc.rss", str(idle.pid))[0] > 0
        matched = [float(r["value"]) for r in found if r["metric"] == "proc.cpu" and r["subject"] == marker
                   and int(r["time_ms"]) < restarted]
        assert matched and min(matched) >= 3, (sampler, matched)
        after = values(found, "proc.cpu", marker, after_ms=restarted + 2000)
        assert after and min(after) >= 3, (sampler, after, found[-5:])
        # Every other tick, whatever the ticks' jitter (ProcessWatcher.TICK_SLACK_MS): never every tick.
        proc_ticks = sorted({int(r["time_ms"]) for r in found if r["metric"] == "proc.rss"})
        assert all(1500 <= b - a < 3500 for a, b in zip(proc_ticks, proc_ticks[1:])), (sampler, proc_ticks)
        assert_lo_counters_grew_by(found, size)

        # The same window as the runner collects it, judged by the one rule: CPU is a bottleneck.
        cpu = [b for b in verdicts(tmp_path / f"step-{sampler}", "esb") if b["resource"] == "cpu"]
        assert cpu and cpu[0]["role"] == "esb" and cpu[0]["sustained_percent"] > 85, (sampler, results[sampler])


def test_a_monitor_killed_mid_window_leaves_a_gap_and_the_others_are_collected(tmp_path):
    testbed = make_testbed(tmp_path / "testbed.yaml", {"esb": 17111, "ws1": 17112})
    esb = ws1 = None
    try:
        esb = monitor.start_monitor("esb", "127.0.0.1", 17111, workdir=tmp_path / "esb")
        ws1 = monitor.start_monitor("ws1", "127.0.0.1", 17112, workdir=tmp_path / "ws1")
        warmup = now_ms()
        time.sleep(2)
        os.killpg(esb.pid, signal.SIGKILL)   # gone for good, and its samples with it
        esb.popen.wait()
        measure = now_ms()
        time.sleep(2)
        end = now_ms()
        lost = monitors.collect_step(testbed, tmp_path / "lost", warmup, measure, end)
    finally:
        stop(esb, ws1)

    # Not answering at all: the whole window is a gap, split at the measurement's start.
    assert "does not answer" in lost["monitors"]["esb"]["error"]
    assert lost["monitors"]["esb"]["rows"] == 0 and lost["monitors"]["esb"]["gaps_ms"] == end - warmup
    gaps = read_step_csv(tmp_path / "lost" / "monitor-esb.csv")
    assert [(g["metric"], g["phase"], int(g["value"])) for g in gaps] == \
        [("gap", "warmup", measure - warmup), ("gap", "measure", end - measure)]
    assert "does not answer" in gaps[0]["subject"] and "," not in gaps[0]["subject"]
    # The other monitor is unaffected.
    assert lost["monitors"]["ws1"]["error"] is None and lost["monitors"]["ws1"]["gaps_ms"] == 0
    assert lost["monitors"]["ws1"]["rows"] > 0
    assert verdicts(tmp_path / "lost", "esb") == []


def verdicts(step_dir: Path, role: str, link_mbit: float | None = None) -> list[dict]:
    """The bottleneck rule on a step's monitor file, as the analysis applies it."""
    return host_stats(step_dir / f"monitor-{role}.csv", role, link_mbit).bottlenecks


def spool_bytes(workdir: Path) -> int:
    return sum(p.stat().st_size for p in (workdir / "spool").glob("samples-*.tsv"))


def test_a_monitor_killed_and_restarted_on_its_spool_serves_the_window_with_a_gap_only_where_it_was_down(tmp_path):
    testbed = make_testbed(tmp_path / "testbed.yaml", {"esb": 17113, "ws1": 17114})
    esb = ws1 = None
    try:
        esb = monitor.start_monitor("esb", "127.0.0.1", 17113, workdir=tmp_path / "esb")
        ws1 = monitor.start_monitor("ws1", "127.0.0.1", 17114, workdir=tmp_path / "ws1")
        warmup = now_ms()
        time.sleep(3.5)
        os.killpg(esb.pid, signal.SIGKILL)
        esb.popen.wait()
        killed = now_ms()
        # As if the kill had come in the middle of a write: the spool ends with a tick line
        # without its newline (a copy of the last one, half a second later, otherwise whole).
        segment = max((tmp_path / "esb" / "spool").glob("samples-*.tsv"))
        last = [line for line in segment.read_text().splitlines() if line.startswith("T\t")][-1]
        _, last_ms, rest = last.split("\t", 2)
        cut_ms = int(last_ms) + 500
        with open(segment, "a") as spool:
            spool.write(f"T\t{cut_ms}\t{rest}")
        time.sleep(3)
        measure = now_ms()
        esb = monitor.start_monitor("esb", "127.0.0.1", 17113, workdir=tmp_path / "esb")   # the same spool
        back = now_ms()
        time.sleep(3)
        end = now_ms()
        result = monitors.collect_step(testbed, tmp_path / "step", warmup, measure, end)
    finally:
        stop(esb, ws1)

    esb_result = result["monitors"]["esb"]
    assert esb_result["error"] is None and esb_result["sampler"] == "sigar", esb_result
    rows = read_step_csv(tmp_path / "step" / "monitor-esb.csv")
    ticks = sorted({int(r["time_ms"]) for r in rows if r["metric"] == "cpu.total"})
    before = [t for t in ticks if t < killed]
    after = [t for t in ticks if t > killed]
    # What the killed monitor sampled is still served, from the window's first second ...
    assert len(before) >= 3 and before[0] - warmup <= 1000, (warmup, ticks, killed)
    assert all(b - a <= 1500 for a, b in zip(before, before[1:])), before
    # ... and so is what the new one sampled, to the window's end; the cut-short line is not.
    assert after and after[0] <= back + 1000 and end - after[-1] <= 1000, (back, after, end)
    assert cut_ms not in {int(r["time_ms"]) for r in rows}
    # The only gap is the time it was down (split at the measurement's start, which fell in it).
    gaps = [r for r in rows if r["metric"] == "gap"]
    assert [(g["phase"], g["subject"]) for g in gaps] == [("warmup", "no samples"), ("measure", "no samples")], gaps
    assert int(gaps[0]["time_ms"]) == before[-1] and int(gaps[1]["time_ms"]) == measure
    assert measure - killed <= esb_result["gaps_ms"] <= back - killed + 1000, (esb_result, killed, back)
    assert result["monitors"]["ws1"]["gaps_ms"] == 0


def test_the_spool_stays_within_its_bound(tmp_path):
    bound = 2048   # a few ticks' worth (the least allowed); the default is 64 MiB
    mon = None
    try:
        mon = monitor.start_monitor("esb", "127.0.0.1", 17115, workdir=tmp_path / "mon", spool_max_bytes=bound)
        start = now_ms()
        sizes = []
        for _ in range(9):
            time.sleep(1)
            sizes.append(spool_bytes(tmp_path / "mon"))
        status = monitor.status("127.0.0.1", 17115)
        rows = pull(17115, 0, now_ms() + 1000)   # everything it still holds
    finally:
        stop(mon)
    assert max(sizes) <= bound, sizes
    assert status["spool"]["max_bytes"] == bound and status["spool"]["bytes"] <= bound, status
    ticks = sorted({int(r["time_ms"]) for r in rows if r["metric"] == "cpu.total"})
    # The oldest went first: what is left is the newest ticks, none missing between them.
    assert ticks and ticks[0] > start + 1000 and ticks[-1] >= start + 7000, (start, ticks)
    assert all(b - a <= 1500 for a, b in zip(ticks, ticks[1:])), ticks
    assert status["oldest_ms"] > start + 1000 and status["ticks"] <= len(ticks) + 1, (status, ticks)


NETNS = "esbpmon0"
VETH_HOST, VETH_NS = "esbpmon0h", "esbpmon0n"
HOST_ADDRESS, NS_ADDRESS = "198.19.254.1", "198.19.254.2"   # RFC 2544 benchmark range


@pytest.fixture
def veth_link():
    """A network namespace joined to this one by a veth pair: a real link with a name."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and ip(8) for a network namespace")
    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True)
    subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)   # left over from a crash
    ip("netns", "add", NETNS)
    try:
        ip("link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS, "netns", NETNS)
        ip("addr", "add", f"{HOST_ADDRESS}/30", "dev", VETH_HOST)
        ip("link", "set", VETH_HOST, "up")
        ip("-n", NETNS, "addr", "add", f"{NS_ADDRESS}/30", "dev", VETH_NS)
        ip("-n", NETNS, "link", "set", VETH_NS, "up")
        yield
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)


SINK = """
import socket, sys
with socket.create_server((sys.argv[1], int(sys.argv[2]))) as s:
    print("ready", flush=True)
    c, _ = s.accept()
    while c.recv(1 << 20):
        pass
"""


@pytest.mark.root
def test_a_saturated_link_is_a_bottleneck_and_loopback_is_not(veth_link, tmp_path):
    # A 10 Mbit/s link on paper, fed at ~64 Mbit/s for 4 s over the veth (and nothing on lo).
    testbed = make_testbed(tmp_path / "testbed.yaml", {"esb": 17121}, link_mbit={"esb": 10})
    sink = subprocess.Popen(["ip", "netns", "exec", NETNS, sys.executable, "-c", SINK, NS_ADDRESS, "17131"],
                            stdout=subprocess.PIPE, text=True)
    mon = None
    try:
        assert sink.stdout.readline().strip() == "ready"
        mon = monitor.start_monitor("esb", "127.0.0.1", 17121, workdir=tmp_path / "mon")
        start = now_ms()
        time.sleep(1.2)
        sent = 0
        with socket.create_connection((NS_ADDRESS, 17131)) as sender:
            deadline = time.monotonic() + 4.5
            while time.monotonic() < deadline:
                sender.sendall(b"x" * (800 * 1024))
                sent += 800 * 1024
                time.sleep(0.1)
        time.sleep(1.2)
        end = now_ms()
        monitors.collect_step(testbed, tmp_path / "step", start, start + 1000, end)
    finally:
        stop(mon, sink)

    rows = read_step_csv(tmp_path / "step" / "monitor-esb.csv")
    tx = values(rows, "net.tx_bytes", VETH_HOST)
    assert tx[-1] - tx[0] >= sent
    found = verdicts(tmp_path / "step", "esb", link_mbit=testbed.hosts["esb"].link_mbit)
    link = [b for b in found if b["resource"] == "link-tx"]
    assert link and link[0]["role"] == "esb" and link[0]["sustained_percent"] > 85, found
    assert link[0]["max_percent"] >= link[0]["sustained_percent"]


def test_the_verdict_rule():
    """Sustained (3 samples in a row) or mean above 85 % is a bottleneck; brief peaks are not."""
    def cpu(*percents, start=11_000):   # the measurement starts at 10 000: its first sample is at 11 000
        return [(start + 1000 * i, "cpu.total", "", str(p)) for i, p in enumerate(percents)]

    def judge(samples, link=None):
        points = [(t, float(v)) for t, metric, _, v in samples if metric == "cpu.total"]
        counters = {"rx": {}, "tx": {}}
        for t, metric, subject, v in samples:
            if metric in ("net.rx_bytes", "net.tx_bytes"):
                counters[metric[4:6]].setdefault(subject, []).append((t, float(v)))
        return bottleneck.assess("esb", points, counters["rx"], counters["tx"], 10_000, link).bottlenecks

    assert judge(cpu(50, 99, 40, 99, 40, 99, 40)) == []
    assert judge(cpu(99, 99, 99, start=1000) + cpu(40, 40)) == []          # in the warm-up only
    [held] = judge(cpu(40, 90, 95, 92, 40, 40))
    assert held == {"role": "esb", "resource": "cpu", "max_percent": 95.0, "mean_percent": 66.2,
                    "sustained_percent": 90.0}
    assert judge(cpu(84, 100, 84, 100, 84, 100))[0]["mean_percent"] == 92.0  # high on average

    def counter(metric, interface, mbit_per_s, seconds=6):
        return [(9_000 + 1000 * i, metric, interface, str(int(i * mbit_per_s * 1e6 / 8))) for i in range(seconds)]
    busy_link = counter("net.rx_bytes", "eth0", 900) + counter("net.tx_bytes", "eth0", 10)
    [rx] = judge(busy_link, link=1000)
    assert rx["resource"] == "link-rx" and rx["sustained_percent"] == pytest.approx(90, abs=0.2)
    assert judge(busy_link, link=None) == []                                # capacity unknown
    assert judge(counter("net.rx_bytes", "lo", 5000), link=1000) == []       # loopback is no link


def test_a_window_counts_the_samples_stamped_in_it_from_its_start_exclusive_to_its_end_inclusive(tmp_path):
    """A sample stamped t covers the second before t: the one stamped at the measurement's start is
    the warm-up's last second, the one stamped at its end the measurement's last (issue 23.5)."""
    measure, end = 10_000, 15_000
    samples = [(t, "cpu.total", "", "100" if t in (measure, end + 1000) else "10") for t in range(7_000, 17_000, 1000)]
    points = [(t, float(v)) for t, _, _, v in samples]
    load = bottleneck.assess("esb", points, {}, {}, measure, end_ms=end)
    assert load.cpu_mean == 10 and load.cpu_max == 10, "the samples at the start and after the end are not the window's"
    # The runner pulls through the end (the monitor's `to` is exclusive) and marks phases the same way.
    pulled = []

    def fake_pull(host, port, from_ms, to_ms):
        pulled.append((from_ms, to_ms))
        return [s for s in samples if from_ms <= s[0] < to_ms], None, 0, "sigar"
    testbed = make_testbed(tmp_path / "testbed.yaml", {"esb": 17199})
    original = monitors.pull
    monitors.pull = fake_pull
    try:
        monitors.collect_step(testbed, tmp_path / "step", 7_000, measure, end, roles=["esb"])
    finally:
        monitors.pull = original
    assert pulled == [(7_000, end + 1)]
    rows = read_step_csv(tmp_path / "step" / "monitor-esb.csv")
    measured = [int(r["time_ms"]) for r in rows if r["phase"] == "measure"]
    assert measured == list(range(measure + 1000, end + 1, 1000))
    stats = host_stats(tmp_path / "step" / "monitor-esb.csv", "esb", None, measure, None, end)
    assert stats.cpu_mean == 10


def test_without_sigars_library_the_monitor_says_so_in_one_line_and_samples_through_oshi(tmp_path, monkeypatch):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "libsigar-amd64-linux-1.6.4.so").write_bytes(b"not a library")
    for native, port, reason in [(tmp_path / "empty", 17140, "no folder"), (broken, 17141, "not a shared library")]:
        monkeypatch.setattr(monitor, "NATIVE_DIR", native)
        mon = monitor.start_monitor("esb", "127.0.0.1", port, workdir=tmp_path / f"w{port}")
        try:
            assert monitor.status("127.0.0.1", port)["sampler"] == "oshi"
            lines = mon.log.read_text().splitlines()
            notice = monitor.sampler_notice(mon)
            assert notice and notice.startswith("monitor: sigar's native library cannot load (") and reason in notice
            assert notice.endswith("; sampling through OSHI"), notice
            assert lines[0] == notice and len(lines) == 2, lines   # that line, then where it serves
        finally:
            stop(mon)

    # Only where nothing can sample at all is it an error: OSHI without JNA's native library.
    monkeypatch.setattr(monitor, "JVM_ARGS", [*monitor.JVM_ARGS, "-Djna.nosys=true", "-Djna.nounpack=true"])
    with pytest.raises(EsbperfError) as neither:
        monitor.start_monitor("esb", "127.0.0.1", 17142, workdir=tmp_path / "w3")
    message = str(neither.value)
    assert "\n" not in message and "sigar's native library cannot load" in message, message
    assert "and OSHI cannot sample this host either" in message, message
    assert not monitor.procs.port_open("127.0.0.1", 17142)


def test_a_port_in_use_is_one_line(tmp_path):
    with socket.create_server(("127.0.0.1", 17144)):
        with pytest.raises(EsbperfError, match=r"^cannot listen on 127.0.0.1:17144 for the esb monitor: "):
            monitor.start_monitor("esb", "127.0.0.1", 17144, workdir=tmp_path)
    # The monitor says so too (e.g. inside a namespace, where the CLI cannot check first).
    process = monitor.monitor_process("esb", "127.0.0.1", 17143, workdir=tmp_path)
    with socket.create_server(("127.0.0.1", 17143)):
        process.start()
        assert process.popen.wait(30) == 2
    assert "monitor: error: cannot listen on 127.0.0.1:17143: Address already in use" in process.log.read_text()


def test_bad_arguments_are_one_line_errors(tmp_path, five):
    def cli(*args):
        return subprocess.run([str(ROOT / ".venv" / "bin" / "esbperf"), "monitor", *args],
                              capture_output=True, text=True, timeout=60)
    for args, expected in [
        (["--role", "esb", "--listen", f"{ipaddress.IPv4Address(0)}:17150"], "not all interfaces"),
        (["--role", "esb", "--listen", "[::]:17150"], "not all interfaces"),
        (["--role", "esb", "--listen", "localhost:17150"], "must be an IP address"),
        (["--role", "esb", "--listen", "127.0.0.1:99999"], "port 1-65535"),
        (["--role", "esb", "--listen", "127.0.0.1:17150", "--pid", "999999999"], "no such process"),
        (["--role", "esb", "--listen", "127.0.0.1:17150", "--match", " "], "non-empty"),
    ]:
        done = cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, (args, done.stderr)
    assert cli("--role", "bus").returncode == 2
    assert cli("--role", "esb", "--sampler", "proc").returncode == 2

    with pytest.raises(EsbperfError, match="warmup start <= measure start < end"):
        monitors.collect_step(five, tmp_path, 2000, 1000, 3000)
    with pytest.raises(EsbperfError, match="unknown role"):
        monitors.collect_step(five, tmp_path, 1000, 2000, 3000, roles=["db"])
    with pytest.raises(EsbperfError, match="in the future"):
        monitors.collect_step(five, tmp_path, now_ms(), now_ms() + 1000, now_ms() + 60_000)
    with pytest.raises(EsbperfError, match="unknown role"):
        monitor.monitor_process("db", "127.0.0.1", 17151)


def test_the_command_prints_its_address_and_stops_on_sigterm(tmp_path):
    testbed = make_testbed(tmp_path / "testbed.yaml", {"ws2": 17160})
    env = dict(os.environ, ESBPERF_STATE=str(tmp_path / "state"))
    command = subprocess.Popen([str(ROOT / ".venv" / "bin" / "esbperf"), "monitor", "--role", "ws2",
                                "--testbed", str(testbed.path)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        first = command.stdout.readline()
        assert "http://127.0.0.1:17160/samples" in first, first
        assert monitor.status("127.0.0.1", 17160)["role"] == "ws2"
        command.send_signal(signal.SIGTERM)
        assert command.wait(30) == 0
    finally:
        if command.poll() is None:
            command.kill()
    assert not monitor.procs.port_open("127.0.0.1", 17160)
    state = tmp_path / "state" / "monitor-ws2"
    assert "monitor: stopped" in (state / "monitor.log").read_text()
    assert "spool " + str(state / "spool") in first + command.stdout.read()
    assert (state / "spool" / "lock").exists()   # its samples stay there for the next monitor on this host
