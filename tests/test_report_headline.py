"""The report opens on its answer: a headline made from the runs' own figures (analysis/headline.py), the
thesis's graphs readable beside a baseline many times faster, hosts that share cores drawn once, the
warnings in one line and the verdicts as a matrix, all of it on the first screen at 1400 × 900 in
headless Chromium, and the page less than half as long as before.

The runs are the demo's three (synthetic.demo_runs, the figures of the demo of 2026-11-28): Camel and
direct interleaved step by step, 2 iterations each, the client and the back ends on one core and
the esb host on the other; direct is client-bound from 20 users at 100 KB."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from conftest import CHROMIUM, render_with_probe
from esbperf.analysis import cli, graphs, headline, page, synthetic
from esbperf.analysis.report import build_report
from esbperf.analysis.runs import load_run

FIRST_SCREEN = (1400, 900)
# The page of this fixture's report at 1400 px as esbperf drew it before the headline (2026-11-28:
# warnings, 42 verdict sentences, the drift graphs, then per plan its table and every graph), px.
PAGE_BEFORE_PX = 17_188


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(report folder, analysis) of the demo's three runs, every target warmed."""
    root = tmp_path_factory.mktemp("demo")
    return build_report(synthetic.demo_runs(root / "runs"), root / "report")


def sentence(found: headline.Headline, topic: str) -> headline.Sentence:
    [s] = [s for s in found.sentences if s.topic.startswith(topic)]
    return s


def plans_of(out: Path) -> dict[str, list[str]]:
    summary = pl.read_csv(out / "summary.csv", infer_schema_length=None, columns=["plan", "run"])
    found: dict[str, list[str]] = {}
    for plan, run in summary.select("plan", "run").unique(maintain_order=True).iter_rows():
        found.setdefault(plan, []).append(run)
    return found


# --- the headline ----------------------------------------------------------------------------------

def test_the_headline_states_each_sweep_from_summary_csv(demo):
    out, analysis = demo
    found = headline.of_report_folder(out)
    # The page's and the CLI's headline is the CSV files' (in the report's plan order there).
    assert sorted(found.lines()) == sorted(headline.of_analysis(analysis).lines())
    summary = pl.read_csv(out / "summary.csv", infer_schema_length=None)
    figures = [(s, f) for s in found.sentences for f in s.figures]
    assert {f.column for _, f in figures} == {"rt_mean_ms", "tps", "lat_p99_ms"}
    for s, f in figures:
        rows = summary.filter((pl.col("run") == f.run) & (pl.col("target") == f.target)
                              & (pl.col("scenario") == f.scenario) & (pl.col("payload_bytes") == f.payload_bytes)
                              & (pl.col("users") == f.users) & (pl.col("test") == f.test)
                              & (pl.col("rate") == f.rate if f.rate is not None else pl.col("rate").is_null()))
        assert rows.height == 2 and set(rows["valid"]) == {"yes"}, f        # both iterations, both valid
        if f.column == "tps":                                              # averaged over the iterations
            assert f.value == pytest.approx(rows["tps"].mean(), abs=1e-3)
        elif f.column == "rt_mean_ms":                                     # pooled: weighted by transactions
            pooled = (rows["rt_mean_ms"] * rows["transactions"]).sum() / rows["transactions"].sum()
            assert f.value == pytest.approx(pooled, rel=1e-3, abs=1e-4)
        else:                                                              # a pooled percentile: within its iterations'
            assert rows[f.column].min() - 1e-3 <= f.value <= rows[f.column].max() + 1e-3
        said = headline.tps_text(f.value) if f.column == "tps" else headline.ms_text(f.value)
        assert said in s.text, (said, s.text)
    verdicts = pl.read_csv(out / "verdicts.csv", infer_schema_length=None)
    for s in found.sentences:
        for r in s.ratios:           # each ratio stated is a verdict's, turned to read engine ÷ baseline
            row = verdicts.row(r.row, named=True)
            assert row["figure"] == r.figure
            assert r.value == pytest.approx(row["ratio"] if row["b_target"] == "direct" else 1 / row["ratio"])


