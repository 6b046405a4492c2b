"""The testbed description (console-config/testbeds/<name>.yaml): hosts by role with their
addresses, ports and links, and the named targets. It is the only place addresses are
written; everything that needs one asks this module. docs/testbed.md describes every field.

Errors name the file and the field, on one line."""
from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from esbperf.core import roles
from esbperf.core.config import load_yaml, resolve_named
from esbperf.core.errors import EsbperfError, quoted
from esbperf.core.project import CONSOLE_CONFIG

TESTBEDS = CONSOLE_CONFIG / "testbeds"
ROLES, BACKENDS = roles.FIXED, roles.BACKENDS   # every testbed has these five roles
HOST_FIELDS = ("address", "link_mbit", "monitor_port", "echo_port", "esb_ports", "cpus", "ssh", "dir", "interface")
LOAD_HOST_FIELDS = ("address", "link_mbit", "monitor_port", "cpus", "ssh", "dir", "interface")
TOP_FIELDS = ("name", "extends", "emulated", "prefix", "bridge", "sysctl", "console", "ssh_config", "cpus", "echo",
              "hosts", "targets", "link_mbit")
# The top-level `echo:`: the runtime of the three echo back ends (docs/echo-services.md). `lean` is cheap
# enough to share a core with the ESB; without the field, `jaxws`, the thesis's set-up.
ECHO_RUNTIMES = ("jaxws", "cxf", "lean")
DEFAULT_ECHO_RUNTIME = "jaxws"
# The top-level `cpus:` of a one-machine testbed: `auto` gives the esb host cores of its own, apart
# from the client side and the back ends (auto_split); `shared` (or no `cpus:`) pins nothing. A host's own list wins.
CPU_MODES = ("auto", "shared")
ONLINE_CPUS = Path("/sys/devices/system/cpu/online")
CGROUP_CPUS = Path("/sys/fs/cgroup/cpuset.cpus.effective")
# An ssh destination (`user@host` or an alias of the user's ssh config) and an install folder:
# plain names only, so they pass unquoted through ssh and rsync (`DEST:DIR`).
SSH_DEST_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*@[A-Za-z0-9_][A-Za-z0-9._-]*$|^[A-Za-z0-9_][A-Za-z0-9._-]*$")
DIR_RE = re.compile(r"^[A-Za-z0-9_./+-]+$")
DEFAULT_DIR = "esbperf"   # the install folder on an ssh host, relative to the login's home

# RFC 2544's range for network benchmarks: emulated testbeds may use nothing else.
BENCHMARK_NET = ipaddress.ip_network("198.18.0.0/15")
DEFAULT_PREFIX = "esbp-"
DEFAULT_EMULATED_MBIT = 1000
IFNAME_MAX = 15   # Linux interface names: IFNAMSIZ - 1
PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}-$")


@dataclass(frozen=True)
class Host:
    role: str
    address: str
    link_mbit: float | None = None   # None: no limit (emulated) or unknown (real)
    monitor_port: int | None = None
    echo_port: int | None = None
    esb_ports: dict[str, int] = field(default_factory=dict)
    cpus: tuple[int, ...] | None = None
    ssh: str | None = None           # `user@host` or an ssh alias: how the client reaches this host
    dir: str = DEFAULT_DIR           # the install folder on an ssh host (relative: to the login's home)
    interface: str | None = None     # the test-network interface, for the bottleneck verdict (analysis/bottleneck.py)

    def url(self, port: int) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{port}"

    def services(self) -> dict[str, int]:
        """The ports this host's own services listen on, by name (for checks and conflicts)."""
        ports = {}
        if self.monitor_port:
            ports["monitor"] = self.monitor_port
        if self.echo_port:
            ports["echo"] = self.echo_port
        ports.update({f"esb {name}": port for name, port in self.esb_ports.items()})
        return ports


@dataclass(frozen=True)
class Bridge:
    """The emulated LAN's switch: a Linux bridge in the root namespace, with an address there
    so that the root namespace (runner, control-API client) reaches every host."""

    name: str
    interface: ipaddress.IPv4Interface   # e.g. 198.18.0.1/24; the hosts share its subnet

    @property
    def address(self) -> str:
        return str(self.interface.ip)


