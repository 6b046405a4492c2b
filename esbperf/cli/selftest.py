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
    interleaved the reference and its twin (esb-projects/reference-twin) as two targets of one run, so
                each fork measures both back to back, and the verdict pairs them fork by fork
                (selftest-interleaved), in runs of their own by turns: an A/A (both at work N: how
                often a difference is called shown) and the known 10 % difference (the twin at
                1.2 × N: shown with the right sign, interval covering the truth by construction —
                the work's share of the reference's CPU by its own clocks; wrk's reading on the two
                in turn kept beside it)
    warmup      forks of a flat reference: how soon their warm-up is judged settled; forks of one whose
                work falls 20 % over 180 s: how often it is judged settled while its speed, by its own
                account, still had more than 5 % to move (selftest-warmup)
    valid       the demo's grid against a flat reference: the share of steps valid, and each warning's
    bracket     the flat reference measured as a round measures an engine, wrk just before and just after
                each step (selftest-bracket): how often `target-drift` says the target moved — every one
                is false

Everything goes into DIR/selftest-<time>/: each check's runs and comparisons, known-answers.csv (a row
per rate: its count, its 95 % interval, its goal) and known-answers.md, the table that
docs/benchmarks/known-answers.md publishes. --quick runs each check once, small (a few minutes in
all: what `make test-long` runs to see that a rule still works), not enough for a rate worth publishing."""
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
from esbperf.services.esb import ENGINES, read_account

CHECKS = ("aa", "aa-camel", "difference", "interleaved", "warmup", "valid", "bracket")
REFERENCE = "reference"
TWIN = "reference-twin"          # the reference a second time, beside it in one run
TRUTH_TURNS = 2                  # wrk on the two in turn this many times, the order turned each time (AB BA)
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
    difference: float        # the known difference between two runs: B's work ÷ A's
    # The interleaved known difference: the twin's work ÷ the reference's. With the work about half of
    # the reference's CPU a request, × 1.2 costs some 10 % more a request: the known 10 % difference.
    interleaved_difference: float
    falling: dict            # the falling reference's curve (its settings) ...
    falling_max_s: float     # ... and how long its warm-up may go on
    flat_max_s: float        # how long a flat reference's may
    # The reference's own warm-up (its C1-compiled code) is over within seconds: in the A/A and the
    # difference its forks are loaded at most this long, where an ESB's are given the plan's.
    reference_warmup_max_s: float
    # Runs of the interleaved A/A, each followed by one of the interleaved difference: each run one
    # experiment of its own (a fresh testbed, its own forks), so the rates count experiments, not forks.
    interleaved_runs: int
    interleaved_forks: int
    # Iterations a fork: the two targets' order turns each one (AB BA AB BA), and from one fork to the
    # next, so a fork's pair is the mean of that many adjacent pairs, a drift within it on both sides.
    interleaved_iterations: int
    interleaved_warmup_max_s: float   # each target's warm-up in each fork (the reference's C1 code is warm in seconds)
    forks: int | None        # forks per run of the A/A and difference checks (None: the plan's)
    users: list[int] | None  # the A/A and difference plans' users (None: the plan's)
    payloads: list[str] | None


FULL = Sizes(aa_pairs=2, camel_pairs=1, difference_pairs=3, truth_s=20, flat_forks=10, falling_forks=6,
             difference=1.10, interleaved_difference=1.2, falling={"warmup-factor": 1.25, "warmup-s": 180},
             falling_max_s=240, flat_max_s=75, reference_warmup_max_s=45,
             # 6 experiments a side, 10 forks of one pair each (about 8 min an experiment here): a fork's
             # adjacent pair lies some 7 % apart here (SD of its log ratio), so 10 forks show a 10 %
             # difference at 95 % in nearly every experiment (non-central t, 9 df) and 6 × 3 verdicts
             # a side count the rates.
             interleaved_runs=6, interleaved_forks=10, interleaved_iterations=1, interleaved_warmup_max_s=6,
             forks=None, users=None, payloads=None)
# Minutes, for `make test-long`: the A/A and the warm-up's false-settle check once, small; a difference
# and a fall large enough that two forks tell them (a rule broken shows, a rate is not measured).
QUICK = Sizes(aa_pairs=1, camel_pairs=1, difference_pairs=1, truth_s=5, flat_forks=1, falling_forks=1,
              difference=2.0, interleaved_difference=2.0, falling={"warmup-factor": 2.0, "warmup-s": 90},
              falling_max_s=45, flat_max_s=30, reference_warmup_max_s=15,
              interleaved_runs=1, interleaved_forks=3, interleaved_iterations=2, interleaved_warmup_max_s=6,
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


MANIFEST = "checks.json"   # what each check measured: its runs, and the truth measured apart


class Selftest:
    """The checks in two phases: measure (runs, kept in the folder and named in its MANIFEST) and
    judge (comparisons and rates, from the manifest: `--from` judges a finished selftest again, into
    a folder of its own, with this code's rules)."""

    def __init__(self, testbed: topology.Testbed | None, out: Path, sizes: Sizes, console: Console):
        self.testbed, self.out, self.sizes, self.console = testbed, out, sizes, console
        self.rates: list = []
        self.judged = out        # where comparisons and tables go
        path = out / MANIFEST
        self.manifest: dict = layout.read_json(path) if path.is_file() else {"sizes": sizes.__dict__}

    def note(self, check: str, what: dict) -> None:
        self.manifest[check] = what
        layout.write_json(self.out / MANIFEST, self.manifest)

    # --- measuring ----------------------------------------------------------------------------

    def runs(self, engine: str, plan: plans.Plan, count: int, folder: str, settings: dict | None = None,
             truth: bool = False, cross_check: str | None = None) -> list[tuple[Path, dict]]:
        """`count` runs of `plan` against `engine`, each with its own services (a fresh start, as a
        user's next run would be); with `truth`, wrk over sizes.truth_s on each load after each run;
        with `cross_check`, the plan's cross-check iterations measured by it too."""
        done = []
        for n in range(count):
            work = state_dir() / "selftest" / f"{self.out.name}-{folder}-{n + 1}"
            with launched(self.testbed, engine, work, self.console,
                          settings={engine: settings} if settings else None) as launcher:
                self.console.rule(f"selftest {folder}: run {n + 1} of {count} ({engine}"
                                  + (f", {settings}" if settings else "") + ")")
                run = runner.start(plan, [engine], self.testbed, self.out / folder, console=self.console,
                                   cross_check=cross_check, **launcher)
                found = self.truth(engine, plan) if truth else {}
            done.append((run, found))
        return done

    def truth(self, engine: str, plan: plans.Plan) -> list[dict]:
        """wrk on each load of `plan` against the running `engine`, sizes.truth_s each."""
        target = self.testbed.target(engine)
        long = plans.Plan.from_dict({**plan.to_dict(), "duration_s": self.sizes.truth_s, "forks": 1}, "truth")
        found, seen = [], set()
        for step in long.steps([engine]):
            if (step.payload_bytes, step.users) in seen:
                continue
            seen.add((step.payload_bytes, step.users))
            self.console.print(f"truth: wrk {self.sizes.truth_s:g} s, {step.payload_label} {step.users} users")
            found.append({"payload_bytes": step.payload_bytes, "users": step.users,
                          **crosscheck.cross_check(self.testbed, target, step, long, 0, False)})
        return found

    def measure(self, check: str) -> None:
        if check in ("aa", "aa-camel"):
            engine = REFERENCE if check == "aa" else "camel"
            pairs = self.sizes.aa_pairs if check == "aa" else self.sizes.camel_pairs
            plan = _plan("selftest-aa", self.sizes, **(self.reference_warmup() if engine == REFERENCE else {}))
            runs = [r for r, _ in self.runs(engine, plan, 2 * pairs, check)]
            self.note(check, {"engine": engine, "pairs": [[runs[2 * i].name, runs[2 * i + 1].name] for i in range(pairs)]})
        elif check == "difference":
            plan = _plan("selftest-difference", self.sizes, **self.reference_warmup())
            work = ENGINES[REFERENCE].setting_values()["work"]
            pairs = []
            for i in range(self.sizes.difference_pairs):
                [(a, truth_a)] = self.runs(REFERENCE, plan, 1, f"difference-{i + 1}-a", {"work": work}, truth=True)
                [(b, truth_b)] = self.runs(REFERENCE, plan, 1, f"difference-{i + 1}-b",
                                           {"work": round(work * self.sizes.difference)}, truth=True)
                pairs.append({"a": str(a.relative_to(self.out)), "b": str(b.relative_to(self.out)),
                              "truth_a": truth_a, "truth_b": truth_b})
                self.note(check, {"factor": self.sizes.difference, "pairs": pairs})
        elif check == "interleaved":
            plan = _plan("selftest-interleaved", self.sizes, forks=self.sizes.interleaved_forks,
                         iterations=self.sizes.interleaved_iterations,
                         target_warmup_max_s={"direct": 30, "floor": 30, "esb": self.sizes.interleaved_warmup_max_s})
            work = ENGINES[REFERENCE].setting_values()["work"]
            runs = []
            # An A/A, then a difference, and again: what the machine does over the hour falls on both.
            for n in range(self.sizes.interleaved_runs):
                for label, factor in (("aa", 1.0), ("difference", self.sizes.interleaved_difference)):
                    folder = f"interleaved-{label}-{n + 1}"
                    settings = {REFERENCE: {"work": work}, TWIN: {"work": round(work * factor)}}
                    run, truth_a, truth_b = self.interleaved(plan, settings, folder, truth=factor != 1.0)
                    runs.append({"label": label, "factor": factor, "run": str(run.relative_to(self.out)),
                                 "truth_a": truth_a, "truth_b": truth_b})
                    self.note(check, {"runs": runs})
        elif check == "warmup":
            flat_plan = _plan("selftest-warmup", self.sizes, forks=self.sizes.flat_forks, users=[20], payloads=["1KB"],
                              target_warmup_max_s={"direct": 30, "floor": 30, "esb": self.sizes.flat_max_s})
            falling_plan = _plan("selftest-warmup", self.sizes, forks=self.sizes.falling_forks, users=[20],
                                 payloads=["1KB"],
                                 target_warmup_max_s={"direct": 30, "floor": 30, "esb": self.sizes.falling_max_s})
            [(flat, _)] = self.runs(REFERENCE, flat_plan, 1, "warmup-flat")
            self.note(check, {"flat": str(flat.relative_to(self.out))})
            [(falling, _)] = self.runs(REFERENCE, falling_plan, 1, "warmup-falling", dict(self.sizes.falling))
            self.note(check, {"flat": str(flat.relative_to(self.out)), "falling": str(falling.relative_to(self.out)),
                              "curve": dict(self.sizes.falling)})
        elif check == "bracket":
            [(run, _)] = self.runs(REFERENCE, _plan("selftest-bracket", self.sizes), 1, "bracket", cross_check="wrk")
            self.note(check, {"run": str(run.relative_to(self.out))})
        elif check == "valid":
            report = run_demo(self.testbed.path, REFERENCE, self.out / "valid", self.console, plan_names=DEMO_PLANS)
            self.note(check, {"demo": str(report.parent.relative_to(self.out))})

    def interleaved(self, plan: plans.Plan, settings: dict, folder: str, truth: bool) -> tuple[Path, list, list]:
        """One run of `plan` with the reference and its twin as its targets, each with its `settings`;
        with `truth`, wrk on each load of the two in turn, TRUTH_TURNS times (the machine's drift
        then falls on both sides of the truth too)."""
        work = state_dir() / "selftest" / f"{self.out.name}-{folder}"
        with launched(self.testbed, [REFERENCE, TWIN], work, self.console, settings=settings) as launcher:
            self.console.rule(f"selftest {folder}: {REFERENCE} {settings[REFERENCE]} beside {TWIN} {settings[TWIN]}")
            run = runner.start(plan, [REFERENCE, TWIN], self.testbed, self.out / folder, console=self.console,
                               **launcher)
            # What each engine's last fork says of itself (its work's share of its CPU: the truth by construction).
            accounts = [read_account(name, *self.testbed.target(name).address) for name in (REFERENCE, TWIN)]
            layout.write_json(run / "accounts.json", dict(zip((REFERENCE, TWIN), accounts)))
            truth_a, truth_b = [], []
            for turn in range(TRUTH_TURNS if truth else 0):
                if turn % 2 == 0:
                    truth_a += self.truth(REFERENCE, plan)
                truth_b += self.truth(TWIN, plan)
                if turn % 2 == 1:
                    truth_a += self.truth(REFERENCE, plan)
        return run, truth_a, truth_b

    def reference_warmup(self) -> dict:
        return {"target_warmup_max_s": {"direct": 30, "floor": 30, "esb": self.sizes.reference_warmup_max_s}}

    # --- judging ------------------------------------------------------------------------------

    def compare(self, first: Path, second: Path, folder: str, gate: bool = True):
        """`esbperf compare FIRST SECOND` as a user types it (with its gate at 5 %): its verdicts and exit code."""
        from esbperf.analysis.known_answers import Comparison

        out = self.judged / folder
        argv = [sys.executable, "-m", "esbperf", "compare", str(first), str(second), "--out", str(out),
                *(GATE if gate else ())]
        done = subprocess.run(argv, capture_output=True, text=True)
        (self.judged / f"{folder}.log").write_text(done.stdout + done.stderr)
        if done.returncode not in (0, 1, 3) or not (out / "verdicts.csv").is_file():
            raise EsbperfError(f"selftest: `esbperf compare` failed (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or ['no output']}")
        return Comparison(folder, pl.read_csv(out / "verdicts.csv", infer_schema_length=None), second.name,
                          done.returncode if gate else None)

    def judge(self) -> None:
        """Every check the manifest names, judged with this code: the rates, in CHECKS' order."""
        from esbperf.analysis import known_answers

        self.rates = []
        for check in CHECKS:
            what = self.manifest.get(check)
            if not what:
                continue
            if check in ("aa", "aa-camel"):
                comparisons = [self.compare(self.out / check / a, self.out / check / b, f"{check}-compare-{n + 1}")
                               for n, (a, b) in enumerate(what["pairs"])]
                self.rates += known_answers.aa_rates(f"A/A: {what['engine']}", comparisons)
            elif check == "difference":
                comparisons = [self.compare(self.out / p["a"], self.out / p["b"], f"difference-compare-{n + 1}",
                                            gate=False) for n, p in enumerate(what["pairs"])]
                truth = known_answers.pooled_truth([(p["truth_a"], p["truth_b"]) for p in what["pairs"]])
                for c in comparisons:
                    c.truth = truth
                layout.write_json(self.judged / "difference-truth.json",
                                  [{"payload_bytes": k[0], "users": k[1], **v} for k, v in truth.items()])
                self.rates += known_answers.difference_rates(f"known difference: work × {what['factor']:g}", comparisons)
            elif check == "interleaved":
                self.rates += self.judge_interleaved(what["runs"])
            elif check == "warmup":
                infos = [layout.read_json(self.out / what[k] / layout.RUN_FILE) for k in ("flat", "falling") if k in what]
                curve = what.get("curve") or {}
                label = (f"reference falling {1 - 1 / curve['warmup-factor']:.0%} over {curve['warmup-s']:g} s"
                         if curve else "")
                found = [[w for info in infos[i:i + 1] for w in known_answers.warmings(info)] for i in (0, 1)]
                self.rates += known_answers.warmup_rates(*found, falling_label=label)
                if any(t.get("machine") for info in infos for e in info.get("target_warmup") or []
                       for t in e.get("targets") or []):
                    # The same forks judged on their throughput alone: what taking the machine out changed.
                    alone = [[w for info in infos[i:i + 1] for w in known_answers.warmings(info, machine=False)]
                             for i in (0, 1)]
                    self.rates += known_answers.warmup_rates(*alone, falling_label=label,
                                                             how=", its throughput alone (the rule before)")
            elif check == "valid":
                from esbperf.analysis.report import build_report
                demo = self.out / what["demo"]
                runs = sorted(p for p in demo.iterdir() if (p / layout.RUN_FILE).is_file())
                report, _ = build_report(runs, self.judged / "valid-report")
                summary = pl.read_csv(report / "summary.csv", infer_schema_length=None)
                self.rates += known_answers.valid_rates("the demo's grid against a flat reference", summary)
            elif check == "bracket":
                from esbperf.analysis.report import build_report
                report, _ = build_report([self.out / what["run"]], self.judged / "bracket-report")
                summary = pl.read_csv(report / "summary.csv", infer_schema_length=None)
                self.rates += known_answers.bracket_rates("wrk bracket: flat reference", summary)
        self.write()

    def judge_interleaved(self, runs: list[dict]) -> list:
        """Each interleaved run's own report (`esbperf report RUN`: its verdicts pair the two targets by
        fork), judged as an A/A or as the known difference."""
        from esbperf.analysis import known_answers
        from esbperf.analysis.known_answers import Comparison
        from esbperf.analysis.report import build_report

        rates = []
        for label in ("aa", "difference"):
            comparisons = []
            for n, entry in enumerate(r for r in runs if r["label"] == label):
                report, _ = build_report([self.out / entry["run"]], self.judged / f"interleaved-{label}-report-{n + 1}")
                found = Comparison(f"interleaved-{label}-{n + 1}",
                                   pl.read_csv(report / "verdicts.csv", infer_schema_length=None), TWIN)
                if label == "difference":
                    found.truth = self.interleaved_truth(entry, found.verdicts, label, n)
                comparisons.append(found)
            if not comparisons:
                continue
            if label == "aa":
                rates += known_answers.aa_rates("A/A interleaved: reference beside its twin", comparisons,
                                                where="run(s), the two targets paired by fork")
            else:
                factor = next(r["factor"] for r in runs if r["label"] == label)
                rates += known_answers.difference_rates(f"known difference interleaved: twin's work × {factor:g}",
                                                        comparisons)
        return rates

    def interleaved_truth(self, entry: dict, verdicts: pl.DataFrame, label: str, n: int) -> dict:
        """The interleaved difference's truth by construction (known_answers.construction_truth): the
        twin's rounds ÷ the reference's, and the work's share of the reference's CPU by its own
        clocks — its last fork's account after the run, or, for a run measured before that was kept,
        its accounts at each fork's warm-up. wrk's, measured after the run on the two in turn, is
        kept beside it (a second reading: it moves with the machine between its windows)."""
        from esbperf.analysis import known_answers

        run = self.out / entry["run"]
        kept = run / "accounts.json"
        record = layout.read_json(run / layout.RUN_FILE)
        warmed = [t.get("account") for w in record.get("target_warmup", []) for t in w.get("targets", [])
                  if t.get("target") == REFERENCE and t.get("account")]
        after = layout.read_json(kept).get(REFERENCE) if kept.is_file() else None
        # Best: the last fork's work and process CPU from its warm-up's end to the run's end, under load
        # only; else that process's whole life (its start counts as not work), else the warm-ups'.
        share = known_answers.work_share_between(warmed[-1] if warmed else None, after)
        source = "its last fork's account from its warm-up's end to the run's end"
        if share is None and after is not None:
            share, source = known_answers.work_share([after]), "its last fork's account after the run"
        if share is None:
            share, source = known_answers.work_share(warmed), f"its accounts at {len(warmed)} fork(s)' warm-up"
        keys = {(r["payload_bytes"], r["users"]) for r in verdicts.iter_rows(named=True)}
        wrk = known_answers.pooled_truth([(entry["truth_a"], entry["truth_b"])])
        built = known_answers.construction_truth(share, entry["factor"], keys) if share else None
        layout.write_json(self.judged / f"interleaved-{label}-truth-{n + 1}.json",
                          {"work_share": share, "share_from": source, "factor": entry["factor"],
                           "construction": {str(k): v for k, v in built.items()} if built else None,
                           "wrk": {str(k): v for k, v in wrk.items()}})
        return built or wrk   # no account: wrk's is all there is

    def write(self) -> None:
        from esbperf.analysis import known_answers

        known_answers.write_csv(self.rates, self.judged / "known-answers.csv")
        (self.judged / "known-answers.md").write_text(known_answers.markdown(self.rates) + "\n"
                                                      + known_answers.binomial_note() + "\n")


@click.command()
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS),
              help="A check to run (repeatable; default: every one).")
