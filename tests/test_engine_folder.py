"""An engine is a folder: a small reverse proxy written for this test (tests/data/engines/tiny-proxy/:
its engine.yaml, a config file with tokens, a Python script) becomes an engine of esbperf with no
change to esbperf/ — named in $ESBPERF_ENGINES, it is started by `esbperf esb`, watched by the esb
host's monitor, checked by `esbperf verify` and measured by `esbperf run` beside the baseline,
through the real console and agents. The folders' rules (esbperf/core/engines.py) without a process."""
from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ECHO_PORTS, HOST, write_testbed

from esbperf.core import engines, procs
from esbperf.core.errors import EsbperfError
from esbperf.services import console

ESBPERF = [sys.executable, "-m", "esbperf"]
FOLDERS = Path(__file__).parent / "data" / "engines"
NAME = "tiny-proxy"
PORT = 16340
SHIPPED = {"camel", "spring-integration", "synapse", "nginx", "haproxy", "reference", "reference-twin"}


def test_the_shipped_engines_are_folders():
    found = engines.load_all()
    assert set(found) == SHIPPED and all((e.folder / engines.FILE).is_file() for e in found.values())
    assert [e.kind for e in found.values()] == ["ESB"] * 3 + ["floor"] * 2 + ["reference"] * 2
    camel = found["camel"]
    assert (camel.module.path, camel.module.artifact, camel.main) == ("esb-projects/camel", "esb-camel",
                                                                      "org.apache.camel.main.Main")
    assert camel.module.also_from == ("esb-projects/shared",)
    assert found["nginx"].program == "nginx" and found["nginx"].parent_death_signal == "TERM"
    assert found["haproxy"].serves == ("proxy", "hbr", "raw", "hbr-raw") and found["synapse"].serves is None


def test_a_folder_named_in_the_environment_is_an_engine_too(monkeypatch):
    monkeypatch.setenv(engines.ENV, str(FOLDERS))
    found = engines.load_all()
    assert set(found) == SHIPPED | {NAME}
    tiny = found[NAME]
    assert (tiny.kind, tiny.program, tiny.module, tiny.serves) == ("ESB", "python3", None, ("proxy", "hbr", "raw", "hbr-raw"))
    monkeypatch.setenv(engines.ENV, f"{FOLDERS / NAME}{os.pathsep}{FOLDERS}")
    with pytest.raises(EsbperfError, match=rf"^two engines are called '{NAME}': "):
        engines.load_all()


def _folder(tmp_path: Path, text: str, name: str = "mine") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "engine.yaml").write_text(text)
    return folder


@pytest.mark.parametrize("text, error", [
    ("kind: bus\nmatch: x\ncommand: [env]\n", r"kind must be ESB, floor or reference, got 'bus'"),
    ("kind: ESB\ncommand: [env]\n", r"match must be a text of the engine's process command line"),
    ("kind: ESB\nmatch: x\n", r"give either java .* or command"),
    ("kind: ESB\nmatch: x\ncommand: [/bin/sh]\n", r"command must start with a program on PATH"),
    ("kind: ESB\nmatch: x\ncommand: [env, '@NOPE@']\n", r"command names @NOPE@, which esbperf does not fill"),
    ("kind: floor\nmatch: x\nserves: [proxy, teleport]\ncommand: [env]\n", r"serves names teleport"),
    ("kind: ESB\nmatch: x\ncommand: [env]\nconfig: [../elsewhere]\n", r"config: '../elsewhere' is not a file or folder"),
    ("kind: ESB\nmatch: x\ncommand: [env]\nport: 80\n", r"unknown field 'port'"),
    ("kind: ESB\nmatch: x\njava: {module: mine, main: a.B}\n", r"java.module must be the artifactId of the Maven module"),
    ("kind: ESB\nmatch: x\ncommand: [env]\nstart_timeout_s: 0\n", r"start_timeout_s must be seconds"),
    ("kind: ESB\nmatch: x\ncommand: [env, '@SETTING_RATE@']\n", r"command names @SETTING_RATE@, which esbperf"),
    ("kind: ESB\nmatch: x\ncommand: [env]\nsettings: {listen: {default: 1}}\n", r"a setting's name is"),
    ("kind: ESB\nmatch: x\ncommand: [env]\nsettings: {rate: {help: x}}\n", r"settings.rate must be a mapping with a default"),
    ("kind: ESB\nmatch: x\ncommand: [env]\nsettings: {rate: {default: 5, min: 10}}\n",
     r"settings.rate.default must be a number within its min and max, got 5"),
])
def test_a_wrong_engine_folder_is_one_line_naming_its_file(tmp_path, text, error):
    folder = _folder(tmp_path, text)
    with pytest.raises(EsbperfError, match=rf"^{re.escape(str(folder / 'engine.yaml'))}: {error}"):
        engines.read(folder)


