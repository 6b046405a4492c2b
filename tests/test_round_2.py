"""Round 2 without a testbed (docs/round-2/README.md): its definition and plans fit their time budgets by
the runner's own estimate from a fresh clone; its page, on synthetic runs in forks, leads with the
verdicts (each step's bound beside them, the family's control stated), leaves the steps the testbed
bounded out of every verdict about engines, says what its control pair reads and how fast the reference
engine ran; and a rerun on another machine is compared by its ratios and verdicts, with the count of
verdicts it reproduced."""
from __future__ import annotations

import dataclasses
import io
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from esbperf.analysis import round as pages, synthetic
from esbperf.analysis.report import write_report
from esbperf.cli import round as round_cli
from esbperf.core import rounds, topology
from esbperf.core.errors import EsbperfError
from esbperf.run import estimate

ROOT = Path(__file__).resolve().parent.parent
PROXY = {"direct": 1.0, "haproxy": 1.15, "nginx": 1.2, "reference": 1.6, "camel": 2.0, "synapse": 2.6}
CBR = {"direct": 1.0, "camel": 2.5, "synapse": 3.0}
FORKS = 3
WORK_US = 150.0     # the reference engine's work a request on the synthetic machine


# --- the round's definition and its time budget ---------------------------------------------------------

def test_round_2_measures_every_engine_in_forks_beside_the_floors_the_baseline_and_the_reference():
    rnd = rounds.load("round-2")
    testbed = topology.load(rnd.testbed)
    parts = rnd.full.parts(testbed)
    assert [(p.kind, p.plan.scenarios, p.targets) for p in parts] == [
        ("closed", ["proxy"], ("direct", "nginx", "haproxy", "reference", "camel", "synapse", "spring-integration")),
        ("closed", ["cbr", "json", "xslt"], ("direct", "camel", "synapse", "spring-integration")),
        ("control", ["proxy"], ("reference",)),
        ("capacity", ["proxy"], ("camel", "synapse", "spring-integration"))]
    closed = rnd.full.closed
    assert closed.forks >= 3 and closed.iterations == 1 and closed.cross_check_iterations == [1]
    assert (closed.sizes(), closed.warmup_auto) == ([1024, 100 * 1024], True)
    assert rnd.full.cross_check == "wrk" and rnd.quick.cross_check is None and rnd.reference == "reference"
    # Each JVM engine's fork warmed up to 60-120 s until settled; its capacity searched in forks too.
    assert closed.target_warmup("esb") == (60, 120) and parts[3].plan.forks >= 3
    assert parts[3].plan.capacity.p99_ms == 20 and parts[3].plan.sizes() == [1024]
    # The control pair: the reference measured again in forks of its own, at steps the closed plan has.
    control = rnd.full.control
    assert control.forks >= 3 and set(control.sizes()) <= set(closed.sizes()) and control.users == closed.users
    quick = rnd.quick.closed
    assert (quick.scenarios, quick.sizes(), quick.users, quick.forks) == (["proxy"], [1024], [20], 3)
    # The reference engine is started in the quick variant too (its account: the machine's speed).
    assert "reference" in round_cli.engines_of(rnd.quick.parts(testbed), testbed, rnd.reference)


@pytest.mark.parametrize("quick, budget_s", [(False, 2 * 3600), (True, 15 * 60)])
def test_round_2_fits_its_time_budget_from_a_fresh_clone(quick, budget_s, tmp_path, monkeypatch):
    """A fresh clone has measured nothing: the estimate uses the runner's defaults, which here count a
    step longer than this machine takes one (estimate.DEFAULTS against runner-overheads.json)."""
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path))
    rnd = rounds.load("round-2")
    rows, total = round_cli.estimate_seconds(rnd, quick, topology.load(rnd.testbed))
    assert total <= budget_s, (total, rows)
    assert total > 0.8 * budget_s, (total, rows)   # what was cut was cut to fit, not more
    if not quick:    # wrk on every fork's one iteration; the control pair's runs are cross-checked alike
        for part in round_cli.parts_of(rnd, False, topology.load(rnd.testbed)):
            steps = part.plan.steps(list(part.targets))
            checked = [s for s in steps if estimate.cross_check_seconds(part.plan, s, rnd.full.cross_check)]
            assert len(checked) == (len(steps) if part.kind in round_cli.CLOSED_KINDS else 0)
            assert {s.fork for s in steps} == set(range(1, part.plan.forks + 1))


