"""Where things are in the checkout, and building the Java modules when their output is missing.

Every Java module builds to <module>/target/<artifactId>.jar with its runtime jars in
<module>/target/lib/ (see the parent pom.xml); the Grinder home is
agents/grinder-home/target/grinder-home/lib/.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import click

from esbperf.core.errors import EsbperfError

ROOT = Path(__file__).resolve().parents[2]   # esbperf/core/project.py -> the checkout


@dataclass(frozen=True)
class Module:
    """A Java module of the reactor and the file whose presence means it is built."""

    path: str          # folder, relative to ROOT
    artifact: str      # artifactId = jar name
    also_from: tuple[str, ...] = ()   # folders outside its own that its jar packages (relative to ROOT)

    @property
    def dir(self) -> Path:
        return ROOT / self.path

    @property
    def jar(self) -> Path:
        return self.dir / "target" / f"{self.artifact}.jar"

    def classpath(self) -> str:
        """The module's jar and its runtime dependencies, for `java -cp`."""
        return os.pathsep.join([str(self.jar), str(self.dir / "target" / "lib" / "*")])

    def built_output(self) -> Path:
        return self.jar


class GrinderHome(Module):
    @property
    def lib(self) -> Path:
        return self.dir / "target" / "grinder-home" / "lib"

    @property
    def grinder_jar(self) -> Path:
        return self.lib / "grinder-3.11.jar"

    def built_output(self) -> Path:
        return self.lib / "grinder-patch.jar"


GRINDER_HOME = GrinderHome("agents/grinder-home", "grinder-home")
CONTROL_API = Module("console-config/control-api", "control-api")
HTTP_CLIENT = Module("grinder-scripts/http-client", "http-client")
MONITOR = Module("agents/monitor", "monitor")
JAXWS_ECHO = Module("jaxws-echo", "jaxws-echo")
# The framework's own modules; the engines' come from their folders (esbperf/core/engines.py).
TOOL_MODULES = [GRINDER_HOME, CONTROL_API, HTTP_CLIENT, MONITOR, JAXWS_ECHO]


def all_modules() -> list[Module]:
    """Every Java module: the framework's, then each JVM engine's."""
    from esbperf.core import engines   # it reads the engine folders, and needs Module from here
    return TOOL_MODULES + engines.modules()

CONSOLE_CONFIG = ROOT / "console-config"
GRINDER_SCRIPTS = ROOT / "grinder-scripts"


def _stale(module: Module) -> bool:
    out = module.built_output()
    if not out.exists():
        return True
    built = out.stat().st_mtime
    # Tests do not change the jar (Maven leaves an unchanged jar untouched), so they do not count.
    for source_root in (module.dir / "src" / "main", module.dir / "pom.xml", *(ROOT / p for p in module.also_from)):
        paths = [source_root] if source_root.is_file() else source_root.rglob("*") if source_root.exists() else []
        if any(p.is_file() and p.stat().st_mtime > built for p in paths):
            return True
    return False


def ensure_built(*modules: Module, quiet: bool = True) -> None:
    """Run Maven for the modules whose output is missing or older than their sources."""
    todo = [m for m in modules if _stale(m)]
    if not todo:
        return
    for m in todo:
        if m.also_from and m.jar.exists():
            m.jar.unlink()   # Maven may not see a change outside the module's folder: build the jar anew
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EsbperfError("Maven (mvn) is not on PATH; install it (Debian: apt-get install maven) and retry")
    cmd = [mvn, "-B", "-DskipTests", "-pl", ",".join(m.path for m in todo), "-am", "package"]
    if quiet:
        cmd.insert(1, "-q")
    click.echo(f"esbperf: building {', '.join(m.path for m in todo)} (mvn package)", err=True)
    result = subprocess.run(cmd, cwd=ROOT)
    if result.returncode != 0:
        raise EsbperfError(f"the Maven build failed (exit {result.returncode}); rerun `{' '.join(cmd)}` in {ROOT} to see why")


@click.command()
@click.option("--all", "everything", is_flag=True, help="Rebuild every module even if it looks up to date.")
def build(everything: bool) -> None:
    """Build the Java modules (Grinder home, control API, echo, ESBs, monitor)."""
    modules = all_modules()
    if everything:
        for m in modules:
            if m.built_output().exists():
                m.built_output().unlink()
    ensure_built(*modules, quiet=False)
    click.echo("esbperf: build complete")
