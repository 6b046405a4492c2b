"""`esbperf round`: a public round rerun with one command (console-config/rounds/<name>.yaml; the
rounds' pages and rules: docs/round-1/README.md, docs/round-2/README.md).

    esbperf round [--round NAME] [--quick] [--out DIR] [--publish]   measure the round, write its page, compare it
    esbperf round [--round NAME] --dry-run [--quick]                 its runs and estimated wall time; nothing started
    esbperf round [--round NAME] --from DIR [--publish]              a finished round's report, page and comparison again
    esbperf round [--round NAME] --reruns DIR --reruns DIR … [--publish]  how often each verdict came out the same

In order: build what is missing; bring the round's testbed up (the emulated one: root) and start
the echo services and every engine the round measures on the esb host at once (the launcher of
`esbperf demo`, esbperf/cli/launch.py); verify every target in every scenario it is measured in, at
every payload, and keep the log (verification.csv); run the closed plan — split where the floors do
not serve a scenario, each part one run of its targets interleaved, the independent client on the
plan's cross_check_iterations — then the control pair's second set of forks (a round with a
`control`), then every capacity search; stop everything; write the report of the closed runs, the
capacity tables, and the round's page (the published page's rules with this round's figures);
compare it with the published round (on another machine: its ratios and verdicts, not its absolute
figures). --publish copies what a published round holds into its folder (the round's `published`,
e.g. docs/round-2/), at most 20 MB."""
from __future__ import annotations

import csv
import os
import shutil
import time
from pathlib import Path

import click
import polars as pl
from rich.console import Console

from esbperf.cli import capacity as capacity_cli
from esbperf.cli.launch import launched
from esbperf.cli.run import console as run_console
from esbperf.core import rounds, topology
from esbperf.core.config import AgentConfig, state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import CONTROL_API, GRINDER_HOME, HTTP_CLIENT, JAXWS_ECHO, MONITOR, ROOT, ensure_built
from esbperf.results import layout
from esbperf.run import crosscheck, environment, estimate, preflight, runner, warmup
from esbperf.run.verify import verify_target
from esbperf.services import esb

ROUND_FILE = "round.json"
RUNS = "runs"
LOOK = "look"   # the report of the closed runs a round with added_forks judges its verdicts on before adding forks
MAX_PUBLISHED_BYTES = 20_000_000
# What a published round holds (names or patterns under the round's folder; with them each run's
# manifest, runs/<run>/run.json). The report's graphs as SVG only: its report.html shows those (write_report's embed_graphs=False), and PNG copies as well
# would not fit the 20 MB.
PUBLISHED = ("round.json", "verification.csv", "README.md", "figures.csv", "verdicts.csv", "control.csv",
             "report/report.html",
             "report/summary.csv", "report/aggregate.csv", "report/hlog.tar.gz", "report/graphs/*.svg", "capacity")
# Published files that may name where the round ran (its checkout, its state folder): written with those
# paths relative to the checkout (the round folder's parent, when it lies elsewhere).
MACHINE_PATH_SUFFIXES = (".json", ".html", ".csv", ".md")
# The parts that run a closed plan (the context's and the control pair's second set of forks too),
# cross-checked alike.
CLOSED_KINDS = ("closed", "context", "control")
# The capacity searches' starts are chosen within a quarter to a half of the capacities measured here:
# the estimate assumes each capacity lies within 4 × its start rate.
CAPACITY_OVER_START = 4


# --- what a round is made of, checked before anything starts ------------------------------------

def parts_of(rnd: rounds.Round, quick: bool, testbed: topology.Testbed) -> list[rounds.Part]:
    """The round's runs, each checked as `esbperf run` checks a run (targets, scenarios they serve,
    agents' worker processes); one line for the first that fails."""
    parts = rnd.variant(quick).parts(testbed)
    agents = len(testbed.load_roles)
    for part in parts:
        preflight.targets_of(testbed, list(part.targets), part.plan)
        part.plan.check_agents(agents, AgentConfig.load().max_worker_processes, f"the {agents} load host(s)")
    return parts