def test_a_control_pair_is_checked_field_by_field(tmp_path):
    base = (ROOT / "console-config/rounds/round-2.yaml").read_text()

    def refused(replace: str, by: str, message: str) -> None:
        path = tmp_path / "r.yaml"
        path.write_text(base.replace(replace, by))
        with pytest.raises(EsbperfError, match=message):
            rounds.load(path)

    control = "control: {closed: round-2-control, targets: [reference]}"
    refused(control, "control: {closed: round-2-control, targets: [tomcat]}", r"field 'full.control' must be .*its "
            r"targets must be targets of round-2")
    refused(control, "control: {closed: selftest-aa, targets: [reference]}", r"field 'full.control' must be .*; "
            r"selftest-aa measures payloads 10240; users 1, 5, which round-2 does not: the pair compares steps both "
            "measured")
    refused(control, "control: {closed: round-1, targets: [reference]}", r"round-1 runs 1 fork: a pair of fork sets "
            "needs 2 forks or more a side")
    refused(control, "control: round-2-control", r"field 'full.control' must be")
    refused("reference: reference ", "reference: tomcat ", r"field 'reference' must be the target")
    refused("cross_check: none ", "cross_check: ab ", r"field 'quick.cross_check' must be")


def test_the_dry_run_names_the_control_part_and_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path))
    out = io.StringIO()
    round_cli.print_dry_run(rounds.load("round-2"), False, Console(file=out, width=400))
    text = out.getvalue()
    assert "control round-2-control (proxy) against reference: 6 steps" in text
    assert "round-2 on emulated: about 1h" in text and "nothing was started" in text


# --- synthetic round-2 folders ---------------------------------------------------------------------------

def accounts(run_dir: Path, us: list[float], reference: str = "reference") -> None:
    """run.json as a forked run leaves it: the reference engine's account after each fork's warm-up
    (a process each, its own start's calibration), and as the run began."""
    info = json.loads((run_dir / "run.json").read_text())

    def account(value: float, n: int) -> dict:
        return {"engine": "reference", "settings": {"work": 1000}, "work_us_per_request": value,
                "work_calibration": {"rounds": 1000, "runs": 3000, "cpu_s": round(3000 * value / 1e6, 6)},
                "work_requests": n, "work_cpu_s": n * value * 1.05 / 1e6}
    info["engines"][reference] = {"kind": "reference", "account": account(us[0] * 1.01, 1)}
    info["target_warmup"] = [{"targets": [{"target": reference, "fork": f, "seconds": 60.0,
                                           "account": account(value, 200_000)}]}
                             for f, value in enumerate(us, 1)]
    (run_dir / "run.json").write_text(json.dumps(info))


def set_bound(report: Path, target: str, users: int, bound: str) -> None:
    """The report's `bound` of a target's steps at a load, as the analysis would have found it (the client at
    its limit, a link...): summary.csv per iteration, aggregate.csv per step."""
    for name in ("summary.csv", "aggregate.csv"):
        frame = pl.read_csv(report / name, infer_schema_length=None)
        hit = (pl.col("target") == target) & (pl.col("users") == users)
        frame.with_columns(bound=pl.when(hit).then(pl.lit(bound)).otherwise(pl.col("bound"))).write_csv(report / name)


