"""Before a run's first step (and again on --resume): the console answers, every target answers and
passes verify, the agents are the testbed's, the monitors that answer, and every host's clock is
close enough to this machine's that one clock cuts every window."""
from __future__ import annotations

from typing import Callable

from esbperf.core import plan as plans, procs, roles, scenarios, topology
from esbperf.core.errors import EsbperfError
from esbperf.run.collect import LocalAgents
from esbperf.run.context import Agent
from esbperf.run.verify import verify_target
from esbperf.services import esb, monitor
from esbperf.services.console import ControlClient

TIMEOUT_S = 5
AGENT_WAIT_S = 10
MAX_SKEW_MS = 100.0   # a host's clock further off than this refuses the run (monitor windows would shift)


def targets_of(testbed: topology.Testbed, names: list[str], plan: plans.Plan | None = None) -> dict[str, topology.Target]:
    """The named targets of the testbed, each once; with `plan`, each must serve the plan's
    scenarios (a floor serves only some; a user's script sends its own requests)."""
    if len(set(names)) != len(names):
        raise EsbperfError(f"a target is named twice: {', '.join(names)}")
    targets = {name: testbed.target(name) for name in names}
    for target in targets.values():
        if plan is not None and not plan.script and target.kind == "esb":
            esb.refuse_unserved(target.name, target.esb, plan.scenarios)
    return targets


def agent_hosts(testbed: topology.Testbed, agents: list[dict], local: LocalAgents) -> list[Agent]:
    """Which host each connected agent runs on: the load host it is named after (`load2`,
    `load2-1`), or this machine when its working folder is here. An agent that is neither is a
    stray (say, a daemon agent of an earlier session) and is refused: its logs could not be brought
    home, and it would take a share of every step's users."""
    names = [a["name"] for a in agents]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise EsbperfError(f"two agents named {twice[0]} are connected to the console; their logs would collide. "
                           "Stop one (each agent needs a name of its own: --host-id)")
    found = []
    for name in names:
        role = next((r for r in testbed.load_roles if name == r or name.startswith(f"{r}-")), None)
        if role is None and any(f.is_dir() for f in local.folders(name)):
            role = roles.CLIENT
        if role is None:
            raise EsbperfError(f"agent {name} is connected to the console but runs on no host of {testbed.path} "
                               f"(not on this machine, and no load host is named {name}); stop it, or add its host "
                               "to the testbed and name the agent after it")
        found.append(Agent(name, role))
    return found


def addresses(target: topology.Target, plan: plans.Plan) -> list[tuple[str, str]]:
    """(what, URL) of what the plan's steps send to: an ESB's own address; for the baseline, the
    back ends its scenarios use (a user's script: all three)."""
    if target.kind == "esb":
        return [(f"the ESB {target.esb}", target.url)]
    used = roles.BACKENDS if plan.script else {r.backend for s in plan.scenarios
                                                for r in scenarios.contract().requests_for(s, "direct", 1024)}
    return [(f"back end {ws}", url) for ws, url in target.backends.items() if ws in used]


def check(client: ControlClient, targets: dict[str, topology.Target], plan: plans.Plan,
          testbed: topology.Testbed, local: LocalAgents, verify: bool, echo: Callable[[str], None]) -> list[Agent]:
    """Check the console, every target and the agents; return the run's agents."""
    client.timeout = TIMEOUT_S
    client.version()   # raises with the address it tried
    for target in targets.values():
        for where, url in addresses(target, plan):
            host, port = topology.host_port(url)
            if not procs.port_open(host, port, TIMEOUT_S):
                raise EsbperfError(f"target {target.name} does not answer at {url} ({where}; tried for {TIMEOUT_S} s)")
    try:
        connected = client.wait_for_agents(1, AGENT_WAIT_S)
    except EsbperfError:
        raise EsbperfError(f"no agent is connected to the console at {testbed.client.address}:{testbed.console_port}; "
                           "start one with `esbperf agent`") from None
    agents = agent_hosts(testbed, connected, local)
    if verify:
        for target in targets.values():
            outcomes = verify_target(testbed, target.name, plan.scenarios, size=1024, timeout=plan.timeout_s,
                                     files=plan.payload_files(), check=plan.payload_check)
            failed = [o for o in outcomes if not o.ok]
            if failed:
                first = failed[0]
                raise EsbperfError(f"target {target.name} fails verification: {len(failed)} of {len(outcomes)} checks, "
                                   f"first: {first.scenario} {first.url}: {first.detail} "
                                   f"(see `esbperf verify --target {target.name}`)")
            echo(f"verified {target.name}: {len(outcomes)} checks passed")
    return agents


def monitored_roles(testbed: topology.Testbed) -> list[str]:
    """Roles whose monitor answers now; only those are collected for each step."""
    return [role for role, host in testbed.hosts.items()
            if host.monitor_port and procs.port_open(host.address, host.monitor_port, 0.5)]


def monitor_samplers(testbed: topology.Testbed, monitored: list[str]) -> dict[str, str | None]:
    """Which sampler each monitor runs (sigar, or OSHI where sigar's library cannot load), for run.json."""
    return {role: (monitor.status(testbed.hosts[role].address, testbed.hosts[role].monitor_port, TIMEOUT_S)
                   or {}).get("sampler") for role in monitored}


def clock_skews(testbed: topology.Testbed, monitored: list[str], max_skew_ms: float,
                agent_hosts: list[str] = (), echo: Callable[[str], None] = print) -> dict[str, dict | None]:
    """Each monitored host's clock against this machine's (its monitor stamps every answer), and each
    agent host's (its agents stamp the data-log rows the step's window cuts): for run.json. A clock
    off by more than max_skew_ms refuses the run, since every window is cut by the runner's clock.
    An agent host without a monitor is read over ssh; on this machine (or in one of its network
    namespaces) it shares the runner's clock."""
    from esbperf.testbed.preflight import _is_local, clock_skew, ssh_clock_skew

    skews: dict[str, dict | None] = {}
    for role in [*monitored, *(r for r in dict.fromkeys(agent_hosts) if r not in monitored)]:
        host = testbed.hosts[role]
        if role in monitored:
            measured, how = clock_skew(host.address, host.monitor_port, TIMEOUT_S), "monitor"
        elif role == roles.CLIENT or testbed.emulated or _is_local(host.address):
            measured, how = (0.0, 0.0), "this machine's clock"
        elif host.ssh:
            measured, how = ssh_clock_skew(testbed, role), "ssh"
        else:
            measured, how = None, "unknown"
        skews[role] = None if measured is None else {"skew_ms": round(measured[0], 1), "error_ms": round(measured[1], 1),
                                                     "how": how}
        if measured and abs(measured[0]) - measured[1] > max_skew_ms:
            raise EsbperfError(f"{role}'s clock is {measured[0]:+.0f} ms off this machine's (limit ±{max_skew_ms:g} ms, "
                               "--max-skew-ms); synchronise the clocks (NTP/chrony) before measuring")
        if measured is None and role not in monitored:
            echo(f"warning: {role}'s clock cannot be read (no monitor answers there and it has no ssh:); its agents' "
                 "rows are cut by this machine's clock all the same")
    return skews
