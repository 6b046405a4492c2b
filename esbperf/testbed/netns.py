"""The emulated testbed: the five hosts of a testbed file on one machine.

Each host is a network namespace `<prefix><role>` whose `eth0` is one end of a veth pair; the
other end, `<prefix><role>` in the root namespace, is a port of the bridge `bridge.name`, which
holds `bridge.address` so the root namespace reaches every host. There is no default route in
the namespaces: their traffic cannot leave the bridge's subnet.

Each link is shaped to the host's link_mbit in both directions, like a NIC and its switch port:
a tbf qdisc on the namespace's eth0 (what the host sends) and one on the root-side veth (what
the bridge delivers to the host). tbf is a single token bucket, the simplest shaper that holds
an aggregate rate; its burst is max(1 ms at the rate, 128 KiB) because veth passes TCP's 64 KiB
GSO packets whole and a smaller bucket would split or drop them, and its queue holds 5 ms at the
rate (a switch-port-sized buffer) before it drops. tbf counts bytes from the Ethernet header up,
so a 1000 Mbit/s link carries at most ~956 Mbit/s of TCP payload at MTU 1500 (a real 1 Gbit/s
NIC: ~941, as it also sends preamble, FCS and gap).

Everything made here is named by the testbed's prefix; `down` removes those names only, after
ending the processes still running in the namespaces.
"""
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from typing import Any

from esbperf.core.errors import EsbperfError
from esbperf.core.topology import Host, Testbed

PEER = "eth0"                     # the host's side of its veth, inside its namespace
QUEUE_MS = 5                      # tbf: how long a full queue takes to drain
MIN_BURST = 128 * 1024            # tbf: two 64 KiB GSO packets
KILL_GRACE = 5.0                  # seconds between SIGTERM and SIGKILL in `down`


# --- running ip and tc -------------------------------------------------------------------

def _run(argv: list[str], input: str | None = None) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, input=input)
    if result.returncode != 0:
        raise EsbperfError(f"`{' '.join(argv)}` failed: {result.stderr.strip() or 'exit ' + str(result.returncode)}")
    return result.stdout


def _json(argv: list[str]) -> list[dict]:
    return json.loads(_run(argv) or "[]")


def require_root(action: str) -> None:
    if os.geteuid() != 0:
        raise EsbperfError(f"`esbperf testbed {action}` needs root (it manages network namespaces, a bridge and tc); "
                           "run it with sudo")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise EsbperfError(f"'{tool}' is not installed; install iproute2 (Debian: apt-get install iproute2)")


def _require_emulated(testbed: Testbed) -> None:
    if not testbed.emulated:
        raise EsbperfError(f"{testbed.path}: testbed '{testbed.name}' is not emulated (no 'emulated: true'); "
                           "only emulated testbeds are brought up or down here")


# --- what exists -------------------------------------------------------------------------

def _namespaces() -> dict[str, int | None]:
    """Namespace name -> its id as seen from the root namespace (None if it has none)."""
    return {n["name"]: n.get("id") for n in _json(["ip", "-j", "netns", "list"])}


def _links(ns: str | None = None) -> dict[str, dict]:
    where = ["-n", ns] if ns else []
    return {link["ifname"]: link for link in _json(["ip", "-j", "-d", *where, "link", "show"])}


def _kind(link: dict | None) -> str | None:
    return (link or {}).get("linkinfo", {}).get("info_kind")


def _ipv4(dev: str, ns: str | None = None) -> list[str]:
    where = ["-n", ns] if ns else []
    entries = _json(["ip", "-j", "-4", *where, "addr", "show", "dev", dev])
    return [f"{a['local']}/{a['prefixlen']}" for e in entries for a in e.get("addr_info", [])]


def _root_qdisc(dev: str, ns: str | None = None) -> dict | None:
    where = ["-n", ns] if ns else []
    for q in _json(["tc", "-j", *where, "qdisc", "show", "dev", dev]):
        if q.get("root"):
            return q
    return None


def _pids(ns: str) -> list[int]:
    return [int(p) for p in _run(["ip", "netns", "pids", ns]).split()]


# --- shaping -----------------------------------------------------------------------------