@click.option("--quick", is_flag=True, help="Each check once and small: minutes, to see that the rules still work.")
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", default=None,
              help="Testbed (default: emulated when root, else local).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives the selftest's folder.")
@click.option("--from", "from_dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Judge a finished selftest's runs again with this code, into a folder of its own inside it.")
def selftest(checks: tuple[str, ...], quick: bool, testbed_name: str | None, out: Path, from_dir: Path | None) -> None:
    """Hold esbperf's judgments against known answers and print their error rates."""
    console = Console()
    began = time.monotonic()
    if from_dir is not None:
        folder = from_dir.resolve()
        if not (folder / MANIFEST).is_file():
            raise EsbperfError(f"{folder} is no selftest's folder (it has no {MANIFEST})")
        test = Selftest(None, folder, FULL, console)
        test.judged = folder / f"judged-{time.strftime('%Y%m%d-%H%M%S')}"
        test.judged.mkdir()
        test.judge()
    else:
        ensure_built(GRINDER_HOME, CONTROL_API, HTTP_CLIENT, JAXWS_ECHO, MONITOR,
                     *filter(None, [ENGINES[REFERENCE].module, ENGINES["camel"].module]))
        if "bracket" in (checks or CHECKS):
            crosscheck.require("wrk")      # one line before anything runs, not after the other checks
        testbed = topology.load(testbed_name or default_testbed())
        folder = out.resolve() / f"selftest-{time.strftime('%Y%m%d-%H%M%S')}"
        folder.mkdir(parents=True, exist_ok=False)
        test = Selftest(testbed, folder, QUICK if quick else FULL, console)
        for check in CHECKS:
            if check in (checks or CHECKS):
                test.measure(check)
        test.judge()
    console.print((test.judged / "known-answers.md").read_text(), markup=False, highlight=False)
    console.print(f"selftest finished in {time.monotonic() - began:.0f} s on {os.cpu_count()} CPUs; "
                  f"{test.judged / 'known-answers.csv'}")
    missed = [r for r in test.rates if r.met is False]
    if missed and not quick:
        console.print(f"{len(missed)} rate(s) miss their goal: " + "; ".join(f"{r.check}: {r.judgment}" for r in missed))
