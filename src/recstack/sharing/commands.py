"""``recstack share MODEL --candidates C [--requests R] [--json]``: batched against shared execution.

``register(subparsers)`` adds the command. Run options are RunConfig's flags
(as for ``recstack profile``; the batch is R x C rows, so ``--batch-size`` is
refused); ``-o`` writes the JSON document, ``--report`` the HTML page.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from recstack.cli_types import int_at_least
from recstack.errors import ConfigError


def _fmt_time(s: float) -> str:
    a = abs(s)
    if a >= 1:
        return f"{s:.3f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def _si(x: float) -> str:
    for unit, f in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= f:
            return f"{x / f:.2f}{unit}"
    return f"{x:.0f}"


def _short(paths: list[str], limit: int = 6) -> list[str]:
    return paths if len(paths) <= limit else [*paths[:limit], f"... ({len(paths)} in all)"]


def render_text(r: dict[str, Any]) -> str:
    """The terminal view of a share result (figures as computed by the analysis)."""
    tol = r["tolerance"]
    share = r["request_only_share"]
    lines = [
        f"recstack share: {r['model']} ({r.get('backend', '?')} backend), {r['requests']} request(s) x "
        f"{r['candidates']:g} candidates = {r['rows']} rows",
        f"sharing: {r['sharing']['status']}" + (f" ({r['sharing']['reason']})" if r["sharing"]["reason"] else "")
        + ("" if r["sharing"]["status"] == "shared" else "; no shared execution: its figures below are the batched run's"),
        f"outputs agree within rtol {tol['rtol']:g}, atol {tol['atol']:g}: {'yes' if r['outputs_equal'] else 'NO'}"
        f" (largest difference {r['max_abs_diff'] if r['max_abs_diff'] is not None else 'n/a: shapes differ'})",
        f"request-only share of the batched run: FLOPs {share['flops']:.1%}, bytes {share['bytes']:.1%}, "
        f"op time {share['time']:.1%} (cost model; {share['time_basis']})",
        "request-only modules: " + (", ".join(_short(r["request_only_modules"])) or "none"),
        "expanded at the entry of: " + (", ".join(r["expansions"]) or "none")
        + ("; request-only but inside them (run per candidate): " + ", ".join(r["unshared_request_modules"])
           if r["unshared_request_modules"] else ""),
        "",
        f"{'stage':20s} {'batched':>11s} {'shared':>11s} {'saved':>11s} {'FLOPs saved/req':>16s} {'bytes saved/req':>16s}",
    ]
    for st, v in r["stages"].items():
        lines.append(
            f"{st:20s} {_fmt_time(v['batched_s']):>11s} {_fmt_time(v['shared_s']):>11s} {_fmt_time(v['saved_s']):>11s} "
            f"{_si(v['flops_saved_per_request']):>16s} {_si(v['bytes_saved_per_request']):>16s}"
        )
    t = r["total"]
    lines += [
        f"{'end to end':20s} {_fmt_time(t['batched_s']):>11s} {_fmt_time(t['shared_s']):>11s} {_fmt_time(t['saved_s']):>11s}",
        "",
        f"speedup (batched / shared, measured, {r['timing']['statistic']}, {r['timing']['iters']} iterations, "
        f"{r['timing']['threads']} threads): {r['speedup']:.2f}x; without the deduplication "
        f"(request features received once): {r['speedup_without_dedupe']:.2f}x",
        "saving as C grows (formula (1 - 1/C) x request-only share of op time): "
        + ", ".join(f"C={p['candidates']}: {p['time_saved_share']:.0%}" for p in r["curve"] if p["candidates"] in (1, 10, 100, 1000)),
        "times are measured on this host; beside other processes they are contended",
    ]
    return "\n".join(lines)


def cmd_share(args: argparse.Namespace) -> int:
    from recstack.cli_types import cli_name, run_config_from_args
    from recstack.outputs import atomic_write_text, check_writable
    from recstack.sharing.run import check_counts

    if hasattr(args, "batch_size"):
        raise ConfigError("share's batch is --requests x --candidates rows; drop --batch-size", field="--batch-size")
    check_counts(args.requests, args.candidates)
    out = check_writable(args.output, "-o/--output") if args.output else None
    report = check_writable(args.report, "--report") if args.report else None
    cfg = run_config_from_args(args)
    from recstack.sharing.run import share_config

    try:
        result = share_config(cfg, requests=args.requests, candidates=args.candidates)
    except ConfigError as exc:
        from recstack.config.run import RunConfig

        if exc.field in RunConfig.model_fields and exc.source is None:
            raise ConfigError(exc.detail, field=cli_name(exc.field)) from exc
        raise
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
    from recstack.cli_types import add_run_arguments

    p = sub.add_parser(
        "share",
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
    p.add_argument("--config", default=None, metavar="RUN.yaml", help="load the run options from YAML")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-o", "--output", default=None, help="also write the JSON result here")
    p.add_argument("--report", default=None, metavar="HTML", help="write the sharing report page here")
    p.set_defaults(func=cmd_share)


__all__ = ["cmd_share", "register", "render_text"]
