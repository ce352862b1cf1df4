"""``recstack advise MODEL|factory [run options] [--goal ...] [--levers ...] [--budget MIN] [--json] [-o FILE]
[--apply-to RUN.yaml] [--report PAGE.html] [--store STORE] [--from PROFILE.json] [--strict]``; the engine is :func:`recstack.advisor.advise.advise`
(``recstack.advise``). docs/advise.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recstack.advisor.advise import (
    DEFAULT_ITERS,
    DEFAULT_ROUNDS,
    DEFAULT_TOLERANCE,
    GOALS,
    advise,
    write_apply,
    write_outputs,
)
from recstack.advisor.levers import KINDS
from recstack.cli_base import add_command
from recstack.errors import ConfigError
from recstack.render.advice import render


def cmd_advise(args: argparse.Namespace) -> int:
    from recstack.cli_base import print_document
    from recstack.cli_types import flags_named, run_config_from_args
    from recstack.outputs import check_writable

    out = check_writable(args.output, "-o/--output") if args.output else None
    apply_to = check_writable(args.apply_to, "--apply-to") if args.apply_to else None
    report = check_writable(args.report, "--report") if args.report else None
    if args.store:
        from recstack.advisor.store import check_store_arg

        check_store_arg(args.store)  # a foreign, newer or damaged store: exit 2 before anything is measured
    if args.from_profile and not Path(args.from_profile).is_file():  # before torch is imported
        raise ConfigError(f"{args.from_profile}: no such file; give a profile JSON written by `recstack profile -o`",
                          field="--from")
    cfg = run_config_from_args(args)
    with flags_named():
        doc = advise(config=cfg, goal=args.goal, levers=args.levers, budget_min=args.budget,
                     tolerance=args.tolerance, from_profile=args.from_profile, strict=args.strict,
                     rounds=args.rounds, advise_iters=args.advise_iters)
    print_document(doc, render, out, args.json)
    if apply_to is not None:
        print(write_apply(doc, apply_to), file=sys.stderr if args.json else sys.stdout)
    for line in write_outputs(doc, report, args.store):
        print(line, file=sys.stderr if args.json else sys.stdout)
    if out is not None and not args.json:
        print(f"advice written to {out}")
    sys.stdout.flush()
    return 0


def _levers_arg(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = sorted(set(kinds) - set(KINDS))
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"lever kinds from {', '.join(KINDS)}, comma-separated (got {text!r})")
    return kinds


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``advise`` to the main CLI's sub-parsers."""
    from recstack.cli_base import add_result_outputs, int_at_least, positive_float
    from recstack.cli_types import add_run_arguments

    p = add_command(
        sub,
        "advise", cmd_advise, help="measured what-ifs for each bottleneck, ranked, combined, applied",
        description="Profile the model, list the levers its stages suggest, measure each against the baseline in "
        "alternating rounds, recommend only what beats noise (and, for dtype levers, stays within --tolerance), "
        "measure the non-conflicting winners together, and write the winner's RunConfig. docs/advise.md.",
    )
    add_run_arguments(p, frozenset({"nproc", "sharding", "rank_placement", "compile"}))
    p.add_argument("--config", default=None, metavar="RUN.yaml", help="load the run options from YAML")
    p.add_argument("--goal", choices=GOALS, default="throughput",
                   help="throughput (time per sample) or latency (step time); p99 is not implemented yet")
    p.add_argument("--levers", type=_levers_arg, default=None, metavar="KIND,...",
                   help=f"only these lever kinds ({', '.join(KINDS)})")
    p.add_argument("--budget", type=positive_float("--budget", 1440), default=None, metavar="MIN",
                   help="bound the wall time in minutes (fewer levers and rounds; the output says what was cut)")
    p.add_argument("--tolerance", type=positive_float("--tolerance", 1), default=DEFAULT_TOLERANCE,
                   help="largest relative output deviation of a lever that changes the arithmetic (dtype, backend, option)")
    p.add_argument("--rounds", type=int_at_least("--rounds", 2, 100), default=DEFAULT_ROUNDS,
                   help="alternating measurement rounds")
    p.add_argument("--advise-iters", type=int_at_least("--advise-iters", 4, 10_000), default=DEFAULT_ITERS,
                   help="timed steps per arm in all, split over the rounds")
    p.add_argument("--from", dest="from_profile", default=None, metavar="PROFILE.json",
                   help="read the profile instead of profiling first")
    p.add_argument("--strict", action="store_true", help="exit 3 and give no advice when the profile or the measurement rounds were contended")
    add_result_outputs(p, "advice", config=False)
    p.add_argument("--apply-to", default=None, metavar="RUN.yaml", help="write the winner's RunConfig YAML here")
    p.add_argument("--report", default=None, metavar="advice.html",
                   help="write an offline HTML page: the ranked table and before/after stage bars")
    p.add_argument("--store", default=None, metavar="STORE",
                   help="append every what-if to this results store's advice table (created or migrated)")


__all__ = ["cmd_advise", "register"]
