"""Round 3's definition (console-config/rounds/round-3.yaml): the three ESBs and direct at the five headline
cells in one part, so that each fork of an ESB is warmed once for all of them; the floors and the reference
engine as the context, a part of their own; Camel's control pair; the capacity at proxy 1 KB; each fitting
its time budget by the runner's own estimate with room left for the forks the verdicts ask for; a wrong
`context` refused in one line."""
from __future__ import annotations

import io
import json
import time
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from conftest import round_refuser
from esbperf.analysis import round as pages, synthetic
from esbperf.analysis.report import write_report
from esbperf.analysis.round import ranking
from esbperf.cli import round as round_cli
from esbperf.core import plan as plans, rounds, topology
from esbperf.run import estimate
from test_round import MEASURED   # the runner's medians as `esbperf round --quick` measured them here

HEADLINE = [("proxy", 1024), ("proxy", 102400), ("cbr", 1024), ("json", 1024), ("xslt", 1024)]
ESBS = ("camel", "synapse", "spring-integration")


def test_round_3_measures_the_headline_cells_of_the_esbs_in_one_part_and_the_floors_apart():
    rnd = rounds.load("round-3")
    testbed = topology.load(rnd.testbed)
    parts = rnd.full.parts(testbed)
    assert [(p.kind, p.targets) for p in parts] == [
        ("closed", ("direct", *ESBS)), ("context", ("nginx", "haproxy", "reference")), ("control", ("camel",)),
        ("capacity", ESBS)]
    closed, context, control, capacity = (p.plan for p in parts)
    assert closed.cells() == HEADLINE and closed.users == [20] and closed.forks == 3 and closed.order == "random"
    assert control.cells() == HEADLINE and control.forks == 3, "the control pair compares every headline cell"
    assert context.cells() == [("proxy", 1024), ("proxy", 102400)]
    assert capacity.cells() == [("proxy", 1024)] and capacity.capacity.p99_ms == 20
    assert rnd.reference == "reference"
    # Each fork of an ESB is warmed under all five cells, up to 180 s in all.
    assert closed.target_warmup("esb") == (40, 180)
    [quick] = rnd.quick.parts(testbed)
    assert quick.targets == ("direct", *ESBS) and quick.plan.cells() == [("proxy", 1024)] and quick.plan.forks == 3


@pytest.mark.parametrize("quick, budget_s", [(False, 100 * 60), (True, 15 * 60)])
def test_round_3_fits_its_time_budget_with_room_for_the_forks_its_verdicts_ask_for(quick, budget_s, tmp_path,
                                                                                    monkeypatch):
    """The full round within 100 minutes by the estimate: 2 hours less the runner's estimate's error on
    Round 2 (16 % short) leaves about 20 minutes for forks added where verdicts are unresolved."""
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path))
    estimate.remember(**MEASURED)
    rnd = rounds.load("round-3")
    rows, total = round_cli.estimate_seconds(rnd, quick, topology.load(rnd.testbed))
    assert total <= budget_s, (total, rows)


def test_a_wrong_context_is_refused_in_one_line(tmp_path):
    refused = round_refuser(tmp_path, "round-3")
    refused(lambda d: d["full"]["context"].update(targets=["camel"]),
            r"field 'full.context' must be .*; its targets must be targets the closed plan does not measure")
    refused(lambda d: d["full"]["context"].update(closed="round-3-capacity-1kb"), "is not a closed-model plan")
    refused(lambda d: d["full"].update(context=["nginx"]), r"field 'full.context' must be")
    refused(lambda d: d.update(ranked=["camel", "nginx"]), "field 'ranked' must be")
    refused(lambda d: d["full"].update(added_forks={"most": 3, "budget_s": 600}), "field 'full.added_forks' must be")
    refused(lambda d: d["full"].update(added_forks={"most": 6}), "field 'full.added_forks' must be")
    # The reference may be a target of the context; of neither, it is refused.
    refused(lambda d: d["full"]["context"].update(targets=["nginx", "haproxy"]), "field 'reference' must be")


# --- the ranking and the forks added where it is unresolved ------------------------------------------------

RANKED = {"direct": 1.0, "camel": 2.0, "synapse": 2.6, "spring-integration": 2.05}


