"""The package's layout holds: each layer imports only those below it (esbperf/__init__.py), and
the facts that used to be written in several places are written once."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# layer -> the layers it may import (besides itself)
ALLOWED = {
    "core": set(),
    "results": {"core"},
    "services": {"core"},
    "testbed": {"core", "services"},
    "run": {"core", "results", "services", "testbed"},
    "analysis": {"core", "results"},
    "cli": {"core", "results", "services", "testbed", "run", "analysis"},
}


def modules() -> list[tuple[str, Path]]:
    """(layer, file) of every module of the package."""
    found = [("analysis", p) for p in sorted((ROOT / "analysis").glob("*.py"))]
    found += [("analysis", p) for p in sorted((ROOT / "analysis").glob("*/*.py")) if p.parent.name != "bench"]
    for layer in ALLOWED:
        if layer != "analysis":
            found += [(layer, p) for p in sorted((ROOT / "esbperf" / layer).glob("*.py"))]
    return found


def imported_layers(path: Path) -> set[str]:
    layers = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "esbperf" and len(parts) > 1 and parts[1] in ALLOWED:
                layers.add(parts[1])
    return layers


@pytest.mark.parametrize("layer, path", modules(), ids=lambda v: str(v.relative_to(ROOT)) if isinstance(v, Path) else v)
def test_each_layer_imports_only_those_below_it(layer, path):
    wrong = imported_layers(path) - ALLOWED[layer] - {layer}
    assert not wrong, f"{path.relative_to(ROOT)} ({layer}) imports {sorted(wrong)}"


def _module_of(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":     # a package's own module (analysis/round/__init__.py: esbperf.analysis.round)
        parts.pop()
    return ".".join(["esbperf", *parts[1:]] if parts[0] == "esbperf" else ["esbperf", *parts])


def imported_modules(path: Path, known: set[str], inside_functions: bool = True) -> set[str]:
    """The package's modules a module imports: at its top, and with `inside_functions` inside a
    function too (what runs when called is an import all the same); `if TYPE_CHECKING:` blocks are
    left out (never run)."""
    tree = ast.parse(path.read_text())
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for n in ast.walk(node)}
    nodes = ast.walk(tree) if inside_functions else iter(tree.body)
    found = set()
    for node in nodes:
        if id(node) in skipped:
            continue
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found |= {name for name in names if name in known}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a graph (module -> modules it imports), each as a path back to its start."""
    state: dict[str, int] = {}
    found = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                found.append(path[path.index(n):] + [n])
            elif not state.get(n):
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m, [m])
    return found


def test_no_two_modules_import_each_other():
    """Defect 10 of issue 43: esbperf/cli/capacity.py and esbperf/cli/run.py imported each other,
    one of them inside a function. No cycle among the package's modules at their top; and none at
    any level among the commands (esbperf/cli), which call into each other: what they share lives
    in a module below them."""
    files = {_module_of(p): p for p in python_sources()}
    top = {m: imported_modules(p, set(files), inside_functions=False) - {m} for m, p in files.items()}
    assert cycles(top) == []
    commands = {m: p for m, p in files.items() if m.startswith("esbperf.cli.")}
    every = {m: imported_modules(p, set(commands)) - {m} for m, p in commands.items()}
    assert cycles(every) == [], " ; ".join(" -> ".join(c) for c in cycles(every))


def test_the_package_holds_only_its_layers():
    top = sorted(p.name for p in (ROOT / "esbperf").iterdir() if not p.name.startswith((".", "__pycache__")))
    assert top == sorted(["__init__.py", "__main__.py", *(layer for layer in ALLOWED if layer != "analysis")])


def python_sources() -> list[Path]:
    return [p for _, p in modules()]


# The Python beside the package: benchmarks, testbed helpers, the Grinder scripts.
OTHER_FOLDERS = ("agents", "console-config", "esb-projects", "grinder-scripts", "jaxws-echo")
CONTRACT = ROOT / "grinder-scripts" / "contract.py"   # where the back ends' names are written, once


def test_roles_are_defined_once():
    """The back ends' names, the fixed roles and the load-host pattern live in core/roles.py (the
    back ends read from the contract); no other module writes them again, nor does a benchmark."""
    repeated = re.compile(r"""["']ws1["']\s*,\s*["']ws2["']\s*,\s*["']ws3["']|load\(\[2-9\]|["']client["']\s*,\s*["']esb["']""")
    beside = [p for folder in OTHER_FOLDERS for p in sorted((ROOT / folder).rglob("*.py")) if p != CONTRACT]
    assert any(p.name == "bench_soak.py" for p in beside)
    offenders = [str(p.relative_to(ROOT)) for p in python_sources() + beside
                 if p.name != "roles.py" and repeated.search(p.read_text())]
    assert offenders == []


def test_one_data_log_reader_and_one_percentile():
    """Data logs are read by results/datalog.py and percentiles ranked by results/histogram.py alone."""
    offenders = [str(p.relative_to(ROOT)) for p in python_sources()
                 if p.name not in ("datalog.py", "histogram.py")
                 and re.search(r"def (read_columns|percentile|nearest_rank)\b", p.read_text())]
    assert offenders == []


def test_the_worker_property_list_is_one_file_both_sides_read():
    from esbperf.run import user_script
    java = (ROOT / "console-config/control-api/src/main/java/esbperf/console/WorkerProperties.java").read_text()
    assert "worker-properties.txt" in java and "grinder.sleepTimeFactor" not in java
    passed, by_runner = user_script.allowed_properties()
    assert "grinder.sleepTimeFactor" in passed and "grinder.threads" in by_runner
    assert not any(name.startswith("grinder.jvm") for name in passed | by_runner)