def test_the_headline_says_what_the_demo_found(demo):
    out, analysis = demo
    found = headline.of_analysis(analysis)
    agg = analysis.aggregate
    at = {(r["target"], r["payload_label"], r["users"], r["rate"]): r for r in agg.iter_rows(named=True)}
    payload = sentence(found, "Payload sweep, 1 user")
    camel, direct = at[("camel", "1KB", 1, None)], at[("direct", "1KB", 1, None)]
    added = camel["rt_mean_ms"] - direct["rt_mean_ms"]
    assert payload.text.startswith(f"camel answers 1KB in {headline.ms_text(camel['rt_mean_ms'])} ms, "
                                   f"{headline.ms_text(added)} ms more than direct's "
                                   f"{headline.ms_text(direct['rt_mean_ms'])} ms (median ")
    assert f"at 1024KB it holds {headline.tps_text(at[('camel', '1024KB', 1, None)]['tps'])} TPS" in payload.text
    users = sentence(found, "Concurrency sweep, 100KB")
    assert users.text.startswith("camel holds 3,800 TPS with 20 users, bound by its own CPU")
    [bounded] = agg.filter((pl.col("target") == "direct") & (pl.col("users") == 20)).iter_rows(named=True)
    assert bounded["bound"] == "client"
    if bounded["valid"] == "yes":       # a bound is a fact: what the client could send, or more
        assert f"; direct is bound by the client there, at {headline.tps_text(bounded['tps'])} or more" in users.text
    else:                               # a client-bound step not valid: said, and no figure of it
        assert " (direct's step there is not valid: " in users.text
        assert all(kind in users.text for kind in bounded["valid"].split(";"))
    assert sentence(found, "Open model, 100KB").text.startswith("offered 350 requests a second, camel keeps the "
                                                                 "schedule with a p99 latency of")
    valid = agg.filter(pl.col("valid") == "yes").height
    note = [line for line in found.lines() if " steps are valid measurements" in line]
    assert note == ([f"{valid} of {agg.height} steps are valid measurements; these figures come from them only "
                     f"(the others: client-bound {agg.height - valid})."] if valid < agg.height else [])


def test_the_headline_says_plainly_when_no_step_was_valid(demo):
    out, analysis = demo
    agg = pl.read_csv(out / "aggregate.csv", infer_schema_length=None)
    verdicts = pl.read_csv(out / "verdicts.csv", infer_schema_length=None)
    cold = agg.with_columns(valid=pl.lit("target-not-warm"))                    # the demo of 2026-11-28
    found = headline.headline(cold, verdicts, plans_of(out))
    assert found.none_valid and not [f for s in found.sentences for f in s.figures]
    assert found.lines() == [f"No step is a valid measurement: a validity warning names every one of the "
                             f"{agg.height} steps (target-not-warm {agg.height}), so these runs state no finding. "
                             "The graphs and tables below show what was measured, hollow where not valid."]
    assert headline.terminal_lines(found) == [f"esbperf: {found.lines()[0]}"]
    shown = page._headline_section(SimpleNamespace(aggregate=cold, verdicts=verdicts, labels=analysis.labels,
                                                   plans={p: [SimpleNamespace(name=r) for r in runs]
                                                          for p, runs in plans_of(out).items()}))
    assert 'class="headline none-valid"' in shown and "No step is a valid measurement" in shown
    # Camel's payload sweep alone not valid: said of that sweep; the others still stated.
    some = agg.with_columns(valid=pl.when((pl.col("target") == "camel") & pl.col("run").str.contains("demo-payload"))
                            .then(pl.lit("target-not-warm")).otherwise(pl.col("valid")))
    partial = headline.headline(some, verdicts, plans_of(out))
    assert sentence(partial, "Payload sweep").text == "camel has no valid step (target-not-warm 5)."
    assert sentence(partial, "Concurrency sweep").figures and not partial.none_valid


def test_a_baseline_bounded_by_the_client_reads_at_least(demo):
    """Once a client-bound step stays valid (a bound is a fact), the baseline's figure there is a floor."""
    out, _ = demo
    agg = pl.read_csv(out / "aggregate.csv", infer_schema_length=None).with_columns(valid=pl.lit("yes"))
    verdicts = pl.read_csv(out / "verdicts.csv", infer_schema_length=None)
    users = sentence(headline.headline(agg, verdicts, plans_of(out)), "Concurrency sweep")
    direct = agg.filter((pl.col("target") == "direct") & (pl.col("users") == 20)).row(0, named=True)
    [tps] = verdicts.filter((pl.col("plan") == "demo-concurrency") & (pl.col("users") == 20)
                            & (pl.col("figure") == "tps")).iter_rows(named=True)
    assert (tps["a_target"], tps["b_target"]) == ("direct", "camel")
    share = headline.share_text(1 / tps["ratio"])                      # camel ÷ direct, the verdict's
    assert users.text == (f"camel holds 3,800 TPS with 20 users, bound by its own CPU; direct is bound by the client "
                          f"there, at {headline.tps_text(direct['tps'])} or more (camel at most {share} of it).")
    assert [f.at_least for f in users.figures] == [False, True]