def round_2(folder: Path, slower: float = 1.0, cpu: str = "synthetic", control_speed: float = 1.0,
            bound: dict | None = None, seed: int = 1, fork_speed: dict | None = None, variant: str = "full") -> Path:
    """A Round 2 folder as `esbperf round --round round-2` leaves it: a proxy run (direct, floors, the
    reference, two ESBs) and a cbr run, each in FORKS forks of one iteration at 1 and 20 users, the
    control pair's run (the reference in forks of its own, `control_speed` × its speed), their report, a
    capacity table of searches in forks, the reference's accounts; on a machine `slower` × slower (every
    response time, and the reference's work). `bound` {(target, users): bound} as the report found it."""
    runs = folder / "runs"
    scale = {t: f * slower for t, f in PROXY.items()}
    proxy = synthetic.round_run(runs / "r-proxy", "r-proxy", scale, ["proxy"], {"1KB": 1024}, [1, 20], 1,
                                forks=FORKS, noise=0.02, seed=seed, fork_speed=fork_speed)
    cbr = synthetic.round_run(runs / "r-cbr", "r-cbr", {t: f * slower for t, f in CBR.items()}, ["cbr"], {"1KB": 1024},
                              [1, 20], 1, forks=FORKS, noise=0.02, seed=seed + 1, fork_speed=fork_speed)
    control = synthetic.round_run(runs / "r-control", "r-control", {"reference": PROXY["reference"] * slower / control_speed},
                                  ["proxy"], {"1KB": 1024}, [20], 1, forks=FORKS, noise=0.02, seed=seed + 2)
    us = [WORK_US * slower * (1 + 0.01 * d) for d in (-1, 0, 1)]
    accounts(proxy, us)
    accounts(control, [u * 1.002 for u in us])
    for run in (proxy, cbr, control):
        info = json.loads((run / "run.json").read_text())
        info["environment"]["cpu"] = cpu
        (run / "run.json").write_text(json.dumps(info))
    synthetic.write_json(folder / pages.ROUND_FILE, {
        "round": "round-2", "variant": variant, "reference": "reference", "verdict_steps": pages.STRICT_STEPS,
        "started": "2026-11-29T10:00:00+0000", "finished": "2026-11-29T11:50:00+0000",
        "machine": {"cpu": cpu, "cores": 2, "reference": {"target": "reference", "engine": "reference",
                                                          "account": None}},
        "parts": [{"kind": "closed", "plan": "r-proxy", "targets": list(PROXY), "run": "runs/r-proxy"},
                  {"kind": "closed", "plan": "r-cbr", "targets": list(CBR), "run": "runs/r-cbr"},
                  {"kind": "control", "plan": "r-control", "targets": ["reference"], "run": "runs/r-control"}]})
    write_report([proxy, cbr, control], folder / pages.REPORT, embed_graphs=False)
    for (target, users), kind in (bound or {}).items():
        set_bound(folder / pages.REPORT, target, users, kind)
    (folder / pages.CAPACITY).mkdir()
    lines = ["target,scenario,payload,iteration,fork,p99_goal_ms,capacity_rate,over_rate,bracket_percent,probes,"
             "result,valid"]
    lines += [f"{t},proxy,1KB,1,{f},20,{r / slower:g},{r * 1.08 / slower:g},8.0,6,held,yes"
              for t, rates in (("camel", (4000, 4100, 3900)), ("synapse", (3000, 3100, 2950)))
              for f, r in enumerate(rates, 1)]
    (folder / pages.CAPACITY / "capacity.csv").write_text("\n".join(lines) + "\n")
    (folder / pages.CAPACITY / "probes.csv").write_text("target,probe\n")
    (folder / pages.VERIFICATION).write_text("target,scenario,payload_bytes,backend,url,result,ms,detail\n"
                                             "camel,proxy,1024,ws1,http://198.18.0.20:8280/proxy/echo,pass,1.2,\n")
    return folder


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """direct's 20-user steps bounded by the client, as on the shipped testbed."""
    return round_2(tmp_path_factory.mktemp("published"), bound={("direct", 20): "client"})


def skeleton(path: Path) -> Path:
    path.write_text(f"# Round 2\n\nThe rules, by hand.\n\n{pages.START}\n(nothing yet)\n{pages.END}\n")
    return path


# --- the page -----------------------------------------------------------------------------------------------

def test_the_page_leads_with_a_verdict_table_per_scenario_and_payload_with_each_steps_bound(published, tmp_path):
    page = pages.write_page(published, skeleton(tmp_path / "README.md")).read_text()
    verdicts_at = page.index("### Verdicts: which target is faster than which")
    assert verdicts_at < page.index("### proxy, 1KB") < page.index("### Capacity within the p99 goal")
    lead = page[verdicts_at:page.index("### TPS and latency")]
    assert "`esbperf round` on 2026-11-29" in page   # round-2 is the default round
    # The family's false-discovery control, stated once for all of them.
    assert "show a difference with their false discoveries held to 5 % (Benjamini–Hochberg" in lead
    proxy = lead[lead.index("**proxy, 1KB**"):lead.index("**cbr, 1KB**")]
    assert "| users | pair | TPS | p50 | p99 | bound |" in proxy
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): [c.strip() for c in line.split("|")[3:-1]]
            for line in proxy.splitlines() if line.startswith("| 1 ") or line.startswith("| 20 ")}
    # camel is 2.6 ÷ 2.0 times faster than synapse: shown, by how much, with its interval over the forks.
    tps, _, _, bound = rows[("20", "camel vs synapse")]
    assert tps.startswith("camel by ") and "%" in tps and "one process" not in tps and bound == "engine / engine" or \
        bound.count("/") == 1, rows[("20", "camel vs synapse")]
    assert rows[("20", "direct vs camel")][-1].startswith("client / ")
    assert (published / pages.VERDICTS).is_file() and (published / pages.CONTROL).is_file()


