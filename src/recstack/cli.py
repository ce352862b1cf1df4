"""The `recstack` command line: a thin layer over the Python API.

``main(argv)`` maps every outcome to one exit code (the table in
:mod:`recstack.errors`, also in the README):

* a :class:`~recstack.errors.RecstackError` (bad input): one line ``error: ...``,
  its ``exit_code`` (2; 3 for a contended ``--strict`` run, ...);
* a :class:`~recstack.errors.UserCodeError`: that line, then the user's own
  traceback frames (not recstack's or torch's);
* an OSError the environment caused (a full disk, no permission, too many open
  files: :data:`recstack.errors.ENV_ERRNOS`): one line naming the path, exit 5
  (a name longer than the file system allows: exit 2);
* anything else is recstack's bug: ``internal error: ...`` and exit 70;
* Ctrl-C: 130; SIGTERM: 143.

``--debug`` (before or after the sub-command) prints the full traceback as well;
``--quiet`` (likewise) silences the progress lines on stderr.
Commands import torch only when they need it, so ``recstack --help`` and
``recstack zoo list`` start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from recstack.cli_types import Parser, config_type, int_at_least, positive_float
from recstack.errors import (
    EXIT_INTERNAL,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    RecstackError,
    Terminated,
    UserCodeError,
    environment_error,
)

SYNOPSIS_WIDTH = 100

__all__ = ["Parser", "config_type", "exit_code_table", "int_at_least", "main", "positive_float", "synopsis"]


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


# -- zoo ------------------------------------------------------------------------
def cmd_zoo_list(args: argparse.Namespace) -> int:
    from recstack.zoo.catalog import list_rows

    rows = list_rows(args.scale)
    if args.json:
        _print_json(rows)
        return 0
    from recstack.render.terminal import zoo_table

    zoo_table(rows)
    return 0


def cmd_zoo_show(args: argparse.Namespace) -> int:
    from recstack.zoo import resolve_config, summary
    from recstack.zoo.build import module_tree
    from recstack.zoo.skeleton import skeleton

    cfg = resolve_config(args.model, args.scale, args.tasks)
    skel = skeleton(cfg)
    info = {
        "config": cfg.model_dump(),
        "tables": [t.model_dump() for t in cfg.resolved_tables()],
        "features": [f.__dict__ for f in skel.features()],
        "summary": summary(cfg),
        "modules": module_tree(skel, args.depth),
    }
    if args.json:
        _print_json(info)
        return 0
    from recstack.render.terminal import zoo_show

    zoo_show(info)
    return 0


def _add_zoo(sub: argparse._SubParsersAction) -> None:
    zoo = sub.add_parser("zoo", help="list and inspect the model zoo")
    zsub = zoo.add_subparsers(dest="zoo_cmd", required=True, metavar="{list,show}")
    from recstack.zoo.config import BUILTIN, ZOO_IDS

    p = zsub.add_parser("list", help=f"the {len(BUILTIN)} zoo models with their sizes")
    p.add_argument("--json", action="store_true", help="print a JSON list to stdout")
    p.add_argument("--scale", type=config_type("scale", "--scale"), default=1.0, help="scale table rows")
    p.set_defaults(func=cmd_zoo_list)
    p = zsub.add_parser("show", help="one model's resolved config and module tree")
    p.add_argument("model", help=f"zoo id ({ZOO_IDS}) or a model YAML file")
    p.add_argument("--json", action="store_true", help="print the config, tables and module tree as JSON")
    p.add_argument("--scale", type=config_type("scale", "--scale"), default=1.0, help="scale table rows")
    p.add_argument("--tasks", type=config_type("tasks", "--tasks"), default=None, help="tasks (mtwnd only)")
    p.add_argument("--depth", type=int_at_least("--depth", 0), default=3, help="module tree depth")
    p.set_defaults(func=cmd_zoo_show)


# Commands run from their own sub-parser alone (``recstack import ...`` builds no other command's parser:
# those import every command module and pydantic's RunConfig, ~0.2 s of start-up per imported trace).
ALONE = {"import": "recstack.traceimport.commands"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; for a ``command`` in :data:`ALONE`, with that command's sub-parser only."""
    from recstack import __version__

    parser = Parser(
        prog="recstack",
        description="Hierarchical, cross-stack profiler and benchmark suite for recommendation models.",
    )
    parser.add_argument("--version", action="version", version=f"recstack {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors (before or after COMMAND)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr (before or after COMMAND)")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    if command in ALONE:
        import importlib

        importlib.import_module(ALONE[command]).register(sub)
    else:
        _add_zoo(sub)
        from recstack.workload.commands import register as register_workload

        register_workload(sub)
        from recstack.commands import register_all

        register_all(sub)
    for p in _leaf_parsers(parser):
        _finish_help(p)
    return parser