def engines_of(parts: list[rounds.Part], testbed: topology.Testbed, reference: str | None = None) -> list[str]:
    """The engines on the esb host that the round measures, in the order they are first measured; and
    the round's reference engine (its `reference` target's), measured or not: its account says how
    fast the machine is (machine_record)."""
    names = [testbed.target(t).esb for part in parts for t in part.targets if testbed.target(t).kind == "esb"]
    if reference is not None and testbed.target(reference).kind == "esb":
        names.append(testbed.target(reference).esb)
    return list(dict.fromkeys(names))


def machine_record(testbed: topology.Testbed, reference: str | None) -> dict:
    """round.json `machine`: this machine (its CPU model, cores; environment.describe) and what the
    round's reference engine says of its own work here (its account: the µs of CPU its set work takes
    per request, measured as it started), so that a rerun elsewhere can say how fast its machine is
    for the same code."""
    env = environment.describe()
    record = {k: env.get(k) for k in ("cpu", "cores", "cpu_mhz", "cpu_frequency", "kernel", "java")}
    if reference is not None:
        target = testbed.target(reference)
        account = esb.read_account(target.esb, *target.address) if target.kind == "esb" and target.esb else None
        record["reference"] = {"target": reference, "engine": target.esb,
                               "account": account if account is not None else "no answer at its account"}
    return record


def refuse(rnd: rounds.Round, quick: bool, publish: bool, testbed: topology.Testbed) -> None:
    """One line for what the round cannot do here, before anything is built or started."""
    if publish and quick:
        raise EsbperfError(f"--publish publishes the full round into {rnd.published}; a --quick round is checked "
                           "against it, never published")
    if testbed.emulated and os.geteuid() != 0:
        raise EsbperfError(f"esbperf round measures on the {testbed.name} testbed (network namespaces), which needs "
                           "root: run it as root (sudo make round)")
    crosscheck.require(rnd.variant(quick).cross_check)
    from esbperf.analysis import round as pages   # the page it will fill, checked before hours of measuring
    pages.skeleton_text(rnd.published / pages.PAGE, rnd.name)


def estimate_seconds(rnd: rounds.Round, quick: bool, testbed: topology.Testbed) -> tuple[list[tuple[str, float]], float]:
    """Each run's estimated wall time (the runner's estimate from this machine's medians; a capacity
    run: searches × the probes of a capacity within CAPACITY_OVER_START × its start), and the total with
    the round's set-up and report."""
    rows, analysed = [], 0
    cross_check = rnd.variant(quick).cross_check
    for part in parts_of(rnd, quick, testbed):
        steps = part.plan.steps(list(part.targets))
        targets = {t: testbed.target(t) for t in part.targets}
        closed = part.kind in CLOSED_KINDS
        guess = estimate.estimate(part.plan, steps, cross_check if closed else None,
                                  warmup.loads(part.plan, targets))
        if closed:
            seconds = guess.total_s
            analysed += len(steps)
        else:
            probes = len(steps) * capacity_cli.search_probes(part.plan.capacity, CAPACITY_OVER_START)
            seconds = guess.run_overhead_s + probes * guess.steps[0][1]
            analysed += probes
        rows.append((f"{part.kind} {part.describe()}: {len(steps)} {'steps' if closed else 'searches'}", seconds))
    total = sum(s for _, s in rows) + estimate.median("round_setup_s") + \
        analysed * estimate.median("round_report_per_step_s")
    return rows, total


def print_dry_run(rnd: rounds.Round, quick: bool, console: Console) -> None:
    testbed = topology.load(rnd.testbed)
    rows, total = estimate_seconds(rnd, quick, testbed)
    for what, seconds in rows:
        console.print(f"{what}, about {estimate.duration(seconds)}")
    console.print(f"{rnd.name}{' (quick)' if quick else ''} on {testbed.name}: about {estimate.duration(total)} in all, "
                  f"with the testbed's set-up, the engines' start and the verification "
                  f"({estimate.duration(estimate.median('round_setup_s'))}) and the report; capacity searches counted "
                  f"at a capacity within {CAPACITY_OVER_START} × their start rate. Round and plans are valid; "
                  "nothing was started")
    variant = rnd.variant(quick)
    if variant.budget_s:
        console.print(f"then, where a pair of ranked engines is unresolved, forks of both again (at most "
                      f"{variant.most_forks} an engine) while the round stays within "
                      f"{estimate.duration(variant.budget_s)}")
    from esbperf.analysis import round as pages   # the published round as the pilot: how many forks
    published = pages.published_round(rnd.published)
    for line in pages.repetition_lines(published) if published is not None else []:
        console.print(line)


