"""The sweep's CLI: ``recstack sweep``, ``best``, ``results``, ``plot``, ``sweep-report`` (docs/sweeps.md).

The point runner and ``recstack.sweep(...)`` are in :mod:`recstack.sweeps.runner`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from recstack.cli_base import add_command, int_at_least, positive_float
from recstack.errors import ConfigError, PartialResultsError
from recstack.sweeps.run import MAX_PARALLEL, MAX_TIMEOUT_S
from recstack.sweeps.runner import sweep


def cmd_sweep(args: argparse.Namespace) -> int:
    from recstack.sweeps.presets import preset

    if bool(args.spec) == bool(args.preset):
        raise ConfigError("give a sweep file or --preset NAME (one of them)", field="SWEEP.yaml")
    spec: Any = preset(args.preset) if args.preset else args.spec
    if args.spec and not Path(args.spec).is_file():
        raise ConfigError(f"{args.spec}: no such file", field="SWEEP.yaml")
    res = sweep(spec, args.output, store=args.store, executor=args.executor, address=args.address,
                parallel=args.parallel, timeout_s=args.timeout, retry_failed=args.retry_failed)
    share = res.overhead_share
    print(f"sweep {res.sweep_id}: {res.total} points, {res.skipped} already in the store, {res.run} run, "
          f"{res.failed} failed; {res.wall_s:.1f} s wall, timed steps {res.timed_s:.1f} s"
          + (f" (overhead {share:.0%} of wall)" if share is not None and res.run else ""))
    print(f"results in {res.store}")
    for note in res.notes:
        print(f"note: {note}")
    if res.failed:
        raise PartialResultsError(f"{res.failed} of {res.run} points failed (their reasons are in the store: "
                                  f"recstack results {res.store})")
    return 0


def cmd_best(args: argparse.Namespace) -> int:
    from recstack.results import best, load

    rows = best(load(args.store), model=args.model, p99=args.p99, by=args.by,
                include_contended=args.include_contended, advice=load(args.store, "advice"))
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    from recstack.render.results_table import best_table

    best_table(rows)
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from recstack.outputs import atomic_output, check_writable
    from recstack.results import load

    if args.format == "parquet" and not args.output:
        raise ConfigError("parquet is binary; give -o FILE", field="--format")
    if args.output:
        check_writable(args.output, "-o/--output")
    df = load(args.store, args.table)
    if args.format == "table":
        from recstack.render.results_table import points_table

        text = points_table(df, args.table)
        if args.output:
            from recstack.outputs import atomic_write_text

            atomic_write_text(args.output, text + "\n")
        else:
            print(text)
        return 0
    if args.format == "csv" and not args.output:
        df.to_csv(sys.stdout, index=False)
        return 0
    with atomic_output(args.output) as tmp:
        if args.format == "csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False)
    print(f"{len(df)} rows written to {args.output}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable
    from recstack.render.sweep_charts import CHARTS, write_charts
    from recstack.results import load
    from recstack.results.sweep_figures import sweep_figures

    out = Path(args.output)
    check_writable(out / f"probe.{args.format}", "-o/--output")
    figs = sweep_figures(load(args.store), load(args.store, "stages"), x=args.x, y=args.y)
    charts = list(CHARTS) if args.chart == "all" else [args.chart]
    for p in write_charts(figs, out, charts, args.format):
        print(f"chart written to {p}")
    return 0


def cmd_sweep_report(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable

    check_writable(args.output, "-o/--output")
    from recstack.outputs import atomic_write_text, write_result
    from recstack.report.sweep_report import render_sweep_report

    html = render_sweep_report(args.store, x=args.x, y=args.y)
    path = write_result(args.output, lambda p: atomic_write_text(p, html), "report")
    print(f"sweep report written to {path.resolve()}")
    return 0


def _axes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--x", default="batch_size", help="heat map: the RunConfig field across (default batch_size)")
    p.add_argument("--y", default="backend", help="heat map: the RunConfig field down (default backend)")


def register(sub: argparse._SubParsersAction) -> None:
    from recstack.results.best import BY
    from recstack.sweeps.presets import PRESETS

    p = add_command(sub, "sweep", cmd_sweep, help="run a grid of RunConfigs into a results store (resumable)")
    p.add_argument("spec", nargs="?", metavar="SWEEP.yaml", help="sweep file: base/grid/zip/points/exclude")
    p.add_argument("--preset", choices=list(PRESETS), help="a named sweep instead of a file")
    p.add_argument("-o", "--output", default="sweep-out", help="folder of the store and profiles (default sweep-out)")
    p.add_argument("--store", default=None, help="the store file (default OUTPUT/results.duckdb)")
    p.add_argument("--executor", choices=["local", "ray"], default="local", help="where points run (default local)")
    p.add_argument("--address", default=None, help="Ray cluster address (--executor ray; default: start a local Ray)")
    p.add_argument("--parallel", type=int_at_least("--parallel", 1, MAX_PARALLEL), default=1,
                   help="points run side by side (local; default 1: this is a measuring host)")
    p.add_argument("--timeout", type=positive_float("--timeout", MAX_TIMEOUT_S, " s (a week)"), default=600.0,
                   help="seconds per point before it is killed and recorded as timeout (default 600)")
    p.add_argument("--retry-failed", action="store_true", help="run failed and timed-out points again")

    p = add_command(sub, "best", cmd_best, help="the best configuration per model in a results store")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--model", default=None, help="only this model")
    p.add_argument("--p99", type=positive_float("--p99"), default=None, metavar="SECONDS",
                   help="also the best whose p99 step latency is at most this")
    p.add_argument("--by", choices=list(BY), default="throughput", help="rank by (default throughput)")
    p.add_argument("--include-contended", action="store_true", help="rank contended points too")
    p.add_argument("--json", action="store_true", help="print JSON: one object per model")

    p = add_command(sub, "results", cmd_results, help="a results store's points (or stages, sweeps, serving, compile) as a table, CSV or Parquet")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--format", choices=["table", "csv", "parquet"], default="table")
    p.add_argument("--table", choices=["points", "stages", "sweeps", "serving", "compile", "advice"], default="points")
    p.add_argument("-o", "--output", default=None, help="write here (parquet: required)")

    p = add_command(sub, "plot", cmd_plot, help="a results store's charts as PNG or SVG (matplotlib)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--chart", choices=["all", "throughput", "latency", "stages", "heatmap"], default="all")
    p.add_argument("--format", choices=["png", "svg"], default="png")
    p.add_argument("-o", "--output", default="sweep-charts", help="folder for the charts (default sweep-charts)")
    _axes(p)

    p = add_command(sub, "sweep-report", cmd_sweep_report, help="a results store as one offline HTML page")
    p.add_argument("store", metavar="STORE")
    p.add_argument("-o", "--output", default="sweep-report.html")
    _axes(p)


__all__ = ["register"]
