"""Benchmark: which layout of one machine's cores leaves the ESB the bottleneck, and whether it is.

    sudo .venv/bin/python console-config/testbeds/bench_layout.py [--splits shipped,echoes-on-esb,echoes-on-client]
        [--esbs camel,spring-integration,synapse] [--payloads 1KB,100KB] [--users 1,20] [--seconds 8]
        [--target-warmup 120] [--iterations 2] [--link-mbit 10000]

For each split of the cores (a copy of the shipped emulated testbed with each host's `cpus` written
out; `shipped` keeps the file's own `cpus: auto`) and each engine, started alone on the esb host:
`proxy` at each payload and each number of `--users`, warm workers, after the engine's own warm-up, with
`--cross-check wrk` bracketing every step, then `direct` the same (with the first engine only). The report's figures are read
back (summary.csv): each step's bound (engine, back ends, link, client or none) and what it was
decided from, the engine's JVM as a share of its host's cores, the echoes' CPU (100 % a core), the
busiest link, and esbperf ÷ wrk. Splits on 2 CPUs:

    shipped            what `cpus: auto` gives (docs/testbed.md, "Cores"): client, ws1, ws2, ws3 0; esb 1
    echoes-on-esb      client 0; esb, ws1, ws2, ws3 1 (the split before the lean echo)
    echoes-on-client   client, ws1, ws2, ws3 0; esb 1 (written out)

The figures go in docs/testbed.md ("Cores") and docs/benchmarks/layout.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import polars as pl
import yaml
from rich.console import Console

from esbperf.analysis.report import build_report
from esbperf.core import plan as plans, topology
from esbperf.core.project import CONSOLE_CONFIG
from esbperf.core.roles import BACKENDS, CLIENT, ESB, FIXED
from esbperf.run import runner
from esbperf.testbed import down, services, up

SHIPPED = CONSOLE_CONFIG / "testbeds" / "emulated.yaml"
SPLITS = {   # on 2 CPUs: each host's cores (None: the file's own `cpus: auto`)
    "shipped": None,
    "echoes-on-esb": {CLIENT: [0], ESB: [1], **{ws: [1] for ws in BACKENDS}},
    "echoes-on-client": {CLIENT: [0], ESB: [1], **{ws: [0] for ws in BACKENDS}},
}


def testbed_file(work: Path, split: str, link_mbit: float | None) -> Path:
    """The shipped emulated testbed with the split's cores (and the link speed) written out."""
    data = yaml.safe_load(SHIPPED.read_text())
    if SPLITS[split] is not None:
        data.pop("cpus", None)
        for role, cpus in SPLITS[split].items():
            data["hosts"][role]["cpus"] = cpus
    if link_mbit:
        for host in data["hosts"].values():
            host["link_mbit"] = link_mbit
    path = work / f"layout-{split}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def user_counts(text: str) -> list[int]:
    """--users: comma-separated positive whole numbers (argparse turns a ValueError into one line)."""
    counts = [int(u) for u in text.split(",")]
    if any(u < 1 for u in counts):
        raise ValueError(text)
    return counts


def share(value, cores: int) -> float | None:
    return None if value is None else value / cores


def rows_of(report: Path) -> list[dict]:
    return pl.read_csv(report / "summary.csv", infer_schema_length=None).to_dicts()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", default="shipped,echoes-on-esb")
    parser.add_argument("--esbs", default="camel,spring-integration,synapse")
    parser.add_argument("--payloads", default="1KB,100KB")
    parser.add_argument("--users", type=user_counts, default=[20], help="comma-separated, e.g. 20,1")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--target-warmup", type=float, default=120)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--link-mbit", type=float, default=None,
                        help="every host's link (default: the shipped file's)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_layout: the emulated testbed needs root", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-layout-"))
    plan_file = work / "layout.yaml"
    plan_file.write_text(json.dumps({
        "name": "bench-layout", "scenarios": ["proxy"], "payloads": args.payloads.split(","),
        "users": args.users,
        "duration_s": args.seconds, "warmup_s": "auto", "warmup_min_s": 2, "warmup_max_s": 20,
        "iterations": args.iterations, "target_warmup_s": {"direct": 10, "floor": 10, "esb": args.target_warmup},
        "target_warmup_max_s": {"direct": 60, "floor": 60, "esb": args.target_warmup + 120},
        "target_warmup_horizon_s": {"direct": 20, "floor": 20, "esb": 60}, "timeout_s": 30}))
    plan = plans.load(plan_file)
    lines = []
    for split in args.splits.split(","):
        testbed = topology.load(testbed_file(work, split, args.link_mbit))
        print(f"\n{split}: {testbed.cpu_split()}", flush=True)
        up(testbed)
        try:
            for k, esb in enumerate(args.esbs.split(",")):
                targets = [esb, "direct"] if k == 0 else [esb]   # the baseline once per split
                group = services.start(testbed, esb, work / f"services-{split}-{esb}", echo=lambda *_: None)
                try:
                    run_dir = runner.start(plan, targets, testbed, work / "results", console=Console(quiet=True),
                                           local_state_dirs=services.state_dirs(work / f"services-{split}-{esb}"),
                                           token_file=services.console_token_file(work / f"services-{split}-{esb}"),
                                           cross_check="wrk")
                finally:
                    group.stop_all()
                report = work / "reports" / run_dir.name
                build_report([run_dir], report)
                record = json.loads((run_dir / "run.json").read_text())
                cores = {role: len(h["cpus"]) or os.cpu_count() for role, h in record["hosts"].items()}
                for r in rows_of(report):
                    if esb != r["target"] and r["target"] != "direct":
                        continue
                    echoes = sum(r.get(f"{ws}_proc_cpu_mean") or 0 for ws in BACKENDS)
                    link = max((r.get(f"{role}_link_percent") or 0) for role in FIXED)
                    engine = share(r.get("esb_proc_cpu_mean"), cores["esb"]) if r["target"] != "direct" else None
                    lines.append(
                        f"{split:<17} {r['target']:<19} {r['payload_label']:>6} {r['users']:>5} {r['iteration']:>3} {r['tps']:>8.0f} "
                        f"{'–' if engine is None else f'{engine:.0f} %':>8} {echoes:>7.0f} % "
                        f"{(r.get('client_cpu_mean') or 0):>6.0f} % {link:>5.0f} % "
                        f"{(r.get('xcheck_tps_ratio') or 0):>6.2f} {str(r.get('bound') or '–'):<9} "
                        f"{str(r.get('valid')):<20} {str(r.get('bound_by') or '')[:70]}")
                    print(lines[-1], flush=True)
        finally:
            down(testbed)
    print(f"\nproxy, {', '.join(map(str, args.users))} users, {args.seconds:g} s windows, warm workers, after {args.target_warmup:g} s "
          f"of the engine's own warm-up; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    print(f"{'split':<17} {'target':<19} {'payload':>6} {'users':>5} {'it':>3} {'TPS':>8} {'engine':>8} {'echoes':>9} "
          f"{'client':>8} {'link':>7} {'÷ wrk':>6} {'bound':<9} {'valid':<20} bound by")
    print("\n".join(lines))
    print(f"(engine: its JVM as a share of the esb host's cores; echoes: the three echo JVMs' CPU, 100 % a "
          f"core; client: the client host's CPU; link: the busiest host link; work folder {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
