"""A public round's page and its comparison with the published one (`esbperf round`, docs/round-2/):
the round folder read (`folder`), its headline figures with their noise (`headline_figures`), a verdict
for every pair of targets under one rule and one family (`pair_verdicts`), the machine and the reference
engine's speed on it (`machine_speed`), the Markdown page (`markdown_tables`, `markdown_page`), and a
rerun against the published round or several runs against each other (`comparison`).

What the commands use is named here: `from esbperf.analysis import round as pages`, then `pages.load`,
`pages.write_page`, …"""
from esbperf.analysis.round.comparison import (agreement, compare, compare_verdicts, comparison_lines, outcome,
                                               rerun_agreement, rerun_lines, verdict_lines, within_noise,
                                               write_comparison)
from esbperf.analysis.round.folder import (CAPACITY, COMPARISON, CONTROL, CONTROL_KIND, FIGURES, HLOG_ARCHIVE, PAGE,
                                           REPORT, RERUNS, ROUND_FILE, STRICT_STEPS, VERDICTS, VERDICTS_COMPARED,
                                           VERIFICATION, RoundData, collect_capacity, load, pack_hlogs,
                                           published_round)
from esbperf.analysis.round.headline_figures import (ABSOLUTE, ADDED_MS, CAPACITY_RATE, CAPACITY_VS_FLOOR, PER_CORE,
                                                     RATIO_KINDS, VS_DIRECT, VS_ENGINE, VS_FLOOR, VS_REFERENCE, Figure,
                                                     figures, figures_frame, kept)
from esbperf.analysis.round.machine_speed import Machine, machine, machine_differences
from esbperf.analysis.round.markdown_page import (DEFAULT_ROUND, END, START, _sharing, control_text, cross_check_text,
                                                  fill, limits_text, page, reference_text, skeleton_text,
                                                  verdicts_intro, write_page)
from esbperf.analysis.round.pair_verdicts import control_verdicts, repetition_lines, verdicts

__all__ = [
    "ABSOLUTE", "ADDED_MS", "CAPACITY", "CAPACITY_RATE", "CAPACITY_VS_FLOOR", "COMPARISON", "CONTROL", "CONTROL_KIND",
    "DEFAULT_ROUND", "END", "FIGURES", "HLOG_ARCHIVE", "PAGE", "PER_CORE", "RATIO_KINDS", "REPORT", "RERUNS",
    "ROUND_FILE", "START", "STRICT_STEPS", "VERDICTS", "VERDICTS_COMPARED", "VERIFICATION", "VS_DIRECT", "VS_ENGINE",
    "VS_FLOOR", "VS_REFERENCE", "Figure", "Machine", "RoundData", "agreement", "collect_capacity", "compare",
    "compare_verdicts", "comparison_lines", "control_text", "control_verdicts", "cross_check_text", "figures",
    "figures_frame", "fill", "kept", "limits_text", "load", "machine", "machine_differences", "outcome", "pack_hlogs",
    "page", "published_round", "reference_text", "repetition_lines", "rerun_agreement", "rerun_lines",
    "skeleton_text", "verdict_lines", "verdicts", "verdicts_intro", "within_noise", "write_comparison", "write_page",
]