def shaper(mbit: float | None) -> dict[str, int] | None:
    """The tbf settings for a link of `mbit` Mbit/s (None: unlimited, no qdisc)."""
    if mbit is None:
        return None
    kbit = round(mbit * 1000)
    rate = kbit * 125                                   # bytes per second
    return {"kbit": kbit, "rate": rate, "burst": max(rate // 1000, MIN_BURST), "latency_us": QUEUE_MS * 1000}


def _shaper_matches(qdisc: dict | None, want: dict | None) -> bool:
    if want is None:
        return qdisc is None or qdisc.get("kind") != "tbf"
    if qdisc is None or qdisc.get("kind") != "tbf":
        return False
    opts = qdisc.get("options", {})
    # tc stores the burst as transmission time, so it reads back a little rounded.
    return opts.get("rate") == want["rate"] and abs(opts.get("burst", 0) - want["burst"]) <= want["burst"] // 50


def _shaped_mbit(qdisc: dict | None) -> float | None:
    if qdisc is None or qdisc.get("kind") != "tbf":
        return None
    return qdisc["options"]["rate"] / 125_000


def _shape(dev: str, ns: str | None, mbit: float | None) -> str | None:
    """Make dev's root qdisc the shaper for mbit; an action description, or None if it already was."""
    where = ["-n", ns] if ns else []
    want = shaper(mbit)
    current = _root_qdisc(dev, ns)
    if _shaper_matches(current, want):
        return None
    if want is None:
        _run(["tc", *where, "qdisc", "del", "dev", dev, "root"])
        return f"removed the rate limit of {dev}{' in ' + ns if ns else ''}"
    _run(["tc", *where, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{want['kbit']}kbit",
          "burst", str(want["burst"]), "latency", f"{QUEUE_MS}ms"])
    return f"limited {dev}{' in ' + ns if ns else ''} to {mbit:g} Mbit/s"


# --- up ----------------------------------------------------------------------------------

def _check_machine(testbed: Testbed, bridge_exists: bool) -> None:
    """What the file cannot promise: the CPUs exist here, and the bridge's subnet is free."""
    available = os.sched_getaffinity(0)
    for role, host in testbed.hosts.items():
        missing = sorted(set(host.cpus or ()) - available)
        if missing:
            raise EsbperfError(f"{testbed.path}: hosts.{role}.cpus: CPU {missing[0]} is not available here "
                               f"(available: {', '.join(map(str, sorted(available)))})")
        if host.cpus and shutil.which("taskset") is None:
            raise EsbperfError("'taskset' is not installed (hosts have cpus); install util-linux")
    subnet = testbed.bridge.interface.network
    for entry in _json(["ip", "-j", "-4", "addr", "show"]):
        if entry["ifname"] == testbed.bridge.name and bridge_exists:
            continue
        for a in entry.get("addr_info", []):
            if ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network.overlaps(subnet):
                raise EsbperfError(f"{testbed.path}: bridge.address subnet {subnet} overlaps {a['local']}/{a['prefixlen']} "
                                   f"on interface {entry['ifname']}; choose another subnet in 198.18.0.0/15")


def _up_bridge(testbed: Testbed, links: dict[str, dict], made: list[list[str]]) -> list[str]:
    bridge = testbed.bridge
    done = []
    if bridge.name not in links:
        _run(["ip", "link", "add", bridge.name, "type", "bridge"])
        made.append(["ip", "link", "del", bridge.name])
        done.append(f"created bridge {bridge.name}")
    elif _kind(links[bridge.name]) != "bridge":
        raise EsbperfError(f"a link named {bridge.name} exists but is a {_kind(links[bridge.name]) or 'plain link'}, "
                           f"not a bridge; remove it or change bridge.name in {testbed.path}")
    have = _ipv4(bridge.name)
    want = str(bridge.interface)
    if want not in have:
        if have:
            raise EsbperfError(f"bridge {bridge.name} has address {', '.join(have)}, {testbed.path} says {want}; "
                               "run `esbperf testbed down` with the file it was brought up with")
        _run(["ip", "addr", "add", want, "dev", bridge.name])
        done.append(f"gave {bridge.name} address {want}")
    if "UP" not in links.get(bridge.name, {}).get("flags", []):
        _run(["ip", "link", "set", bridge.name, "up"])
        done.append(f"set {bridge.name} up")
    return done


def _up_host(testbed: Testbed, host: Host, links: dict[str, dict], namespaces: dict[str, int | None],
             made: list[list[str]]) -> list[str]:
    ns = testbed.netns(host.role)
    link = ns                                      # the root-side veth has the namespace's name
    done = []
    if ns not in namespaces:
        _run(["ip", "netns", "add", ns])
        made.append(["ip", "netns", "del", ns])
        done.append(f"created namespace {ns}")
        namespaces = _namespaces()
    inner = _links(ns)
    if link in links:
        veth = links[link]
        peer = inner.get(PEER)
        if _kind(veth) != "veth" or _kind(peer) != "veth" or peer.get("link_index") != veth["ifindex"] \
                or veth.get("link_netnsid") is None or veth.get("link_netnsid") != namespaces.get(ns):
            raise EsbperfError(f"a link named {link} exists but is not the veth to {PEER} in namespace {ns}; "
                               f"remove it (ip link del {link}) or change prefix in {testbed.path}")
    elif PEER in inner:
        raise EsbperfError(f"namespace {ns} already has an {PEER} that is not esbperf's; "
                           f"remove the namespace (ip netns del {ns}) or change prefix in {testbed.path}")
    else:
        _run(["ip", "link", "add", link, "type", "veth", "peer", "name", PEER, "netns", ns])
        made.append(["ip", "link", "del", link])
        done.append(f"created veth {link} <-> {ns}:{PEER}")
    _run(["ip", "link", "set", link, "master", testbed.bridge.name, "up"])
    _run(["ip", "-n", ns, "link", "set", "lo", "up"])
    _run(["ip", "-n", ns, "link", "set", PEER, "up"])

    want = f"{host.address}/{testbed.bridge.interface.network.prefixlen}"
    have = _ipv4(PEER, ns)
    if want not in have:
        if have:
            raise EsbperfError(f"namespace {ns} has address {', '.join(have)}, {testbed.path} says {want}; "
                               "run `esbperf testbed down` with the file it was brought up with")
        _run(["ip", "-n", ns, "addr", "add", want, "dev", PEER])
        done.append(f"gave {ns} address {want}")

    if testbed.sysctl:
        _set_sysctls(ns, testbed)
    for dev, where in ((PEER, ns), (link, None)):   # what the host sends; what it receives
        action = _shape(dev, where, host.link_mbit)
        if action:
            done.append(action)
    return done


def _sysctl_path(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def _set_sysctls(ns: str, testbed: Testbed) -> None:
    # One shell inside the namespace writes every key; a key that does not exist there is not
    # per-namespace and is refused rather than set on the whole machine.
    args = [x for key, value in testbed.sysctl.items() for x in (_sysctl_path(key), value)]
    script = ('while [ $# -gt 0 ]; do [ -f "$1" ] || { echo "$1"; exit 3; }; '
              'printf "%s\\n" "$2" > "$1" || exit 1; shift 2; done')
    result = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", script, "sh", *args],
                            capture_output=True, text=True)
    if result.returncode == 3:
        key = result.stdout.strip()[len("/proc/sys/"):].replace("/", ".")
        raise EsbperfError(f"{testbed.path}: sysctl.{key} does not exist in a network namespace here; remove it")
    if result.returncode != 0:
        raise EsbperfError(f"setting sysctls in {ns} failed: {result.stderr.strip()}")


def up(testbed: Testbed) -> list[str]:
    """Bring the emulated testbed up, or make an existing one match the file. Returns what it
    changed (empty when everything already matched). Refuses clearly when something of the
    same name is not what `up` makes."""
    _require_emulated(testbed)
    require_root("up")
    links = _links()
    namespaces = _namespaces()
    _check_machine(testbed, testbed.bridge.name in links)
    done: list[str] = []
    made: list[list[str]] = []     # how to remove what this call created, should it fail
    try:
        done += _up_bridge(testbed, links, made)
        for host in testbed.hosts.values():
            done += _up_host(testbed, host, links, namespaces, made)
    except BaseException:
        for argv in reversed(made):
            subprocess.run(argv, capture_output=True)
        raise
    return done


# --- down --------------------------------------------------------------------------------

def _existing(testbed: Testbed, links: dict[str, dict], namespaces: dict[str, Any]) -> list[str]:
    names = [testbed.netns(r) for r in testbed.hosts]
    found = [f"namespace {n}" for n in names if n in namespaces]
    found += [f"link {n}" for n in [*names, testbed.bridge.name] if n in links]
    return found


def _end_processes(namespaces: list[str]) -> list[str]:
    pids = {ns: _pids(ns) for ns in namespaces}
    everyone = [p for ps in pids.values() for p in ps]
    if not everyone:
        return []
    for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 2.0)):
        for pid in everyone:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(_pids(ns) for ns in namespaces):
            time.sleep(0.05)
        everyone = [p for ns in namespaces for p in _pids(ns)]
        if not everyone:
            break
    if everyone:
        raise EsbperfError(f"processes {', '.join(map(str, everyone))} in the testbed's namespaces survived SIGKILL")
    return [f"ended {len(ps)} process(es) in {ns}" for ns, ps in pids.items() if ps]