def test_steps_the_testbed_bounded_are_used_for_no_verdict_about_engines(published):
    """direct's 20-user steps read the client's limit, not direct's: every pair with them is not judged
    (no member of the family: no p, no q), the page says so and counts them; the same pairs at 1 user,
    and the engines' own pairs at 20 users, are judged."""
    data = pages.load(published)
    found = pages.verdicts(data)
    with_direct = found.filter((pl.col("a_target") == "direct") & (pl.col("users") == 20))
    assert with_direct.height == 3 * (len(PROXY) - 1 + len(CBR) - 1)
    assert with_direct["short"].str.starts_with("not judged (testbed bound)").all()
    assert with_direct["q"].is_null().all() and with_direct["shown"].is_null().all()
    assert with_direct["sentence"].str.contains("direct's step was bounded by the client, a limit of the testbed").all()
    at_one = found.filter((pl.col("a_target") == "direct") & (pl.col("users") == 1) & (pl.col("figure") == "tps"))
    assert at_one["q"].is_not_null().all()
    engines = found.filter((pl.col("a_target") == "camel") & (pl.col("b_target") == "synapse") & (pl.col("users") == 20))
    assert engines["q"].is_not_null().all()
    from esbperf.analysis.verdicts import family_line, percent_level
    judged = found.filter(pl.col("q").is_not_null()).height
    assert f"of {judged} verdicts show a difference" in family_line(found)
    intro = pages.verdicts_intro(data)
    closed = found.filter(pl.col("figure") != "capacity").height
    assert f"({with_direct.height} of {closed} verdicts at closed steps are not judged for that" in intro
    assert "used for no verdict about engines" in intro
    # The intervals' level is named only where the family's control moved it off 95 % (never "at 95 %, not 95 %").
    level = percent_level(found["confidence"].drop_nulls().max())
    assert (f"So each interval is at {level}, not 95 %" in intro) == (level != "95 %"), (level, intro)


def test_a_spoiled_fork_is_left_out_of_a_verdict_and_a_missing_fork_leaves_its_step_unjudged(tmp_path):
    """camel's fork 2 at 20 users ran beside a busy neighbour: its verdicts are over forks 1 and 3 and
    say so; synapse's fork 3 at 1 user never ran: its step is not valid (missing-iterations) and judged
    for nothing."""
    folder = round_2(tmp_path / "r")
    report = folder / pages.REPORT
    frame = pl.read_csv(report / "summary.csv", infer_schema_length=None)
    spoiled = (pl.col("target") == "camel") & (pl.col("users") == 20) & (pl.col("fork") == 2) & (pl.col("scenario") == "proxy")
    missing = (pl.col("target") == "synapse") & (pl.col("users") == 1) & (pl.col("fork") == 3) & (pl.col("scenario") == "proxy")
    frame.with_columns(valid=pl.when(spoiled).then(pl.lit("busy-neighbours")).otherwise(pl.col("valid"))) \
        .filter(~missing).write_csv(report / "summary.csv")
    data = pages.load(folder)
    found = pages.verdicts(data).filter(pl.col("scenario") == "proxy")
    camel = found.filter((pl.col("a_target") == "camel") & (pl.col("b_target") == "synapse") & (pl.col("users") == 20))
    assert camel["sentence"].str.contains(r"\[camel: left out: fork 2 it1 \(busy-neighbours\)\]").all()
    assert (camel["forks"] == 2).all() and camel["q"].is_not_null().all()
    synapse = found.filter(((pl.col("a_target") == "synapse") | (pl.col("b_target") == "synapse")) & (pl.col("users") == 1))
    assert synapse.height and (synapse["short"] == "not judged (not valid)").all()
    assert synapse["sentence"].str.contains("synapse's step is not valid (missing-iterations)", literal=True).all()
    figure = {(f.kind, f.what, f.target, f.users): f for f in pages.figures(data) if f.scenario == "proxy"}
    assert "missing-iterations" in figure[(pages.ABSOLUTE, "tps", "synapse", 1)].valid


