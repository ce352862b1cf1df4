"""Every example in README.md and docs/*.md runs, so an example that stops working fails the suite.

Each fenced block carries a marker, an HTML comment on the line before it (invisible when rendered):

* ``<!-- doc: run [tiny] [sub="OLD=>NEW;;..."] [expect="TEXT;;..."] [code=N] -->``: run the block; a shell
  block line by line (``recstack ...`` in-process through ``recstack.cli.main``, ``python FILE`` with runpy),
  a Python block with ``exec``. ``tiny`` appends small sizes to every profiling command; ``sub`` replaces
  text first (smaller sizes for a Python call); every ``expect`` text must appear in what the block printed;
  with ``only="TEXT"`` only the commands holding TEXT run, the others have their flags checked (as usage).
* ``<!-- doc: file name="NAME" [sub=...] [then="COMMAND"] -->``: write the block to NAME (for later blocks),
  then run COMMAND if given (a YAML example is read by the command that takes it).
* ``<!-- doc: usage -->``: a synopsis (``[--flag]`` optional parts): every flag it names must exist.
* ``<!-- doc: output -->``: what a command prints, shown not run.
* ``<!-- doc: skip reason="..." -->``: cannot run here (GPU, several nodes, a 30-minute benchmark).

``needs="PATH"`` on any marker runs the block only where PATH exists (the shared data sets beside the repository).

A block without a marker fails the test, so a new example must say how it is checked. The blocks of one
page run in order in one temporary folder, which starts with a tiny profile saved under the names the
docs use (``out.json``, ``a.json`` ...).
"""

from __future__ import annotations

import contextlib
import os
import re
import runpy
import shlex
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from recstack.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
MARKER = re.compile(r"<!-- doc: (\w+)((?:\s+\w+(?:=(?:\"[^\"]*\"|\S+))?)*)\s*-->\s*\n$")
ATTR = re.compile(r"(\w+)(?:=(\"[^\"]*\"|\S+))?")
# appended to every profiling command of a `tiny` block (the last value of a flag wins)
TINY = {
    "profile": "--scale 0.001 --iters 2 --warmup 1 --op-iters 1 --batch-size 32 --machine none",
    "share": "--scale 0.001 --iters 2 --warmup 1",
    "compile": "--scale 0.001 --iters 2 --warmup 1 --batch-size 32",
    "serve": "--scale 0.001 --duration 1",
    "demo": "--scale 0.001 --batch-size 32 --machine none",
}
RAN: list[str] = []  # every command and snippet run, for the count printed at the end
CHECKED: list[str] = []  # every synopsis line whose flags were checked
PROFILE_NAMES = ("out.json", "a.json", "b.json", "base.json", "cand.json", "rmc1.json")


@dataclass
class Block:
    page: str
    line: int
    lang: str
    body: str
    kind: str
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def text(self, cwd: Path) -> str:
        body = self.body.replace("{REPO}", str(REPO)).replace("{CWD}", str(cwd))
        for pair in filter(None, self.attrs.get("sub", "").split(";;")):
            old, new = pair.split("=>", 1)
            assert old in body, f"{self.where}: sub {old!r} not in the block"
            body = body.replace(old, new.replace("{REPO}", str(REPO)))
        return body


def blocks(page: str) -> list[Block]:
    text = (REPO / page).read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        before = text[max(0, m.start() - 600) : m.start()]
        line = text.count("\n", 0, m.start()) + 1
        if before.endswith("<!-- generated:synopsis -->\n"):
            continue  # generated from the parser (scripts/gen_synopsis.py --check)
        mk = MARKER.search(before)
        if mk is None:
            pytest.fail(f"{page}:{line}: fenced block without a <!-- doc: ... --> marker (see tests/test_docs.py)")
        attrs = {k: v.strip('"') for k, v in ATTR.findall(mk.group(2))}
        out.append(Block(page, line, m.group(1), m.group(2), mk.group(1), attrs))
    return out


# -- running --------------------------------------------------------------------------------
def _commands(body: str) -> Iterator[tuple[dict[str, str], list[str]]]:
    """(env assignments, argv) of every command in a shell block: `$ ` prompts, comments, `&&`, `\\` joined."""
    for raw in body.replace("\\\n", " ").splitlines():
        line = raw.strip().removeprefix("$ ")
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            argv = shlex.split(part, comments=True)
            env = {}
            while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0]):
                k, _, v = argv.pop(0).partition("=")
                env[k] = v
            if argv:
                yield env, argv