# --- the round --------------------------------------------------------------------------------

def verify_all(testbed: topology.Testbed, parts: list[rounds.Part], folder: Path, console: Console) -> Path:
    """Every target in every scenario the round measures it in, at every payload of the round, by
    `esbperf verify`'s code; the log is verification.csv in the round's folder, kept whatever the
    outcome. One line when a check fails."""
    wanted: dict[str, dict[str, None]] = {}
    sizes: set[int] = set()
    for part in parts:
        for target in part.targets:
            wanted.setdefault(target, {}).update(dict.fromkeys(part.plan.scenarios))
        sizes |= set(part.plan.sizes())
    rows, failed = [], []
    for target, names in wanted.items():
        outcomes = [(size, o) for size in sorted(sizes) for o in verify_target(testbed, target, list(names), size=size)]
        rows += [{"target": target, "scenario": o.scenario, "payload_bytes": size, "backend": o.backend, "url": o.url,
                  "result": "pass" if o.ok else "fail", "ms": round(o.ms, 2), "detail": " ".join(o.detail.split())}
                 for size, o in outcomes]
        bad = [(size, o) for size, o in outcomes if not o.ok]
        failed += [(target, size, o) for size, o in bad]
        console.print(f"verified {target}: {len(outcomes) - len(bad)} of {len(outcomes)} checks passed "
                      f"({', '.join(names)} at {', '.join(str(s) for s in sorted(sizes))} bytes)")
    out = folder / "verification.csv"
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["target"])
        writer.writeheader()
        writer.writerows(rows)
    if failed:
        target, size, o = failed[0]
        raise EsbperfError(f"verification failed: {len(failed)} of {len(rows)} checks (first: {target} {o.scenario} "
                           f"{size} bytes {o.url}: {' '.join(o.detail.split())}); the log is {out}")
    return out


def _after(part: rounds.Part, done: list[tuple[rounds.Part, Path]]) -> Path | None:
    """The run of this session a part may follow (runner.start's `after`: its client calibration, and
    its targets taken as warm): the latest whose scenarios include every one of this part's, so that
    no path is measured cold."""
    for earlier, run_dir in reversed(done):
        if set(part.plan.scenarios) <= set(earlier.plan.scenarios):
            return run_dir
    return None


def run_round(rnd: rounds.Round, quick: bool, out: Path, console: Console) -> Path:
    """Measure the round into a new folder under `out`; returns the folder (finish() writes its
    report and page)."""
    from esbperf.analysis.round import STRICT_STEPS   # the rule its page's verdicts follow, recorded with it
    testbed = topology.load(rnd.testbed)
    parts = parts_of(rnd, quick, testbed)
    engines = engines_of(parts, testbed, rnd.reference)
    cross_check = rnd.variant(quick).cross_check
    for name in engines:
        esb.require_installed(name)
    ensure_built(GRINDER_HOME, CONTROL_API, HTTP_CLIENT, JAXWS_ECHO, MONITOR,
                 *filter(None, [esb.engine(name).module for name in engines]))
    folder = out.resolve() / f"{rnd.name}{'-quick' if quick else ''}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=False)
    record = {"round": rnd.name, "source": rnd.source, "variant": "quick" if quick else "full",
              "testbed": str(testbed.path), "cross_check": cross_check, "published": str(rnd.published),
              "reference": rnd.reference, "verdict_steps": STRICT_STEPS,
              **({"ranked": list(rnd.ranked)} if rnd.ranked else {}),
              # A round that may add forks judges its family twice: after its parts, and at the end.
              **({"looks": 2} if rnd.variant(quick).budget_s else {}),
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "finished": None,
              "parts": [{"kind": p.kind, "plan": p.plan.name, "scenarios": p.plan.scenarios,
                         "targets": list(p.targets), "run": None} for p in parts]}
    layout.write_json(folder / ROUND_FILE, record)
    began = time.monotonic()
    with launched(testbed, engines, state_dir() / folder.name, console) as launcher:
        verify_all(testbed, parts, folder, console)
        record["machine"] = machine_record(testbed, rnd.reference)
        layout.write_json(folder / ROUND_FILE, record)
        estimate.remember(round_setup_s=time.monotonic() - began)
        done: list[tuple[rounds.Part, Path]] = []
        for n, part in enumerate(parts):
            part_began = time.monotonic()
            console.rule(f"{part.kind} {n + 1}/{len(parts)}: {part.describe()}")
            options = dict(console=console, after=_after(part, done), **launcher)
            if part.kind in CLOSED_KINDS:
                run_dir = runner.start(part.plan, list(part.targets), testbed, folder / RUNS,
                                       cross_check=cross_check, **options)
            else:
                run_dir = capacity_cli.start(part.plan, list(part.targets), testbed, folder / RUNS, **options)
            done.append((part, run_dir))
            record["parts"][n].update(run=str(run_dir.relative_to(folder)),
                                      measured_s=round(time.monotonic() - part_began, 1))
            layout.write_json(folder / ROUND_FILE, record)
        if rnd.variant(quick).budget_s:
            add_forks(rnd.variant(quick), done, folder, record, launcher, console, began)
    record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record["measured_s"] = round(time.monotonic() - began, 1)
    layout.write_json(folder / ROUND_FILE, record)
    return folder


