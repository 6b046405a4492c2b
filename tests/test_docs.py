"""The docs' promises that name tests: every test a doc names exists, so a table such as
docs/faults.md's fault matrix cannot point at a test that was renamed or removed."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NAMED = re.compile(r"`(tests/test_\w+\.py)::(test_\w+)`")


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


DOCS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))


@pytest.mark.parametrize("doc", DOCS)
def test_every_test_a_doc_names_exists(doc):
    for file, name in NAMED.findall((ROOT / doc).read_text()):
        assert (ROOT / file).is_file(), f"{doc} names {file}, which does not exist"
        assert name in _test_names(ROOT / file), f"{doc} names {file}::{name}, which does not exist"


def test_the_fault_matrix_names_a_test_in_every_row():
    rows = [line for line in (ROOT / "docs" / "faults.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| fault")]
    assert len(rows) >= 25
    for row in rows:
        assert NAMED.search(row), f"a fault without a test: {row[:80]}"


FILE = re.compile(r"(?<![\w./-])((?:esbperf|analysis|grinder-scripts|agents|console-config|jaxws-echo|esb-projects|docs|"
                  r"tests)/[\w./-]+\.(?:py|md|yaml|java|xml|txt|xsl|properties))\b")
USERS_OWN = {"console-config/testbeds/mylab.yaml"}   # files a doc tells the user to make


@pytest.mark.parametrize("doc", ["README.md", "esb-projects/README.md", *DOCS])
def test_every_file_a_doc_names_exists(doc):
    """A doc that names a file of the checkout (a module, a plan, a test) names one that is there."""
    missing = sorted({name for name in FILE.findall((ROOT / doc).read_text()) if not (ROOT / name).exists()} - USERS_OWN)
    assert not missing, f"{doc} names files that do not exist: {missing}"
