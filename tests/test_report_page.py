"""report.html reads well: validity warnings in one line, grouped by kind under it with their steps folded,
tables that keep every header and label at least as wide as its longest word at 1400 px (headless
Chromium measures a copy of the page), and per-host graphs whose panels wrap into rows so that no
title or axis label runs into another (matplotlib's own renderer measures them).

The report is a real one: two synthetic runs of the thesis sweeps, two iterations each, with a
load host (load2) beside the five and many warnings (no warm-up, a network fault on every step,
hosts sharing CPUs)."""
from __future__ import annotations

import html
import itertools
import json
import math
import re
from types import SimpleNamespace

import polars as pl
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from conftest import CHROMIUM, render_with_probe
from esbperf.analysis import forks, graphs, page, synthetic, verdicts
from esbperf.analysis.report import build_report

PAGE_WIDTH_PX = 1250        # page.py's body max-width: a graph wider than this is shrunk


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """(report folder, analysis) of a direct and a camel run with a load2 host and many warnings."""
    root = tmp_path_factory.mktemp("page")
    runs = []
    for target, seed in (("direct", 2), ("camel", 3)):
        # 5-second steps without warm-up: both runs lack a warm-up.
        run = synthetic.thesis_run(root / f"{target}-run", target, rows_per_step=300, iterations=2, duration_s=5,
                                   warmup_s=0, seed=seed)
        info = json.loads((run / "run.json").read_text())
        info["hosts"]["load2"] = {"address": "198.18.0.11", "link_mbit": 1000, "cpus": []}   # shares CPUs
        (run / "run.json").write_text(json.dumps(info))
        for step_json in sorted(run.rglob("step.json")):
            meta = json.loads(step_json.read_text())
            meta["hosts"]["load2"] = {"address": "198.18.0.11", "link_mbit": 1000}
            meta["network_faults"] = [{"host": "esb", "description": "loss 5%", "loss_percent": 5}]
            step_json.write_text(json.dumps(meta))
            synthetic.write_monitor(step_json.parent, "load2", meta["start_ms"], meta["warmup_end_ms"], meta["end_ms"],
                                    cpu_percent=30.0, rx_mbit=meta["users"] * 2.0, tx_mbit=meta["users"] * 2.0)
        runs.append(run)
    return build_report(runs, root / "report", compare=True)


# --- the validity warnings -----------------------------------------------------------------------

def test_warnings_are_grouped_by_kind_with_their_steps_folded(report):
    out, analysis = report
    html_text = (out / "report.html").read_text()
    section = html_text[html_text.index('<div id="validity" class="warnings">'):html_text.index('<h2 id="verdicts">')]
    kinds = {w.kind for w in analysis.warnings}
    # One line: how many warnings, their kinds, how many steps they make invalid; the rest folded under it.
    line = re.search(r'<details><summary><span class="count">(\d+) validity warnings</span> \((.*?)\); (\d+) of '
                     r'(\d+) steps not valid', section)
    assert line and int(line.group(1)) == len(analysis.warnings) and set(line.group(2).split(", ")) == kinds
    assert (int(line.group(3)), int(line.group(4))) == (
        analysis.aggregate.filter(analysis.aggregate["valid"] != "yes").height, analysis.aggregate.height)
    assert {"network-faults", "no-warm-up", "shared-cpus"} <= kinds
    folded = re.findall(r'<details id="validity-([\w-]+)"><summary><span class="count">(\d+) (\w+)</span>: (.*?)'
                        r'</summary><ul>(.*?)</ul></details>', section)
    assert sorted(kind for kind, *_ in folded) == sorted(kinds)          # one fold per kind
    found = {kind: (int(count), unit, what, re.findall(r"<li>(.*?)</li>", items))
             for kind, count, unit, what, items in folded}
    count, unit, what, steps = found["network-faults"]
    assert (count, unit) == (40, "steps") and len(steps) == 40 and len(set(steps)) == 40   # every step, listed
    assert what.startswith("Steps ran while a network fault was emulated") and "it2 (esb:loss 5%)" in steps[-1]
    assert found["no-warm-up"][:2] == (2, "runs") and found["no-warm-up"][3] == ["direct-run", "camel-run"]
    # The terminal keeps one line per warning: the first steps named, the others counted.
    [faults] = [w for w in analysis.warnings if w.kind == "network-faults"]
    assert faults.startswith("40 step(s) ran while a network fault") and faults.endswith("; and 32 more")