def host_port(url: str) -> tuple[str, int]:
    """http://host:port (as the testbed makes every URL) -> (host, port)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class Target:
    """A named endpoint under test: an ESB (`kind: esb`) or the no-ESB baseline (`kind: direct`)."""

    name: str
    kind: str
    esb: str | None
    url: str | None                  # the ESB's base URL; None for direct
    backends: dict[str, str]         # ws1..ws3 -> base URL of that echo service

    @property
    def address(self) -> tuple[str, int]:
        """The ESB's host and port."""
        return host_port(self.url)


@dataclass
class Testbed:
    name: str
    path: Path
    hosts: dict[str, Host]
    console_port: int
    api_host: str
    api_port: int
    targets: dict[str, Target]
    # Warm workers poll the console's step board here, on the client's address like console_port.
    board_port: int = 0
    emulated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)   # the file's emulation settings, as written
    prefix: str = DEFAULT_PREFIX       # names of the namespaces, links and bridge `testbed up` makes
    bridge: Bridge | None = None       # emulated testbeds only
    sysctl: dict[str, str] = field(default_factory=dict)   # OS tuning every host should have
    ssh_config: Path | None = None     # passed to ssh as -F (None: the user's own ~/.ssh/config)
    cpu_mode: str = "shared"           # the file's top-level `cpus:` (CPU_MODES); hosts' own lists win
    echo_runtime: str = DEFAULT_ECHO_RUNTIME   # the file's top-level `echo:` (ECHO_RUNTIMES)

    @property
    def client(self) -> Host:
        return self.hosts["client"]

    @property
    def load_roles(self) -> list[str]:
        """The hosts that run agents: the client and every load host."""
        return [r for r in self.hosts if r == roles.CLIENT or roles.is_load(r)]

    @property
    def api_url(self) -> str:
        return Host("api", self.api_host).url(self.api_port)

    @property
    def board_url(self) -> str:
        """Where warm workers poll for their orders (the console's step board)."""
        return self.client.url(self.board_port) + "/order"

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
        return f"{self.prefix}{role}" if self.emulated else None

    def command(self, role: str, argv: list[str]) -> list[str]:
        """argv as it must be run to execute on the host of `role`: inside its network
        namespace and on its CPUs when the testbed is emulated; unchanged otherwise."""
        host = self.hosts[role]
        if host.cpus:
            argv = ["taskset", "-c", cpu_list(host.cpus), *argv]
        ns = self.netns(role)
        if ns:
            argv = ["ip", "netns", "exec", ns, *argv]
        return argv

    def target(self, name: str) -> Target:
        try:
            return self.targets[name]
        except KeyError:
            raise EsbperfError(f"unknown target '{name}' in {self.path} (known: {', '.join(self.targets)})") from None

    def cpu_split(self) -> str:
        """Which cores each host has, in one line: `cpus auto (2 CPUs): client 0; esb, ws1, ws2, ws3 1`."""
        groups: dict[tuple[int, ...] | None, list[str]] = {}
        for role, host in self.hosts.items():
            groups.setdefault(host.cpus, []).append(role)
        if not one_machine(self.hosts, self.emulated) and list(groups) == [None]:
            return "cpus: each host is a machine of its own (nothing pinned)"
        if list(groups) == [None]:
            why = " (1 CPU: nothing to split)" if self.cpu_mode == "auto" else ""
            return f"cpus {self.cpu_mode}: every host shares all of this machine's CPUs{why}"
        where = "; ".join(f"{', '.join(members)} {cpu_list(cpus) if cpus else 'any'}" for cpus, members in groups.items())
        mode = f"auto ({len(machine_cpus())} CPUs)" if self.cpu_mode == "auto" else "as listed"
        return f"cpus {mode}: {where}"


def cpu_list(cpus) -> str:
    """(0, 1, 2, 5) -> "0-2,5", as taskset and /sys write CPU lists."""
    cpus, parts = sorted(cpus), []
    for cpu in cpus:
        if parts and parts[-1][1] == cpu - 1:
            parts[-1][1] = cpu
        else:
            parts.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def parse_cpu_list(text: str) -> list[int]:
    """"0-2,5" -> [0, 1, 2, 5] (the kernel's CPU list format)."""
    cpus: list[int] = []
    for part in filter(None, text.strip().split(",")):
        low, _, high = part.partition("-")
        cpus += range(int(low), int(high or low) + 1)
    return cpus


