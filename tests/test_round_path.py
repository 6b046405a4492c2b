"""`esbperf round`'s whole path on an emulated testbed of its own (namespaces, bridge, 1 Gbit/s
links, the client on a core of its own): the echo services, a floor and an ESB started on the esb
host at once, every target verified into verification.csv, a closed plan split where the floor
does not serve a scenario (each part interleaved, wrk on the first iteration), a capacity search,
the report, the round's page, and a clean tear-down. Minutes: `make test-long`."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml
from rich.console import Console

from esbperf import testbed as testbeds
from esbperf.analysis import round as pages
from esbperf.analysis.round import ranking
from esbperf.cli import round as round_cli
from esbperf.core import rounds, topology
from test_demo import PREFIX, emulated_testbed

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.long,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


def test_a_small_round_runs_end_to_end_and_writes_its_page(tmp_path, monkeypatch):
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path / "state"))
    testbed_file = emulated_testbed(tmp_path / "round-test.yaml")
    data = yaml.safe_load(testbed_file.read_text().replace("198.18.220.", "198.18.221.").replace(PREFIX, "esbr-"))
    data["cpus"] = "auto"
    data["hosts"]["esb"]["esb_ports"] = {"camel": 8280, "nginx": 8310}
    data["targets"]["nginx"] = {"kind": "esb", "esb": "nginx"}
    testbed_file.write_text(yaml.safe_dump(data, sort_keys=False))
    closed = {"name": "tiny-round", "scenarios": ["proxy", "cbr"], "payloads": ["1KB"], "users": [3],
              "duration_s": 2, "warmup_s": "auto", "warmup_min_s": 1, "warmup_max_s": 5, "target_warmup_s": 2, "target_warmup_max_s": 6,
              "iterations": 2, "cross_check_iterations": [1], "timeout_s": 10}
    search = {"name": "tiny-capacity", "scenarios": ["proxy"], "payloads": ["1KB"], "duration_s": 2, "warmup_s": 2,
              "timeout_s": 10, "capacity": {"p99_ms": 50, "precision": 0.5, "start_rate": 400}}
    for name, plan in (("tiny-round", closed), ("tiny-capacity", search)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(plan))
    variant = {"closed": str(tmp_path / "tiny-round.yaml"), "targets": ["direct", "nginx", "camel"],
               "capacity": [str(tmp_path / "tiny-capacity.yaml")], "capacity_targets": ["camel"]}
    (tmp_path / "round.yaml").write_text(yaml.safe_dump({
        "name": "tiny", "testbed": str(testbed_file), "published": "docs/round-1", "cross_check": "wrk",
        "full": variant, "quick": variant}))
    rnd = rounds.load(tmp_path / "round.yaml")
    testbeds.down(topology.load(testbed_file))   # a killed earlier run's leftovers

    folder = round_cli.run_round(rnd, False, tmp_path / "results", Console())
    page = round_cli.finish(folder, rnd, Console(), publish=False)

    record = json.loads((folder / "round.json").read_text())
    assert [(p["plan"], p["targets"]) for p in record["parts"]] == [
        ("tiny-round-proxy", ["direct", "nginx", "camel"]), ("tiny-round-cbr", ["direct", "camel"]),
        ("tiny-capacity", ["camel"])] and record["finished"]
    verified = pl.read_csv(folder / "verification.csv")
    assert verified["result"].to_list() == ["pass"] * verified.height
    assert set(zip(verified["target"], verified["scenario"])) == {("direct", "proxy"), ("direct", "cbr"),
                                                                  ("nginx", "proxy"), ("camel", "proxy"),
                                                                  ("camel", "cbr")}
    proxy_run = folder / record["parts"][0]["run"]
    manifest = json.loads((proxy_run / "run.json").read_text())
    assert set(manifest["engines"]) == {"camel", "nginx"} and manifest["engines"]["nginx"]["kind"] == "floor"
    assert manifest["cross_check"] == "wrk" and "cpu_frequency" in manifest["environment"]
    checked = {p.parent.name: "xcheck" in json.loads(p.read_text()) for p in proxy_run.glob("camel/proxy/*/*/*/step.json")}
    assert checked == {"iter-1": True, "iter-2": False}
    # Each step's warm-up asked the esb host's monitor whether the other engine was quiet before measuring.
    quiet = [json.loads(p.read_text()).get("neighbours") for p in proxy_run.glob("*/proxy/*/*/*/step.json")]
    assert len(quiet) == 6 and all(q and q["quiet"] in (True, False) and q["waited_s"] >= 0 for q in quiet)
    summary = pl.read_csv(folder / "report" / "summary.csv")
    assert summary.height == 2 * (3 + 2) and (summary["errors"] == 0).all()
    # Both engines ran on the esb host throughout: the one not under test is watched as a neighbour (a
    # 2-s window may hold no process reading: the monitor reads processes every 2 s).
    assert summary.filter(pl.col("target") == "camel")["esb_proc_cpu_mean"].min() > 0
    assert summary["esb_neighbours_cpu_mean"].drop_nulls().len() >= summary.height - 2
    assert (folder / "capacity" / "capacity.csv").is_file() and (folder / "report" / "hlog.tar.gz").is_file()
    assert "data:image" not in (folder / "report" / "report.html").read_text()   # its SVGs beside it, published
    text = page.read_text()
    assert "### proxy, 1KB" in text and "### cbr, 1KB" in text and "### Capacity within the p99 goal" in text
    assert "| 3 | camel |" in text and "wrk measured 4 closed steps" in text
    assert testbeds.status(topology.load(testbed_file))["state"] == "down"
    assert "esbr-" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_a_ranked_round_adds_forks_where_its_verdicts_are_unresolved_and_leads_its_page_with_the_ranking(
        tmp_path, monkeypatch):
    """Round 3's path on a tiny round: direct and two ESBs in 3 forks in random order, the floor as
    context in a part of its own, one look at the verdicts (every pair taken as unresolved here, so that
    the path that adds forks runs), a fork more of both ESBs resumed into the closed run with their
    engines restarted, the family judged over two looks, and a page that leads with the ranking."""
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path / "state"))
    monkeypatch.setattr(ranking, "resolved", lambda row: False)
    testbed_file = emulated_testbed(tmp_path / "ranked-test.yaml")
    data = yaml.safe_load(testbed_file.read_text().replace("198.18.220.", "198.18.222.").replace(PREFIX, "esbk-"))
    data["cpus"] = "auto"
    data["hosts"]["esb"]["esb_ports"] = {"camel": 8280, "synapse": 8290, "nginx": 8310}
    data["targets"].update(synapse={"kind": "esb", "esb": "synapse"}, nginx={"kind": "esb", "esb": "nginx"})
    testbed_file.write_text(yaml.safe_dump(data, sort_keys=False))
    common = {"scenarios": ["proxy"], "payloads": ["1KB"], "users": [3], "duration_s": 2, "warmup_s": 1,
              "target_warmup_s": 2, "iterations": 1, "order": "random", "timeout_s": 10}
    for name, forks in (("tiny-ranked", 3), ("tiny-context", 2)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, **common, "forks": forks}))
    variant = {"closed": str(tmp_path / "tiny-ranked.yaml"), "targets": ["direct", "camel", "synapse"],
               "context": {"closed": str(tmp_path / "tiny-context.yaml"), "targets": ["nginx"]},
               "added_forks": {"most": 4, "budget_s": 3600}}
    (tmp_path / "round.yaml").write_text(yaml.safe_dump({
        "name": "tiny-ranked", "testbed": str(testbed_file), "published": "docs/round-3", "ranked": ["camel", "synapse"],
        "full": variant, "quick": {k: v for k, v in variant.items() if k != "added_forks"}}))
    rnd = rounds.load(tmp_path / "round.yaml")
    testbeds.down(topology.load(testbed_file))

    folder = round_cli.run_round(rnd, False, tmp_path / "results", Console())
    page = round_cli.finish(folder, rnd, Console(), publish=False)

    record = json.loads((folder / "round.json").read_text())
    assert [(p["kind"], p["targets"]) for p in record["parts"]] == [
        ("closed", ["direct", "camel", "synapse"]), ("context", ["nginx"])]
    assert record["looks"] == 2 and record["ranked"] == ["camel", "synapse"]
    added = record["added_forks"]
    assert added["forks"] == {"camel": 1, "synapse": 1} and added["why"].startswith("1 pair(s) unresolved"), added
    closed_run = folder / record["parts"][0]["run"]
    manifest = json.loads((closed_run / "run.json").read_text())
    assert manifest["plan"]["added_forks"] == [["camel", "synapse"]] and manifest["finished"]
    assert manifest["fork_starts"][-1]["fork"] == 4
    summary = pl.read_csv(folder / "report" / "summary.csv")
    forks_of = {t: sorted(summary.filter((pl.col("target") == t) & (pl.col("plan") == "tiny-ranked"))["fork"])
                for t in ("direct", "camel", "synapse")}
    assert forks_of == {"direct": [1, 2, 3], "camel": [1, 2, 3, 4], "synapse": [1, 2, 3, 4]}
    assert not (folder / round_cli.LOOK).exists()
    text = page.read_text()
    assert text.index("### The ranking: camel, synapse") < text.index("### Verdicts")
    assert "#### proxy 1KB, 3 users: TPS" in text and "Forks: camel 4, synapse 4." in text
    assert "Its false discoveries are spent over 2 looks" in text
    assert pl.read_csv(folder / pages.VERDICTS).filter(pl.col("figure") == "tps").height == 3, "3 pairs at proxy 1KB"
    assert testbeds.status(topology.load(testbed_file))["state"] == "down"