def test_a_warning_without_a_kind_is_shown_whole():
    # A warning given as plain text (no ValidityWarning) is a kind of its own, shown in full.
    section = page._warnings_section(SimpleNamespace(warnings=["Something odd <here>."]))
    assert '<p id="validity-warning-0">Something odd &lt;here&gt;.</p>' in section
    assert "<details id=\"validity-" not in section and "1 validity warning</span> (other)" in section


# --- the verdict matrix ----------------------------------------------------------------------------

def _verdicts_of_every_outcome() -> pl.DataFrame:
    """verdicts.csv's rows, one of each outcome a verdict can have (verdicts.verdict), judged as one
    family: a difference, one "at least" (the better side bounded by the testbed), no difference, not
    judged for want of an interval, not judged for a testbed bound; and one on a side not valid."""
    def found(value, se=None, why=""):
        low, high = (None, None) if se is None else (value * math.exp(-4 * se), value * math.exp(4 * se))
        return forks.Interval(value, low, high, 3, 3, None if se is None else 2.0, False, se, True, why)

    cases = [("difference", found(2.0, 0.02), (None, None), "yes"),
             ("at least", found(2.0, 0.02), ("client", None), "yes"),
             ("no difference", found(1.01, 0.05), (None, None), "yes"),
             ("no interval", found(1.5, why="one iteration a side"), (None, None), "yes"),
             ("hidden by a bound", found(0.5, 0.02), ("client", None), "yes"),
             ("not valid", found(1.01, 0.05), (None, None), "drift")]
    pending = []
    for users, (_, interval, bounds, valid) in enumerate(cases, 1):
        note = "camel's step was bounded by the client" if any(bounds) else ""
        row = {"plan": "p", "scenario": "proxy", "payload_bytes": 1024, "payload_label": "1KB", "users": users,
               "model": "closed", "rate": None, "test": None, "figure": "tps", "a": "camel", "b": "synapse",
               "a_run": "r", "a_target": "camel", "b_run": "r", "b_target": "synapse", "bound_a": bounds[0],
               "bound_b": bounds[1], "valid_a": valid, "valid_b": "yes", "bound_note": note}
        pending.append(verdicts.Pending(row, "tps", interval, note, bounds))
    return verdicts.judged(pending)


def test_the_verdict_matrix_draws_each_outcome_with_its_own_sign(tmp_path):
    """A difference is its change; no difference shown ≈; not judged – (for want of an interval or
    because a testbed bound hides it: the page of 2026-12-07 drew that ≈†); the marks after them. The
    same from verdicts.csv as written and read back, and the legend names each sign."""
    judged = _verdicts_of_every_outcome()
    judged.write_csv(tmp_path / "verdicts.csv")
    read_back = pl.read_csv(tmp_path / "verdicts.csv", infer_schema_length=None)
    for frame in (judged, read_back):
        cells = {int(n): html.unescape(text) for n, text in
                 re.findall(r'<td class="verdict[^"]*" data-verdict="(\d+)" title="[^"]*">([^<]*)</td>',
                            page.verdict_matrix(frame))}
        assert [r["short"].split(" (")[0].split(" by ")[0] for r in frame.iter_rows(named=True)] == [
            "camel", "camel", "none shown", "not judged", "not judged", "none shown"]
        assert cells[0] == page.verdict_cell(frame.row(0, named=True))[0] and cells[0].startswith("−")
        assert cells[1].startswith("−") and cells[1].endswith(page.BOUNDED_MARK)     # at least: a change, bounded
        assert cells[2] == page.NO_DIFFERENCE
        assert cells[3] == page.NOT_JUDGED
        assert cells[4] == page.NOT_JUDGED + page.BOUNDED_MARK
        assert cells[5] == page.NO_DIFFERENCE + page.INVALID_MARK
    assert len({page.NO_DIFFERENCE, page.NOT_JUDGED, page.INVALID_MARK, page.BOUNDED_MARK}) == 4
    legend = page.matrix_legend(judged)
    for sign, meaning in ((page.NO_DIFFERENCE, "no difference shown"), (page.NOT_JUDGED, "not judged"),
                          (page.INVALID_MARK, "a side not valid"), (page.BOUNDED_MARK, "a side bounded by the testbed")):
        assert f"{sign} {meaning}" in legend
    level = verdicts.percent_level(judged["confidence"].max())
    assert level != "95 %" and f"with its interval at {level} (the family's level)" in legend