def machine_cpus() -> list[int]:
    """The CPUs this machine gives its processes: the online ones (within the cgroup's cpuset when
    there is one). Not this process's affinity: a service started under `taskset` loads the testbed
    file too, and must compute the same split as the launcher that pinned it."""
    for source in (CGROUP_CPUS, ONLINE_CPUS):
        try:
            cpus = parse_cpu_list(source.read_text())
        except (OSError, ValueError):
            continue
        if cpus:
            return cpus
    return list(range(os.cpu_count() or 1))


def auto_split(cpus: list[int], host_roles: list[str]) -> dict[str, tuple[int, ...]]:
    """Cores per host when a one-machine testbed says `cpus: auto`, so that the engine under test is
    what saturates first: the ESB alone on the upper half of the cores (rounded down); the client
    side (client and load hosts) on the rest, where the back ends share them below 8 CPUs (the lean
    echo costs a fifth of an engine per request or less: docs/benchmarks/echo.md) and from 8 CPUs
    take the last ⌊n/8⌋ of that half.
      1 CPU: nothing pinned (returns {}); 2: client and back ends 0, esb 1; 3: 0-1 / 2;
      4: 0-1 / 2-3; 8: client 0-2, back ends 3, esb 4-7; 16: 0-5, 6-7, 8-15."""
    cpus = sorted(cpus)
    n = len(cpus)
    if n < 2:
        return {}
    below, esb = cpus[:n - n // 2], cpus[n - n // 2:]
    b = n // 8
    client, backends = (below[:-b], below[-b:]) if b else (below, below)
    side = {roles.CLIENT: client, roles.ESB: esb, **{ws: backends for ws in BACKENDS}}
    return {role: tuple(side.get(role, client)) for role in host_roles}   # load hosts: the client side


def one_machine(hosts: dict[str, Host], emulated: bool) -> bool:
    """Whether every host of the testbed is this one machine (emulated, or every address loopback)."""
    return emulated or all(ipaddress.ip_address(h.address).is_loopback for h in hosts.values())


def _cpu_mode(path: Path, data: dict, hosts: dict[str, Host], emulated: bool) -> tuple[str, dict[str, Host]]:
    """The file's `cpus:` and the hosts with their cores: `auto` fills every host without a list."""
    mode = data.get("cpus", "shared")
    if mode not in CPU_MODES:
        raise EsbperfError(f"{path}: cpus must be one of {', '.join(CPU_MODES)} (each host may list its own), "
                           f"got {mode!r}")
    if mode != "auto":
        return mode, hosts
    if not one_machine(hosts, emulated):
        raise EsbperfError(f"{path}: cpus: auto is for a testbed on one machine (emulated, or every host on "
                           "loopback); on a LAN each host has its own cores: remove it, or list a host's cpus")
    split = auto_split(machine_cpus(), list(hosts))
    return mode, {role: h if h.cpus or role not in split else dataclasses.replace(h, cpus=split[role])
                  for role, h in hosts.items()}


def _echo_runtime(path: Path, data: dict) -> str:
    runtime = data.get("echo", DEFAULT_ECHO_RUNTIME)
    if runtime not in ECHO_RUNTIMES:
        raise EsbperfError(f"{path}: echo must be one of {', '.join(ECHO_RUNTIMES)} (the back ends' runtime), "
                           f"got {runtime!r}")
    return runtime


def resolve(name_or_path: str | Path | None, default: str = "local") -> Path:
    """A testbed name (file in console-config/testbeds) or a path; default `local`."""
    return resolve_named(default if name_or_path is None else name_or_path, TESTBEDS, "testbed")


def _port(path: Path, where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise EsbperfError(f"{path}: {where} must be a port number (1-65535), got {value!r}")
    return value


def _link_mbit(path: Path, where: str, value: Any, emulated: bool) -> float | None:
    if value is None:
        return DEFAULT_EMULATED_MBIT if emulated else None
    if value == "unlimited":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise EsbperfError(f"{path}: {where} must be a positive number of Mbit/s or 'unlimited', got {value!r}")
    return value


def _host(path: Path, role: str, h: Any, emulated: bool) -> Host:
    where = f"hosts.{role}"
    if not isinstance(h, dict):
        raise EsbperfError(f"{path}: {where} must be a mapping")
    allowed = HOST_FIELDS if role in ROLES else LOAD_HOST_FIELDS
    unknown = set(h) - set(allowed)
    if unknown:
        raise EsbperfError(f"{path}: {where}: unknown field {quoted(sorted(unknown, key=str)[0])} "
                           f"(allowed: {', '.join(allowed)})")
    try:
        address = ipaddress.ip_address(str(h.get("address")))
    except ValueError:
        raise EsbperfError(f"{path}: {where}.address must be an IP address, got {h.get('address')!r}") from None
    esb_ports = h.get("esb_ports") or {}
    if not isinstance(esb_ports, dict):
        raise EsbperfError(f"{path}: {where}.esb_ports must map ESB names to ports")
    cpus = h.get("cpus")
    if cpus is not None and (not isinstance(cpus, list) or not cpus
                             or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus)):
        raise EsbperfError(f"{path}: {where}.cpus must be a non-empty list of CPU numbers, got {cpus!r}")
    ssh = h.get("ssh")
    if ssh is not None and (not isinstance(ssh, str) or not SSH_DEST_RE.match(ssh)):
        raise EsbperfError(f"{path}: {where}.ssh must be an ssh destination like user@host or an alias "
                           f"of your ssh config (letters, digits, '.', '_', '-'), got {ssh!r}")
    folder = h.get("dir", DEFAULT_DIR)
    if not isinstance(folder, str) or not DIR_RE.match(folder) or folder.startswith("-") \
            or ".." in folder.split("/"):
        raise EsbperfError(f"{path}: {where}.dir must be a folder (absolute, or relative to the login's home; "
                           f"letters, digits, '.', '_', '-', '+', '/', no '..'), got {folder!r}")
    if "dir" in h and ssh is None:
        raise EsbperfError(f"{path}: {where}.dir is the install folder on a host reached over ssh; "
                           "give the host an ssh: too, or remove dir")
    interface = h.get("interface")
    if interface is not None and (not isinstance(interface, str) or not re.fullmatch(r"[^\s/:]{1,15}", interface)
                                  or interface == "lo"):
        raise EsbperfError(f"{path}: {where}.interface must name a network interface like eth0 "
                           f"(at most {IFNAME_MAX} characters, not lo), got {interface!r}")
    return Host(
        role=role, address=str(address),
        link_mbit=_link_mbit(path, f"{where}.link_mbit", h.get("link_mbit"), emulated),
        monitor_port=_port(path, f"{where}.monitor_port", h["monitor_port"]) if "monitor_port" in h else None,
        echo_port=_port(path, f"{where}.echo_port", h["echo_port"]) if "echo_port" in h else None,
        esb_ports={k: _port(path, f"{where}.esb_ports.{k}", v) for k, v in esb_ports.items()},
        cpus=tuple(cpus) if cpus is not None else None,
        ssh=ssh, dir=folder.rstrip("/") or "/", interface=interface,
    )


def _hosts(path: Path, data: dict, emulated: bool) -> dict[str, Host]:
    hosts_data = data.get("hosts")
    if not isinstance(hosts_data, dict):
        raise EsbperfError(f"{path}: 'hosts' must map roles ({', '.join(ROLES)}) to host settings")
    for role in hosts_data:
        if not isinstance(role, str) or not roles.is_role(role):
            raise EsbperfError(f"{path}: hosts: unknown role {quoted(role)} (allowed: {', '.join(ROLES)}, "
                               f"and load hosts {roles.LOAD_EXAMPLE})")
    missing = [r for r in ROLES if r not in hosts_data]
    if missing:
        raise EsbperfError(f"{path}: hosts: missing role(s) {', '.join(missing)}")
    loads = sorted((r for r in hosts_data if r not in ROLES), key=roles.load_number)
    hosts = {role: _host(path, role, hosts_data[role], emulated) for role in [*ROLES, *loads]}
    for ws in BACKENDS:
        if hosts[ws].echo_port is None:
            raise EsbperfError(f"{path}: hosts.{ws}.echo_port is required")
    return hosts


def _sysctl(path: Path, data: dict, emulated: bool) -> dict[str, str]:
    raw = data.get("sysctl") or {}
    if not isinstance(raw, dict):
        raise EsbperfError(f"{path}: 'sysctl' must map sysctl keys (net.core.somaxconn) to values")
    settings = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_-]+)+", key):
            raise EsbperfError(f"{path}: sysctl: {quoted(key)} is not a sysctl key like net.core.somaxconn")
        # Only net.* settings belong to a network namespace; any other key written inside
        # one would change the whole machine.
        if emulated and not key.startswith("net."):
            raise EsbperfError(f"{path}: sysctl.{key}: an emulated testbed may only set net.* keys "
                               "(others are not per network namespace and would change the whole machine)")
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise EsbperfError(f"{path}: sysctl.{key} must be a number or a string, got {value!r}")
        settings[key] = " ".join(str(value).split())
    return settings


