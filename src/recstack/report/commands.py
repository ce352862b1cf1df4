"""CLI commands over saved profiles: ``report``, ``diff`` and ``export``.

``register(subparsers)`` adds the three sub-commands; each sets ``func`` to a
callable ``(args) -> int`` (the exit status). Bad input raises
:class:`~recstack.errors.RecstackError` (the main CLI prints ``error: <msg>``
and exits 2). ``diff --fail-on-regression PCT`` returns 1 when the run or a
stage regressed beyond noise by more than PCT percent.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from recstack.cli_base import add_command, int_at_least
from recstack.errors import DataError


def percent(flag: str) -> Callable[[str], float]:
    """argparse type: a finite percentage >= 0, named ``flag`` in the error."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a number of percent (got {text!r})") from None
        if not math.isfinite(v) or v < 0:
            raise argparse.ArgumentTypeError(f"{flag} must be a percentage >= 0 (got {text!r})")
        return v

    return parse


def cmd_report(args: argparse.Namespace) -> int:
    from recstack.outputs import beside, check_writable
    from recstack.report.build import write_report
    from recstack.tree import Profile

    out = check_writable(args.output or beside(args.profile, ".html"), "-o/--output")
    prof = Profile.load(args.profile)
    write_report(prof, out, title=args.title)
    print(f"report written to {out}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable
    from recstack.report.diff import NoiseRule, diff_profiles
    from recstack.report.diff_render import print_diff, write_diff_html
    from recstack.tree import Profile

    if args.output:
        check_writable(args.output, "-o/--output")
    a, b = Profile.load(args.a), Profile.load(args.b)
    rule = NoiseRule(min_change_pct=args.min_change, fixed_noise_pct=args.noise_floor)
    result = diff_profiles(a, b, rule=rule, level=args.level, allow_different_models=args.allow_different_models)
    print_diff(result, top=args.top, fail_pct=args.fail_on_regression)
    if args.output:
        write_diff_html(result, args.output, fail_pct=args.fail_on_regression)
        print(f"diff written to {args.output}")
    if args.fail_on_regression is not None and result.failures(args.fail_on_regression):
        return 1
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from recstack.export import FORMATS, export
    from recstack.tree import Profile

    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lstrip(".").lower() if args.output else ""
        fmt = suffix if suffix in FORMATS else "csv"
    if fmt not in FORMATS:
        raise DataError(f"--format must be one of {', '.join(FORMATS)} (got {fmt!r})")
    from recstack.outputs import beside, check_writable

    out = check_writable(args.output or beside(args.profile, f".nodes.{fmt}"), "-o/--output")
    prof = Profile.load(args.profile)
    export(prof, out, fmt)
    print(f"{fmt} written to {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``report``, ``diff`` and ``export`` to the main CLI's sub-parsers."""
    p = add_command(sub, "report", cmd_report, help="write a self-contained HTML report of a saved profile")
    p.add_argument("profile", help="profile JSON (from recstack profile -o)")
    p.add_argument("-o", "--output", default=None, help="HTML file to write (default: the profile's name, .html)")
    p.add_argument("--title", default=None, help="page title (default: the model name)")

    p = add_command(sub, "diff", cmd_diff, help="compare two profiles node by node, judging changes against noise")
    p.add_argument("a", help="baseline profile JSON")
    p.add_argument("b", help="candidate profile JSON")
    p.add_argument("-o", "--output", default=None, help="also write the diff as a self-contained HTML page")
    p.add_argument(
        "--fail-on-regression", type=percent("--fail-on-regression"), default=None, metavar="PCT",
        help="exit 1 when the run or any stage got slower by more than PCT percent beyond noise",
    )
    p.add_argument("--level", choices=("op", "stage"), default=None,
                   help="match level (default: op when the module trees match, else stage)")
    p.add_argument("--min-change", type=percent("--min-change"), default=2.0, metavar="PCT",
                   help="with p10-p90 spread: smallest change counted as real, percent (default 2)")
    p.add_argument("--noise-floor", type=percent("--noise-floor"), default=10.0, metavar="PCT",
                   help="without spread (modules, ops): fixed noise floor, percent (default 10)")
    p.add_argument("--top", type=int_at_least("--top", 1), default=15, help="module/op changes listed in the terminal (default 15)")
    p.add_argument("--allow-different-models", action="store_true",
                   help="compare profiles of two different models (refused by default: exit 2)")

    p = add_command(sub, "export", cmd_export, help="write a profile as a table, one row per node (CSV or Parquet)")
    p.add_argument("profile", help="profile JSON")
    p.add_argument("--format", choices=("csv", "parquet"), default=None,
                   help="table format (default: from the -o suffix, else csv)")
    p.add_argument("-o", "--output", default=None, help="file to write (default: <profile>.nodes.<format>)")


__all__ = ["cmd_diff", "cmd_export", "cmd_report", "register"]
