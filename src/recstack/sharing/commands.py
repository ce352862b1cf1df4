"""``recstack share MODEL --candidates C [--requests R] [--json]``: batched against shared execution.

``register(subparsers)`` adds the command. Run options are RunConfig's flags
(as for ``recstack profile``; the batch is R x C rows, so ``--batch-size`` is
refused); ``-o`` writes the JSON document, ``--report`` the HTML page.
"""

from __future__ import annotations

import argparse
import json
import sys

from recstack.cli_base import add_command, int_at_least
from recstack.errors import ConfigError
from recstack.render.sharing import render_text


def cmd_share(args: argparse.Namespace) -> int:
    from recstack.cli_types import flags_named, run_config_from_args
    from recstack.outputs import atomic_write_text, check_writable
    from recstack.sharing.run import check_counts

    if hasattr(args, "batch_size"):
        raise ConfigError("share's batch is --requests x --candidates rows; drop --batch-size", field="--batch-size")
    check_counts(args.requests, args.candidates)
    out = check_writable(args.output, "-o/--output") if args.output else None
    report = check_writable(args.report, "--report") if args.report else None
    cfg = run_config_from_args(args)
    from recstack.sharing.run import share_config

    with flags_named():
        result = share_config(cfg, requests=args.requests, candidates=args.candidates)
    text = json.dumps(result, indent=1, allow_nan=False)
    if out is not None:
        from recstack.outputs import write_result

        write_result(out, lambda p: atomic_write_text(p, text + "\n"), "result")
    if report is not None:
        from recstack.report.sharing import write_share_report

        write_share_report(result, report)
    if args.json:
        print(text)
    else:
        print(render_text(result))
        for path, what in ((out, "result"), (report, "report")):
            if path is not None:
                print(f"{what} written to {path}")
    sys.stdout.flush()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``share`` to the main CLI's sub-parsers."""
    from recstack.cli_base import add_result_outputs
    from recstack.cli_types import add_run_arguments

    p = add_command(
        sub,
        "share", cmd_share,
        help="request-side compute sharing: batched against shared execution of a ranking request",
        description="Run a zoo model on R ranking requests x C candidates (request-side features repeated, as "
        "served) and again with request-side work done once per request (deduplicated at the input, expanded "
        "where it meets candidate values); report the request-only share of every stage, the time, FLOPs and "
        "bytes saved, the speedup and whether the outputs agree (rtol 1e-5, atol 1e-6).",
    )
    # share runs one process, uncompiled, with no op pass or roofline: these run options do nothing here
    add_run_arguments(p, frozenset({"nproc", "sharding", "rank_placement", "compile", "machine", "op_iters",
                                    "workload_batches"}))
    p.add_argument("--candidates", type=int_at_least("--candidates", 1), required=True,
                   help="candidates per request (C)")
    p.add_argument("--requests", type=int_at_least("--requests", 1), default=1, help="requests per batch (R; default 1)")
    add_result_outputs(p)
    p.add_argument("--report", default=None, metavar="HTML", help="write the sharing report page here")


__all__ = ["cmd_share", "register"]