def _prefix(path: Path, data: dict) -> str:
    prefix = data.get("prefix", DEFAULT_PREFIX)
    if not isinstance(prefix, str) or not PREFIX_RE.match(prefix):
        raise EsbperfError(f"{path}: prefix must be 1-8 lowercase letters or digits, starting with a letter, "
                           f"then '-' (like {DEFAULT_PREFIX}), got {prefix!r}")
    return prefix


def _bridge(path: Path, data: dict, prefix: str, roles: list[str]) -> Bridge:
    raw = data.get("bridge")
    if not isinstance(raw, dict) or set(raw) != {"name", "address"}:
        raise EsbperfError(f"{path}: an emulated testbed needs 'bridge: {{name: {prefix}br0, address: 198.18.0.1/24}}'")
    name = raw["name"]
    if not isinstance(name, str) or not name.startswith(prefix) or len(name) > IFNAME_MAX \
            or not re.fullmatch(r"[a-z0-9-]+", name) or name in {prefix + r for r in roles}:
        raise EsbperfError(f"{path}: bridge.name must start with the prefix '{prefix}', be at most {IFNAME_MAX} "
                           f"lowercase letters, digits or '-', and not name a host's link, got {name!r}")
    try:
        interface = ipaddress.IPv4Interface(str(raw["address"]))
    except ValueError:
        raise EsbperfError(f"{path}: bridge.address must be an IPv4 address with its prefix length "
                           f"(like 198.18.0.1/24), got {raw['address']!r}") from None
    if "/" not in str(raw["address"]) or interface.network.prefixlen > 29:
        raise EsbperfError(f"{path}: bridge.address needs a subnet for the bridge and five hosts "
                           f"(prefix length /29 or shorter, like 198.18.0.1/24), got {raw['address']!r}")
    if not interface.network.subnet_of(BENCHMARK_NET):
        raise EsbperfError(f"{path}: bridge.address {raw['address']} is outside {BENCHMARK_NET}, "
                           "the range reserved for network benchmarks that emulated testbeds must use")
    if interface.ip in (interface.network.network_address, interface.network.broadcast_address):
        raise EsbperfError(f"{path}: bridge.address {raw['address']} is the subnet's network or broadcast address")
    return Bridge(name, interface)


