"""``recstack compile``: eager vs compiled per stage, numerics, compile time, graphs, breaks, recompiles.

``recstack compile MODEL --compile cfg.yaml [--batch-sizes 1,7,64] [--mode train] [--json]``;
``recstack compile MODEL --recommend [--budget MINUTES] [-o best.yaml]`` searches configs
(:mod:`recstack.compilation.recommend`) and writes the best as YAML for ``recstack profile --compile``;
with ``--store FILE.duckdb`` each candidate's results become a row of the results store's ``compile`` table.
A silent fallback to eager or numerics past the tolerance is an error of the config (exit 2), after
the report is printed.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from recstack.cli_base import positive_float
from recstack.compilation.model import load
from recstack.errors import ConfigError

MAX_SIZES = 64


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers (got {text!r})") from None
    if not sizes or any(s < 1 for s in sizes) or len(sizes) > MAX_SIZES:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_SIZES} integers >= 1 (got {text!r})")
    return sizes


def cmd_compile(args: argparse.Namespace) -> int:
    from recstack.compilation.store import store_writer
    from recstack.compilation.verdict import check_report
    from recstack.outputs import atomic_write_text, check_writable, write_result
    from recstack.render.compile_report import emit

    if args.output:
        check_writable(args.output, "-o/--output")
    cfg = args.run_config_from_args(args)
    if args.recommend:
        from recstack.compilation.recommend import recommend

        out_file = args.output or "compile.recommended.yaml"
        check_writable(out_file, "-o/--output")
        on_result, store = store_writer(args.store, cfg) if args.store else (None, None)
        result = recommend(cfg, budget_s=args.budget * 60, batch_sizes=args.batch_sizes, loader=load,
                           on_result=on_result)
        out_file = str(write_result(out_file, lambda p: atomic_write_text(p, result["config_yaml"]), "config"))
        result["written"] = out_file
        result["store"] = ({"path": store.path, "table": "compile", "search_id": store.search_id}
                           if store is not None else None)
        emit(result, args.json, recommend=True)
        return 0
    if args.store:
        raise ConfigError("--store applies to --recommend (its candidates' results)", field="--store")
    if cfg.compile is None:
        raise ConfigError("give a compile config YAML (or --recommend to search for one)", field="--compile")
    from recstack.compilation.coldwarm import compile_times
    from recstack.compilation.config import load_compile_config
    from recstack.compilation.session import run_session

    ccfg = load_compile_config(cfg.compile)
    source = cfg.compile if isinstance(cfg.compile, str) else "--compile"
    report = run_session(cfg, ccfg, batch_sizes=args.batch_sizes, source=source, loader=load)
    in_process = report["compile_time_s"]["in_process"]
    if args.compile_time:
        report["compile_time_s"] = {**compile_times(cfg, ccfg), "in_process": in_process}
    else:
        report["compile_time_s"] = {"cold": None, "warm": None, "phases": in_process["phases"],
                                    "in_process": in_process,
                                    "unavailable": "unavailable: --no-compile-time (fresh-process runs skipped)"}
    if args.output:
        text = json.dumps(report, indent=1, default=str) + "\n"
        write_result(args.output, lambda p: atomic_write_text(p, text), "report")
    emit(report, args.json)
    check_report(report)
    return 0


def register(sub: argparse._SubParsersAction, add_run_arguments: Any, run_config_from_args: Any) -> None:
    """Add ``compile``; the run-option helpers of :mod:`recstack.commands` are passed in (no import cycle)."""
    p = sub.add_parser("compile", help="torch.compile from a config: eager vs compiled per stage, graph breaks, "
                                       "recompiles, compile time; --recommend searches configs")
    # one process, no op pass, no roofline: these run options would do nothing here
    add_run_arguments(p, frozenset({"nproc", "sharding", "rank_placement", "machine", "op_iters"}))
    p.add_argument("--config", default=None, metavar="RUN.yaml", help="load the run options from YAML")
    p.add_argument("--batch-sizes", type=_batch_sizes, default=None, metavar="N,N,...",
                   help="batch sizes to run compiled for recompiles (default: the workload's query sizes and 1)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("-o", "--output", default=None,
                   help="write the JSON report here (with --recommend: the YAML config; default "
                        "compile.recommended.yaml)")
    p.add_argument("--compile-time", action=argparse.BooleanOptionalAction, default=True,
                   help="measure cold and warm compile time in two fresh processes (default: on)")
    p.add_argument("--recommend", action="store_true", help="search compile configs and write the best as YAML")
    p.add_argument("--budget", type=positive_float("--budget", 24 * 60, " minutes"), default=20.0, metavar="MINUTES",
                   help="time budget of --recommend (default: 20)")
    p.add_argument("--store", default=None, metavar="FILE.duckdb",
                   help="--recommend: write every candidate's results to this results store (table compile; "
                        "a sweep's store or a new file)")
    p.set_defaults(func=cmd_compile, run_config_from_args=run_config_from_args)


__all__ = ["cmd_compile", "register"]
