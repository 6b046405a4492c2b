"""The no-ESB baseline through Grinder across the emulated 1 Gbit/s link: the whole esbperf
path (console, agent and workers in the client's namespace, echo services in theirs, the runner
in the root namespace) at 100 KB, against the link-limited rate, and again with the limits
removed to show where the CPU takes over. bench_link.py measures the same link with wrk.

Run as root from the checkout, with the emulated testbed down:
    .venv/bin/python console-config/testbeds/bench_baseline.py [--users 16] [--seconds 15]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from esbperf.core import plan as plans, topology
from esbperf.run import runner

from esbperf import testbed
from esbperf.analysis.report import analyse
from esbperf.testbed import services as stack
from esbperf.core.errors import EsbperfError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbed", default="emulated")
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--size-kb", type=int, default=100)
    parser.add_argument("--scenario", default="raw", help="raw (buyStocks via /raw) or proxy (thesis SOAP echo)")
    args = parser.parse_args()
    tb = topology.load(args.testbed, default="emulated")
    if testbed.status(tb)["state"] != "down":
        raise EsbperfError(f"testbed {tb.name} is already up (a demo running?); bring it down first")
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-baseline-"))
    os.environ["ESBPERF_STATE"] = str(work / "state")
    plan_file = work / "baseline.yaml"
    plan_file.write_text(json.dumps({"name": "link-baseline", "scenarios": [args.scenario],
                                     "payloads": [f"{args.size_kb}KB"], "users": [args.users],
                                     "duration_s": args.seconds, "warmup_s": 6, "timeout_s": 30}))
    the_plan = plans.load(plan_file)
    unlimited = dataclasses.replace(tb, hosts={r: dataclasses.replace(h, link_mbit=None) for r, h in tb.hosts.items()})
    link = min(tb.hosts["client"].link_mbit, tb.hosts["ws1"].link_mbit)
    ceiling = link * 1e6 / 8 / (args.size_kb * 1024)   # full duplex: requests and echoes each have the link
    figures = []
    quiet = Console(quiet=True)
    with testbed.emulated(tb):
        group = stack.start(tb, None, work / "services", echo=lambda *_: None)
        try:
            for label, bed in (("rate-limited", tb), ("unlimited", unlimited)):
                testbed.up(bed)
                run_dir = runner.start(the_plan, "direct", bed, work / "results", console=quiet,
                                       local_state_dirs=stack.state_dirs(work / "services"),
                                       token_file=stack.console_token_file(work / "services"))
                step = json.loads(next(run_dir.rglob("step.json")).read_text())
                totals = dict(zip(step["console"]["columns"], step["console"]["totals"]))
                [row] = analyse([run_dir]).summary.to_dicts()
                figures.append((label, totals, row["bottlenecks"]))
        finally:
            group.stop_all()
    print(f"no-ESB baseline via Grinder: {args.scenario} {args.size_kb} KB, {args.users} users, "
          f"{args.seconds} s measured; link {link:g} Mbit/s full duplex -> link-limited {ceiling:.0f} TPS")
    for label, t, bottlenecks in figures:
        tps = t["TPS"] or 0
        ratio = f"{tps / ceiling:.2f}" if label == "rate-limited" else "-"
        hot = bottlenecks.replace(";", ", ") or "none"
        print(f"{label:13} TPS {tps:7.0f}  ÷ link-limited {ratio:>5}  mean {t['Mean Test Time (ms)'] or 0:6.2f} ms  "
              f"errors {t['Errors']}  bottlenecks: {hot}")


if __name__ == "__main__":
    try:
        main()
    except EsbperfError as e:
        print(f"bench_baseline: error: {e}", file=sys.stderr)
        sys.exit(2)