def _check_emulated(path: Path, hosts: dict[str, Host], bridge: Bridge, api_host: str) -> None:
    """Each emulated host is a namespace on the bridge's subnet, with an address of its own."""
    subnet = bridge.interface.network
    seen = {bridge.interface.ip: "bridge.address"}
    for role, host in hosts.items():
        ip = ipaddress.ip_address(host.address)
        where = f"hosts.{role}.address"
        if ip.version != 4 or ip not in subnet:
            raise EsbperfError(f"{path}: {where} {host.address} is not in the bridge's subnet {subnet} "
                               f"(bridge.address), which must hold every emulated host")
        if ip in (subnet.network_address, subnet.broadcast_address):
            raise EsbperfError(f"{path}: {where} {host.address} is the subnet's network or broadcast address")
        if ip in seen:
            raise EsbperfError(f"{path}: {where} {host.address} is already used by {seen[ip]}; "
                               "each emulated host needs an address of its own")
        seen[ip] = where
    if api_host != hosts["client"].address:
        raise EsbperfError(f"{path}: console.api_host must be the client's address {hosts['client'].address} "
                           f"in an emulated testbed (the console runs in the client's namespace), got {api_host}")


def _check_emulated_ssh(path: Path, hosts: dict[str, Host], data: dict) -> None:
    """The emulated ssh mode: an OpenSSH server in the namespace of each host with `ssh:`, on that
    host's address, and an install folder of its own (the hosts share this machine's files)."""
    folders: dict[str, str] = {}
    for role, host in hosts.items():
        if not host.ssh:
            continue
        where = f"hosts.{role}"
        if host.ssh.rpartition("@")[2] != host.address:
            raise EsbperfError(f"{path}: {where}.ssh must be USER@{host.address} on an emulated testbed (its "
                               f"OpenSSH server listens on the host's own address), got {host.ssh!r}")
        if "dir" not in data["hosts"][role]:
            raise EsbperfError(f"{path}: {where}.dir: an emulated ssh host needs an install folder of its own "
                               "(the emulated hosts share this machine's file system)")
        for other, folder in folders.items():
            if host.dir == folder or host.dir.startswith(folder + "/") or folder.startswith(host.dir + "/"):
                raise EsbperfError(f"{path}: {where}.dir {host.dir} overlaps hosts.{other}.dir {folder}; "
                                   "each emulated host needs an install folder of its own")
        folders[role] = host.dir


