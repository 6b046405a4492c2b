"""Network faults on an emulated host's link (`esbperf testbed fault`): packet loss, delay and
jitter, or a partition, in both directions of the link, and their removal.

A host's link is its veth pair (esbperf/testbed/netns.py): `eth0` in its namespace carries what it
sends, the root-side end what it receives. A fault goes on the egress of both ends, beside the
link's rate limit, and is named by a fixed handle so it is found and removed exactly.

Two mechanisms, as the kernel allows:
- netem (sch_netem): loss, delay and jitter; a child of the link's tbf shaper, or the root qdisc of
  an unshaped link.
- Where the kernel has no netem (some VM kernels, this project's CI among them), loss and
  partitions are a cls_bpf filter on a clsact qdisc running a few instructions of classic BPF: a
  random number against a threshold (`ld rand`), then drop (TC_ACT_SHOT) or pass. Delay and jitter
  cannot be emulated that way, and are refused in one line.
A partition drops every packet for its duration; TCP connections survive it if it is short.

Every fault put on or taken off is logged (JSON lines in the state folder, by testbed), so the
runner can record in each step the faults that overlapped its window, including a partition that
came and went in the middle of it. A fault lives on its link, so it ends when the link does: the
testbed's `down` and a fresh `up` are logged too (`links_replaced`), and end every fault still
open then — a killed partition or a `down` without a `fault --clear` leaves no fault behind.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.topology import Testbed
from esbperf.testbed.netns import PEER, require_root

FILTER_PREF = 7               # our filter's priority on the clsact egress hook
NETEM_HANDLE = "e5b:"         # our netem qdisc's handle
SKF_AD_RANDOM = 2**32 - 4096 + 56   # classic BPF's ancillary load of a random u32 (SKF_AD_OFF + SKF_AD_RANDOM)
TC_ACT_OK, TC_ACT_SHOT = 0, 2


@dataclass(frozen=True)
class Fault:
    loss_percent: float = 0.0      # 100: a partition
    delay_ms: float = 0.0
    jitter_ms: float = 0.0

    def describe(self) -> str:
        if self.loss_percent >= 100:
            return "partition (every packet dropped)"
        parts = []
        if self.loss_percent:
            parts.append(f"{self.loss_percent:g} % loss")
        if self.delay_ms:
            parts.append(f"{self.delay_ms:g} ms delay" + (f" ± {self.jitter_ms:g} ms" if self.jitter_ms else ""))
        return ", ".join(parts) or "none"

    def to_dict(self) -> dict:
        return {"loss_percent": self.loss_percent, "delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms,
                "description": self.describe()}


def _log(testbed: Testbed) -> Path:
    return state_dir() / "network-faults" / f"{testbed.prefix}{testbed.name}.jsonl"


def _record(testbed: Testbed, role: str, fault: Fault | None) -> None:
    path = _log(testbed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps({"time_ms": int(time.time() * 1000), "host": role,
                            "fault": fault.to_dict() if fault else None}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def links_replaced(testbed: Testbed, what: str) -> None:
    """Log that the testbed's links went (`down`) or were made afresh (`up`): no fault survives that."""
    path = _log(testbed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps({"time_ms": int(time.time() * 1000), "links": what}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def during(testbed: Testbed, start_ms: int, end_ms: int) -> list[dict]:
    """The faults that were on some link at any moment of [start_ms, end_ms), from the log:
    [{host, description, loss_percent, delay_ms, jitter_ms, from_ms, to_ms (None: still on)}]."""
    try:
        lines = _log(testbed).read_text().splitlines()
    except OSError:
        return []
    spans, open_ = [], {}
    for line in lines:
        try:
            event = json.loads(line)
            at = int(event["time_ms"])
            if "links" in event:   # the links went or were replaced: every open fault ends
                spans += [{**span, "to_ms": at} for span in open_.values()]
                open_ = {}
                continue
            host = event["host"]
        except (ValueError, KeyError, TypeError):
            continue            # a line cut short by a kill
        if host in open_:
            spans.append({**open_.pop(host), "to_ms": at})
        if event.get("fault"):
            open_[host] = {"host": host, **event["fault"], "from_ms": at}
    spans += [{**span, "to_ms": None} for span in open_.values()]
    return [s for s in spans if s["from_ms"] < end_ms and (s["to_ms"] is None or s["to_ms"] > start_ms)]


Device = tuple[str | None, str]   # (network namespace or None for the root one, device)


def _tc(dev: Device | None, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """tc in the device's namespace; `dev` after the object's verb is the caller's (the device's
    name is dev[1])."""
    ns = ["-n", dev[0]] if dev and dev[0] else []
    result = subprocess.run(["tc", *ns, *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise EsbperfError(f"`tc {' '.join(args)}` failed: {result.stderr.strip() or result.returncode}")
    return result


def _ends(testbed: Testbed, role: str) -> list[Device]:
    """Both ends of a host's link: what it sends (eth0 in its namespace), what it receives."""
    ns = testbed.netns(role)
    return [(ns, PEER), (None, ns)]


def has_netem() -> bool:
    """Whether this kernel has netem (probed on the loopback of a throwaway namespace)."""
    probe = subprocess.run(["ip", "netns", "add", "esbperf-netem-probe"], capture_output=True)
    try:
        if probe.returncode != 0:
            return False
        ok = _tc(("esbperf-netem-probe", "lo"), "qdisc", "add", "dev", "lo", "root", "netem", "loss", "0%",
                 check=False)
        return ok.returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", "esbperf-netem-probe"], capture_output=True)


def loss_bytecode(percent: float) -> str:
    """Classic BPF, direct action: drop a packet with probability percent/100."""
    if percent >= 100:
        return f"1,6 0 0 {TC_ACT_SHOT},"
    threshold = round(percent / 100 * 2**32)
    # ld rand; if A >= threshold skip one: pass, else drop.
    return f"4,32 0 0 {SKF_AD_RANDOM},53 1 0 {threshold},6 0 0 {TC_ACT_SHOT},6 0 0 {TC_ACT_OK},"


def _bytecode_loss(bytecode: dict) -> float | None:
    """The loss a filter of ours drops (tc -j shows its classic BPF as instructions), or None."""
    ops = [(i.get("code"), i.get("jt"), i.get("jf"), i.get("k")) for i in bytecode.get("insns", [])]
    if ops == [(6, 0, 0, TC_ACT_SHOT)]:
        return 100.0
    if len(ops) == 4 and ops[0] == (32, 0, 0, SKF_AD_RANDOM) and ops[1][:3] == (53, 1, 0) \
            and ops[2:] == [(6, 0, 0, TC_ACT_SHOT), (6, 0, 0, TC_ACT_OK)]:
        return round(ops[1][3] / 2**32 * 100, 6)
    return None


def _root_handle(end: Device) -> tuple[str | None, str | None]:
    """(kind, handle) of the device's root qdisc."""
    for q in json.loads(_tc(end, "-j", "qdisc", "show", "dev", end[1]).stdout or "[]"):
        if q.get("root"):
            return q.get("kind"), q.get("handle")
    return None, None


def _clear_end(end: Device) -> bool:
    removed = False
    dev = ["dev", end[1]]
    if _tc(end, "filter", "del", *dev, "egress", "pref", str(FILTER_PREF), check=False).returncode == 0:
        removed = True
    _tc(end, "qdisc", "del", *dev, "clsact", check=False)
    kind, handle = _root_handle(end)
    if kind == "netem" and handle == NETEM_HANDLE:
        _tc(end, "qdisc", "del", *dev, "root")
        removed = True
    elif kind == "tbf":
        if _tc(end, "qdisc", "del", *dev, "parent", f"{handle}1", "handle", NETEM_HANDLE, check=False).returncode == 0:
            removed = True
    return removed


def _apply_end(end: Device, fault: Fault, netem: bool) -> None:
    dev = ["dev", end[1]]
    if netem:
        spec = ["netem", "loss", f"{fault.loss_percent:g}%"]
        if fault.delay_ms:
            spec += ["delay", f"{fault.delay_ms:g}ms"] + ([f"{fault.jitter_ms:g}ms"] if fault.jitter_ms else [])
        kind, handle = _root_handle(end)
        where = ["parent", f"{handle}1"] if kind == "tbf" else ["root"]
        _tc(end, "qdisc", "add", *dev, *where, "handle", NETEM_HANDLE, *spec)
    else:
        _tc(end, "qdisc", "add", *dev, "clsact")
        _tc(end, "filter", "add", *dev, "egress", "pref", str(FILTER_PREF), "bpf", "da", "bytecode",
            loss_bytecode(fault.loss_percent))


def _check(testbed: Testbed, role: str) -> None:
    if not testbed.emulated:
        raise EsbperfError(f"{testbed.path}: network faults are emulated on an emulated testbed's links only "
                           f"(testbed '{testbed.name}' is not emulated)")
    if role not in testbed.hosts:
        raise EsbperfError(f"unknown host '{role}' (hosts: {', '.join(testbed.hosts)})")
    require_root("fault")


def apply(testbed: Testbed, role: str, fault: Fault) -> str:
    """Put `fault` on both directions of `role`'s link (replacing a fault already there)."""
    _check(testbed, role)
    if not 0 <= fault.loss_percent <= 100 or fault.delay_ms < 0 or fault.jitter_ms < 0:
        raise EsbperfError("loss must be 0-100 %, delay and jitter 0 ms or more")
    if fault.jitter_ms and not fault.delay_ms:
        raise EsbperfError("jitter needs a delay (--delay-ms)")
    netem = has_netem()
    if (fault.delay_ms or fault.jitter_ms) and not netem:
        raise EsbperfError("this kernel has no netem (sch_netem), so delay and jitter cannot be emulated here; "
                           "loss and partitions can (a BPF filter)")
    for end in _ends(testbed, role):
        _clear_end(end)
        _apply_end(end, fault, netem)
    _record(testbed, role, fault)
    return f"{role}: {fault.describe()} on both directions of its link ({'netem' if netem else 'BPF filter'})"


def clear(testbed: Testbed, role: str | None = None) -> list[str]:
    """Remove our faults from one host's link or from every link; returns what was removed."""
    roles = [role] if role else list(testbed.hosts)
    for r in roles:
        _check(testbed, r)
    removed = [r for r in roles if any([_clear_end(end) for end in _ends(testbed, r)])]
    for r in removed:
        _record(testbed, r, None)
    return [f"{r}: fault removed" for r in removed]


def active(testbed: Testbed) -> dict[str, dict]:
    """The faults on the testbed's links now, by host (for step.json); {} when there are none."""
    found = {}
    for role in testbed.hosts:
        for end in _ends(testbed, role):
            fault = _read_end(end)
            if fault:
                found[role] = fault.to_dict()
                break
    return found


def _read_end(end: Device) -> Fault | None:
    filters = json.loads(_tc(end, "-j", "filter", "show", "dev", end[1], "egress", check=False).stdout or "[]")
    for f in filters:
        if f.get("pref") == FILTER_PREF and f.get("kind") == "bpf" and "options" in f:
            loss = _bytecode_loss(f["options"].get("bytecode") or {})
            if loss is not None:
                return Fault(loss_percent=loss)
    for q in json.loads(_tc(end, "-j", "qdisc", "show", "dev", end[1]).stdout or "[]"):
        if q.get("kind") == "netem" and q.get("handle") == NETEM_HANDLE:
            o = q.get("options", {})
            delay = o.get("delay", {})
            return Fault(loss_percent=round(100 * float((o.get("loss-random") or {}).get("loss", 0)), 6),
                         delay_ms=round(float(delay.get("delay", 0)) * 1000, 3),
                         jitter_ms=round(float(delay.get("jitter", 0)) * 1000, 3))
    return None


def partition(testbed: Testbed, role: str, seconds: float) -> str:
    """Cut `role`'s link for `seconds`, then heal it (also when interrupted)."""
    apply(testbed, role, Fault(loss_percent=100))
    try:
        time.sleep(seconds)
    finally:
        clear(testbed, role)
    return f"{role}: partitioned for {seconds:g} s, then healed"
