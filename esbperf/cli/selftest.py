"""`esbperf selftest`: esbperf's own judgments held against known answers, with their error rates.

    esbperf selftest [--check aa --check warmup …] [--quick] [--out DIR] [--testbed NAME]

Each check runs on the shipped emulated testbed (as root; `local` otherwise), started as `esbperf
demo` starts it, against the reference engine (esb-projects/reference: a set amount of work per
request, and on demand a known warm-up curve) or Camel:

    aa          A/A: pairs of runs of the flat reference, forks on both sides (selftest-aa), compared
                with `esbperf compare` and its gate at 5 %: how often a difference is called shown
                (TPS, p50, p99) — every one is false — and how often the gate fails
    aa-camel    the same with Camel
    difference  the reference at its work N, then at 1.1 × N (selftest-difference): how often the verdict
                is shown with the right sign, and how often its interval covers the truth, measured
                apart by wrk over long windows on each
    warmup      forks of a flat reference: how soon their warm-up is judged settled; forks of one whose
                work falls 20 % over 180 s: how often it is judged settled while its speed, by its own
                account, still had more than 5 % to move (selftest-warmup)
    valid       the demo's grid against a flat reference: the share of steps valid, and each warning's

Everything goes into DIR/selftest-<time>/: each check's runs and comparisons, known-answers.csv (a row
per rate: its count, its 95 % interval, its goal) and known-answers.md, the table that
docs/benchmarks/known-answers.md publishes. --quick runs each check once, small (a few minutes in
all: what `make test` runs to see that a rule still works), not enough for a rate worth publishing."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click
import polars as pl
from rich.console import Console

from esbperf.cli.demo import DEMO_PLANS, default_testbed, run_demo
from esbperf.cli.launch import launched
from esbperf.core import plan as plans, topology
from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import CONTROL_API, GRINDER_HOME, HTTP_CLIENT, JAXWS_ECHO, MONITOR, ensure_built
from esbperf.results import layout
from esbperf.run import crosscheck, runner
from esbperf.services.esb import ENGINES

CHECKS = ("aa", "aa-camel", "difference", "warmup", "valid")
REFERENCE = "reference"
DIFFERENCE = 1.10           # the known difference: B's work ÷ A's
FALLING = {"warmup-factor": 1.25, "warmup-s": 180}   # the work falls 20 % over 180 s of load
GATE = ("--max-tps-drop", "5%", "--max-p99-rise", "5%")


@dataclass(frozen=True)
class Sizes:
    """How much of each check to run."""

    aa_pairs: int
    camel_pairs: int
    difference_pairs: int
    truth_s: float           # wrk's window per load and side, for the known difference's truth
    flat_forks: int
    falling_forks: int
    forks: int | None        # forks per run of the A/A and difference checks (None: the plan's)
    users: list[int] | None  # the A/A and difference plans' users (None: the plan's)
    payloads: list[str] | None


FULL = Sizes(aa_pairs=2, camel_pairs=1, difference_pairs=3, truth_s=30, flat_forks=15, falling_forks=8,
             forks=None, users=None, payloads=None)
QUICK = Sizes(aa_pairs=1, camel_pairs=1, difference_pairs=1, truth_s=5, flat_forks=2, falling_forks=1,
              forks=2, users=[20], payloads=["1KB"])


def _plan(name: str, sizes: Sizes, **changes) -> plans.Plan:
    """A selftest plan, resized."""
    plan = plans.load(name)
    data = plan.to_dict()
    if sizes.forks is not None:
        data["forks"] = sizes.forks
    if sizes.users is not None and "users" in data:
        data["users"] = sizes.users
    if sizes.payloads is not None:
        data["payloads"] = sizes.payloads
    data.update(changes)
    return plans.Plan.from_dict(data, f"{name} (selftest)")


class Selftest:
    def __init__(self, testbed: topology.Testbed, out: Path, sizes: Sizes, console: Console):
        self.testbed, self.out, self.sizes, self.console = testbed, out, sizes, console
        self.rates: list = []

    # --- running ----------------------------------------------------------------------------

    def runs(self, engine: str, plan: plans.Plan, count: int, folder: str, settings: dict | None = None,
             truth: bool = False) -> list[tuple[Path, dict]]:
        """`count` runs of `plan` against `engine`, each with its own services (a fresh start, as a
        user's next run would be); with `truth`, wrk over sizes.truth_s on each load after each run."""
        done = []
        for n in range(count):
            work = state_dir() / "selftest" / f"{self.out.name}-{folder}-{n + 1}"
            with launched(self.testbed, engine, work, self.console,
                          settings={engine: settings} if settings else None) as launcher:
                self.console.rule(f"selftest {folder}: run {n + 1} of {count} ({engine}"
                                  + (f", {settings}" if settings else "") + ")")
                run = runner.start(plan, [engine], self.testbed, self.out / folder, console=self.console, **launcher)
                found = self.truth(engine, plan) if truth else {}
            done.append((run, found))
        return done

    def truth(self, engine: str, plan: plans.Plan) -> dict:
        """wrk on each load of `plan` against the running `engine`, sizes.truth_s each: {(payload
        bytes, users): wrk's figures}."""
        target = self.testbed.target(engine)
        long = plans.Plan.from_dict({**plan.to_dict(), "duration_s": self.sizes.truth_s, "forks": 1}, "truth")
        found = {}
        for step in long.steps([engine]):
            if step.iteration != 1 or (step.payload_bytes, step.users) in found:
                continue
            self.console.print(f"truth: wrk {self.sizes.truth_s:g} s, {step.payload_label} {step.users} users")
            found[(step.payload_bytes, step.users)] = crosscheck.cross_check(self.testbed, target, step, long, 0, False)
        return found

    def compare(self, first: Path, second: Path, folder: str, gate: bool = True):
        """`esbperf compare FIRST SECOND` as a user types it (with its gate at 5 %): its verdicts and exit code."""
        from esbperf.analysis.known_answers import Comparison

        out = self.out / folder
        argv = [sys.executable, "-m", "esbperf", "compare", str(first), str(second), "--out", str(out),
                *(GATE if gate else ())]
        done = subprocess.run(argv, capture_output=True, text=True)
        (self.out / f"{folder}.log").write_text(done.stdout + done.stderr)
        if done.returncode not in (0, 1, 3) or not (out / "verdicts.csv").is_file():
            raise EsbperfError(f"selftest: `esbperf compare` failed (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or ['no output']}")
        return Comparison(folder, pl.read_csv(out / "verdicts.csv", infer_schema_length=None), second.name,
                          done.returncode if gate else None)

    # --- the checks ---------------------------------------------------------------------------

    def aa(self, engine: str, pairs: int, name: str) -> None:
        from esbperf.analysis import known_answers

        plan = _plan("selftest-aa", self.sizes)
        runs = [r for r, _ in self.runs(engine, plan, 2 * pairs, name)]
        comparisons = [self.compare(runs[2 * i], runs[2 * i + 1], f"{name}-compare-{i + 1}") for i in range(pairs)]
        self.rates += known_answers.aa_rates(f"A/A: {engine}", comparisons)

    def difference(self) -> None:
        from esbperf.analysis import known_answers

        plan = _plan("selftest-difference", self.sizes)
        work = ENGINES[REFERENCE].setting_values()["work"]
        comparisons, truths = [], {}
        for i in range(self.sizes.difference_pairs):
            [(a, truth_a)] = self.runs(REFERENCE, plan, 1, f"difference-{i + 1}-a", {"work": work}, truth=True)
            [(b, truth_b)] = self.runs(REFERENCE, plan, 1, f"difference-{i + 1}-b",
                                       {"work": round(work * DIFFERENCE)}, truth=True)
            for key in truth_a:
                truths.setdefault(key, []).append((truth_a[key], truth_b.get(key, {})))
            comparisons.append(self.compare(a, b, f"difference-compare-{i + 1}", gate=False))
        # The truth, B ÷ A, from every pair's wrk windows pooled: one figure per load.
        truth = {}
        for key, sides in truths.items():
            figures = {}
            for figure, column in (("tps", "tps"), ("p50", "p50_ms"), ("p99", "p99_ms")):
                a = [s[0].get(column) for s in sides if s[0].get(column) and s[1].get(column)]
                b = [s[1].get(column) for s in sides if s[0].get(column) and s[1].get(column)]
                if a:
                    figures[figure] = (sum(b) / len(b)) / (sum(a) / len(a))
            truth[key] = figures
        for c in comparisons:
            c.truth = truth
        layout.write_json(self.out / "difference-truth.json",
                          {f"{p} B {u} users": f for (p, u), f in truth.items()})
        self.rates += known_answers.difference_rates(f"known difference: work × {DIFFERENCE:g}", comparisons)

    def warmup(self) -> None:
        from esbperf.analysis import known_answers

        flat_plan = _plan("selftest-warmup", self.sizes, forks=self.sizes.flat_forks, users=[20], payloads=["1KB"])
        falling_plan = _plan("selftest-warmup", self.sizes, forks=self.sizes.falling_forks, users=[20],
                             payloads=["1KB"], target_warmup_max_s={"direct": 30, "floor": 30, "esb": 240})
        [(flat, _)] = self.runs(REFERENCE, flat_plan, 1, "warmup-flat")
        [(falling, _)] = self.runs(REFERENCE, falling_plan, 1, "warmup-falling", dict(FALLING))
        self.rates += known_answers.warmup_rates(known_answers.warmings(layout.read_json(flat / layout.RUN_FILE)),
                                                 known_answers.warmings(layout.read_json(falling / layout.RUN_FILE)))

    def valid(self) -> None:
        from esbperf.analysis import known_answers

        report = run_demo(self.testbed.path, REFERENCE, self.out / "valid", self.console, plan_names=DEMO_PLANS)
        summary = pl.read_csv(report / "summary.csv", infer_schema_length=None)
        self.rates += known_answers.valid_rates("the demo's grid against a flat reference", summary)

    def write(self) -> None:
        from esbperf.analysis import known_answers

        known_answers.write_csv(self.rates, self.out / "known-answers.csv")
        (self.out / "known-answers.md").write_text(known_answers.markdown(self.rates) + "\n" + known_answers.binomial_note()
                                                   + "\n")


@click.command()
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS),
              help="A check to run (repeatable; default: every one).")
