"""A round's folder (`esbperf round`, docs/round-2/): reading it as the page and the comparison read
it (`load`, RoundData), and packing what a published round keeps of its raw data (`pack_hlogs`,
`collect_capacity`).

A round folder holds what `esbperf round` ran (round.json: its parts and their runs under runs/),
the verification of every answer before measuring (verification.csv), the report of its closed
runs (report/: summary.csv, aggregate.csv, graphs, HdrHistogram logs), and its capacity searches
(capacity/: capacity.csv, probes.csv, graphs). A published round (docs/round-2/) holds the same
files but the raw data logs."""
from __future__ import annotations

import csv
import gzip
import json
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import polars as pl

from esbperf.analysis.runs import BASELINE_TARGET
from esbperf.analysis.stats import StepHistograms
from esbperf.core.errors import EsbperfError
from esbperf.core.plan import parse_size
from esbperf.results.histogram import Histogram

ROUND_FILE = "round.json"
VERIFICATION = "verification.csv"
REPORT = "report"
CAPACITY = "capacity"
PAGE = "README.md"
COMPARISON = "compare.csv"
VERDICTS_COMPARED = "compare-verdicts.csv"   # a rerun's verdicts beside the published round's
RERUNS = "reruns.csv"                        # one verdict's outcome in each of several reruns
FIGURES = "figures.csv"       # the page's figures, one row each
VERDICTS = "verdicts.csv"     # the page's verdicts: every pair of targets, per figure
CONTROL = "control.csv"       # the control pair's verdicts
HLOG_ARCHIVE = "hlog.tar.gz"  # report/: the HdrHistogram logs a published round keeps
# round.json `verdict_steps`: the rule a round's verdicts follow, recorded with it — only steps no validity
# warning spoils and the testbed did not bound (analysis/round/pair_verdicts.py). Every round `esbperf round`
# runs records it; Round 1's published page predates it and is kept as it was published.
STRICT_STEPS = "valid and not bounded by the testbed"
# A part of a round whose steps are the control pair's second side (esbperf/core/rounds.py), kept apart
# from the round's figures.
CONTROL_KIND = "control"
# The order targets are shown and paired in: the baseline, the floors, the reference engine, the ESBs.
KIND_ORDER = {BASELINE_TARGET: 0, "floor": 1, "reference": 1.5, "ESB": 2}


# --- reading a round folder ---------------------------------------------------------------------

@dataclass
class RoundData:
    """A round folder as read (load), with what is computed from it once: its histograms, figures and
    verdicts."""

    dir: Path
    info: dict                # round.json
    summary: pl.DataFrame     # report/summary.csv: closed-model steps, one row per iteration
    aggregate: pl.DataFrame   # report/aggregate.csv: iterations pooled
    capacity: pl.DataFrame | None
    runs: dict[str, dict]     # run.json of every run, by run name
    verification: pl.DataFrame | None
    # The control pair's second side (the round's `control` parts), kept apart from the figures.
    control_summary: pl.DataFrame | None = None
    control_aggregate: pl.DataFrame | None = None
    report: Path | None = None   # the report read (default: the round's REPORT; a look's, mid-round)
    _histograms: dict | None = field(default=None, repr=False)
    _figures: list | None = field(default=None, repr=False)
    _verdicts: pl.DataFrame | None = field(default=None, repr=False)

    def histograms(self) -> dict[tuple, StepHistograms]:
        """Each closed step's response times by summary.csv's (run, step_dir, test): from the report's
        histograms.csv, else (a published round) its HdrHistogram logs, at the buckets' resolution;
        {} without either (percentiles then have no interval)."""
        if self._histograms is None:
            raw = _raw_histograms(self.report or self.dir / REPORT)
            self._histograms = {}
            frames = [f for f in (self.summary, self.control_summary) if f is not None]
            for r in pl.concat([f.select("run", "step_dir", "test") for f in frames]).iter_rows(named=True):
                h = raw.get((r["run"], r["step_dir"], r["test"])) or raw.get((r["run"], r["step_dir"], None))
                if h is not None:
                    self._histograms[(r["run"], r["step_dir"], r["test"])] = StepHistograms(response=h)
        return self._histograms

    def scenarios(self) -> list[str]:
        """The scenarios in the order the round's plans list them (then any other, by name)."""
        ordered = [s for r in self.runs.values() for s in (r.get("plan") or {}).get("scenarios") or []]
        found = set(self.summary["scenario"]) | (set(self.capacity["scenario"]) if self.capacity is not None else set())
        return list(dict.fromkeys(ordered + sorted(found)))

    def reference(self) -> str | None:
        """The target that is the round's measuring standard: round.json `reference`, else the target
        whose engine is of kind `reference`; None without one."""
        named = self.info.get("reference")
        if named:
            return named
        return next((t for t, k in self.kinds().items() if k == "reference"), None)

    def kinds(self) -> dict[str, str]:
        """Each target's kind: `direct`, or its engine's (ESB, floor, reference) as the runs recorded it."""
        engines: dict[str, str] = {}
        kinds: dict[str, str] = {}
        for record in self.runs.values():
            engines.update({name: e.get("kind", "ESB") for name, e in (record.get("engines") or {}).items()})
            for t in record.get("targets") or []:
                kinds[t["name"]] = BASELINE_TARGET if t.get("kind") == "direct" else engines.get(t.get("esb"), "ESB")
        return kinds


