"""The testbed: its description file and validation, the emulated five-host LAN (namespaces,
veths, a bridge, tc rate limits) and the preflight check.

The emulated tests use testbeds of their own (prefixes esbt-/esbu-, subnets 198.18.201-203.0/24),
so they never touch a running demo's `esbp-` testbed; they send traffic only inside them."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from esbperf import testbed as tbapi
from esbperf.core import topology
from esbperf.core.errors import EsbperfError

ROOT = Path(__file__).resolve().parent.parent
ESBPERF = [sys.executable, "-m", "esbperf"]
IS_ROOT = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None


def needs_root(test):
    return pytest.mark.root(pytest.mark.skipif(
        not IS_ROOT, reason="needs root and iproute2: creates network namespaces, veths, a bridge and tc qdiscs")(test))


def emulated_data(prefix: str = "esbt-", subnet: int = 201, **hosts) -> dict:
    """An emulated testbed on 198.18.<subnet>.0/24 whose names start with `prefix`; host
    settings in `hosts` (role=dict) are merged over the defaults."""
    net = f"198.18.{subnet}"
    data = {
        "name": f"test-{prefix.rstrip('-')}",
        "emulated": True,
        "prefix": prefix,
        "bridge": {"name": f"{prefix}br0", "address": f"{net}.1/24"},
        "sysctl": {"net.ipv4.ip_local_port_range": "10000 65535", "net.ipv4.tcp_tw_reuse": 1},
        "console": {"port": 6372, "api_host": f"{net}.10", "api_port": 6373},
        "hosts": {
            "client": {"address": f"{net}.10", "monitor_port": 7090},
            "esb": {"address": f"{net}.20", "monitor_port": 7090, "esb_ports": {"camel": 8280}},
            "ws1": {"address": f"{net}.31", "monitor_port": 7090, "echo_port": 8080},
            "ws2": {"address": f"{net}.32", "monitor_port": 7090, "echo_port": 8080},
            "ws3": {"address": f"{net}.33", "monitor_port": 7090, "echo_port": 8080},
        },
        "targets": {"direct": {"kind": "direct"}, "camel": {"kind": "esb", "esb": "camel"}},
    }
    for role, settings in hosts.items():
        data["hosts"][role].update(settings)
    return data


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ---- the description files ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["local", "emulated", "emulated-ssh", "emulated-thesis", "lan-example"])
def test_shipped_testbeds_load(name):
    tb = topology.load(name)
    assert set(topology.ROLES) <= set(tb.hosts) and set(tb.load_roles) == set(tb.hosts) - {"esb", "ws1", "ws2", "ws3"}
    assert tb.target("direct").backends["ws1"] == tb.echo_url("ws1")


def test_emulated_testbed_names_and_commands():
    tb = topology.load("emulated")
    assert tb.emulated and tb.prefix == "esbp-" and tb.bridge.name == "esbp-br0"
    assert str(tb.bridge.interface) == "198.18.0.1/24"
    assert tb.netns("ws2") == "esbp-ws2"
    ws2_cores = topology.cpu_list(tb.hosts["ws2"].cpus)   # cpus: auto
    assert tb.command("ws2", ["java", "-version"]) == ["ip", "netns", "exec", "esbp-ws2", "taskset", "-c", ws2_cores,
                                                       "java", "-version"]
    # 10 Gbit/s: a 100 KB step bounded by an engine, not the link; the thesis's 1 Gbit/s is a variant.
    assert all(h.link_mbit == 10000 for h in tb.hosts.values())
    thesis = topology.load("emulated-thesis")
    assert thesis.name == "emulated-thesis" and all(h.link_mbit == 1000 for h in thesis.hosts.values())
    assert thesis.echo_runtime == "jaxws" and thesis.bridge == tb.bridge and thesis.hosts["esb"].esb_ports == \
        tb.hosts["esb"].esb_ports
    assert tb.api_url == "http://198.18.0.10:6373"
    local = topology.load("local")
    assert local.netns("ws1") is None and local.command("ws1", ["x"]) == ["taskset", "-c", ws2_cores, "x"]


def test_a_testbed_may_extend_another_and_say_only_what_differs(tmp_path):
    base = write(tmp_path / "base.yaml", {**emulated_data(ws3={"link_mbit": 2.5}), "link_mbit": 500})
    variant = write(tmp_path / "variant.yaml", {"name": "variant", "extends": "base.yaml", "link_mbit": 100,
                                                "hosts": {"esb": {"cpus": [0]}}, "echo": "lean"})
    tb = topology.load(variant)
    assert tb.name == "variant" and tb.echo_runtime == "lean"
    assert tb.hosts["client"].link_mbit == 100 and tb.hosts["ws3"].link_mbit == 2.5, "a host's own link wins"
    assert tb.hosts["esb"].cpus == (0,) and tb.hosts["esb"].address == topology.load(base).hosts["esb"].address
    assert topology.load(base).hosts["client"].link_mbit == 500
    loop = write(tmp_path / "loop.yaml", {"extends": "loop.yaml"})
    with pytest.raises(EsbperfError, match="extends loop.yaml, which extends it back"):
        topology.load(loop)


def test_cpus_and_defaults(tmp_path):
    data = emulated_data(ws1={"cpus": [0]}, ws2={"link_mbit": "unlimited"}, ws3={"link_mbit": 2.5})
    del data["hosts"]["esb"]["monitor_port"]
    tb = topology.load(write(tmp_path / "t.yaml", data))
    assert tb.command("ws1", ["sleep", "1"]) == ["ip", "netns", "exec", "esbt-ws1", "taskset", "-c", "0", "sleep", "1"]
    assert tb.hosts["client"].link_mbit == 1000          # the default link of an emulated host
    assert tb.hosts["ws2"].link_mbit is None
    assert tb.hosts["ws3"].link_mbit == 2.5
    assert tb.sysctl == {"net.ipv4.ip_local_port_range": "10000 65535", "net.ipv4.tcp_tw_reuse": "1"}
    # The bottleneck rule's interface (analysis/bottleneck.py): named per host, else none (the busiest counts).
    named = topology.load(write(tmp_path / "i.yaml", emulated_data(esb={"interface": "br0"})))
    assert named.hosts["esb"].interface == "br0" and named.hosts["ws1"].interface is None


@pytest.mark.parametrize("cores, client, esb, backends", [
    (2, [0], [1], [0]),                                     # the engine alone; the echoes beside the client
    (3, [0, 1], [2], [0, 1]),
    (4, [0, 1], [2, 3], [0, 1]),
    (8, [0, 1, 2], [4, 5, 6, 7], [3]),                      # from 8 CPUs the echoes have cores of their own
    (16, list(range(6)), list(range(8, 16)), [6, 7]),
])
def test_cpus_auto_gives_the_engine_cores_of_its_own(tmp_path, monkeypatch, cores, client, esb, backends):
    monkeypatch.setattr(topology, "machine_cpus", lambda: list(range(cores)))
    data = {**emulated_data(), "cpus": "auto"}
    data["hosts"]["load2"] = {"address": "198.18.201.11"}
    data["hosts"]["ws3"]["cpus"] = [cores - 1]              # a host's own list wins
    tb = topology.load(write(tmp_path / "t.yaml", data))
    assert tb.cpu_mode == "auto"
    assert list(tb.hosts["client"].cpus) == client and list(tb.hosts["load2"].cpus) == client
    assert list(tb.hosts["esb"].cpus) == esb
    assert list(tb.hosts["ws1"].cpus) == list(tb.hosts["ws2"].cpus) == backends and tb.hosts["ws3"].cpus == (cores - 1,)
    assert not set(esb) & (set(client) | set(backends))
    assert (set(client) & set(backends)) == (set(backends) if cores < 8 else set())
    together = "client, ws1, ws2, load2" if cores < 8 else "client, load2"
    assert tb.cpu_split().startswith(f"cpus auto ({cores} CPUs): {together} {topology.cpu_list(client)}; ")
    assert tb.command("esb", ["x"])[4:7] == ["taskset", "-c", topology.cpu_list(esb)]


def test_cpus_shared_on_purpose_or_on_one_cpu_pins_nothing(tmp_path, monkeypatch):
    shared = topology.load(write(tmp_path / "s.yaml", {**emulated_data(), "cpus": "shared"}))
    assert all(h.cpus is None for h in shared.hosts.values())
    assert shared.cpu_split() == "cpus shared: every host shares all of this machine's CPUs"
    monkeypatch.setattr(topology, "machine_cpus", lambda: [0])
    one = topology.load(write(tmp_path / "a.yaml", {**emulated_data(), "cpus": "auto"}))
    assert all(h.cpus is None for h in one.hosts.values())
    assert one.cpu_split() == "cpus auto: every host shares all of this machine's CPUs (1 CPU: nothing to split)"


def test_cpus_auto_is_for_one_machine(tmp_path):
    lan = yaml.safe_load((ROOT / "console-config" / "testbeds" / "lan-example.yaml").read_text())
    with pytest.raises(EsbperfError, match=r"cpus: auto is for a testbed on one machine"):
        topology.load(write(tmp_path / "lan.yaml", {**lan, "cpus": "auto"}))
    with pytest.raises(EsbperfError, match=r"cpus must be one of auto, shared"):
        topology.load(write(tmp_path / "bad.yaml", {**emulated_data(), "cpus": [0, 1]}))
    assert topology.load("lan-example").cpu_split() == "cpus: each host is a machine of its own (nothing pinned)"
    assert topology.parse_cpu_list("0-2,5") == [0, 1, 2, 5] and topology.cpu_list([5, 0, 1, 2]) == "0-2,5"


def _set(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for p in parents:
        data = data[p]
    if value is _DELETE:
        del data[last]
    else:
        data[last] = value


_DELETE = object()

BAD_EMULATED = [
    ("hosts.ws2.address", "198.18.201.31", "hosts.ws2.address 198.18.201.31 is already used by hosts.ws1.address"),
    ("hosts.ws2.address", "198.18.201.1", "hosts.ws2.address 198.18.201.1 is already used by bridge.address"),
    ("hosts.ws3.address", "198.18.202.33", "hosts.ws3.address 198.18.202.33 is not in the bridge's subnet 198.18.201.0/24"),
    ("hosts.ws3.address", "198.18.201.255", "hosts.ws3.address 198.18.201.255 is the subnet's network or broadcast"),
    ("bridge.address", "10.1.2.1/24", "bridge.address 10.1.2.1/24 is outside 198.18.0.0/15"),
    ("bridge.address", "198.18.201.1", "bridge.address needs a subnet"),
    ("bridge.address", "198.18.201.0/24", "bridge.address 198.18.201.0/24 is the subnet's network"),
    ("bridge.name", "br-test", "bridge.name must start with the prefix 'esbt-'"),
    ("bridge.name", "esbt-abcdefghijklmnop", "bridge.name must start with the prefix 'esbt-', be at most 15"),
    ("bridge", _DELETE, "an emulated testbed needs 'bridge:"),
    ("prefix", "ESB_", "prefix must be 1-8 lowercase letters"),
    ("prefix", "averylongprefix-", "prefix must be 1-8 lowercase letters"),
    ("hosts.ws1.link_mbit", -5, "hosts.ws1.link_mbit must be a positive number of Mbit/s or 'unlimited'"),
    ("hosts.ws1.cpus", "0-1", "hosts.ws1.cpus must be a non-empty list of CPU numbers"),
    ("hosts.ws1.ssh", "bench@somewhere", "hosts.ws1.ssh must be USER@198.18.201.31 on an emulated testbed"),
    ("hosts.ws1.ssh", "-oProxyCommand=x", "hosts.ws1.ssh must be an ssh destination like user@host"),
    ("hosts.ws1.dir", "esbperf", "hosts.ws1.dir is the install folder on a host reached over ssh"),
    ("hosts.load2", {"address": "198.18.201.11", "echo_port": 8080}, "hosts.load2: unknown field 'echo_port'"),
    ("hosts.load1", {"address": "198.18.201.11"}, "hosts: unknown role 'load1'"),
    ("console.api_host", "127.0.0.1", "console.api_host must be the client's address 198.18.201.10"),
    ("sysctl", {"vm.swappiness": 1}, "sysctl.vm.swappiness: an emulated testbed may only set net.* keys"),
    ("hosts.ws1.echo_port", 18080, "hosts.ws1.echo_port 18080 lies in sysctl.net.ipv4.ip_local_port_range 10000-65535"),
    ("emulated", "yes", "emulated must be true or false"),
    ("hosts.esb.interface", "lo", "hosts.esb.interface must name a network interface like eth0"),
    ("hosts.esb.interface", "eth0 br0", "hosts.esb.interface must name a network interface like eth0"),
    ("bridges", {}, "unknown field 'bridges'"),
    ("echo", "axis2", "echo must be one of jaxws, cxf, lean"),
]


@pytest.mark.parametrize("field,value,message", BAD_EMULATED, ids=[f"{b[0]}={b[1]!r}"[:40] for b in BAD_EMULATED])
def test_invalid_emulated_testbed_is_refused_naming_file_and_field(tmp_path, field, value, message):
    data = emulated_data()
    _set(data, field, value)
    path = write(tmp_path / "bad.yaml", data)
    with pytest.raises(EsbperfError) as e:
        topology.load(path)
    assert str(e.value).startswith(f"{path}: ")
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_two_services_on_one_address_and_port_are_refused(tmp_path):
    data = yaml.safe_load((topology.TESTBEDS / "local.yaml").read_text())
    data["hosts"]["ws2"]["monitor_port"] = data["hosts"]["ws1"]["monitor_port"]
    with pytest.raises(EsbperfError, match=r"hosts.ws2.monitor_port: 127.0.0.1:17093 is already taken by hosts.ws1.monitor_port"):
        topology.load(write(tmp_path / "dup.yaml", data))
    data["hosts"]["ws2"]["address"] = "127.0.0.2"     # another machine (or address): fine
    assert topology.load(write(tmp_path / "ok.yaml", data)).hosts["ws2"].monitor_port == 17093


def test_the_echo_runtime_is_the_testbeds_and_reaches_the_echo_commands(tmp_path):
    from esbperf.testbed import hosts
    data = yaml.safe_load((topology.TESTBEDS / "local.yaml").read_text())
    assert data["echo"] == "lean"
    del data["echo"]
    old = topology.load(write(tmp_path / "old.yaml", data))
    assert old.echo_runtime == "jaxws"      # a file from before the field: the thesis's runtime
    for tb, runtime in ((topology.load("local"), "lean"), (old, "jaxws")):
        echoes = [s.argv for s in hosts.plan(tb, "camel", lambda role: "x") if s.name == "echo"]
        assert len(echoes) == 3 and all(argv[-2:] == ("--runtime", runtime) for argv in echoes)


def test_real_lan_fields_are_refused_where_they_do_not_belong(tmp_path):
    data = yaml.safe_load((topology.TESTBEDS / "lan-example.yaml").read_text())
    data["bridge"] = {"name": "esbp-br0", "address": "198.18.0.1/24"}
    with pytest.raises(EsbperfError, match="bridge is only for emulated testbeds"):
        topology.load(write(tmp_path / "lan.yaml", data))


def test_cli_prints_one_line_error_and_exits_2(tmp_path):
    data = emulated_data()
    data["hosts"]["ws3"]["address"] = "198.18.201.31"
    path = write(tmp_path / "bad.yaml", data)
    result = subprocess.run([*ESBPERF, "testbed", "status", "--testbed", str(path)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith(f"esbperf: error: {path}: hosts.ws3.address 198.18.201.31 is already used")
    assert result.stderr.count("\n") == 1


def test_testbed_commands_use_the_file_and_the_namespaces(tmp_path):
    result = subprocess.run([*ESBPERF, "testbed", "commands", "--testbed", "emulated", "--esb", "synapse"],
                            capture_output=True, text=True, check=True)
    lines = result.stdout.splitlines()
    emulated = topology.load("emulated")   # cpus: auto, on this machine's cores
    cores = {role: f"taskset -c {topology.cpu_list(h.cpus)} " if h.cpus else "" for role, h in emulated.hosts.items()}
    assert f"ip netns exec esbp-ws2 {cores['ws2']}esbperf echo --id ws2 --listen 198.18.0.32:8080 --runtime lean" in lines
    assert f"ip netns exec esbp-esb {cores['esb']}esbperf esb synapse --testbed emulated" in lines
    assert f"ip netns exec esbp-client {cores['client']}esbperf console --testbed emulated" in lines
    lan = subprocess.run([*ESBPERF, "testbed", "commands", "--testbed", "lan-example"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    # each monitor watches its host's service JVMs, so a run started by hand gets their CPU too
    assert "esbperf monitor --role ws3 --testbed lan-example --match 'esbperf.echo.EchoMain --id ws3'" in lan
    esb_monitor = next(line for line in lan if line.startswith("esbperf monitor --role esb "))
    assert "--match org.apache.synapse.SynapseServer" in esb_monitor
    assert "esbperf agent --testbed lan-example --count 1 --host-id load2" in lan   # a further load host
    assert not any("netns" in line for line in lan)


def test_up_refuses_a_testbed_that_is_not_emulated():
    with pytest.raises(EsbperfError, match="testbed 'local' is not emulated"):
        tbapi.up("local")


def as_nobody(argv: list[str]) -> list[str]:
    """argv run without root: as user nobody when we are root (skip if that is impossible)."""
    if os.geteuid() != 0:
        return argv
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if shutil.which("setpriv") is None or subprocess.run([*drop, *ESBPERF, "--version"], cwd=ROOT,
                                                          capture_output=True).returncode != 0:
        pytest.skip("cannot run esbperf as user nobody here (setpriv missing or the venv unreadable)")
    return [*drop, *argv]


@pytest.mark.parametrize("action", ["up", "down", "status"])
def test_refuses_clearly_without_root(action):
    with tempfile.TemporaryDirectory() as folder:        # readable by nobody, unlike tmp_path
        os.chmod(folder, 0o755)
        path = write(Path(folder) / "t.yaml", emulated_data("esbn-", 209))
        path.chmod(0o644)
        argv = as_nobody([*ESBPERF, "testbed", action, "--testbed", str(path)])
        result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    assert f"`esbperf testbed {action}` needs root" in result.stderr
    assert result.stderr.count("\n") == 1


# ---- the emulated testbed: helpers -------------------------------------------------------

def snapshot() -> dict:
    """What exists in the root namespace that a testbed could leave behind."""
    links = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True).stdout
    qdiscs = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True, check=True).stdout
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {
        "links": sorted(link["ifname"] for link in json.loads(links)),
        "qdiscs": sorted(line for line in qdiscs.splitlines() if "esbt-" in line or "esbu-" in line),
        "netns": sorted(line.split()[0] for line in netns.splitlines() if line.strip()),
    }


def ours(snap: dict, prefix: str) -> list[str]:
    return [n for n in snap["links"] + snap["netns"] if n.startswith(prefix)] + snap["qdiscs"]


# A TCP service for the tests: `serve PORT` answers each connection with the host's name;
# `sink PORT` receives one bulk transfer and prints its bytes and seconds; `send HOST PORT S`
# sends for S seconds. Run inside a namespace with Testbed.command.
NETTOOL = textwrap.dedent("""
    import json, socket, sys, time
    mode = sys.argv[1]
    if mode in ("serve", "sink"):
        server = socket.create_server((sys.argv[3], int(sys.argv[2])))
        print("ready", flush=True)
        if mode == "serve":
            server.settimeout(60)
            while True:
                conn, _ = server.accept()
                conn.sendall(sys.argv[4].encode()); conn.close()
        conn, _ = server.accept()
        conn.settimeout(30)
        total, first, last = 0, None, None
        while True:
            data = conn.recv(1 << 20)
            if not data:
                break
            now = time.monotonic()
            first = first or now
            last, total = now, total + len(data)
        print(json.dumps({"bytes": total, "seconds": last - first}), flush=True)
    elif mode == "send":
        conn = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=10)
        block, end = b"x" * (1 << 16), time.monotonic() + float(sys.argv[4])
        while time.monotonic() < end:
            conn.sendall(block)
        conn.close()
    elif mode == "fetch":
        print(socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=5).recv(100).decode())