def ranked_round(folder: Path, fork_speed: dict | None = None, looks: int = 2) -> Path:
    """A Round 3 folder as `esbperf round` leaves it before its look: direct and three ESBs (Camel
    fastest, Spring Integration 2.5 % slower, Synapse 30 % slower) at proxy 1 KB 20 users in 3 forks."""
    run = synthetic.round_run(folder / "runs" / "r3", "r3", RANKED, ["proxy"], {"1KB": 1024}, [20], 1, forks=3,
                              noise=0.01, seed=3, fork_speed=fork_speed)
    synthetic.write_json(folder / pages.ROUND_FILE, {
        "round": "round-3", "variant": "full", "verdict_steps": pages.STRICT_STEPS, "looks": looks,
        "ranked": list(ESBS), "started": "2026-12-08T10:00:00+0000",
        "parts": [{"kind": "closed", "plan": "r3", "targets": list(RANKED), "run": "runs/r3", "measured_s": 1200.0}]})
    write_report([run], folder / pages.REPORT, embed_graphs=False)
    (folder / pages.VERIFICATION).write_text("target,scenario,payload_bytes,backend,url,result,ms,detail\n")
    return folder


def test_the_page_leads_with_the_ranking_each_pair_and_each_engines_cost_against_direct(tmp_path):
    data = pages.load(ranked_round(tmp_path / "round"))
    assert ranking.ranked(data) == list(ESBS)
    text = ranking.ranking_text(data)
    block = text[text.index("#### proxy 1KB, 20 users: TPS"):]
    order = [line.split("|")[2].strip() for line in block.splitlines() if line.startswith("| ") and "rank" not in line]
    assert order == ["camel", "spring-integration", "synapse"], block
    pairs = ranking.pair_rows(data)
    assert pairs.height == 3 and set(pairs["figure"]) == {"tps"}
    slow = pairs.filter((pl.col("a_target") == "camel") & (pl.col("b_target") == "synapse")).row(0, named=True)
    assert slow["shown"] and ranking.resolved(slow) and slow["sentence"] in text
    assert "3 of 3 pairs of camel, synapse, spring-integration resolved" in text
    assert not ranking.unresolved(data)
    page = pages.page(data)
    assert page.index("### The ranking: camel, synapse, spring-integration") < page.index("### Verdicts")


def test_an_unresolved_pair_gets_forks_of_both_its_engines_within_the_budget(tmp_path, monkeypatch):
    """Spring Integration's processes 30 % apart: its pairs' intervals hold 1 and are wider than ±10 %, so
    the round adds forks of it and of the engines it is paired with, as many as `most` and the time left
    allow (each engine's fork as long as the part's own took), resumes the run with them, and says why."""
    noisy = {("spring-integration", 1): 0.7, ("spring-integration", 2): 1.3, ("spring-integration", 3): 1.0}
    folder = ranked_round(tmp_path / "round", fork_speed=noisy)
    data = pages.load(folder)
    rows = ranking.unresolved(data)
    assert rows and all("spring-integration" in (r["a_target"], r["b_target"]) for r in rows), rows
    engines = ranking.engines_of(rows)
    assert "spring-integration" in engines and len(engines) >= 2
    resumed = []
    monkeypatch.setattr(round_cli.runner, "resume", lambda run_dir, **options: resumed.append(run_dir))
    record = json.loads((folder / pages.ROUND_FILE).read_text())
    part = rounds.Part("closed", plans.Plan.from_dict({**json.loads((folder / "runs/r3/run.json").read_text())["plan"]},
                                                       "run.json"), tuple(RANKED))
    variant = rounds.load("round-3").full
    # 1200 s for 3 forks of 4 targets: 100 s a fork of an engine; 1000 s left, at most 6 forks an engine.
    began = time.monotonic() - (variant.budget_s - 100 * len(engines) * 2 - 50)
    round_cli.add_forks(variant, [(part, folder / "runs/r3")], folder, record, {}, Console(file=io.StringIO()),
                        began)
    assert resumed == [folder / "runs/r3"]
    manifest = json.loads((folder / "runs/r3/run.json").read_text())
    assert manifest["plan"]["added_forks"] == [engines, engines], "two forks of these engines fit the time left"
    said = json.loads((folder / pages.ROUND_FILE).read_text())["added_forks"]
    assert said["forks"] == {e: 2 for e in engines} and said["why"].startswith(f"{len(rows)} pair(s) unresolved")
    assert not (folder / round_cli.LOOK).exists(), "the look's report is gone: the round's own reads every fork"
    # No time left: nothing added, and the reason said.
    resumed.clear()
    round_cli.add_forks(variant, [(part, folder / "runs/r3")], folder, record, {}, Console(file=io.StringIO()),
                        time.monotonic() - variant.budget_s)
    assert not resumed and "of the round's budget were left" in json.loads(
        (folder / pages.ROUND_FILE).read_text())["added_forks"]["why"]