def _raw_histograms(report: Path) -> dict[tuple, Histogram]:
    table, archive = report / "histograms.csv", report / HLOG_ARCHIVE
    if table.is_file():
        frame = pl.read_csv(table, schema_overrides={"test": pl.Int64, "value_us": pl.Int64, "count": pl.Int64})
        out = {}
        for (run, step_dir, test), g in frame.filter(pl.col("kind") == "response").group_by(
                ["run", "step_dir", "test"]):
            g = g.sort("value_us")
            lows, counts = g["value_us"].to_list(), g["count"].to_list()
            h = Histogram()
            h.add_buckets(lows, counts, [0] * len(lows), [0] * len(lows), lows[0], lows[-1])
            out[(run, step_dir, test)] = h
        return out
    if archive.is_file():
        from esbperf.analysis.hlog import read_archive
        return read_archive(archive)
    return {}


def _csv(path: Path) -> pl.DataFrame | None:
    return pl.read_csv(path, infer_schema_length=None) if path.is_file() else None


def load(folder: Path, report: Path | None = None) -> RoundData:
    """A round folder, or a published round, as the page and the comparison read it; with `report`,
    that report of its closed runs rather than its own (a look at the round before it ends)."""
    folder = Path(folder)
    info_file = folder / ROUND_FILE
    if not info_file.is_file():
        raise EsbperfError(f"{folder}: not a round folder (no {ROUND_FILE}; `esbperf round` writes one)")
    info = json.loads(info_file.read_text())
    read = report or folder / REPORT
    summary, aggregate = _csv(read / "summary.csv"), _csv(read / "aggregate.csv")
    if summary is None or aggregate is None:
        raise EsbperfError(f"{folder}: the round has no report of its closed runs ({REPORT}/summary.csv and "
                           f"{REPORT}/aggregate.csv); was it stopped before its closed runs ended?")
    runs = {}
    for part in info.get("parts") or []:
        run_file = folder / str(part.get("run") or "") / "run.json"
        if part.get("run") and run_file.is_file():
            runs[Path(part["run"]).name] = json.loads(run_file.read_text())
    summary, aggregate = _with_bounds(summary, aggregate)
    closed = summary.filter(pl.col("model") == "closed")
    aggregate = aggregate.filter(pl.col("model") == "closed")
    controls = [Path(p["run"]).name for p in info.get("parts") or [] if p.get("kind") == CONTROL_KIND and p.get("run")]
    of_control = pl.col("run").cast(pl.String).str.split("/").list.last().is_in(controls)
    return RoundData(folder, info, closed.filter(~of_control), aggregate.filter(~of_control),
                     _csv(folder / CAPACITY / "capacity.csv"), runs, _csv(folder / VERIFICATION),
                     closed.filter(of_control) if controls else None,
                     aggregate.filter(of_control) if controls else None, report)


def published_round(folder: Path) -> RoundData | None:
    """The round published in `folder`, or None when it has none yet."""
    if not (Path(folder) / ROUND_FILE).is_file():
        return None
    return load(folder)