def test_a_twin_extends_an_engine_beside_it_with_a_match_of_its_own(tmp_path):
    """reference-twin is the reference built and started from its folder, its own JVM option and
    match the only difference; an engine extending none beside it, or keeping its match, is one line."""
    found = engines.load_all()
    one, twin = found["reference"], found["reference-twin"]
    assert twin.folder == one.folder and twin.module == one.module and twin.settings == one.settings
    assert (twin.main, twin.arguments, twin.account, twin.kind) == (one.main, one.arguments, one.account, one.kind)
    assert twin.match != one.match and twin.match in " ".join(twin.jvm_options) and \
        one.match not in " ".join(twin.jvm_options) and twin.match not in " ".join(one.jvm_options)
    _folder(tmp_path, "kind: ESB\nmatch: base-proxy\ncommand: [env, '@ESB_PORT@']\n", name="base")
    copy = engines.read(_folder(tmp_path, "extends: base\nmatch: base-copy\n", name="copy"))
    assert (copy.name, copy.folder, copy.program, copy.arguments, copy.match) == \
        ("copy", tmp_path / "base", "env", ("@ESB_PORT@",), "base-copy")
    for name, text, error in (("far", "extends: elsewhere\nmatch: y\n", "extends must name an engine folder beside it"),
                              ("same", "extends: base\nmatch: base-proxy\n", "needs a match of its own"),
                              ("inner", "extends: base\nmatch: base\n", "needs a match of its own"),
                              ("twice", "extends: copy\nmatch: z\n", "one level only")):
        folder = _folder(tmp_path, text, name=name)
        with pytest.raises(EsbperfError, match=rf"^{re.escape(str(folder / 'engine.yaml'))}: .*{error}"):
            engines.read(folder)


def test_an_unknown_engine_name_says_how_to_add_one(tmp_path):
    with pytest.raises(EsbperfError, match=r"an engine's folder name is its name"):
        engines.read(_folder(tmp_path, "kind: ESB\nmatch: x\ncommand: [env]\n", name="Big_Name"))


@pytest.mark.slow
def test_an_engine_from_a_folder_of_its_own_is_started_verified_and_measured(grinder, echoes, state_dir, tmp_path):
    if shutil.which("python3") is None:
        pytest.skip("the tiny proxy runs on python3")
    env = {**os.environ, engines.ENV: str(FOLDERS)}
    testbed = write_testbed(tmp_path / "own-engine.yaml", ECHO_PORTS)
    data = yaml.safe_load(testbed.read_text())
    data["hosts"]["esb"]["esb_ports"] = {NAME: PORT}
    data["targets"] = {"direct": {"kind": "direct"}, NAME: {"kind": "esb", "esb": NAME}}
    testbed.write_text(yaml.safe_dump(data, sort_keys=False))
    assert not procs.port_open(HOST, PORT)

    # What to start on the esb host: the engine, and a monitor that watches it by its folder's `match`.
    watched = tmp_path / "watched.yaml"
    data["hosts"]["esb"]["monitor_port"] = 16341
    watched.write_text(yaml.safe_dump(data, sort_keys=False))
    shown = subprocess.run([*ESBPERF, "testbed", "commands", "--testbed", str(watched), "--esb", NAME],
                           env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    assert f"esbperf esb {NAME} --testbed {watched}" in shown
    assert any(line.startswith("esbperf monitor --role esb") and "--match 'tiny_proxy.py --listen'" in line
               for line in shown), shown

    started = subprocess.Popen([*ESBPERF, "esb", NAME, "--testbed", str(testbed)], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        banner = started.stdout.readline()
        assert banner.startswith(f"esb {NAME}: ESB {NAME} listening at http://{HOST}:{PORT} (python3, serving "
                                 "proxy, hbr, raw, hbr-raw), routing to ws1 "), banner
        [proxy] = [int(p) for p in Path(f"/proc/{started.pid}/task/{started.pid}/children").read_text().split()]
        assert "tiny_proxy.py --listen" in Path(f"/proc/{proxy}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        work = state_dir / "esb" / f"{NAME}-{PORT}"
        assert (work / "routes.conf").read_text().splitlines()[1:] == \
            [f"ws{n} http://{HOST}:{port}" for n, port in enumerate(ECHO_PORTS.values(), 1)] + ["timeout_ms 120000"]

        verified = subprocess.run([*ESBPERF, "verify", "--target", NAME, "--testbed", str(testbed)], env=env,
                                  capture_output=True, text=True)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        lines = verified.stdout.splitlines()
        assert lines[-2] == f"verify {NAME}: skipped cbr, json, xslt, cbr-raw (ESB {NAME} serves only proxy, hbr, raw, hbr-raw)"
        assert lines[-1] == f"verify {NAME}: all 8 checks passed (4 scenarios)"

        plan = tmp_path / "own-engine-plan.yaml"
        plan.write_text(yaml.safe_dump({"name": "own-engine", "scenarios": ["proxy"], "payloads": ["1KB"],
                                        "users": [2], "duration_s": 2, "warmup_s": 2, "timeout_s": 10}))
        run = subprocess.run([*ESBPERF, "run", "--plan", str(plan), "--target", NAME, "--target", "direct",
                              "--testbed", str(testbed), "--out", str(tmp_path / "results"),
                              "--token-file", str(console.token_file(state_dir / "console"))],
                             env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    finally:
        started.terminate()
        assert started.wait(30) == 0
    assert not procs.port_open(HOST, PORT)

    [run_dir] = (tmp_path / "results").iterdir()
    rows = list(csv.DictReader((run_dir / "report" / "summary.csv").open()))
    measured = {row["target"]: row for row in rows}
    assert set(measured) == {NAME, "direct"}
    tiny = measured[NAME]
    assert int(tiny["transactions"]) > 0 and int(tiny["errors"]) == 0 and float(tiny["tps"]) > 0, tiny