# --- the page at 1400 px in a real browser ---------------------------------------------------------

# Appended to a copy of the page: writes what it measures into the DOM, which --dump-dom prints.
PROBE = """<script>
window.addEventListener("load", () => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });   // what is folded is measured too
  const context = document.createElement("canvas").getContext("2d");
  const wordWidth = (word, cell) => {
    const s = getComputedStyle(cell);
    context.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    return context.measureText(word).width;
  };
  const cells = [...document.querySelectorAll("th, td.text")].map(cell => {
    const s = getComputedStyle(cell);
    const words = cell.textContent.split(/\\s+/).filter(Boolean);
    return {text: cell.textContent.slice(0, 60), tag: cell.tagName,
            width: cell.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight),
            longest: Math.max(0, ...words.map(w => wordWidth(w, cell)))};
  });
  const images = [...document.images].map(i => ({alt: i.alt, shown: i.clientWidth, natural: i.naturalWidth}));
  const result = document.createElement("pre");
  result.id = "probe-result";
  result.textContent = JSON.stringify({cells, images, body: document.body.clientWidth,
                                       scrolls: document.documentElement.scrollWidth > window.innerWidth});
  document.body.appendChild(result);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it)")
def test_at_1400_px_no_header_or_label_is_narrower_than_its_longest_word(report, tmp_path):
    out, _ = report
    assert "<script" not in (out / "report.html").read_text()        # the page itself stays script-free
    measured = render_with_probe(out, tmp_path, PROBE, (1400, 2000))
    assert measured["body"] == PAGE_WIDTH_PX and not measured["scrolls"]   # wide tables scroll in their own box
    cells = measured["cells"]
    assert len(cells) > 150 and {"series", "payload", "marks", "camel", "100KB"} <= {c["text"] for c in cells}
    squeezed = [c for c in cells if c["width"] + 0.5 < c["longest"]]
    assert not squeezed, squeezed[:10]
    # Graphs are shown at (about) their own size: a row of six host panels used to be shrunk to 63 %.
    assert len(measured["images"]) == 11
    for image in measured["images"]:
        assert image["natural"] <= PAGE_WIDTH_PX and image["shown"] >= 0.9 * image["natural"], image


# --- the per-host graphs ---------------------------------------------------------------------------

def test_per_host_panels_wrap_into_rows_and_no_title_or_label_overlaps(report):
    _, analysis = report
    colors = graphs._colors(analysis.graphs)
    hosts = [g for g in analysis.graphs if g.name in ("proxy-network-vs-users", "proxy-cpu-vs-payload")]
    assert [len(g.panels) for g in hosts] == [6, 6]                   # client, load2, esb, ws1, ws2, ws3
    assert "load2 (link 1000 Mbit/s)" in [p.title for p in hosts[1].panels]
    for graph in analysis.graphs:
        fig = graphs.figure(graph, colors)
        renderer = FigureCanvasAgg(fig).get_renderer()
        frame = fig.bbox
        texts = [t for t in fig.texts if t.get_text()]                 # title, shared axis labels
        for ax in fig.axes:
            texts += [t for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_text()]
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
        for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
            assert not box_a.overlaps(box_b), f"{graph.name}: {a!r} overlaps {b!r}"
        for text, box in boxes:
            assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, f"{graph.name}: {text!r} is cut off"
        widths = [ax.get_window_extent(renderer).width for ax in fig.axes]
        assert frame.width <= PAGE_WIDTH_PX and min(widths) >= 250, (graph.name, frame.width, widths)
        if graph in hosts:
            rows = {round(ax.get_window_extent(renderer).y0) for ax in fig.axes}
            assert len(rows) == 2, graph.name                         # six panels: two rows of three