""")


def nettool(tb, role: str, *args: str, **popen) -> subprocess.Popen:
    argv = tb.command(role, [sys.executable, "-c", NETTOOL, *args]) if role != "root" else [sys.executable, "-c", NETTOOL, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def ready(proc: subprocess.Popen) -> subprocess.Popen:
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read()
    return proc


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    """An emulated testbed for traffic: ws1's link is 100 Mbit/s, ws2's 200 Mbit/s, the rest 1 Gbit/s."""
    if not IS_ROOT:
        pytest.skip("needs root and iproute2: creates network namespaces, veths, a bridge and tc qdiscs")
    path = write(tmp_path_factory.mktemp("testbeds") / "shaped.yaml",
                 emulated_data("esbt-", 201, ws1={"link_mbit": 100}, ws2={"link_mbit": 200}))
    with tbapi.emulated(path) as tb:
        yield tb
    assert ours(snapshot(), "esbt-") == []


# ---- the emulated testbed: life cycle ----------------------------------------------------

@needs_root
def test_up_twice_then_down_leaves_exactly_what_was_there(tmp_path):
    tb = topology.load(write(tmp_path / "t.yaml", emulated_data("esbu-", 202, ws3={"link_mbit": "unlimited"})))
    # Something with our prefix that `up` does not make: `down` must leave it alone.
    subprocess.run(["ip", "netns", "add", "esbu-keep"], check=True)
    try:
        before = snapshot()
        assert ours(before, "esbu-") == ["esbu-keep"]
        made = tbapi.up(tb)
        assert made[:3] == ["created bridge esbu-br0", "gave esbu-br0 address 198.18.202.1/24", "set esbu-br0 up"]
        assert "created namespace esbu-ws1" in made
        during = snapshot()
        for role in topology.ROLES:
            assert f"esbu-{role}" in during["links"] and f"esbu-{role}" in during["netns"]
        assert "esbu-br0" in during["links"]
        status = tbapi.status(tb)
        assert status["state"] == "up"
        assert status["hosts"]["ws1"]["shaped_mbit"] == {"from_host": 1000, "to_host": 1000}
        assert status["hosts"]["ws3"]["shaped_mbit"] == {"from_host": None, "to_host": None}

        ifindex = _ifindexes("esbu-")
        assert tbapi.up(tb) == []                    # the second `up` changes nothing ...
        assert _ifindexes("esbu-") == ifindex        # ... and re-creates nothing
        assert snapshot() == during
        sysctl = subprocess.run(tb.command("esb", ["cat", "/proc/sys/net/ipv4/ip_local_port_range"]),
                                capture_output=True, text=True, check=True).stdout.split()
        assert sysctl == ["10000", "65535"]

        # Processes still running in the namespaces are ended by `down`.
        sleepers = [subprocess.Popen(tb.command(role, ["sleep", "300"])) for role in ("client", "ws2")]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not all(tbapi.status(tb)["hosts"][r]["pids"] for r in ("client", "ws2")):
            time.sleep(0.05)
        removed = tbapi.down(tb)
        assert "ended 1 process(es) in esbu-client" in removed
        for sleeper in sleepers:
            assert sleeper.wait(5) == -signal.SIGTERM
        assert snapshot() == before
        assert tbapi.down(tb) == []                  # nothing left to remove
        assert tbapi.status(tb)["state"] == "down"
    finally:
        tbapi.down(tb)
        subprocess.run(["ip", "netns", "del", "esbu-keep"], check=False)


def _ifindexes(prefix: str) -> dict[str, int]:
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True).stdout)
    return {link["ifname"]: link["ifindex"] for link in links if link["ifname"].startswith(prefix)}


@needs_root
def test_up_repairs_what_drifted(tmp_path):
    tb = topology.load(write(tmp_path / "t.yaml", emulated_data("esbu-", 202)))
    try:
        tbapi.up(tb)
        subprocess.run(["tc", "qdisc", "del", "dev", "esbu-ws2", "root"], check=True)
        subprocess.run(["ip", "link", "set", "esbu-br0", "down"], check=True)
        assert tbapi.status(tb)["state"] == "partial"
        assert tbapi.status(tb)["hosts"]["ws2"]["shaped_ok"] is False
        assert tbapi.up(tb) == ["set esbu-br0 up", "limited esbu-ws2 to 1000 Mbit/s"]
        assert tbapi.status(tb)["state"] == "up"
        # A changed rate in the file is applied to the running testbed.
        faster = topology.load(write(tmp_path / "t2.yaml", emulated_data("esbu-", 202, ws1={"link_mbit": 500})))
        assert tbapi.up(faster) == ["limited eth0 in esbu-ws1 to 500 Mbit/s", "limited esbu-ws1 to 500 Mbit/s"]
        # Other addresses under the same names: refused, not silently re-addressed.
        moved = topology.load(write(tmp_path / "t3.yaml", emulated_data("esbu-", 203)))
        with pytest.raises(EsbperfError, match=r"bridge esbu-br0 has address 198.18.202.1/24, .*t3.yaml says "
                                               r"198.18.203.1/24; run `esbperf testbed down`"):
            tbapi.up(moved)
    finally:
        tbapi.down(tb)
    assert ours(snapshot(), "esbu-") == []


@needs_root
def test_up_refuses_what_it_did_not_make_and_leaves_nothing(tmp_path):
    tb = topology.load(write(tmp_path / "t.yaml", emulated_data("esbu-", 202)))
    subprocess.run(["ip", "link", "add", "esbu-ws2", "type", "veth", "peer", "name", "esbu-other"], check=True)
    try:
        before = snapshot()
        with pytest.raises(EsbperfError, match="a link named esbu-ws2 exists but is not the veth to eth0 in namespace esbu-ws2"):
            tbapi.up(tb)
        assert snapshot() == before                  # the failed `up` took back what it had made
        subprocess.run(["ip", "link", "del", "esbu-ws2"], check=True)
        # Another bridge on the same subnet would break routing: refused before anything is made.
        subprocess.run(["ip", "link", "add", "esbu-br9", "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", "198.18.202.200/24", "dev", "esbu-br9"], check=True)
        before = snapshot()
        with pytest.raises(EsbperfError, match="subnet 198.18.202.0/24 overlaps 198.18.202.200/24 on interface esbu-br9"):
            tbapi.up(tb)
        assert snapshot() == before
    finally:
        subprocess.run(["ip", "link", "del", "esbu-ws2"], capture_output=True)
        subprocess.run(["ip", "link", "del", "esbu-br9"], capture_output=True)
    assert ours(snapshot(), "esbu-") == []


@needs_root
def test_cli_up_status_down(tmp_path):
    path = write(tmp_path / "t.yaml", emulated_data("esbu-", 203, ws1={"cpus": [0]}))
    run = lambda *a: subprocess.run([*ESBPERF, "testbed", *a, "--testbed", str(path)], capture_output=True, text=True)
    try:
        up = run("up")
        assert up.returncode == 0, up.stderr
        assert "testbed: created namespace esbu-ws1" in up.stdout
        again = run("up")
        assert "already up and matching the file; nothing changed" in again.stdout
        status = run("status")
        assert f"testbed test-esbu ({path}): up" in status.stdout
        ws1 = next(line.split() for line in status.stdout.splitlines() if line.split()[:1] == ["ws1"])
        assert ws1 == ["ws1", "198.18.203.31", "esbu-ws1", "ok", "esbu-ws1", "ok", "1000", "1000/1000", "0", "0"]
        assert json.loads(run("status", "--json").stdout)["hosts"]["ws1"]["cpus"] == [0]
        down = run("down")
        assert "testbed: removed bridge esbu-br0" in down.stdout
        assert "nothing of it exists" in run("down").stdout
        assert ": down" in run("status").stdout
    finally:
        run("down")
    assert ours(snapshot(), "esbu-") == []


# ---- the emulated testbed: traffic -------------------------------------------------------

@pytest.mark.root
def test_namespaces_have_no_route_out(shaped):
    for role in topology.ROLES:
        routes = subprocess.run(["ip", "-n", shaped.netns(role), "-j", "route", "show"],
                                capture_output=True, text=True, check=True).stdout
        assert [r["dst"] for r in json.loads(routes)] == ["198.18.201.0/24"]


@pytest.mark.root
def test_hosts_reach_each_other_and_the_root_namespace_reaches_them(shaped):
    servers = [ready(nettool(shaped, role, "serve", "9000", shaped.hosts[role].address, role)) for role in ("ws1", "ws3")]
    try:
        from_root = nettool(shaped, "root", "fetch", shaped.hosts["ws1"].address, "9000").communicate(timeout=10)
        assert from_root[0].strip() == "ws1", from_root[1]
        across = nettool(shaped, "client", "fetch", shaped.hosts["ws3"].address, "9000").communicate(timeout=10)
        assert across[0].strip() == "ws3", across[1]
        # ws3's server listens on ws3's address only: nothing answers that port on ws2.
        refused = nettool(shaped, "client", "fetch", shaped.hosts["ws2"].address, "9000").communicate(timeout=10)
        assert "ConnectionRefusedError" in refused[1]
    finally:
        for s in servers:
            s.kill()
            s.wait()


def bulk_mbit(tb, sender: str, receiver: str, seconds: float = 2.5) -> float:
    sink = ready(nettool(tb, receiver, "sink", "9100", tb.hosts[receiver].address))
    try:
        send = nettool(tb, sender, "send", tb.hosts[receiver].address, "9100", str(seconds))
        assert send.wait(seconds + 15) == 0, send.stderr.read()
        result = json.loads(sink.communicate(timeout=15)[0])
    finally:
        sink.kill()
        sink.wait()
    return result["bytes"] * 8 / result["seconds"] / 1e6


@pytest.mark.root
@pytest.mark.parametrize("sender,receiver,mbit", [("ws1", "ws2", 100), ("ws2", "ws1", 100), ("ws2", "esb", 200)],
                         ids=["ws1-sends-100", "ws1-receives-100", "ws2-sends-200"])
def test_link_limit_holds_in_both_directions(shaped, sender, receiver, mbit):
    # ws1 -> ws2 is held by ws1's own egress; ws2 -> ws1 by the bridge's port to ws1 (the
    # "switch"); ws2 -> esb by ws2's egress at ws2's rate.
    measured = bulk_mbit(shaped, sender, receiver)
    assert measured <= mbit * 1.05, f"{sender} -> {receiver}: {measured:.1f} Mbit/s on a {mbit} Mbit/s link"
    assert measured >= mbit * 0.8, f"{sender} -> {receiver}: only {measured:.1f} Mbit/s on a {mbit} Mbit/s link"


# ---- the preflight -----------------------------------------------------------------------

@pytest.mark.root
def test_check_lists_exactly_the_unreachable_services(shaped):
    ws1 = shaped.hosts["ws1"]
    echo = ready(nettool(shaped, "ws1", "serve", str(ws1.echo_port), ws1.address, "not an echo"))
    try:
        result = subprocess.run([*ESBPERF, "testbed", "check", "--testbed", str(shaped.path), "--role", "ws1",
                                 "--timeout", "2"], capture_output=True, text=True, timeout=60)
    finally:
        echo.kill()
        echo.wait()
    assert result.returncode == 2
    assert result.stderr.strip() == (f"esbperf: error: testbed check found 1 problem(s): "
                                     f"{ws1.address}:7090 (monitor on ws1) unreachable: Connection refused")
    assert f"ok     echo         {ws1.address}:8080" in result.stdout.replace("WARN  ", "ok    ")
    assert f"namespace {shaped.netns('ws1')}" in result.stdout          # versions read inside the namespace
    assert "net.ipv4.tcp_tw_reuse 1" in result.stdout


@pytest.mark.root
@pytest.mark.slow
def test_check_passes_with_real_echo_and_monitor_and_measures_clock_skew(shaped, tmp_path):
    """The real `esbperf echo` and `esbperf monitor` in ws1's namespace: identity, skew ≈ 0."""
    ws1 = shaped.hosts["ws1"]
    env = {**os.environ, "ESBPERF_STATE": str(tmp_path)}
    started = [subprocess.Popen(shaped.command("ws1", argv), env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
               for argv in ([*ESBPERF, "echo", "--id", "ws1", "--listen", f"{ws1.address}:{ws1.echo_port}"],
                            [*ESBPERF, "monitor", "--role", "ws1", "--testbed", str(shaped.path)])]
    try:
        from esbperf.testbed import preflight
        deadline = time.monotonic() + 120
        while True:
            reports = preflight.check(shaped, roles=["ws1"], timeout=1)
            # Until both answer as what they are: an echo just started may take over the probe's 1 s at first.
            if all(p.ok and not p.warning for p in reports[0].probes) and reports[0].skew_ms is not None \
                    or time.monotonic() > deadline:
                break
            time.sleep(1)
        failures, warnings = preflight.problems(shaped, reports, max_skew_ms=100)
        assert failures == [] and warnings == [], (failures, warnings)
        assert abs(reports[0].skew_ms) <= reports[0].skew_error_ms + 5     # one clock: no skew
    finally:
        for p in started:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(20)


@pytest.mark.root
def test_check_probes_only_the_targets_esb(shaped):
    esb = shaped.hosts["esb"].address
    reports, failures, _ = tbapi.check(shaped, roles=["esb"], timeout=1)
    assert [p.service for p in reports[0].probes] == ["monitor", "esb camel"]
    assert f"{esb}:8280 (esb camel on esb) unreachable: Connection refused; only one ESB runs at a time? " \
           "--target NAME checks just its port" in failures
    reports, failures, _ = tbapi.check(shaped, target="direct", roles=["esb"], timeout=1)
    assert [p.service for p in reports[0].probes] == ["monitor"]
    assert failures == [f"{esb}:7090 (monitor on esb) unreachable: Connection refused"]
