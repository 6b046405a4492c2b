"""The docs cannot drift from the code: every test, file and link a doc names exists (so a table such
as docs/faults.md's fault matrix cannot point at a test that was renamed or removed), and every
command a doc shows is one the command table has, with options it takes; a run of a shipped plan
passes a dry run."""
from __future__ import annotations

import ast
import re
from functools import lru_cache
import shlex
import subprocess
import sys
from pathlib import Path

import click
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


# --- the commands a doc shows ----------------------------------------------------------------
# Every `esbperf …` command in README.md and docs/ (code blocks and inline code) must name a command,
# subcommand and options of the real command table; every `esbperf run` line naming a shipped plan and
# testbed must pass a dry run; every `make` target named must exist. A doc that drifts from the code
# fails here, not in a newcomer's terminal.

COMMAND_DOCS = ["README.md", "esb-projects/README.md", *DOCS]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
INLINE = re.compile(r"`([^`]+)`")
SEPARATORS = re.compile(r"\s(?:&&|\|\||\||;)\s|;\s|;$|\s&$|\s&\s")
OPTION = re.compile(r"^\[?(--?[A-Za-z][\w-]*)")
PLANS = {p.stem for p in (ROOT / "console-config" / "plans").glob("*.yaml")}
TESTBEDS = {p.stem for p in (ROOT / "console-config" / "testbeds").glob("*.yaml")}
# The testbed file a doc tells the user to make, as a copy of this shipped one: its runs dry-run on it.
USERS_TESTBED = {"mylab": "lan-example"}


def make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", (ROOT / "Makefile").read_text(), re.M))


def shown_commands(text: str) -> list[list[str]]:
    """The shell commands a doc shows: each a list of words, from its shell code blocks (lines
    joined where they end in a backslash) and its inline code, cut at ;, &&, ||, | and &."""
    pieces = []
    for lang, body in FENCE.findall(text):
        if lang in SHELL_FENCES:
            pieces += body.replace("\\\n", " ").splitlines()
    prose = FENCE.sub("", text)
    pieces += [" ".join(span.split()) for span in INLINE.findall(prose)]
    commands = []
    for piece in pieces:
        for part in SEPARATORS.split(piece):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:   # an unbalanced quote: not a command line
                continue
            if words:
                commands.append(words)
    return commands


def _program(words: list[str]) -> list[str]:
    """The words from the program on: past sudo, VAR=value, `ip netns exec NS` and `taskset -c CPUS`."""
    while words:
        if words[0] in ("sudo", "setsid", "nohup") or re.fullmatch(r"[A-Za-z_]\w*=\S*", words[0]):
            words = words[1:]
        elif words[:3] == ["ip", "netns", "exec"]:
            words = words[4:]
        elif words[:2] == ["taskset", "-c"]:
            words = words[3:]
        else:
            break
    return words


def _esbperf_words(words: list[str]) -> list[str] | None:
    """The command line when its program is esbperf (`esbperf`, `.venv/bin/esbperf`), else None."""
    words = _program(words)
    return words if words and (words[0] == "esbperf" or words[0].endswith("/esbperf")) else None


def _options(command: click.Command) -> set[str]:
    return {o for p in command.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts} | {"--help", "-h"}


def _placeholder(word: str) -> bool:
    """NAME, <name>, …: a doc's stand-in for a value, not a name to check."""
    return not re.fullmatch(r"[a-z][a-z0-9-]*", word)


def command_problems(words: list[str]) -> list[str]:
    """What is wrong with one `esbperf …` command line against the real command table."""
    from esbperf.cli import COMMANDS, cli
    from esbperf.services import esb

    line = " ".join(words)
    if len(words) < 2 or words[1].startswith("-"):
        return []
    context = click.Context(cli)
    if words[1] not in COMMANDS:
        return [f"`{line}`: no command '{words[1]}' (commands: {', '.join(COMMANDS)})"]
    command = cli.get_command(context, words[1])
    rest = words[2:]
    problems = []
    if isinstance(command, click.Group):
        names = rest[0].strip("[]").split("|") if rest and not rest[0].startswith(("-", "[")) else []
        for name in names:
            if name not in command.commands:
                problems.append(f"`{line}`: no subcommand '{words[1]} {name}' (subcommands: {', '.join(command.commands)})")
        if len(names) != 1 or problems:
            return problems
        command, rest = command.commands[names[0]], rest[1:]
    if words[1] == "esb" and rest and not rest[0].startswith("-"):
        problems += [f"`{line}`: no engine '{name}' ({esb.known()})"
                     for name in rest[0].split("|") if not _placeholder(name) and name not in esb.ENGINES]
    known = _options(command)
    if words[1] == "esb" and rest and rest[0] in esb.ENGINES:   # the settings its engine.yaml declares
        known |= {f"--{s.name}" for s in esb.ENGINES[rest[0]].settings}
    for word in rest:
        option = OPTION.match(word)
        if option and option.group(1).split("=")[0] not in known:
            problems.append(f"`{line}`: `esbperf {' '.join(words[1:2] + ([command.name] if command.name != words[1] else []))}` "
                            f"has no option {option.group(1)}")
    return problems


