"""``recstack memory MODEL [run options] [--limit SIZE] [--json] [-o FILE]``: will it fit, and what fits.

Prints the predicted peak per stage and in all, the top consumers, and the largest batch size and table
scale whose predicted peak fits ``--limit`` (default: this host's available memory). Nothing is allocated.
"""

from __future__ import annotations

import argparse
import sys

from recstack.cli_base import add_command, int_at_least
from recstack.memory.predict import analyse, parse_size
from recstack.render.memory import render


def cmd_memory(args: argparse.Namespace) -> int:
    from recstack.cli_base import print_document
    from recstack.cli_types import flags_named, run_config_from_args
    from recstack.config.limits import available_bytes
    from recstack.outputs import check_writable

    limit = parse_size(args.limit) if args.limit else available_bytes()
    out = check_writable(args.output, "-o/--output") if args.output else None
    cfg = run_config_from_args(args)
    with flags_named():
        doc = analyse(cfg, limit, cache_hit=args.cache_hit, cache_batches=args.cache_batches,
                      measure=args.measure)
    print_document(doc, render, out, args.json)
    if out is not None and not args.json:
        print(f"result written to {out}")
    sys.stdout.flush()
    return 0


# run options the prediction does not read: not offered, and refused in --config (as serve, share, compile)
MEMORY_UNUSED = frozenset({"learning_rate", "threads", "iters", "warmup", "op_iters", "stage_rules", "machine",
                           "rank_placement", "compile", "workload_batches"})


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``memory`` to the main CLI's sub-parsers."""
    from recstack.cli_base import add_result_outputs
    from recstack.cli_types import add_run_arguments

    p = add_command(
        sub,
        "memory", cmd_memory, help="predicted memory per stage, top consumers, the largest batch and scale that fit",
        description="Predict a zoo model's memory from its config and run options (nothing allocated): the peak "
        "per stage and in all, the top consumers, and the largest batch size and table scale that fit --limit. "
        "What is counted and what is not: docs/memory.md.",
    )
    add_run_arguments(p, MEMORY_UNUSED)
    p.add_argument("--limit", default=None, metavar="SIZE",
                   help="memory limit, e.g. 24GiB, 512MiB or bytes (default: this host's available memory)")
    p.add_argument("--cache-hit", type=float, default=None, metavar="RATE",
                   help="also size each table's embedding cache (LRU and LFU, 32-way sets) for this hit rate, "
                   "simulated over --cache-batches batches of the workload")
    p.add_argument("--cache-batches", type=int_at_least("--cache-batches", 1), default=4,
                   help="batches of the workload the cache simulation replays (default 4)")
    p.add_argument("--measure", action="store_true", help="also build the model and measure each stage's per-step "
                   "peak in recstack profile --memory's memory pass, beside the prediction")
    add_result_outputs(p)


__all__ = ["cmd_memory", "register"]