def test_a_round_not_yet_published_gets_a_page_and_a_page_without_markers_is_refused_before_measuring(
        published, tmp_path, monkeypatch):
    """The published page is the skeleton the round fills: missing (a round of your own, never published),
    the page is a title and the generated part; present without its markers, `esbperf round` says so in
    one line before it builds or starts anything (not after two hours of measuring)."""
    page = pages.write_page(published, tmp_path / "nowhere" / "README.md").read_text()
    assert page.startswith("# esbperf round-2\n\n" + pages.START) and page.rstrip().endswith(pages.END)
    assert not (tmp_path / "nowhere").exists()
    folder = tmp_path / "published-page"
    folder.mkdir()
    (folder / pages.PAGE).write_text("# Round 2\n\nhand-written, its markers lost\n")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    rnd = dataclasses.replace(rounds.load("round-2"), published=folder)
    with pytest.raises(EsbperfError, match=r"README.md: no generated part to fill \(the lines"):
        round_cli.refuse(rnd, True, False, topology.load(rnd.testbed))
    assert [p.name for p in folder.iterdir()] == [pages.PAGE]
    round_cli.refuse(rounds.load("round-2"), True, False, topology.load(rnd.testbed))   # the shipped page holds them


def test_the_page_states_this_rounds_layout_and_links_not_round_1s(published):
    """What this round cannot say is read from its own runs: the cores the esb host shares (none on 2 CPUs:
    client and back ends on one core, the engines on the other), its links' rate, intervals over forks."""
    data = pages.load(published)
    text = pages.limits_text(data)
    assert "- **One machine of 2 CPUs.**" in text and "- **Emulated links.** 1 Gbit/s per host" in text   # as recorded
    for record in data.runs.values():   # Round 2's testbed, as its runs record it
        record["hosts"]["esb"]["link_mbit"] = 10000
        for role, cores in {"client": [0], "esb": [1], "ws1": [0], "ws2": [0], "ws3": [0]}.items():
            record["hosts"][role]["cpus"] = cores
    text = pages.limits_text(data)
    assert "- **Emulated links.** 10 Gbit/s per host" in text and "the engine under test has its cores to itself" in text
    assert "Every interval is over this round's engine processes (its forks)" in text
    assert pages._sharing({"client": {"cpus": [0]}, "esb": {"cpus": [1]}, "ws1": {"cpus": [0]}}).startswith(
        "the engine under test has its cores to itself")
    assert pages._sharing({"client": {"cpus": [0]}, "esb": {"cpus": [1]}, "ws1": {"cpus": [1]}, "ws2": {"cpus": [1]},
                           "ws3": {"cpus": [1]}}).startswith("the esb host shares its cores with ws1, ws2, ws3")


def test_every_figure_lies_inside_its_interval_over_forks(published):
    found = [f for f in pages.figures(pages.load(published)) if f.interval is not None and f.interval.has_interval]
    assert found and all(f.interval.forks == FORKS for f in found if f.kind in (pages.ABSOLUTE, pages.VS_DIRECT))
    assert all(f.interval.low <= f.value <= f.interval.high for f in found)
    ratio = {(f.kind, f.target, f.users): f for f in found}[(pages.VS_REFERENCE, "camel", 20)]
    assert ratio.interval.low < PROXY["reference"] / PROXY["camel"] * 1.3 and ratio.value < 1


def test_the_control_pair_reads_no_difference_shown_and_the_page_says_so(published):
    data = pages.load(published)
    control = pages.control_verdicts(data)
    assert control.height == 3 and set(control["a"]) == {"reference"} and set(control["b"]) == {"reference (control forks)"}
    assert control["shown"].to_list() == [False, False, False]
    assert control["control"][0].startswith("Benjamini–Hochberg over 3 verdicts")   # a family of its own
    # The control's steps are no figures of the round: the reference's 20-user TPS is over its own forks only.
    tps = {(f.kind, f.what, f.target, f.users): f for f in pages.figures(data) if f.scenario == "proxy"}
    assert tps[(pages.ABSOLUTE, "tps", "reference", 20)].iterations == FORKS
    text = pages.control_text(data)
    assert "It reads **no difference shown**, as it must: 3 of 3 verdicts judged, none shows a difference" in text