def dry_run_argv(words: list[str]) -> list[str] | None:
    """The arguments of a dry run of an `esbperf run` line that names a shipped plan (and a shipped
    testbed, the user's copy of one, or none: the default), else None."""
    args = words[1:]
    if args[:1] != ["run"] or any(a in args for a in ("--resume", "--script")) or "--plan" not in args:
        return None
    if args.index("--plan") + 1 >= len(args) or Path(args[args.index("--plan") + 1]).stem not in PLANS:
        return None
    if "--testbed" in args:
        i = args.index("--testbed") + 1
        name = USERS_TESTBED.get(args[i], args[i])
        if Path(name).stem not in TESTBEDS:
            return None
        args = [*args[:i], name, *args[i + 1:]]
    return args if "--dry-run" in args else [*args, "--dry-run"]


def dry_run_problems(argv: list[str]) -> list[str]:
    from esbperf.cli import cli
    from esbperf.core.errors import EsbperfError

    try:
        code = cli.main(args=argv, prog_name="esbperf", standalone_mode=False)
    except (EsbperfError, click.ClickException) as e:
        return [f"`esbperf {' '.join(argv)}` is refused: {e}"]
    return [] if not code else [f"`esbperf {' '.join(argv)}` exits {code}"]


def make_problems(words: list[str]) -> list[str]:
    words = _program(words)
    if words[:1] != ["make"]:
        return []
    targets = make_targets()
    return [f"`{' '.join(words)}`: the Makefile has no target '{t}'"
            for t in words[1:] if not t.startswith("-") and "=" not in t and t not in targets]


def doc_problems(text: str, dry_run: bool = True) -> list[str]:
    problems = []
    for words in shown_commands(text):
        problems += make_problems(words)
        line = _esbperf_words(words)
        if line is None:
            continue
        found = command_problems(line)
        problems += found
        argv = dry_run_argv(line) if dry_run and not found else None
        if argv:
            problems += dry_run_problems(argv)
    return problems


@pytest.mark.parametrize("doc", COMMAND_DOCS)
def test_every_command_a_doc_shows_exists_and_every_run_of_a_shipped_plan_passes_a_dry_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # a dry run writes nothing; should one, not into the checkout
    assert doc_problems((ROOT / doc).read_text()) == []
    assert not any(tmp_path.iterdir())


def test_the_docs_show_commands_at_all():
    """The extraction finds what the docs show (a check that finds nothing passes every doc)."""
    readme = shown_commands((ROOT / "README.md").read_text())
    shown = [" ".join(w) for w in readme]
    assert "make demo" in shown and "make test" in shown
    assert any(line.startswith("esbperf run --plan thesis-payload --scenario proxy") for line in shown)
    runs = [argv for doc in COMMAND_DOCS for words in shown_commands((ROOT / doc).read_text())
            if (line := _esbperf_words(words)) and (argv := dry_run_argv(line))]
    assert len(runs) >= 6


CRAFTED = """# A page that drifted

```sh
esbperf run --plan smoke --target camel --no-such-option   # an option that does not exist
esbperf testbed launch --testbed local                    # a subcommand that does not exist
esbperf benchmark --all
esbperf run --plan thesis-payload --target nginx --testbed local   # nginx serves no cbr
make everything
```

Or inline: `esbperf esb mule` and `esbperf verify --target camel --sizes 5`.
"""


