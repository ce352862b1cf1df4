"""``recstack serve``: open-loop load on a pool of worker processes; ``--search`` for the QPS at a p99 target.

The run options are RunConfig's (generated flags: :func:`recstack.cli_types.add_run_arguments`);
the serving flags are defined here. ``MODEL`` ``spin`` is the built-in model
whose every batch busy-waits ``--service-ms``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from recstack.cli_base import DeprecatedAlias, add_command, int_at_least, positive_float
from recstack.cli_types import add_run_arguments, run_config_from_args
from recstack.errors import EXIT_SIGINT, ConfigError, PartialResultsError
from recstack.serving import MAX_WORKERS, QUERY_SIZE_MAX

MAX_WALL_S = 6 * 3600.0  # --max-wall's default: a serve or search bounded beyond this is refused before it starts


def _non_negative(name: str) -> Any:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number (got {text!r})") from None
        if not 0 <= v < float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a number >= 0 (got {text!r})")
        return v

    return parse


def _accel(text: str) -> tuple[float, float]:
    ms, _, us = text.partition(":")
    try:
        out = (float(ms), float(us or 0))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sim-accel takes MS[:US_PER_CANDIDATE] (got {text!r})") from None
    if not all(0 <= v < float("inf") for v in out):
        raise argparse.ArgumentTypeError(f"--sim-accel values must be >= 0 (got {text!r})")
    return out


# RunConfig fields serve does not use (it batches by --max-batch, always infers, builds no stage tree)
SERVE_UNUSED = frozenset({"batch_size", "mode", "optimizer", "learning_rate", "iters", "warmup", "op_iters",
                          "stage_rules", "machine", "nproc", "sharding", "rank_placement", "compile",
                          "workload_batches"})


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p, SERVE_UNUSED)
    p.add_argument("--config", default=None, metavar="RUN.yaml", help="load the run options from YAML")
    p.add_argument("--qps", type=positive_float("--qps"), default=None,
                   help="offered load, queries per second (default 100; --search: the starting point, "
                        "default 0.8 x each configuration's measured capacity)")
    p.add_argument("--duration", type=positive_float("--duration"), default=10.0,
                   help="seconds of scheduled arrivals (--search: at least; default 10)")
    p.add_argument("--max-batch", type=int_at_least("--max-batch", 1, QUERY_SIZE_MAX), default=256,
                   help="split queries into batches of at most this many candidates (default 256)")
    p.add_argument("--workers", type=int_at_least("--workers", 1, MAX_WORKERS), default=None,
                   help="CPU worker processes (default: usable cores // threads)")
    p.add_argument("--query-size", type=int_at_least("--query-size", 1, QUERY_SIZE_MAX), default=None,
                   help="every query has this many candidates (default: --query-sizes)")
    p.add_argument("--query-sizes", choices=["workload", "lognormal"], default="workload",
                   help="workload: the workload's query_sizes (MLPerf quantiles unless the spec says); "
                        "lognormal: mu 5.1, sigma 0.2 clamped to [1, 1024] (DeepRecSys)")
    p.add_argument("--arrivals", default="poisson", metavar="poisson|diurnal[:PERIOD[:AMPL]]|FILE.csv",
                   help="arrival process (seeded by --seed); a CSV replays one timestamp (s) per line")
    p.add_argument("--grace", type=_non_negative("--grace"), default=None,
                   help="seconds after the schedule's end before unfinished requests are late "
                        "(default max(1, 10%% of the duration))")
    p.add_argument("--queue-depth", type=int_at_least("--queue-depth", 1), default=2,
                   help="with several workers, due batches a worker may hold: 1 is one central FIFO queue (M/D/c) "
                        "with a pipe round trip per batch; 2 (default) lets the next batch wait in its pipe")
    # the flag's old name (--depth is tree depth in profile and show): accepted, hidden, warned about
    p.add_argument("--depth", dest="queue_depth", type=int_at_least("--depth", 1), action=DeprecatedAlias,
                   new="--queue-depth", help=argparse.SUPPRESS)
    p.add_argument("--lookahead-ms", type=_non_negative("--lookahead-ms"), default=None,
                   help="hand batches to workers up to this long before they are due (they start at their "
                        "arrival; default 20); 0: at their arrival")
    p.add_argument("--service-ms", type=_non_negative("--service-ms"), default=None,
                   help="spin model: busy-wait per batch, ms")
    p.add_argument("--per-sample-us", type=_non_negative("--per-sample-us"), default=0.0,
                   help="spin model: busy-wait per candidate, us (default 0)")
    p.add_argument("--gpu-threshold", type=int_at_least("--gpu-threshold", 0), default=None,
                   help="queries of more candidates go whole to the accelerator workers (CPU/GPU split)")
    p.add_argument("--accel-workers", type=int_at_least("--accel-workers", 1, MAX_WORKERS), default=1,
                   help="accelerator workers of a split (default 1)")
    p.add_argument("--sim-accel", type=_accel, default=None, metavar="MS[:US]",
                   help="simulated accelerator for the split: busy-wait MS per batch + US per candidate")
    p.add_argument("--oversubscribe", action="store_true", help="allow workers x threads > usable cores")
    p.add_argument("--search", action="store_true", help="find the highest QPS meeting --p99, over --grid")
    p.add_argument("--p99", type=positive_float("--p99"), default=None, metavar="SECONDS",
                   help="--search: the p99 latency target")
    p.add_argument("--budget", type=positive_float("--budget"), default=15.0, metavar="MINUTES",
                   help="--search: time budget (default 15)")
    p.add_argument("--grid", default=None, metavar="KEY=V,V;...",
                   help="--search grid over max_batch, workers, threads, backend, dtype, gpu_threshold")
    p.add_argument("--tail-samples", type=int_at_least("--tail-samples", 1), default=100,
                   help="--search: samples beyond the percentile every full probe holds (default 100)")
    p.add_argument("--screen-samples", type=int_at_least("--screen-samples", 1), default=20,
                   help="--search: samples beyond the percentile of a screening probe (default 20; "
                        ">= --tail-samples: every probe is full)")
    p.add_argument("--store", default=None, metavar="FILE.duckdb",
                   help="--search: write every probe and the result to this results store "
                        "(table serving; a sweep's store or a new file)")
    p.add_argument("--chart-out", dest="chart", default=None, metavar="FILE.png",
                   help="--search: draw p99 vs load per configuration and the QPS at target (PNG)")
    # its old name: --chart is the kind of chart in recstack plot, here it named a file (hidden, warned about)
    p.add_argument("--chart", dest="chart", action=DeprecatedAlias, new="--chart-out", help=argparse.SUPPRESS)
    p.add_argument("--max-wall", type=positive_float("--max-wall"), default=MAX_WALL_S, metavar="SECONDS",
                   help="refuse a run whose wall time, bounded from its inputs (schedule + grace; --search: "
                        f"budget + one probe), exceeds this (default {MAX_WALL_S:g}: 6 hours)")
    p.add_argument("-o", "--output", default=None, help="write the result JSON here")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def options_from_args(args: argparse.Namespace) -> Any:
    from recstack.serving.arrivals import parse_arrivals
    from recstack.serving.service import ServeOptions

    return ServeOptions(
        qps=args.qps or 100.0, duration_s=args.duration, max_batch=args.max_batch, workers=args.workers,
        query_size=args.query_size, query_sizes=args.query_sizes, arrivals=parse_arrivals(args.arrivals),
        grace_s=args.grace, depth=args.queue_depth, service_ms=args.service_ms, per_sample_us=args.per_sample_us,
        gpu_threshold=args.gpu_threshold, accel_workers=args.accel_workers, sim_accel=args.sim_accel,
        oversubscribe=args.oversubscribe,
        **({} if args.lookahead_ms is None else {"lookahead_s": args.lookahead_ms / 1e3}),
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable

    if args.output:
        check_writable(args.output, "-o/--output")
    cfg = run_config_from_args(args)
    if cfg.model and ":" in cfg.model and cfg.model != "spin":
        from recstack.usercode import is_factory

        if is_factory(cfg.model):
            raise ConfigError("serve runs zoo models (id or YAML) and spin, not factories", field="MODEL")
    opts = options_from_args(args)
    return (cmd_serve_search if args.search else cmd_serve_run)(args, cfg, opts)


def cmd_serve_run(args: argparse.Namespace, cfg: Any, opts: Any) -> int:
    """``recstack serve`` without ``--search``: one run at the offered load."""
    from recstack.render.serving import emit, render_run
    from recstack.serving.runs import serve

    if args.p99 is not None or args.store or args.chart:
        raise ConfigError("--p99, --store and --chart-out apply to --search", field="--search")
    result = serve(cfg, opts, args.max_wall)
    emit(result, args, render_run)
    if result["stopped"] == "SIGINT":
        sys.stderr.write("interrupted: the result is partial (complete: false)\n")
        return EXIT_SIGINT
    if result["failed"]:
        raise PartialResultsError(f"{result['failed']} requests failed (a worker died); the result is written")
    return 0


def cmd_serve_search(args: argparse.Namespace, cfg: Any, opts: Any) -> int:
    """``recstack serve --search``: the QPS at a p99 target."""
    from recstack.outputs import check_writable
    from recstack.render.serving import emit, render_probe, render_search
    from recstack.serving.runs import search
    from recstack.serving.search import Target

    if args.p99 is None:
        raise ConfigError("--search needs the target, e.g. --p99 0.02 (seconds)", field="--p99")
    if opts.arrivals.kind == "csv":
        raise ConfigError("a replayed CSV fixes the arrival times, so --search cannot vary the load; "
                          "use poisson or diurnal", field="--arrivals")
    if args.store:
        check_writable(args.store, "--store")
    if args.chart:
        check_writable(args.chart, "--chart-out")
    target = Target(99.0, args.p99, args.tail_samples, args.screen_samples)
    verdict = search(cfg, opts, target, budget_s=args.budget * 60, grid=args.grid, max_wall_s=args.max_wall,
                     store_path=args.store, start_qps=args.qps, show_probe=None if args.json else render_probe)
    emit(verdict, args, render_search)
    if args.chart:
        from recstack.render.serving_chart import render_search_chart

        render_search_chart(verdict, args.chart)
        if not args.json:
            print(f"chart written to {args.chart}")
    if verdict["stopped"] == "SIGINT":
        sys.stderr.write("interrupted: the search is partial (complete: false)\n")
        return EXIT_SIGINT
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "serve", cmd_serve, help="serve a model under open-loop load; --search: QPS at a p99 target")
    add_serve_arguments(p)
