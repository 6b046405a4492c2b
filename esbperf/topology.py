"""The testbed description (console-config/testbeds/<name>.yaml): hosts by role with their
addresses, ports and links, and the named targets. It is the only place addresses are
written; everything that needs one asks this module."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esbperf.config import load_yaml
from esbperf.errors import EsbperfError
from esbperf.project import CONSOLE_CONFIG

TESTBEDS = CONSOLE_CONFIG / "testbeds"
ROLES = ("client", "esb", "ws1", "ws2", "ws3")
BACKENDS = ("ws1", "ws2", "ws3")
HOST_FIELDS = ("address", "link_mbit", "monitor_port", "echo_port", "esb_ports", "cpus")


@dataclass(frozen=True)
class Host:
    role: str
    address: str
    link_mbit: float | None = None   # None: no limit known (loopback)
    monitor_port: int | None = None
    echo_port: int | None = None
    esb_ports: dict[str, int] = field(default_factory=dict)
    cpus: tuple[int, ...] | None = None

    def url(self, port: int) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{port}"


@dataclass(frozen=True)
class Target:
    """A named endpoint under test: an ESB (`kind: esb`) or the no-ESB baseline (`kind: direct`)."""

    name: str
    kind: str
    esb: str | None
    url: str | None                  # the ESB's base URL; None for direct
    backends: dict[str, str]         # ws1..ws3 -> base URL of that echo service


@dataclass
class Testbed:
    name: str
    path: Path
    hosts: dict[str, Host]
    console_port: int
    api_host: str
    api_port: int
    targets: dict[str, Target]
    emulated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)   # settings of the emulation (bridge, …)

    @property
    def client(self) -> Host:
        return self.hosts["client"]

    @property
    def api_url(self) -> str:
        return Host("api", self.api_host).url(self.api_port)

    def echo_url(self, backend: str) -> str:
        host = self.hosts[backend]
        return host.url(host.echo_port)

    def esb_url(self, esb: str) -> str:
        host = self.hosts["esb"]
        if esb not in host.esb_ports:
            raise EsbperfError(f"{self.path}: hosts.esb.esb_ports has no port for '{esb}' "
                               f"(known: {', '.join(host.esb_ports) or 'none'})")
        return host.url(host.esb_ports[esb])

    def netns(self, role: str) -> str | None:
        """The network namespace a role's processes run in (emulated testbeds only)."""
        return f"esbp-{role}" if self.emulated else None

    def command(self, role: str, argv: list[str]) -> list[str]:
        """argv as it must be run to execute on the host of `role`: inside its network
        namespace and on its CPUs when the testbed is emulated; unchanged otherwise."""
        host = self.hosts[role]
        if host.cpus:
            argv = ["taskset", "-c", ",".join(map(str, host.cpus)), *argv]
        ns = self.netns(role)
        if ns:
            argv = ["ip", "netns", "exec", ns, *argv]
        return argv

    def target(self, name: str) -> Target:
        try:
            return self.targets[name]
        except KeyError:
            raise EsbperfError(f"unknown target '{name}' in {self.path} (known: {', '.join(self.targets)})") from None


def resolve(name_or_path: str | Path | None) -> Path:
    """A testbed name (file in console-config/testbeds) or a path; default `local`."""
    if name_or_path is None:
        return TESTBEDS / "local.yaml"
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        return candidate
    path = TESTBEDS / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in TESTBEDS.glob("*.yaml"))
        raise EsbperfError(f"unknown testbed '{name_or_path}' (known: {', '.join(known)}; or give a file)")
    return path