def down(testbed: Testbed) -> list[str]:
    """Remove what `up` made for this testbed (by name), after ending the processes still
    running in its namespaces. Returns what it removed; leaves anything else alone."""
    _require_emulated(testbed)
    require_root("down")
    namespaces = [n for n in (testbed.netns(r) for r in testbed.hosts) if n in _namespaces()]
    done = _end_processes(namespaces)
    links = _links()
    for role in testbed.hosts:
        link = testbed.netns(role)
        if _kind(links.get(link)) == "veth":
            _run(["ip", "link", "del", link])       # takes its peer and both qdiscs with it
            done.append(f"removed veth {link}")
    if _kind(links.get(testbed.bridge.name)) == "bridge":
        _run(["ip", "link", "del", testbed.bridge.name])
        done.append(f"removed bridge {testbed.bridge.name}")
    for ns in namespaces:
        _run(["ip", "netns", "del", ns])
        done.append(f"removed namespace {ns}")
    return done


# --- status ------------------------------------------------------------------------------

def status(testbed: Testbed) -> dict[str, Any]:
    """What exists of the testbed, host by host, against what the file asks for. `state` is
    'up' (everything exists and matches), 'down' (nothing exists) or 'partial'."""
    _require_emulated(testbed)
    require_root("status")
    links = _links()
    namespaces = _namespaces()
    bridge = testbed.bridge
    bridge_link = links.get(bridge.name)
    report: dict[str, Any] = {
        "name": testbed.name, "file": str(testbed.path), "prefix": testbed.prefix,
        "bridge": {"name": bridge.name, "address": str(bridge.interface),
                   "exists": _kind(bridge_link) == "bridge",
                   "addressed": _kind(bridge_link) == "bridge" and str(bridge.interface) in _ipv4(bridge.name),
                   "up": "UP" in (bridge_link or {}).get("flags", [])},
        "hosts": {},
    }
    for role, host in testbed.hosts.items():
        ns = testbed.netns(role)
        ns_exists = ns in namespaces
        veth = links.get(ns)
        link_exists = _kind(veth) == "veth" and veth.get("master") == bridge.name
        inner = _links(ns) if ns_exists else {}
        want = f"{host.address}/{bridge.interface.network.prefixlen}"
        egress = _root_qdisc(PEER, ns) if PEER in inner else None
        ingress = _root_qdisc(ns, None) if veth else None
        report["hosts"][role] = {
            "address": host.address, "netns": ns, "netns_exists": ns_exists,
            "link": ns, "link_exists": link_exists,
            "addressed": PEER in inner and want in _ipv4(PEER, ns),
            "link_mbit": host.link_mbit,
            "shaped_mbit": {"from_host": _shaped_mbit(egress), "to_host": _shaped_mbit(ingress)},
            "shaped_ok": link_exists and PEER in inner and _shaper_matches(egress, shaper(host.link_mbit))
                         and _shaper_matches(ingress, shaper(host.link_mbit)),
            "cpus": list(host.cpus) if host.cpus else None,
            "pids": _pids(ns) if ns_exists else [],
        }
    parts = [report["bridge"]["exists"], report["bridge"]["addressed"]] + \
            [h[k] for h in report["hosts"].values() for k in ("netns_exists", "link_exists", "addressed", "shaped_ok")]
    report["state"] = "up" if all(parts) else "down" if not _existing(testbed, links, namespaces) else "partial"
    return report
