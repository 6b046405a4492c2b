"""Bad input at volume (issue 14): thousands of mutated plans (and, below, testbed files, data logs and
monitor files), each either accepted whole or refused with ONE line that names the file and the
problem — never a traceback, never a half-written result.

Hypothesis generates the mutations: field-level ones (a field given a value of any type or shape)
and byte-level ones (the YAML text cut short, bytes inserted, replaced or dropped)."""
from __future__ import annotations

import math
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import check_one_line, mutate
from esbperf.core import plan as plans
from esbperf.core.errors import EsbperfError

SCRATCH = Path(tempfile.mkdtemp(prefix="esbperf-bad-input-"))
FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

VALID_PLAN = {"name": "fuzz", "scenarios": ["proxy", "cbr"], "payloads": ["1KB", "100KB"], "users": [1, 20],
              "duration_s": 5, "warmup_s": 2, "iterations": 2, "keepalive": True, "timeout_s": 10,
              "max_threads_per_process": 100}

# Any YAML value: scalars of every kind, and lists and mappings of them.
scalars = (st.none() | st.booleans() | st.integers(min_value=-10**20, max_value=10**20)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20)
           | st.sampled_from(["1KB", "0.5KB", "abc", "", "proxy", "-5", "1e3", "100 KB", "1MB", "∞", "\t"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                                 max_size=3),
                      max_leaves=8)
# Field names: the plan's own, near misses, and any text (a line break in a name must not break
# the message's line).
field_names = st.sampled_from([*plans.FIELDS, "colour", "", "users ", "Rates"]) | st.text(max_size=6)


def usable(plan: plans.Plan) -> None:
    """A plan that loads can be planned: steps, the users split, its record and back."""
    steps = plan.steps(["camel", "direct"])
    assert steps and all(s.users >= 1 and s.payload_bytes >= 1 for s in steps)
    for s in steps[:50]:
        processes, threads = plan.processes_threads(s.users, 2)
        assert processes >= 1 and threads >= 1 and processes * threads * 2 >= s.users
        assert s.rate is None or (s.rate > 0 and math.isfinite(s.rate))
    again = plans.Plan.from_dict(plan.to_dict(), "run.json (plan)")
    assert again.steps(["camel", "direct"]) == steps


@FUZZ
@given(changes=st.dictionaries(field_names, values, min_size=1, max_size=3),
       dropped=st.lists(st.sampled_from(list(VALID_PLAN)), max_size=2))
@example(changes={"capacity": {"\n": None}}, dropped=[])      # Hypothesis found it: a name with a line break
@example(changes={"users\r\n": 1}, dropped=[])
@example(changes={"forks": 10**20}, dropped=[])   # a local run found it: listing its steps took 23 GB
@example(changes={"iterations": 10**15}, dropped=[])
def test_plans_with_fields_of_any_value_load_or_fail_in_one_line(changes, dropped):
    data = {k: v for k, v in VALID_PLAN.items() if k not in dropped}
    data.update(changes)
    path = SCRATCH / "fields.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    plan = check_one_line(path, plans.load, first=True)
    if plan is not None:
        usable(plan)


VALID_TEXT = yaml.safe_dump(VALID_PLAN, sort_keys=False).encode()


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(VALID_TEXT)),
       edits=st.lists(st.tuples(st.integers(min_value=0, max_value=len(VALID_TEXT)),
                                st.sampled_from(["insert", "replace", "delete"]),
                                st.binary(min_size=1, max_size=3) | st.sampled_from([b":", b"-", b"\t", b"[", b"{",
                                                                                       b"\xff", b"'", b"\n  ", b"&a"])),
                      max_size=4))
def test_plans_cut_short_or_garbled_load_or_fail_in_one_line(cut, edits):
    path = SCRATCH / "garbled.yaml"
    path.write_bytes(mutate(VALID_TEXT, (cut, edits)))
    plan = check_one_line(path, plans.load, first=True)
    if plan is not None:
        usable(plan)


@pytest.mark.parametrize("text", [b"", b"\xff\xfe", b"users: [1\n", b"- a\n- b\n", b"scenarios: !!python/object:os.system x",
                                  b"rates: [.nan]\nscenarios: [proxy]\npayloads: [1KB]\nduration_s: 1\n"])
def test_the_command_line_says_one_line_and_exits_2(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_bytes(text)
    process = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(path), "--target", "direct",
                              "--dry-run"], capture_output=True, text=True)
    assert process.returncode == 2, process.stdout + process.stderr
    [line] = process.stderr.splitlines()
    assert line.startswith(f"esbperf: error: {path}"), line