def _with_bounds(summary: pl.DataFrame, aggregate: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A report from before steps had a bound (no `bound` column: Round 1's) given what its columns
    tell of one (bottleneck.legacy_bound: the client, a link, or unknown), per iteration and, as
    the analysis pools it, per step."""
    if "bound" in summary.columns or "client_bound" not in summary.columns:
        return summary, aggregate
    from esbperf.analysis.bottleneck import legacy_bound, pooled_bound
    kinds = [legacy_bound(r.get("client_bound"), r.get("bottlenecks"))
             for r in summary.select("client_bound", *(["bottlenecks"] if "bottlenecks" in summary.columns else []))
             .iter_rows(named=True)]
    summary = summary.with_columns(bound=pl.Series(kinds, dtype=pl.String))
    keys = [k for k in ("run", "scenario", "target", "payload_bytes", "users", "model", "rate", "test")
            if k in summary.columns and k in aggregate.columns]
    by_step: dict[tuple, list] = {}
    for key, kind in zip(summary.select(keys).iter_rows(), kinds):
        by_step.setdefault(key, []).append(kind)
    pooled = [pooled_bound(by_step.get(key, []))[0] for key in aggregate.select(keys).iter_rows()]
    return summary, aggregate.with_columns(bound=pl.Series(pooled, dtype=pl.String))


def payload_bytes(label: str) -> int:
    """A payload label's bytes (1KB: 1024); 0 for a label that names no size."""
    try:
        return parse_size(label)
    except ValueError:
        return 0


def in_order(targets: Iterable[str], kinds: dict[str, str]) -> list[str]:
    """The targets in KIND_ORDER, by name within a kind."""
    return sorted(set(targets), key=lambda t: (KIND_ORDER.get(kinds.get(t, "ESB"), 2), t))


def ranks(kinds: dict[str, str]) -> dict[str, int]:
    """Each target's place in in_order (a sort key for pairs and rows)."""
    return {t: i for i, t in enumerate(in_order(kinds, kinds))}


# --- the round's files ----------------------------------------------------------------------------

def _as_published(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A member without who wrote it or when (the logs carry their own times): the same logs pack to
    the same bytes, so publishing a round again changes nothing in git."""
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def pack_hlogs(report: Path) -> Path | None:
    """The report's HdrHistogram logs (hlog/) as one compressed archive beside them, hlog.tar.gz:
    what a published round keeps of its raw data; the same logs give the same archive, byte for byte."""
    from esbperf.analysis.hlog import FOLDER
    source = Path(report) / FOLDER
    if not source.is_dir():
        return None
    out = Path(report) / HLOG_ARCHIVE
    partial = out.with_name(f".{out.name}.partial")
    with partial.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as packed, \
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for f in sorted(source.rglob("*")):
            if f.is_file():
                archive.add(f, arcname=f.relative_to(source.parent).as_posix(), recursive=False,
                            filter=_as_published)
    partial.replace(out)
    return out


def collect_capacity(folder: Path, runs: list[Path]) -> Path:
    """The capacity searches of the round's capacity runs in one folder, capacity/: capacity.csv and
    probes.csv of every run (the latest tables each wrote: RUN/capacity/, capacity-2/, …; probes'
    step folders given from the round's folder) and their latency-against-rate graphs."""
    out = Path(folder) / CAPACITY
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    tables: dict[str, list[dict]] = {"capacity.csv": [], "probes.csv": []}
    columns: dict[str, list[str]] = {}
    for run in runs:
        written = sorted((p for p in Path(run).glob(f"{CAPACITY}*") if (p / "capacity.csv").is_file()),
                         key=lambda p: int(p.name.rpartition("-")[2]) if p.name != CAPACITY else 1)
        if not written:
            continue
        latest = written[-1]
        for name in tables:
            with open(latest / name, newline="") as f:
                reader = csv.DictReader(f)
                columns.setdefault(name, list(reader.fieldnames or []))
                for row in reader:
                    if "step_dir" in row:
                        row["step_dir"] = (Path(run).relative_to(folder) / row["step_dir"]).as_posix()
                    tables[name].append(row)
        for graph in latest.iterdir():
            if graph.suffix in (".png", ".svg"):
                shutil.copy2(graph, partial / graph.name)
    for name, rows in tables.items():
        with open(partial / name, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns.get(name) or ["target"])
            writer.writeheader()
            writer.writerows(rows)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out