def test_the_cli_prints_the_headline_above_the_reports_path(demo, capsys):
    out, analysis = demo
    cli._done(out, analysis)
    printed = capsys.readouterr().out.splitlines()
    lines = headline.terminal_lines(headline.of_analysis(analysis))
    at = printed.index(lines[0])
    assert printed[at:at + len(lines)] == lines and printed[at + len(lines)].startswith("esbperf: report in ")


# --- the graphs ------------------------------------------------------------------------------------

def readable(ax, value: float) -> bool:
    """Whether `value` can be read off the axis to within 10 %: the gridlines around it at most 1.5×
    apart and 8 px or more apart on screen (so the eye interpolates between near values), and 10 %
    more moving the point by 4 px or more."""
    bottom, top = ax.get_ylim()
    lines = sorted({v for v in [*ax.yaxis.get_majorticklocs(), *ax.yaxis.get_minorticklocs()] if bottom <= v <= top})
    below, above = [v for v in lines if v <= value], [v for v in lines if v > value]
    if not below or not above:
        return False

    def px(v: float) -> float:
        return ax.transData.transform((1.0, v))[1]
    low, high = below[-1], above[0]
    return (low > 0 and high / low <= 1.5 and px(high) - px(low) >= 8
            and px(value * 1.1) - px(value) >= 4)


def test_the_payload_graph_reads_camels_tps_beside_a_baseline_14_times_faster(demo):
    _, analysis = demo
    [tps] = [g for g in analysis.graphs if g.name.endswith("-tps-vs-payload")]
    assert tps.thesis and tps.yscale == "log" and tps.title.endswith("(log scale)")
    series = {s.label: s for s in tps.panels[0].series}
    assert series["direct"].y[0] / series["camel"].y[0] > 10
    fig = graphs.figure(tps, graphs._colors(analysis.graphs))
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    for label in ("camel", "direct"):
        assert readable(ax, series[label].y[0]), label          # at 1 KB
    labelled = [t.get_text() for t in ax.yaxis.get_minorticklabels() + ax.yaxis.get_majorticklabels()]
    assert {"2,000", "5,000", "10,000", "50,000"} <= set(labelled)
    # On the linear axis it had, Camel's 1 KB point could not be read so.
    tps.yscale, tps.ymin = "linear", 0.0
    linear = graphs.figure(tps, graphs._colors(analysis.graphs))
    FigureCanvasAgg(linear).draw()
    assert not readable(linear.axes[0], series["camel"].y[0])


def test_hosts_that_share_cores_are_drawn_once(demo, tmp_path):
    _, analysis = demo
    assert graphs.cpu_groups(analysis.runs, analysis.roles) == [("client", "ws1", "ws2", "ws3"), ("esb",)]
    cpu = [g for g in analysis.graphs if re.search(r"-cpu-vs-", g.name) and "process-cpu" not in g.name]
    assert len(cpu) == 3                                  # one per plan
    for g in cpu:
        assert [p.title for p in g.panels] == ["client, ws1, ws2, ws3\n(shared cores: one figure)", "esb"]
        curves = [[(s.label, s.y) for s in p.series] for p in g.panels]
        assert len({json.dumps(c) for c in curves}) == len(curves)       # no curve twice
    # Hosts on cores of their own stay a panel each.
    own_dir = synthetic.write_run(tmp_path / "own", "camel")
    synthetic.write_step(synthetic.step_dir(own_dir, "proxy", "1KB", 1, 1), "proxy", "camel", 1024, "1KB", 1, 1)
    own = load_run(own_dir)
    assert graphs.cpu_groups([own], own.roles) == [(role,) for role in own.roles]


# --- the page --------------------------------------------------------------------------------------