def _check_ports(path: Path, hosts: dict[str, Host], console_port: int, api_host: str, api_port: int,
                 board_port: int, sysctl: dict[str, str]) -> None:
    """No two services may listen on the same address and port (e.g. two roles on 127.0.0.1),
    and none on a port that outgoing connections may take (the ephemeral range)."""
    ephemeral = None
    if "net.ipv4.ip_local_port_range" in sysctl:
        bounds = sysctl["net.ipv4.ip_local_port_range"].split()
        if len(bounds) != 2 or not all(b.isdigit() for b in bounds) or not 0 < int(bounds[0]) <= int(bounds[1]) < 65536:
            raise EsbperfError(f"{path}: sysctl.net.ipv4.ip_local_port_range must be two ports 'LOW HIGH', "
                               f"got {sysctl['net.ipv4.ip_local_port_range']!r}")
        ephemeral = range(int(bounds[0]), int(bounds[1]) + 1)
    taken: dict[tuple[str, int], str] = {}
    listeners = [(hosts["client"].address, console_port, "console.port"), (api_host, api_port, "console.api_port"),
                 (hosts["client"].address, board_port, "console.board_port")]
    for role, host in hosts.items():
        for service, port in host.services().items():
            field_name = f"esb_ports.{service[4:]}" if service.startswith("esb ") else f"{service}_port"
            listeners.append((host.address, port, f"hosts.{role}.{field_name}"))
    for address, port, where in listeners:
        if ephemeral and port in ephemeral:
            raise EsbperfError(f"{path}: {where} {port} lies in sysctl.net.ipv4.ip_local_port_range "
                               f"{ephemeral.start}-{ephemeral.stop - 1}, where outgoing connections may take it first")
        if (address, port) in taken:
            raise EsbperfError(f"{path}: {where}: {address}:{port} is already taken by {taken[(address, port)]}")
        taken[(address, port)] = where


def _targets(path: Path, data: dict, testbed: Testbed) -> dict[str, Target]:
    backends = {ws: testbed.echo_url(ws) for ws in BACKENDS}
    raw = data.get("targets") or {"direct": {"kind": "direct"}}
    if not isinstance(raw, dict):
        raise EsbperfError(f"{path}: 'targets' must map names to {{kind: direct}} or {{kind: esb, esb: NAME}}")
    targets = {}
    for name, t in raw.items():
        kind = t.get("kind") if isinstance(t, dict) else None
        if kind == "direct":
            targets[name] = Target(name, "direct", None, None, backends)
        elif kind == "esb":
            esb = t.get("esb", name)
            targets[name] = Target(name, "esb", esb, testbed.esb_url(esb), backends)
        else:
            raise EsbperfError(f"{path}: targets.{name}.kind must be 'direct' or 'esb', got {kind!r}")
    return targets