def _int(path: Path, where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise EsbperfError(f"{path}: {where} must be a port number (1-65535), got {value!r}")
    return value


def load(name_or_path: str | Path | None = None) -> Testbed:
    path = resolve(name_or_path)
    data = load_yaml(path)
    hosts_data = data.get("hosts")
    if not isinstance(hosts_data, dict):
        raise EsbperfError(f"{path}: 'hosts' must map roles ({', '.join(ROLES)}) to host settings")
    missing = [r for r in ROLES if r not in hosts_data]
    if missing:
        raise EsbperfError(f"{path}: hosts: missing role(s) {', '.join(missing)}")
    hosts = {}
    for role, h in hosts_data.items():
        if role not in ROLES:
            raise EsbperfError(f"{path}: hosts: unknown role '{role}' (allowed: {', '.join(ROLES)})")
        if not isinstance(h, dict):
            raise EsbperfError(f"{path}: hosts.{role} must be a mapping")
        unknown = set(h) - set(HOST_FIELDS)
        if unknown:
            raise EsbperfError(f"{path}: hosts.{role}: unknown field '{sorted(unknown)[0]}' "
                               f"(allowed: {', '.join(HOST_FIELDS)})")
        try:
            ipaddress.ip_address(str(h.get("address")))
        except ValueError:
            raise EsbperfError(f"{path}: hosts.{role}.address must be an IP address, got {h.get('address')!r}") from None
        link = h.get("link_mbit")
        if link is not None and (isinstance(link, bool) or not isinstance(link, (int, float)) or link <= 0):
            raise EsbperfError(f"{path}: hosts.{role}.link_mbit must be a positive number, got {link!r}")
        esb_ports = h.get("esb_ports") or {}
        if not isinstance(esb_ports, dict):
            raise EsbperfError(f"{path}: hosts.{role}.esb_ports must map ESB names to ports")
        cpus = h.get("cpus")
        if cpus is not None and (not isinstance(cpus, list) or not all(isinstance(c, int) for c in cpus)):
            raise EsbperfError(f"{path}: hosts.{role}.cpus must be a list of CPU numbers, got {cpus!r}")
        hosts[role] = Host(
            role=role, address=str(h["address"]), link_mbit=link,
            monitor_port=_int(path, f"hosts.{role}.monitor_port", h["monitor_port"]) if "monitor_port" in h else None,
            echo_port=_int(path, f"hosts.{role}.echo_port", h["echo_port"]) if "echo_port" in h else None,
            esb_ports={k: _int(path, f"hosts.{role}.esb_ports.{k}", v) for k, v in esb_ports.items()},
            cpus=tuple(cpus) if cpus is not None else None,
        )
    for ws in BACKENDS:
        if hosts[ws].echo_port is None:
            raise EsbperfError(f"{path}: hosts.{ws}.echo_port is required")

    console = data.get("console") or {}
    if not isinstance(console, dict):
        raise EsbperfError(f"{path}: 'console' must be a mapping (port, api_host, api_port)")
    api_host = str(console.get("api_host", "127.0.0.1"))
    try:
        ipaddress.ip_address(api_host)
    except ValueError:
        raise EsbperfError(f"{path}: console.api_host must be an IP address, got {api_host!r}") from None

    testbed = Testbed(
        name=str(data.get("name", path.stem)), path=path, hosts=hosts,
        console_port=_int(path, "console.port", console.get("port", 6372)),
        api_host=api_host,
        api_port=_int(path, "console.api_port", console.get("api_port", 6373)),
        targets={}, emulated=bool(data.get("emulated", False)),
        extra={k: v for k, v in data.items() if k not in ("name", "console", "hosts", "targets", "emulated")},
    )
    backends = {ws: testbed.echo_url(ws) for ws in BACKENDS}
    targets = data.get("targets") or {"direct": {"kind": "direct"}}
    if not isinstance(targets, dict):
        raise EsbperfError(f"{path}: 'targets' must map names to {{kind: direct}} or {{kind: esb, esb: NAME}}")
    for name, t in targets.items():
        kind = (t or {}).get("kind")
        if kind == "direct":
            testbed.targets[name] = Target(name, "direct", None, None, backends)
        elif kind == "esb":
            esb = t.get("esb", name)
            testbed.targets[name] = Target(name, "esb", esb, testbed.esb_url(esb), backends)
        else:
            raise EsbperfError(f"{path}: targets.{name}.kind must be 'direct' or 'esb', got {kind!r}")
    return testbed