def test_a_control_pair_that_shows_a_difference_says_it_does_not_read_as_it_must(tmp_path):
    data = pages.load(round_2(tmp_path / "r", control_speed=0.75))
    assert pages.control_verdicts(data)["shown"].any()
    text = pages.control_text(data)
    assert "It does **not** read \"no difference shown\"" in text and "reference is faster than reference (control forks)" in text


def test_the_page_says_how_fast_the_reference_engine_ran_on_this_machine(published):
    data = pages.load(published)
    m = pages.machine(data)
    # Eight processes: in each of two runs (the control's its own) the launcher's, then three forks.
    assert m.work_us.units == 8 and m.work == 1000 and m.work_us.low < WORK_US < m.work_us.high
    assert m.under_load_us == pytest.approx(WORK_US * 1.05, rel=0.02)
    text = pages.reference_text(data)
    assert text.startswith("**The reference engine: this machine's speed.** `reference`")
    assert "µs of CPU a request** for that work on this machine (synthetic, 2 CPUs)" in text
    assert "proxy 1KB 20 users" in text


# --- a rerun, compared ------------------------------------------------------------------------------------

def test_a_rerun_on_another_machine_is_compared_by_ratios_and_verdicts_and_counts_those_it_reproduced(published,
                                                                                                      tmp_path):
    """The same round on a machine 1.6 × slower for the same code (every time, and the reference's work):
    its absolute figures are not compared, its ratios agree, and its verdicts are those published."""
    rerun = round_2(tmp_path / "rerun", slower=1.6, cpu="another CPU", seed=5, bound={("direct", 20): "client"})
    new, old = pages.load(rerun), pages.load(published)
    differs = pages.machine_differences(new, old)
    assert differs[0] == "CPU synthetic → another CPU" and "the reference engine's work took 1.60 × the published" \
        in differs[1]
    out, lines = pages.write_comparison(new, old, rerun / pages.COMPARISON)
    table = pl.read_csv(out)
    assert set(table["kind"]) <= set(pages.RATIO_KINDS) and pages.ABSOLUTE not in set(table["kind"])
    assert {pages.VS_DIRECT, pages.VS_FLOOR, pages.VS_REFERENCE, pages.VS_ENGINE} <= set(table["kind"])
    ratios = table.filter(pl.col("agrees").is_not_null())
    assert ratios.height > 20 and ratios["agrees"].sum() >= 0.85 * ratios.height
    assert lines[1].startswith("  another machine (CPU synthetic → another CPU; the reference engine's work took")
    assert lines[1].endswith("compared by its ratios (÷ direct, ÷ best floor, ÷ reference, engine ÷ engine) and "
                             "verdicts, not its absolute figures")
    said = pl.read_csv(rerun / pages.VERDICTS_COMPARED)
    judged = said.filter(pl.col("reproduced").is_not_null())
    reproduced = judged.filter(pl.col("reproduced")).height
    [line] = [line for line in lines if line.startswith("  verdicts: ")]
    assert line.startswith(f"  verdicts: {reproduced} of {judged.height} judged by both rounds reproduced")
    assert judged.height > 30 and reproduced >= 0.85 * judged.height
    # The pairs with direct at 20 users were judged by neither round: counted apart, never as reproduced.
    assert said.filter((pl.col("a") == "direct") & (pl.col("users") == 20))["reproduced"].is_null().all()


def test_a_rerun_on_the_same_machine_compares_its_absolute_figures_too(published, tmp_path):
    rerun = round_2(tmp_path / "rerun", seed=11, bound={("direct", 20): "client"})
    new, old = pages.load(rerun), pages.load(published)
    assert pages.machine_differences(new, old) == []
    out, lines = pages.write_comparison(new, old, rerun / pages.COMPARISON)
    assert pages.ABSOLUTE in set(pl.read_csv(out)["kind"]) and not any("another machine" in line for line in lines)
    assert any(line.startswith("  verdicts: ") for line in lines)