@contextlib.contextmanager
def _env(env: dict[str, str], cwd: Path) -> Iterator[None]:
    """Environment assignments of a command line; PYTHONPATH also goes on sys.path (the command runs here)."""
    old = {k: os.environ.get(k) for k in env}
    paths = [str((cwd / p).resolve()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ.update(env)
    sys.path[:0] = paths
    try:
        yield
    finally:
        for p in paths:
            sys.path.remove(p)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _forget_modules(cwd: Path) -> None:
    """Drop modules imported from the page's folder (the next page may reuse their names)."""
    for name, mod in list(sys.modules.items()):
        if str(getattr(mod, "__file__", None) or "").startswith(str(cwd)):
            del sys.modules[name]


def run_shell(block: Block, cwd: Path, capsys: pytest.CaptureFixture[str]) -> str:
    printed = []
    for env, argv in _commands(block.text(cwd)):
        if argv[:3] == ["python", "-m", "recstack"]:
            argv = ["recstack", *argv[3:]]
        if block.attrs.get("only", "") not in shlex.join(argv):
            check_usage(Block(block.page, block.line, "", shlex.join(argv), "usage"))
            continue
        with _env(env, cwd):
            if argv[0] == "recstack":
                if "tiny" in block.attrs and argv[1] in TINY:
                    argv = argv + TINY[argv[1]].split()
                code = main(argv[1:])
                want = int(block.attrs.get("code", 0))
                out, err = capsys.readouterr()
                assert code == want, f"{block.where}: {shlex.join(argv)} exited {code}, want {want}:\n{out}\n{err}"
            elif argv[0] == "python":
                with _argv(argv[1:]):
                    runpy.run_path(str(cwd / argv[1]), run_name="__main__")
                out, err = capsys.readouterr()
            else:
                pytest.fail(f"{block.where}: cannot run {argv[0]!r} in-process; mark the block skip with a reason")
        printed.append(out + err)
        RAN.append(f"{block.where}: {shlex.join(argv)}")
    return "\n".join(printed)


@contextlib.contextmanager
def _argv(argv: list[str]) -> Iterator[None]:
    old = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = old


def run_python(block: Block, cwd: Path, capsys: pytest.CaptureFixture[str]) -> str:
    with _env({"PYTHONPATH": "."}, cwd):
        exec(compile(block.text(cwd), block.where, "exec"), {"__name__": "__doc_example__"})  # noqa: S102
    RAN.append(f"{block.where}: python")
    out, err = capsys.readouterr()
    return out + err


def check_usage(block: Block) -> None:
    """Every flag a synopsis names is a flag of the command it names."""
    parsers = _parsers()
    for line in block.body.replace("\\\n", " ").splitlines():
        words = [w for w in line.split() if w not in GLOBAL_FLAGS and w != "..."]  # "...": the rest, any
        if len(words) < 2 or words[0] != "recstack":
            continue
        cmd = " ".join(w for w in words[1:3] if re.fullmatch(r"[a-z-]+", w) and " ".join(words[1:3]) in parsers)
        cmd = cmd if cmd in parsers else words[1]
        assert cmd in parsers, f"{block.where}: no command {cmd!r}"
        for flag in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", " ".join(words)):
            assert flag in parsers[cmd], f"{block.where}: recstack {cmd} has no flag {flag}"
        CHECKED.append(f"{block.where}: {line.strip()}")


GLOBAL_FLAGS = ("--quiet", "--debug", "--version", "--help")  # recstack's own, before or after any command


def _parsers() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}

    def walk(p, name: str) -> None:
        subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not subs:
            out[name] = {s for a in p._actions for s in a.option_strings}
            return
        for sub_name, sp in subs[0].choices.items():
            walk(sp, f"{name} {sub_name}".strip())

    walk(build_parser(), "")
    return out


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("docs") / "out.json"
    assert main(["profile", "rmc1", *TINY["profile"].split(), "-o", str(path), "--quiet"]) == 0
    return path


@pytest.mark.parametrize("page", PAGES)
def test_doc_examples(page: str, tiny_profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RECSTACK_PROGRESS", "never")
    for name in PROFILE_NAMES:
        shutil.copy(tiny_profile, tmp_path / name)
    before = len(RAN)
    try:
        for block in blocks(page):
            printed = None
            needs = block.attrs.get("needs", "").replace("{REPO}", str(REPO))
            if needs and not Path(needs).exists():
                print(f"{block.where}: skipped, {needs} is absent")
                continue
            if block.kind == "file":
                (tmp_path / block.attrs["name"]).write_text(block.text(tmp_path), encoding="utf-8")
                if "then" in block.attrs:
                    then = {k: v for k, v in block.attrs.items() if k != "sub"}
                    printed = run_shell(Block(page, block.line, "", block.attrs["then"], "run", then), tmp_path, capsys)
            elif block.kind == "run" and block.lang == "python":
                printed = run_python(block, tmp_path, capsys)
            elif block.kind == "run":
                printed = run_shell(block, tmp_path, capsys)
            elif block.kind == "usage":
                check_usage(block)
            else:
                assert block.kind in ("output", "skip"), f"{block.where}: unknown marker {block.kind!r}"
                assert block.kind != "skip" or block.attrs.get("reason"), f"{block.where}: skip needs a reason"
                continue
            for want in filter(None, block.attrs.get("expect", "").split(";;")):
                assert want in (printed or ""), f"{block.where}: {want!r} not in the output:\n{printed}"
    finally:
        _forget_modules(tmp_path)
    print(f"{page}: {len(RAN) - before} commands and snippets run ({len(RAN)} so far; {len(CHECKED)} synopsis lines "
          "checked so far)")


def test_zoo_table_lists_every_model() -> None:
    """docs/zoo.md's hand-written table (descriptions, sources) has one row per zoo model, in one table."""
    from recstack.zoo.config import BUILTIN

    text = (REPO / "docs/zoo.md").read_text(encoding="utf-8")
    table = text[text.index("| id | arch |") :].split("\n\n", 1)[0]  # a blank line would end the table
    assert [ln.split("|")[1].strip() for ln in table.splitlines()[2:]] == list(BUILTIN)


# -- help ----------------------------------------------------------------------------------------
def _leaves() -> list:
    from recstack.cli import _leaf_parsers

    return list(_leaf_parsers(build_parser()))


def test_every_command_shows_an_example_that_parses(capsys: pytest.CaptureFixture[str]) -> None:
    from recstack.cli import EXAMPLES

    names = [p.prog.removeprefix("recstack ") for p in _leaves()]
    assert sorted(names) == sorted(EXAMPLES), "one example per command, in recstack.cli.EXAMPLES"
    for name in names:
        with pytest.raises(SystemExit):
            main([*name.split(), "--help"])
        out = capsys.readouterr().out
        assert f"example:\n  {EXAMPLES[name]}\n" in out, out
        build_parser().parse_args(shlex.split(EXAMPLES[name])[1:])  # its flags, choices and numbers are valid


def test_every_flag_shows_its_default() -> None:
    import argparse

    for p in _leaves():
        for a in p._actions:
            if a.option_strings and a.help != argparse.SUPPRESS and a.default not in (None, False, argparse.SUPPRESS):
                assert "default" in (a.help or ""), f"{p.prog} {a.option_strings[-1]}: help hides its default"


def test_one_meaning_per_flag_name(capsys: pytest.CaptureFixture[str]) -> None:
    """--depth is a tree's depth wherever it shows; every --machine takes 'auto' for this host's machine file;
    --json prints JSON (it names no file) and --chart picks a chart (it names no file)."""
    for p in _leaves():
        for a in p._actions:
            if a.help == "==SUPPRESS==":
                continue  # an old name kept working
            if "--json" in a.option_strings:
                assert a.nargs == 0, f"{p.prog} --json takes a value"
            if "--chart" in a.option_strings:
                assert a.choices, f"{p.prog} --chart is not a choice of chart"
            if "--depth" in a.option_strings and a.help != "==SUPPRESS==":
                assert "tree depth" in a.help, f"{p.prog} --depth: {a.help}"
            if "--machine" in a.option_strings:
                assert "auto" in f"{a.metavar} {a.help}", f"{p.prog} --machine: {a.help}"
    # serve's queue depth, under its old name: still read, with a warning, and hidden from help
    with pytest.warns(FutureWarning, match="--depth is deprecated here: use --queue-depth"):
        args = build_parser().parse_args(["serve", "spin", "--depth", "1"])
    assert args.queue_depth == 1 and not hasattr(args, "depth")
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "--depth" not in capsys.readouterr().out


def test_relative_links_resolve() -> None:
    """Every relative link of README.md and docs/*.md names a file that exists (docs moved keep their links)."""
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (REPO / page).parent.joinpath(target).exists(), f"{page}: link to {target} names no file"


def test_inline_commands_name_real_flags() -> None:
    """Every inline `recstack CMD --flag ...` in the prose names a command and flags that exist (as a synopsis)."""
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        text = FENCE.sub("", text)  # fenced blocks are checked above
        for m in re.finditer(r"(?<!`)`(recstack [^`]+)`", text):
            line = text.count("\n", 0, m.start()) + 1
            check_usage(Block(page, line, "", " ".join(m.group(1).split()), "usage"))  # a span may wrap a line
