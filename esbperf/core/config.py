"""Configuration files: the console's (console-config/console.yaml) and the agents'
(agents/agent.yaml). Errors name the file and the field."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from esbperf.core.errors import EsbperfError, quoted
from esbperf.core.project import CONSOLE_CONFIG, ROOT

CONSOLE_FILE = CONSOLE_CONFIG / "console.yaml"
AGENT_FILE = ROOT / "agents" / "agent.yaml"


def resolve_named(name_or_path: str | Path, folder: Path, kind: str) -> Path:
    """A named YAML file of `folder` (a plan, a testbed) or a path to one."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        return candidate
    path = folder / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise EsbperfError(f"unknown {kind} '{name_or_path}' (known: {', '.join(known)}; or give a file)")
    return path


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key written twice in one mapping (PyYAML keeps the last
    without a word: `duration_s: 4` and later `duration_s: 400` would quietly run 400 s)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":   # `<<: *anchor`: keys written after it override
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:      # an unhashable key: PyYAML's own error says so
                break
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice (first on line {first.start_mark.line + 1})",
                    key_node.start_mark)
        return super().construct_mapping(node, deep)


def load_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise EsbperfError(f"{path}: no such file") from None
    except OSError as e:
        raise EsbperfError(f"{path}: cannot be read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EsbperfError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())   # PyYAML's messages span lines
        raise EsbperfError(f"{path}{where}: not valid YAML ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise EsbperfError(f"{path}: expected a mapping of settings at the top")
    return data


def _take(data: dict, path: Path, name: str, kind: type, default: Any) -> Any:
    value = data.pop(name, default)
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise EsbperfError(f"{path}: field '{name}' must be {kind.__name__}, got {value!r}")
    return value


def _no_extra(data: dict, path: Path, allowed: list[str]) -> None:
    if data:
        raise EsbperfError(f"{path}: unknown field {quoted(next(iter(data)))} (allowed: {', '.join(allowed)})")


@dataclass
class ConsoleConfig:
    distribution_directory: Path = ROOT / "grinder-scripts"
    sample_interval_ms: int = 1000
    jvm_args: list[str] = field(default_factory=lambda: ["-Xmx512m"])

    @classmethod
    def load(cls, path: Path = CONSOLE_FILE) -> "ConsoleConfig":
        data = load_yaml(path)
        d = cls()
        cfg = cls(
            distribution_directory=(path.parent / _take(data, path, "distribution_directory", str,
                                                        str(d.distribution_directory))).resolve(),
            sample_interval_ms=_take(data, path, "sample_interval_ms", int, d.sample_interval_ms),
            jvm_args=_take(data, path, "jvm_args", list, d.jvm_args),
        )
        _no_extra(data, path, ["distribution_directory", "sample_interval_ms", "jvm_args"])
        return cfg


@dataclass
class AgentConfig:
    reconnect_seconds: int = 2
    agent_jvm_args: list[str] = field(default_factory=lambda: ["-Xmx256m"])
    worker_jvm_args: list[str] = field(default_factory=lambda: ["-Xmx1g"])
    max_worker_processes: int = 16   # worker JVMs an agent starts for one step, at most

    @classmethod
    def load(cls, path: Path = AGENT_FILE) -> "AgentConfig":
        data = load_yaml(path)
        d = cls()
        cfg = cls(
            reconnect_seconds=_take(data, path, "reconnect_seconds", int, d.reconnect_seconds),
            agent_jvm_args=_take(data, path, "agent_jvm_args", list, d.agent_jvm_args),
            worker_jvm_args=_take(data, path, "worker_jvm_args", list, d.worker_jvm_args),
            max_worker_processes=_take(data, path, "max_worker_processes", int, d.max_worker_processes),
        )
        if cfg.max_worker_processes < 1:
            raise EsbperfError(f"{path}: field 'max_worker_processes' must be at least 1, got {cfg.max_worker_processes}")
        _no_extra(data, path, ["reconnect_seconds", "agent_jvm_args", "worker_jvm_args", "max_worker_processes"])
        return cfg


def state_dir() -> Path:
    """Where running processes keep their logs and working files ($ESBPERF_STATE or ./.esbperf)."""
    import os

    return Path(os.environ.get("ESBPERF_STATE", ROOT / ".esbperf")).resolve()