def test_a_rerun_whose_engine_is_slower_does_not_reproduce_the_verdict_it_reverses(published, tmp_path):
    """The rerun's camel runs 1.5 × slower in every fork: camel, faster than synapse in the published
    round, is now the slower; the comparison names that verdict as not reproduced."""
    rerun = round_2(tmp_path / "rerun", seed=21, bound={("direct", 20): "client"},
                    fork_speed={("camel", f): 1 / 1.5 for f in range(1, FORKS + 1)})
    said = pages.compare_verdicts(pages.load(rerun), pages.load(published))
    flipped = said.filter((pl.col("a") == "camel") & (pl.col("b") == "synapse") & (pl.col("figure") == "tps")
                          & (pl.col("scenario") == "proxy") & (pl.col("users") == 20)).row(0, named=True)
    assert (flipped["published_outcome"], flipped["new_outcome"], flipped["reproduced"]) == ("camel", "synapse", False)
    lines = pages.verdict_lines(said)
    # Reversals are named first (every camel vs synapse verdict reversed here, cbr's as well).
    assert lines[1].startswith("    not reproduced: ") and "camel vs synapse" in lines[1], lines
    assert "published camel by " in lines[1] and ", now synapse by " in lines[1], lines


def test_reruns_say_how_often_each_verdict_came_out_the_same(published, tmp_path, capsys):
    """Three runs of the round, the third with camel 1.5 × slower in every fork: `esbperf round --reruns`
    counts camel over synapse 2 of 3 (the third shows synapse), a verdict all three show 3 of 3, and
    writes a row per verdict with each run's outcome in order."""
    from esbperf.cli import main
    first = round_2(tmp_path / "first", seed=31)
    second = round_2(tmp_path / "second", seed=32)
    third = round_2(tmp_path / "third", seed=33, fork_speed={("camel", f): 1 / 1.5 for f in range(1, FORKS + 1)})
    argv = ["round", "--reruns", str(first), "--reruns", str(second), "--reruns", str(third), "--out", str(tmp_path)]
    main(argv)
    printed = capsys.readouterr().out
    [written] = tmp_path.glob("round-2-reruns-*.csv")
    table = pl.read_csv(written)
    row = lambda a, b: table.filter((pl.col("scenario") == "proxy") & (pl.col("users") == 20) & (pl.col("figure") == "tps")
                                    & (pl.col("a") == a) & (pl.col("b") == b)).row(0, named=True)
    flipped = row("camel", "synapse")
    assert (flipped["outcomes"], flipped["most"], flipped["same"], flipped["judged"]) == \
        ("camel; camel; synapse", "camel", 2, 3)
    assert row("direct", "synapse")["same"] == 3
    assert "reruns: " in printed and "camel 2 of 3 judged (camel; camel; synapse)" in printed
    # One line for what cannot be compared: a single folder, or a folder of another round.
    with pytest.raises(SystemExit):
        main(["round", "--reruns", str(first)])
    assert "at least two round folders" in capsys.readouterr().err


# --- the published round, made again from its own data ---------------------------------------------------

def test_the_published_round_is_what_the_code_makes_of_its_published_data(tmp_path):
    """`esbperf round --from DIR --publish` with docs/round-2 as both the round measured and the round
    published (copies of it): the page, figures.csv, verdicts.csv and control.csv it writes, and every
    other published file, are byte for byte the committed ones. What any change to the analysis must
    keep (or republish, saying why)."""
    committed = ROOT / "docs" / "round-2"
    measured, published = tmp_path / "round-2-from", tmp_path / "published"
    shutil.copytree(committed, measured)
    shutil.copytree(committed, published)
    rnd = dataclasses.replace(rounds.load("round-2"), published=published)
    round_cli.finish(measured, rnd, Console(file=io.StringIO(), width=400), publish=True)
    files = lambda root: sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files(published) == files(committed)
    changed = [name for name in files(committed) if (published / name).read_bytes() != (committed / name).read_bytes()]
    if pages.PAGE in changed:
        import difflib
        diff = difflib.unified_diff((committed / pages.PAGE).read_text().splitlines(),
                                    (published / pages.PAGE).read_text().splitlines(), lineterm="", n=0)
        pytest.fail("the page differs from docs/round-2/README.md:\n" + "\n".join(list(diff)[:40]))
    assert not changed, changed