@pytest.mark.parametrize("fields, message", [
    ({"users": [10, 10]}, r"users\[1\]: 10 is listed twice"),
    ({"payloads": ["1KB", 1024]}, r"payloads\[1\]: 1KB \(1024 bytes\) is listed twice \(also as .*payloads\[0\]"),
    ({"scenarios": ["proxy", "cbr", "proxy"]}, r"scenarios\[2\]: 'proxy' is listed twice"),
    ({"rates": [50, 50.0], "users": [4]}, r"rates\[1\]: 50.0 is listed twice"),
    ({"name": "../../x"}, r"field 'name' must be a plain name .* got '../../x'"),
    ({"name": ".hidden"}, r"field 'name' must be a plain name"),
    ({"name": "a/b"}, r"field 'name' must be a plain name"),
])
def test_a_plan_that_would_stop_midway_or_write_outside_out_is_refused_when_loaded(tmp_path, fields, message):
    """A second copy of a step is measured, then refused ("already exists") halfway through a run;
    a name with '/' or '..' puts the run folder outside --out (issue 23.7)."""
    path = tmp_path / "twice.yaml"
    path.write_text(yaml.safe_dump({**VALID_PLAN, **fields}))
    with pytest.raises(EsbperfError, match=rf"^{path}: {message}") as e:
        plans.load(path)
    assert "\n" not in str(e.value)


def test_a_plan_needing_more_worker_processes_than_agents_start_is_refused_by_a_dry_run(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump({**VALID_PLAN, "users": [100_000_000]}))
    process = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(path), "--target", "direct",
                              "--dry-run"], capture_output=True, text=True)
    assert process.returncode == 2, process.stdout + process.stderr
    [line] = process.stderr.splitlines()
    assert line.startswith(f"esbperf: error: {path}: 100000000 users need 1000000 worker processes of 100 threads "
                           "on each of the 1 load host(s)"), line
    assert "at most 16 (agents/agent.yaml max_worker_processes)" in line


def test_a_key_written_twice_is_refused_in_one_line_naming_it(tmp_path):
    """PyYAML keeps the last of two equal keys without a word: a plan saying `duration_s: 4` and
    further down `duration_s: 400` would run 400-second steps. A plan, a testbed file and the
    console's settings all go through one loader, which refuses it."""
    from esbperf.core import topology

    plan = tmp_path / "twice.yaml"
    plan.write_text("name: twice\nscenarios: [proxy]\npayloads: [1KB]\nusers: [1]\nduration_s: 4\n"
                    "warmup_s: 2\nduration_s: 400\n")
    with pytest.raises(EsbperfError) as e:
        plans.load(plan)
    assert str(e.value) == (f"{plan} line 7: not valid YAML (key 'duration_s' is written twice (first on line 5))")
    testbed = tmp_path / "bed.yaml"
    testbed.write_text("name: bed\nhosts:\n  client: {address: 127.0.0.1}\n  esb:\n    address: 127.0.0.1\n"
                       "    address: 198.18.0.20\n")
    with pytest.raises(EsbperfError, match=rf"^{testbed} line 6: not valid YAML \(key 'address' is written twice "
                                           r"\(first on line 5\)\)$"):
        topology.load(testbed)
    # The same key in two mappings is no repeat: every host has its `address`.
    testbed.write_text("name: bed\nhosts:\n  client: {address: 127.0.0.1}\n  esb: {address: 127.0.0.1}\n" + "".join(
        f"  {ws}: {{address: 127.0.0.1, echo_port: {port}}}\n" for ws, port in (("ws1", 1), ("ws2", 2), ("ws3", 3))))
    assert topology.load(testbed).hosts["ws3"].address == "127.0.0.1"


FOUR_HOSTS = "".join(f"  {role}: {{address: 127.0.0.1, echo_port: {port}}}\n"
                     for role, port in (("esb", 8280), ("ws1", 1), ("ws2", 2), ("ws3", 3)))


@pytest.mark.parametrize("kind, text", [
    ("plan", "name: x\nscenarios: [proxy]\npayloads: [1KB]\nduration_s: 5\nrates: [10]\ncapacity: {\"\\n\": 1}\n"),
    ("plan", "name: x\n\"a\\nb\": 1\n"),
    ("round", "\"\\n\": 1\n"),
    ("testbed", "name: bed\nhosts:\n  client: {address: 127.0.0.1, \"\\n\": 1}\n" + FOUR_HOSTS),
    ("testbed", "name: bed\nhosts:\n  client: {address: 127.0.0.1}\n  \"es\\nb\": {address: 127.0.0.1}\n"
                + FOUR_HOSTS),
    ("testbed", "name: bed\n\"\\n\": 1\n"),
], ids=["capacity field", "plan field", "round field", "host field", "host role", "testbed field"])
def test_a_name_holding_a_line_break_is_quoted_on_one_line(tmp_path, kind, text):
    """A field or role named with a line break is refused in one line: the name quoted with its escapes
    (esbperf/core/errors.py `quoted`), never written out raw."""
    from esbperf.core import rounds, topology
    path = tmp_path / f"{kind}.yaml"
    path.write_text(text)
    load = {"plan": plans.load, "round": rounds.load, "testbed": topology.load}[kind]
    with pytest.raises(EsbperfError) as e:
        load(path)
    assert "\n" not in str(e.value) and "\\n" in str(e.value), str(e.value)