@click.option("--quick", is_flag=True, help="Each check once and small: minutes, to see that the rules still work.")
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", default=None,
              help="Testbed (default: emulated when root, else local).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives the selftest's folder.")
def selftest(checks: tuple[str, ...], quick: bool, testbed_name: str | None, out: Path) -> None:
    """Hold esbperf's judgments against known answers and print their error rates."""
    console = Console()
    ensure_built(GRINDER_HOME, CONTROL_API, HTTP_CLIENT, JAXWS_ECHO, MONITOR,
                 *filter(None, [ENGINES[REFERENCE].module, ENGINES["camel"].module]))
    testbed = topology.load(testbed_name or default_testbed())
    folder = out.resolve() / f"selftest-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=False)
    test = Selftest(testbed, folder, QUICK if quick else FULL, console)
    began = time.monotonic()
    wanted = checks or CHECKS
    try:
        for check in CHECKS:
            if check not in wanted:
                continue
            if check == "aa":
                test.aa(REFERENCE, test.sizes.aa_pairs, "aa")
            elif check == "aa-camel":
                test.aa("camel", test.sizes.camel_pairs, "aa-camel")
            elif check == "difference":
                test.difference()
            elif check == "warmup":
                test.warmup()
            elif check == "valid":
                test.valid()
            test.write()   # what is measured so far is kept, whatever the next check does
    finally:
        test.write()
    console.print((folder / "known-answers.md").read_text(), markup=False, highlight=False)
    console.print(f"selftest finished in {time.monotonic() - began:.0f} s on {os.cpu_count()} CPUs; "
                  f"{folder / 'known-answers.csv'}")
    missed = [r for r in test.rates if r.met is False]
    if missed and not quick:
        console.print(f"{len(missed)} rate(s) miss their goal: " + "; ".join(f"{r.check}: {r.judgment}" for r in missed))