def test_a_doc_that_names_what_does_not_exist_fails(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    problems = doc_problems(CRAFTED)
    expected = ["has no option --no-such-option", "no subcommand 'testbed launch'", "no command 'benchmark'",
                "serves only proxy, hbr, raw, hbr-raw, not cbr, json", "no target 'everything'",
                "no engine 'mule'", "has no option --sizes"]
    for text in expected:
        assert [p for p in problems if text in p], (text, problems)
    assert len(problems) == len(expected), problems   # one each, no dry run of a line already wrong


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", COMMAND_DOCS)
def test_every_relative_link_of_a_doc_leads_to_a_file(doc):
    broken = [target for target in LINK.findall((ROOT / doc).read_text())
              if "://" not in target and not ((ROOT / doc).parent / target).exists()]
    assert not broken, f"{doc} links to what is not there: {broken}"


def test_the_testbed_commands_shown_are_what_the_command_prints():
    """docs/testbed.md shows `esbperf testbed commands --testbed lan-example` in full: it is the output."""
    from esbperf.cli import cli

    text = (ROOT / "docs" / "testbed.md").read_text()
    intro = text.index("For `lan-example.yaml` it prints:")
    shown = FENCE.search(text, intro).group(2)
    printed = subprocess.run([sys.executable, "-m", "esbperf", "testbed", "commands", "--testbed", "lan-example"],
                             capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert shown == printed


# --- the lines docs/troubleshooting.md quotes --------------------------------------------------
# Each is a line esbperf prints: it must still be one of the messages in the code. A message is a
# string expression of esbperf's Python (a literal, an f-string, a + of them); its literal parts must
# appear in the quoted line as they are, its {values} stand for anything — an address, a count, or
# a message of its own (then checked the same way: `testbed check`'s problems joined by "; ").

PRINTED_BY = ("esbperf", "analysis")
ERROR = "esbperf: error: "
MIN_LITERAL = 12    # a template with less fixed text than this would match any line


def _template(node: ast.AST) -> list[str | None] | None:
    """A string expression as its parts: literal text, or None for a value; None if it is none."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value if isinstance(v, ast.Constant) else None for v in node.values]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        if left is not None or right is not None:
            return (left or [None]) + (right or [None])
    return None


@lru_cache(maxsize=1)
def message_patterns() -> list[re.Pattern]:
    patterns = set()
    for folder in PRINTED_BY:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                parts = _template(node)
                if parts and sum(len(p) for p in parts if p) >= MIN_LITERAL:
                    regex = "".join(re.escape(p) if p is not None else "(.+?)" for p in parts)
                    patterns.add(re.sub(r"(\(\.\+\?\))+", "(.+?)", regex))   # two values side by side: one
    return [re.compile(p, re.S) for p in sorted(patterns)]


# A value that is no message of esbperf's own: an address, a count, a command line, or a short
# reason from the system or a library ("Connection refused", "Permission denied (publickey).").
PLAIN = re.compile(r"\s*[\w.,:()\[\]/'@+…±-]+(?: [\w.,:()\[\]/'@+…±-]+){0,7}")
# Where a value joins messages: "; " between them, " (" before a message in brackets.
JOINS = re.compile(r"(?=; | \()")


def is_printed(line: str, patterns: list[re.Pattern]) -> bool:
    """Whether esbperf prints `line`: a message of the code matches it whole, and each of its values
    is plain (an address, a count, a short reason) or itself made of messages of the code."""
    @lru_cache(maxsize=None)
    def printed(text: str) -> bool:
        return any(m and all(value(v) for v in m.groups()) for m in (p.fullmatch(text) for p in patterns))

    @lru_cache(maxsize=None)
    def value(text: str) -> bool:
        if PLAIN.fullmatch(text):
            return True
        cuts = sorted({0, len(text), *(m.start() for m in JOINS.finditer(text))})
        reach = {0}
        for end in cuts[1:]:
            if any(piece(text[start:end]) for start in reach if start < end):
                reach.add(end)
        return len(text) in reach and len(cuts) > 2

    def piece(text: str) -> bool:
        bare = text.removeprefix("; ")
        return bool(PLAIN.fullmatch(bare)) or printed(text) or printed(bare)

    return printed(line.removeprefix(ERROR))


def quoted_lines(text: str) -> list[str]:
    return [line for lang, body in FENCE.findall(text) if lang == "text" for line in body.splitlines() if line.strip()]


def test_every_line_troubleshooting_quotes_is_one_esbperf_prints():
    quoted = quoted_lines((ROOT / "docs" / "troubleshooting.md").read_text())
    assert len(quoted) >= 15
    patterns = message_patterns()
    assert not [line for line in quoted if not is_printed(line, patterns)]


def test_a_line_esbperf_no_longer_prints_fails_the_troubleshooting_check():
    patterns = message_patterns()
    assert is_printed("esbperf: error: no java found: install a JDK 17+ or set JAVA_HOME", patterns)
    assert not is_printed("esbperf: error: no java found: install a JDK 11 or set JAVA_HOME", patterns)
    assert is_printed("esbperf: error: testbed check found 2 problem(s): 1.2.3.4:80 (echo on ws1) unreachable: "
                      "Connection refused; ws2's clock is +250 ms off this machine's (limit ±100 ms); "
                      "synchronise the clocks (NTP/chrony)", patterns)
    assert not is_printed("esbperf: error: testbed check found 1 problem(s): ws2's clock runs late by 250 ms, "
                          "please fix it soon", patterns)
    assert not is_printed("esbperf: error: the frobnicator on ws1 is broken beyond repair today", patterns)
    assert not is_printed("esbperf: error: `esbperf testbed up` needs root; run it with sudo", patterns)


ISSUE_NUMBER = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
CODE_FOLDERS = ("esbperf", "analysis", "console-config", "grinder-scripts", "agents")


def test_no_user_doc_or_message_names_an_issue_number():
    """Issues are the developers' bookkeeping: a user reads docs/ and what esbperf prints (its strings,
    usage texts and docstrings), where "since issue 43" says nothing."""
    found = [f"{doc}:{n}: {line.strip()}" for doc in ["README.md", "esb-projects/README.md", *DOCS]
             for n, line in enumerate((ROOT / doc).read_text().splitlines(), 1) if ISSUE_NUMBER.search(line)]
    for folder in CODE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            try:
                strings = [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text()))
                           if isinstance(node, ast.Constant) and isinstance(node.value, str)]
            except SyntaxError:         # the workers' Jython 2 scripts: every line, comments too
                strings = list(enumerate(path.read_text().splitlines(), 1))
            found += [f"{path.relative_to(ROOT)}:{n}: {ISSUE_NUMBER.search(text)[0]}" for n, text in strings
                      if ISSUE_NUMBER.search(text)]
    assert not found, "\n".join(found)