def add_forks(variant: rounds.Variant, done: list[tuple[rounds.Part, Path]], folder: Path, record: dict,
              launcher: dict, console: Console, began: float) -> None:
    """The round's first look at its verdicts (its closed runs' report in LOOK): where a pair of ranked
    engines is unresolved at a headline cell (analysis/round/ranking.py), the closed plan's forks again
    for both engines of every such pair, as many as `variant.most_forks` and the time left of
    `variant.budget_s` allow (each as long as the part's own forks took per engine), added to the
    part's run (its plan's `added_forks`, resumed); round.json `added_forks` says what and why."""
    from esbperf.analysis import round as pages
    from esbperf.analysis.report import write_report
    from esbperf.analysis.round import ranking

    capacity_runs = [run for part, run in done if part.kind == "capacity"]
    if capacity_runs:   # the family judged at the look has the capacity pairs the page's has
        pages.collect_capacity(folder, capacity_runs)
    write_report([run for part, run in done if part.kind in CLOSED_KINDS], folder / LOOK, embed_graphs=False)
    rows = ranking.unresolved(pages.load(folder, report=folder / LOOK))
    entry: dict = {"unresolved": [ranking.pair_label(r) for r in rows], "forks": {}}
    said = []
    for n, (part, run_dir) in enumerate(done):
        engines = ranking.engines_of([r for r in rows if r["plan"] == part.plan.name]) if part.kind == "closed" else []
        if not engines:
            continue
        measured = next(p for p in record["parts"] if p.get("run") == str(run_dir.relative_to(folder)))["measured_s"]
        one = measured / (part.plan.forks * len(part.targets)) * len(engines)   # a fork of these engines
        left = variant.budget_s - (time.monotonic() - began)
        more = min(variant.most_forks - part.plan.forks, int(left // one))
        if more < 1:
            said.append(f"a fork more of {', '.join(engines)} would take about {one:.0f} s, and {max(left, 0):.0f} s "
                        "of the round's budget were left")
            continue
        manifest = layout.read_json(run_dir / layout.RUN_FILE)
        manifest["plan"]["added_forks"] = [list(engines)] * more
        layout.write_json(run_dir / layout.RUN_FILE, manifest)
        console.rule(f"{more} fork(s) more of {', '.join(engines)}: {len(rows)} pair(s) unresolved")
        runner.resume(run_dir, console=console, restart_esb=launcher.get("restart_esb"),
                      token_file=launcher.get("token_file"))
        entry["forks"].update({e: more for e in engines})
        said.append(f"{more} fork(s) more of {', '.join(engines)}, about {one:.0f} s each")
    entry["why"] = (f"{len(rows)} pair(s) unresolved after the round's own forks ({'; '.join(entry['unresolved'])}): "
                    + "; ".join(said) + "." if rows else "every pair of the ranked engines was resolved; none added.")
    record["added_forks"] = entry
    shutil.rmtree(folder / LOOK, ignore_errors=True)   # the report finish() writes reads the added forks too
    layout.write_json(folder / ROUND_FILE, record)


def finish(folder: Path, rnd: rounds.Round, console: Console, publish: bool) -> Path:
    """The round's report (when it has none yet), its capacity tables, its page; the comparison with
    the published round; with `publish`, the published round replaced by this one. Returns the page."""
    from esbperf.analysis import round as pages
    from esbperf.analysis.report import write_report

    record = layout.read_json(folder / ROUND_FILE)
    if publish and record.get("variant") == "quick":
        raise EsbperfError(f"{folder} is a --quick round: it is checked against {rnd.published}, never published")
    began = time.monotonic()
    runs = [(p["kind"], folder / p["run"]) for p in record["parts"] if p.get("run")]
    closed = [run for kind, run in runs if kind in CLOSED_KINDS]   # the control pair's in the report too, apart
    if not closed:
        raise EsbperfError(f"{folder}: no closed run finished; nothing to report")
    report = folder / pages.REPORT
    analysed = not (report / "aggregate.csv").is_file()
    if analysed:
        write_report(closed, report, embed_graphs=False)   # published with its SVG graphs beside it
    pages.pack_hlogs(report)
    capacity_runs = [run for kind, run in runs if kind == "capacity"]
    if capacity_runs and not (folder / pages.CAPACITY).exists():
        pages.collect_capacity(folder, capacity_runs)
    page = pages.write_page(folder, rnd.published / pages.PAGE)
    steps = sum(1 for _, run in runs for _ in run.rglob(layout.STEP_FILE))
    if analysed and steps:   # what the estimate of the next round counts per step analysed
        estimate.remember(round_report_per_step_s=(time.monotonic() - began) / steps)
    console.print(f"page: {page}")
    published = pages.published_round(rnd.published)
    if published is None:
        console.print(f"{rnd.published} has no published results yet: nothing to compare with")
    else:
        out, lines = pages.write_comparison(pages.load(folder), published, folder / pages.COMPARISON)
        for line in lines:
            console.print(line)
        console.print(f"comparison: {out}")
    if publish:
        publish_round(folder, rnd.published, console)
    return page


def published_files(folder: Path) -> list[tuple[Path, str]]:
    """(file, its path in the published folder) of everything a published round holds."""
    files = []
    for name in PUBLISHED:
        for path in sorted(folder.glob(name)):
            if path.is_dir():
                files += [(f, f.relative_to(folder).as_posix()) for f in sorted(path.rglob("*")) if f.is_file()]
            elif path.is_file():
                files.append((path, path.relative_to(folder).as_posix()))
    files += [(f, f.relative_to(folder).as_posix()) for f in sorted((folder / RUNS).glob(f"*/{layout.RUN_FILE}"))]
    return files


def publish_round(folder: Path, published: Path, console: Console) -> None:
    """Replace the published round by this one: its files (PUBLISHED and each run's manifest) into
    `published`, and the page's generated part into the published README.md (its hand-written text
    kept). Refused in one line, with nothing changed, beyond MAX_PUBLISHED_BYTES."""
    from esbperf.analysis import round as pages

    files = [(f, rel) for f, rel in published_files(folder) if rel != pages.PAGE]
    size = sum(f.stat().st_size for f, _ in files)
    if size > MAX_PUBLISHED_BYTES:
        raise EsbperfError(f"the round's published files would take {size / 1e6:.1f} MB, more than the "
                           f"{MAX_PUBLISHED_BYTES / 1e6:g} MB a published round may take; nothing was published")
    readme = published / pages.PAGE
    generated = (folder / pages.PAGE).read_text(encoding="utf-8")
    text = pages.fill(pages.skeleton_text(readme, published.name), generated[generated.index(pages.START):
                                                                     generated.index(pages.END) + len(pages.END)],
                      str(readme))
    staging = published / f".publishing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for f, rel in files:
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            if f.suffix not in MACHINE_PATH_SUFFIXES:
                shutil.copy2(f, staging / rel)
                continue
            content = f.read_text(encoding="utf-8")   # no path of the machine it ran on: relative to the checkout
            for prefix in dict.fromkeys((f"{ROOT}/", f"{folder.resolve().parent}/")):
                content = content.replace(prefix, "")
            (staging / rel).write_text(content, encoding="utf-8")
        for name in {Path(rel).parts[0] for _, rel in files} | {p for p in PUBLISHED if "/" not in p} | {RUNS}:
            old = published / name
            if name == pages.PAGE:
                continue
            if old.is_dir():
                shutil.rmtree(old)
            elif old.exists():
                old.unlink()
        for entry in staging.iterdir():
            entry.rename(published / entry.name)
        (published / f".{pages.PAGE}.new").write_text(text, encoding="utf-8")
        os.replace(published / f".{pages.PAGE}.new", readme)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    console.print(f"published into {published}: {len(files) + 1} files, {size / 1e6:.1f} MB")


def compare_reruns(rnd: rounds.Round, folders: list[Path], out: Path, publish: bool, console: Console) -> Path:
    """How often each verdict came out the same over several runs of `rnd` (RERUNS): printed, and written
    into `out` (with `publish`, into the round's published folder). One line for a folder that is not a
    finished run of this round."""
    from esbperf.analysis import round as pages

    if len(folders) < 2:
        raise EsbperfError("--reruns needs at least two round folders to say how often a verdict came out the same")
    found = []
    for folder in folders:
        data = pages.load(folder)
        if data.info.get("round") != rnd.name:
            raise EsbperfError(f"{folder}: a run of {data.info.get('round')!r}, not of {rnd.name!r} (give --round)")
        found.append(data)
    table = pages.rerun_agreement(found)
    target = rnd.published / pages.RERUNS if publish else \
        out.resolve() / f"{rnd.name}-reruns-{time.strftime('%Y%m%d-%H%M%S')}.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    table.with_columns(pl.Series("runs", ["; ".join(f.name for f in folders)] * table.height)) \
        .write_csv(target)
    for line in pages.rerun_lines(table):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"reruns: {target}", soft_wrap=True)
    return target


@click.command(name="round")
@click.option("--quick", is_flag=True, help="The round's quick variant (fewer payloads, users, iterations, searches).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives the round's folder.")
@click.option("--publish", is_flag=True, help="Copy the round's page, tables, manifests, HdrHistogram logs and report "
                                              "into its published folder (the round's `published`: docs/round-2/ for "
                                              "round-2), at most 20 MB.")
@click.option("--dry-run", is_flag=True, help="Print the round's runs and estimated wall time; start nothing.")
@click.option("--from", "from_dir", type=click.Path(file_okay=False, path_type=Path),
              help="A round folder measured before: write its report (if missing), page and comparison again.")
@click.option("--reruns", "reruns", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="Round folders of several runs of the round (e.g. its quick variant three times; repeat the "
                   "option): how often each verdict came out the same, into reruns.csv (with --publish, the "
                   "published folder's).")
@click.option("--round", "round_name", default="round-2", show_default=True, metavar="NAME|FILE",
              help="The round (console-config/rounds/<NAME>.yaml or a file).")
def round_command(quick: bool, out: Path, publish: bool, dry_run: bool, from_dir: Path | None,
                  reruns: tuple[Path, ...], round_name: str) -> None:
    """Rerun a public round with one command: build, bring the testbed up, start every engine, verify,
    run the closed plan and the capacity searches, write the report and the round's page, and compare
    it with the published round."""
    console = run_console()
    rnd = rounds.load(round_name)
    if reruns:
        if quick or dry_run or from_dir is not None:
            raise EsbperfError("--reruns reads measured rounds as they are; do not give --quick, --dry-run or --from")
        compare_reruns(rnd, list(reruns), out, publish, console)
        return
    if from_dir is not None:
        if quick or dry_run:
            raise EsbperfError("--from takes a measured round as it is; do not give --quick or --dry-run")
        if not (from_dir / ROUND_FILE).is_file():
            raise EsbperfError(f"{from_dir}: not a round folder (no {ROUND_FILE}; `esbperf round` writes one)")
        finish(from_dir.resolve(), rnd, console, publish)
        return
    if dry_run:
        if publish:
            raise EsbperfError("--dry-run starts nothing and publishes nothing; do not give --publish")
        print_dry_run(rnd, quick, console)
        return
    testbed = topology.load(rnd.testbed)
    refuse(rnd, quick, publish, testbed)
    began = time.monotonic()
    folder = run_round(rnd, quick, out, console)
    page = finish(folder, rnd, console, publish)
    console.print(f"round {folder.name} finished in {estimate.duration(time.monotonic() - began)}; page {page}")