def test_the_verdict_matrix_holds_every_verdict(demo):
    out, _ = demo
    text = (out / "report.html").read_text()
    verdicts = pl.read_csv(out / "verdicts.csv", infer_schema_length=None)
    matrix = text[text.index('<figure id="verdict-matrix"'):text.index("</figure>", text.index('id="verdict-matrix"'))]
    cells = re.findall(r'<td class="verdict( marked)?" data-verdict="(\d+)" title="([^"]*)">([^<]*)</td>', matrix)
    assert sorted(int(n) for _, n, _, _ in cells) == list(range(verdicts.height))       # each once
    for marked, n, title, shown in cells:
        r = verdicts.row(int(n), named=True)
        assert html.unescape(title) == r["sentence"]
        invalid, bounded = r["valid_a"] != "yes" or r["valid_b"] != "yes", bool(r["bound_note"])
        assert bool(marked) == (invalid or bounded)
        assert shown.endswith(("*" if invalid else "") + ("†" if bounded else ""))
        value = html.unescape(shown).rstrip("*†")
        if r["shown"] is None:                # not judged: no interval, or a testbed bound hides it
            assert value == page.NOT_JUDGED
        elif not r["shown"]:
            assert value == page.NO_DIFFERENCE
        else:                     # camel against direct: B ÷ A − 1, the verdict's ratio turned over
            assert value == page._ratio_cell(1 / r["ratio"], 1 / r["ratio_high"], 1 / r["ratio_low"])
    assert "demo-payload: camel against direct" in matrix and "1KB · 1 user" in matrix
    assert re.search(r">−9[234] % \(", matrix)            # Camel's TPS at 1 KB, against direct's: 14 times less
    # The sentences are folded below, all of them.
    assert f"<summary>The {verdicts.height} verdicts in words</summary>" in text


PROBE = """<script>
window.addEventListener("load", () => {
  const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
                     return {top: r.top + scrollY, bottom: r.bottom + scrollY, width: r.width}; };
  const result = document.createElement("pre");
  result.id = "probe-result";
  result.textContent = JSON.stringify({
    width: innerWidth, height: document.documentElement.scrollHeight,
    headline: box(document.querySelector("#headline")),
    graph: box(document.querySelector("#graphs figure img")),
    graphAlt: (document.querySelector("#graphs figure img") || {}).alt,
    matrix: box(document.querySelector("#verdict-matrix .matrix-box")),
    ids: [...document.querySelectorAll("[id]")].map(e => e.id)});
  document.body.appendChild(result);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it)")
def test_the_first_screen_holds_the_headline_a_thesis_graph_and_the_verdicts(demo, tmp_path):
    out, analysis = demo
    assert "<script" not in (out / "report.html").read_text()
    seen = render_with_probe(out, tmp_path, PROBE, FIRST_SCREEN)
    assert seen["width"] == FIRST_SCREEN[0]
    for part in ("headline", "graph", "matrix"):
        assert seen[part] and seen[part]["bottom"] <= FIRST_SCREEN[1], (part, seen[part])
    assert seen["graphAlt"] == "proxy: throughput vs payload size (log scale)"
    assert seen["matrix"]["width"] >= 500                  # beside the graph, not squeezed
    # Less than half as long as it was, the detail one click or link away.
    assert seen["height"] <= PAGE_BEFORE_PX / 2, seen["height"]
    ids = set(seen["ids"])
    assert {"validity", "verdicts", "verdict-sentences", "runs", "calibration", "graphs"} <= ids
    assert {graphs.slug(f"{plan}-proxy") for plan in analysis.plans} <= ids
    assert {f"hosts-{graphs.slug(f'{plan}-proxy')}" for plan in analysis.plans} <= ids
    assert {g.name for g in analysis.graphs} <= ids        # every graph is on the page


def test_an_interval_wide_past_sense_is_said_to_say_nothing():
    """The demo of 2026-11-28 printed "99.8 %: 1.5e-30 % to 2889333684631335469031319507304448×" for a
    ratio over one unit at a family's level."""
    from esbperf.analysis import headline
    wild = headline.Ratio("p50", 6.5, 1.5e-32, 2.9e33, 2, 0.998)
    assert headline._ratio_interval(wild) == "99.8 %: too few units for an interval that says anything"
    assert headline._ratio_interval(headline.Ratio("p50", 6.5, 6.0, 7.0, 3, 0.95)) == "95 %: 6–7×"