# One example per command, shown at the end of its --help (tests/test_docs.py parses every one).
EXAMPLES = {
    "zoo list": "recstack zoo list --scale 0.01",
    "zoo show": "recstack zoo show dlrmv2 --depth 2",
    "workload fit": "recstack workload fit clicks.csv --columns user_id,item_id -o clicks.yaml",
    "workload stats": "recstack workload stats --preset production --batch-size 4096",
    "profile": "recstack profile rmc1 --scale 0.05 --batch-size 512 --workload production -o rmc1.json",
    "show": "recstack show rmc1.json --depth 2 --top 5",
    "demo": "recstack demo --model rmc2 --scale 0.01 --out out/rmc2",
    "report": "recstack report rmc1.json -o rmc1.html",
    "diff": "recstack diff base.json cand.json --fail-on-regression 5 -o diff.html",
    "export": "recstack export rmc1.json --format parquet -o nodes.parquet",
    "machine": "recstack machine --quick --json",
    "roofline": "recstack roofline rmc1.json -o roofline.png --machine auto",
    "analyse": "recstack analyse rmc1.json --machine auto -o classified.json",
    "validate": "recstack validate rmc1.json",
    "serve": "recstack serve rmc1 --scale 0.05 --qps 200 --duration 30",
    "correlate": "recstack correlate results.duckdb -o correlate.html",
    "share": "recstack share din --scale 0.01 --candidates 100",
    "sweep": "recstack sweep --preset characterise -o out/sweep",
    "best": "recstack best results.duckdb --p99 0.02",
    "results": "recstack results results.duckdb --table stages --format csv -o stages.csv",
    "plot": "recstack plot results.duckdb --chart latency -o plots",
    "sweep-report": "recstack sweep-report results.duckdb -o sweep.html",
    "shard-sim": "recstack shard-sim rmc1-tw2.json --ranks 64",
    "import": "recstack import trace.json -o imported.json --machine auto",
    "advise": "recstack advise rmc1 --scale 0.01 --batch-size 256 --budget 5 --apply-to run.yaml",
    "compile": "recstack compile rmc3 --scale 0.01 --compile cfg.yaml --batch-sizes 1,7,64",
    "memory": "recstack memory dlrmv2 --batch-size 4096 --limit 64GiB",
}


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, keeping the epilog's lines (the example) as they are written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _finish_help(p: argparse.ArgumentParser) -> None:
    """The command's example as its epilog, and every flag's default in its help (argparse's %(default)s)."""
    name = p.prog.removeprefix("recstack ")
    if name in EXAMPLES:
        p.epilog = f"example:\n  {EXAMPLES[name]}"
        p.formatter_class = _HelpFormatter
    for a in p._actions:
        if not a.option_strings or a.help == argparse.SUPPRESS or "default" in (a.help or ""):
            continue
        if a.default is None or a.default is False or a.default == argparse.SUPPRESS:
            continue
        a.help = f"{a.help} (default: %(default)s)" if a.help else "default: %(default)s"


# -- synopsis (README) -------------------------------------------------------------
def _leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
        return
    for sp in dict.fromkeys(subs[0].choices.values()):
        yield from _leaf_parsers(sp)


def synopsis() -> str:
    """One usage block per command, generated from the parser (the README's synopsis is this text)."""
    blocks = []
    for p in _leaf_parsers(build_parser()):
        fmt = argparse.HelpFormatter(prog=p.prog, width=SYNOPSIS_WIDTH)
        actions = [a for a in p._actions if not isinstance(a, argparse._HelpAction)]
        fmt.add_usage(p.usage, actions, p._mutually_exclusive_groups, prefix="")
        blocks.append(fmt.format_help().rstrip())
    return "\n".join(blocks) + "\n"


def exit_code_table() -> str:
    """The exit-code table of :mod:`recstack.errors`'s docstring as a Markdown table (for the README)."""
    from recstack import errors

    rows = []
    for line in (errors.__doc__ or "").splitlines():
        head, _, rest = line.strip().partition(" ")
        if head.isdigit() and rest.strip():
            rows.append(f"| {head} | {rest.strip().replace('``', '`')} |")
    return "| code | meaning |\n|---|---|\n" + "\n".join(rows) + "\n"


# -- main ------------------------------------------------------------------------------
def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises Terminated in the main thread (so atomic writes clean up), restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Python warnings print as one ``warning: ...`` line each (no file:line noise)."""
    old = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        sys.stderr.write(f"warning: {message}\n")

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = old


def _split_flag(argv: list[str], flag: str) -> tuple[list[str], bool]:
    """Remove a global ``flag`` (``--debug``, ``--quiet``) wherever it stands before a ``--``."""
    end = argv.index("--") if "--" in argv else len(argv)
    found = flag in argv[:end]
    return [a for i, a in enumerate(argv) if not (i < end and a == flag)], found


def _raised_by_rich_broken_pipe(exc: SystemExit) -> bool:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "on_broken_pipe"


def main(argv: Sequence[str] | None = None) -> int:
    argv, debug = _split_flag(list(sys.argv[1:] if argv is None else argv), "--debug")
    argv, quiet = _split_flag(argv, "--quiet")
    try:
        with _sigterm_raises(), _warnings_as_lines():
            args = build_parser(argv[0] if argv else None).parse_args(argv)
            if quiet:
                from recstack.render.progress import configure

                configure(quiet=True)
            return int(args.func(args) or 0)
    except UserCodeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        if exc.user_frames and not debug:
            sys.stderr.write("your code's frames (most recent call last; --debug shows all):\n")
            sys.stderr.write(exc.user_frames + "\n")
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except RecstackError as exc:
        sys.stderr.write(f"error: {exc}\n")
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except SystemExit as exc:
        # rich turns a closed stdout (| head) into SystemExit(1) after pointing stdout at /dev/null;
        # for us a reader that went away is success, as with a plain BrokenPipeError below.
        if _raised_by_rich_broken_pipe(exc):
            return 0
        raise
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_SIGINT
    except Terminated:
        sys.stderr.write("terminated\n")
        return EXIT_SIGTERM
    except BrokenPipeError:
        # The reader went away (| head); point stdout at /dev/null so the exit flush does not complain.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        env = environment_error(exc)
        if env is None:
            return _internal(exc, debug)
        sys.stderr.write(f"error: {env}\n")
        if debug:
            traceback.print_exc()
        return env.exit_code
    except Exception as exc:
        return _internal(exc, debug)


def _internal(exc: BaseException, debug: bool) -> int:
    """recstack's own bug: one line, exit 70 (``--debug``: the traceback)."""
    text = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    sys.stderr.write(f"internal error: {what}; please report it (run with --debug for the traceback)\n")
    if debug:
        traceback.print_exc()
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
