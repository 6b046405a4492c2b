"""The no-ESB baseline across the emulated link: how close to the link's limit does a 100 KB
echo get, and where does the CPU take over once the limit is gone.

wrk in the client's namespace POSTs bodies of --size-kb to the raw echo (`esbperf echo`, /raw)
in ws1's namespace, which sends each body back. Each body crosses ws1's and the client's
links once in each direction; the links are full duplex, so the link-limited rate is
link bytes per second / body bytes. The same run follows with the rate limits removed.

Run as root from the checkout, with the emulated testbed down (after `esbperf build`):
    .venv/bin/python console-config/testbeds/bench_link.py [--seconds 10] [--connections 16]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

from esbperf import testbed
from esbperf.core import procs, topology

from esbperf.core.errors import EsbperfError
from esbperf.run import wrk
from esbperf.services.echo import wsdl_answers

WARMUP_S = 5          # the echo's JIT settles before each measured run


def cpu_busy() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def run_wrk(tb: topology.Testbed, url: str, body: int, seconds: int, connections: int) -> dict:
    """wrk in the client's namespace; the machine's CPU busy share while it ran."""
    before = cpu_busy()
    r = wrk.run(url, b"x" * body, connections, seconds, threads=2,
                headers={"Content-Type": "application/octet-stream"}, wrap=lambda argv: tb.command("client", argv))
    after = cpu_busy()
    return {"tps": r.rps, "requests": r.requests, "read_bytes": r.bytes_read, "non_2xx": r.non_2xx,
            "socket_errors": r.errors - r.non_2xx, "cpu_busy": (after[0] - before[0]) / (after[1] - before[1])}


def measure(tb, url, args, label, link_mbit, body) -> dict:
    run_wrk(tb, url, body, WARMUP_S, args.connections)
    r = run_wrk(tb, url, body, args.seconds, args.connections)
    per_answer = r["read_bytes"] / max(r["requests"], 1)
    if r["non_2xx"] or r["socket_errors"] or per_answer < body:
        raise EsbperfError(f"{label}: the echo did not answer every request in full "
                           f"({r['non_2xx']} non-2xx, {r['socket_errors']} socket errors, "
                           f"{per_answer:.0f} bytes per answer for {body}-byte bodies)")
    r["label"], r["link_mbit"] = label, link_mbit
    r["ceiling"] = link_mbit * 1e6 / 8 / body if link_mbit else None
    r["mbit_each_way"] = r["tps"] * per_answer * 8 / 1e6
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--testbed", default="emulated", help="an emulated testbed (default: emulated)")
    parser.add_argument("--seconds", type=int, default=10, help="measured seconds per run")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (concurrent users)")
    parser.add_argument("--size-kb", type=int, default=100, help="body size in KiB")
    parser.add_argument("--runtime", default="jaxws", choices=["jaxws", "cxf", "lean"], help="the echo's runtime")
    args = parser.parse_args()
    wrk.require()
    tb = topology.load(args.testbed, default="emulated")
    if testbed.status(tb)["state"] != "down":
        raise EsbperfError(f"testbed {tb.name} is already up (a demo running?); bring it down first")
    body = args.size_kb * 1024
    ws1 = tb.hosts["ws1"]
    url = f"{ws1.url(ws1.echo_port)}/raw"
    unlimited = dataclasses.replace(tb, hosts={r: dataclasses.replace(h, link_mbit=None) for r, h in tb.hosts.items()})
    results = []
    with tempfile.TemporaryDirectory() as tmp, testbed.emulated(tb):
        echo = procs.Process("echo ws1", tb.command("ws1", [
            sys.executable, "-m", "esbperf", "echo", "--id", "ws1", "--runtime", args.runtime,
            "--listen", f"{ws1.address}:{ws1.echo_port}"]), Path(tmp) / "echo.log").start()
        try:
            echo.wait_until(lambda: wsdl_answers(ws1.address, ws1.echo_port), 90, "its WSDL answering")
            link = min(tb.hosts["client"].link_mbit or 0, ws1.link_mbit or 0) or None
            results.append(measure(tb, url, args, "rate-limited", link, body))
            testbed.up(unlimited)                   # same testbed, qdiscs removed
            results.append(measure(tb, url, args, "unlimited", None, body))
        finally:
            echo.stop()
    print(f"raw echo ({args.runtime}) of {args.size_kb} KiB bodies, client -> ws1, wrk -t2 -c{args.connections}, "
          f"{args.seconds} s after {WARMUP_S} s warm-up")
    print(f"{'run':13} {'link Mbit/s':>11} {'TPS':>8} {'link-limited TPS':>17} {'ratio':>6} "
          f"{'Mbit/s each way':>16} {'machine CPU busy':>17}")
    for r in results:
        ceiling = f"{r['ceiling']:.0f}" if r["ceiling"] else "-"
        ratio = f"{r['tps'] / r['ceiling']:.2f}" if r["ceiling"] else "-"
        print(f"{r['label']:13} {r['link_mbit'] or 'none':>11} {r['tps']:8.0f} {ceiling:>17} {ratio:>6} "
              f"{r['mbit_each_way']:16.0f} {r['cpu_busy']:17.0%}")
    limited, free = results
    print(f"unlimited / rate-limited TPS: {free['tps'] / limited['tps']:.2f}")


if __name__ == "__main__":
    try:
        main()
    except EsbperfError as e:
        print(f"bench_link: error: {e}", file=sys.stderr)
        sys.exit(2)
