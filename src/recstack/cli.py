"""The `recstack` command line: a thin layer over the Python API.

Bad input raises :class:`~recstack.errors.RecstackError`; ``main`` prints it on
one line as ``error: ...`` and exits 2 (no traceback unless ``--debug``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from recstack.cli_types import int_at_least, positive_float
from recstack.errors import RecstackError


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


# -- zoo ------------------------------------------------------------------------
def cmd_zoo_list(args: argparse.Namespace) -> int:
    from recstack.zoo import builtin_names, summary

    rows = [summary(n, args.scale) for n in builtin_names()]
    if args.json:
        _print_json(rows)
        return 0
    from recstack.render.terminal import zoo_table

    zoo_table(rows)
    return 0


def cmd_zoo_show(args: argparse.Namespace) -> int:
    from recstack.zoo import resolve_config, summary
    from recstack.zoo.build import _skeleton, module_tree

    cfg = resolve_config(args.model, args.scale, args.tasks)
    skel = _skeleton(cfg)
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
    p = zsub.add_parser("list", help="the eight models with their sizes")
    p.add_argument("--json", action="store_true", help="print a JSON list to stdout")
    p.add_argument("--scale", type=positive_float("--scale"), default=1.0, help="scale table rows (default 1)")
    p.set_defaults(func=cmd_zoo_list)
    p = zsub.add_parser("show", help="one model's resolved config and module tree")
    p.add_argument("model", help="model id (rmc1, ..., dien) or a model YAML file")
    p.add_argument("--json", action="store_true")
    p.add_argument("--scale", type=positive_float("--scale"), default=1.0)
    p.add_argument("--tasks", type=int_at_least("--tasks", 1), default=None, help="tasks (mtwnd only)")
    p.add_argument("--depth", type=int_at_least("--depth", 0), default=3, help="module tree depth")
    p.set_defaults(func=cmd_zoo_show)


def build_parser() -> argparse.ArgumentParser:
    from recstack import __version__

    parser = argparse.ArgumentParser(
        prog="recstack",
        description="Hierarchical, cross-stack profiler and benchmark suite for recommendation models.",
    )
    parser.add_argument("--version", action="version", version=f"recstack {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    _add_zoo(sub)
    from recstack.workload.commands import register as register_workload

    register_workload(sub)
    from recstack.commands import register_all

    register_all(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.quiet:
            from recstack.render.progress import configure

            configure(quiet=True)
        return int(args.func(args) or 0)
    except RecstackError as exc:
        if debug:
            raise
        sys.stderr.write(f"error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