def _merged(base: Any, override: Any) -> Any:
    """`override` over `base`: mappings merged key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: _merged(base.get(k), v) for k, v in override.items()}}
    return override


def _file_data(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A testbed file's fields over those of the testbed it `extends` (a name of
    console-config/testbeds, or a file relative to it; its `name` is not inherited), so that a
    variant says only what differs."""
    data = load_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent:
        raise EsbperfError(f"{path}: extends must name a testbed (a name of console-config/testbeds or a file)")
    relative = "/" in parent or parent.endswith((".yaml", ".yml"))   # a file, else a shipped testbed's name
    base_path = resolve(path.parent / parent if relative else parent)
    if base_path.resolve() in (*seen, path.resolve()):
        raise EsbperfError(f"{path}: extends {parent}, which extends it back")
    base = _file_data(base_path, (*seen, path.resolve()))
    base.pop("name", None)
    return _merged(base, data)


def _host_links(data: dict) -> dict:
    """The top-level `link_mbit` given to every host that does not give its own."""
    if "link_mbit" in data:
        link = data.pop("link_mbit")
        for host in (data.get("hosts") or {}).values():
            if isinstance(host, dict):
                host.setdefault("link_mbit", link)
    return data


def load(name_or_path: str | Path | None = None, default: str = "local") -> Testbed:
    path = resolve(name_or_path, default)
    data = load_yaml(path)
    unknown = [k for k in data if k not in TOP_FIELDS]
    if unknown:
        raise EsbperfError(f"{path}: unknown field {quoted(unknown[0])} (allowed: {', '.join(TOP_FIELDS)})")
    data = _host_links(_file_data(path))
    emulated = data.get("emulated", False)
    if not isinstance(emulated, bool):
        raise EsbperfError(f"{path}: emulated must be true or false, got {emulated!r}")
    hosts = _hosts(path, data, emulated)

    console = data.get("console") or {}
    if not isinstance(console, dict):
        raise EsbperfError(f"{path}: 'console' must be a mapping (port, api_host, api_port, board_port)")
    api_host = str(console.get("api_host", "127.0.0.1"))
    try:
        ipaddress.ip_address(api_host)
    except ValueError:
        raise EsbperfError(f"{path}: console.api_host must be an IP address, got {api_host!r}") from None
    console_port = _port(path, "console.port", console.get("port", 6372))
    api_port = _port(path, "console.api_port", console.get("api_port", 6373))
    board_port = _port(path, "console.board_port", console.get("board_port", console_port + 2))
    sysctl = _sysctl(path, data, emulated)
    cpu_mode, hosts = _cpu_mode(path, data, hosts, emulated)

    prefix = _prefix(path, data)
    bridge = None
    if emulated:
        bridge = _bridge(path, data, prefix, list(hosts))
        _check_emulated(path, hosts, bridge, api_host)
        _check_emulated_ssh(path, hosts, data)
    else:
        for key in ("prefix", "bridge"):
            if key in data:
                raise EsbperfError(f"{path}: {key} is only for emulated testbeds (emulated: true)")
    _check_ports(path, hosts, console_port, api_host, api_port, board_port, sysctl)
    ssh_config = data.get("ssh_config")
    if ssh_config is not None and (not isinstance(ssh_config, str) or not ssh_config.strip()):
        raise EsbperfError(f"{path}: ssh_config must be the path of an ssh config file (passed to ssh as -F), "
                           f"got {ssh_config!r}")

    testbed = Testbed(
        name=str(data.get("name", path.stem)), path=path, hosts=hosts,
        console_port=console_port, api_host=api_host, api_port=api_port, board_port=board_port,
        targets={}, emulated=emulated,
        extra={k: v for k, v in data.items() if k in ("prefix", "bridge", "sysctl")},
        prefix=prefix, bridge=bridge, sysctl=sysctl,
        ssh_config=(path.parent / Path(ssh_config).expanduser()).resolve() if ssh_config else None,
        cpu_mode=cpu_mode, echo_runtime=_echo_runtime(path, data),
    )
    testbed.targets = _targets(path, data, testbed)
    return testbed


testbed_option = click.option("--testbed", "testbed_name", metavar="NAME|FILE",
                              help="Testbed description (default: local, i.e. console-config/testbeds/local.yaml).")
