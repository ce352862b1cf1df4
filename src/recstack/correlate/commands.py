"""``recstack correlate STORE|PROFILES... [-o report.html]``: architecture features vs bottleneck metrics."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from recstack.cli_base import DeprecatedAlias, add_command, int_at_least


def cmd_correlate(args: argparse.Namespace) -> int:
    from recstack.correlate.points import load_points
    from recstack.correlate.render import render_html, write_plots
    from recstack.correlate.stats import MIN_MODELS, correlate, nan_free
    from recstack.errors import DataError
    from recstack.outputs import atomic_write_text, check_writable, write_result

    out = check_writable(args.output, "-o")
    if args.json:
        check_writable(args.json, "--json-out")
    t0 = time.perf_counter()
    points = load_points(args.inputs)
    models = {p.model for p in points}
    if len(models) < MIN_MODELS:
        raise DataError(f"INPUT: {len(points)} points from {len(models)} models; correlate needs at least "
                        f"{MIN_MODELS} models (rank correlations across models)")
    corr = correlate(points, bootstrap=args.bootstrap, seed=args.seed)
    plot_dir = out.with_name(out.stem + "_plots")
    try:
        plots = write_plots(points, corr, plot_dir)
    except OSError as exc:  # computed: the plots go to a fallback folder, as the report to a fallback file
        import sys
        import tempfile

        plot_dir = Path(tempfile.mkdtemp(prefix=f"recstack-{plot_dir.name}-"))
        sys.stderr.write(f"warning: cannot write the plots in {out.with_name(out.stem + '_plots')} "
                         f"({exc.strerror or exc}); they are written to {plot_dir} instead\n")
        plots = write_plots(points, corr, plot_dir)
    html = render_html(points, corr, plots)
    out = write_result(out, lambda p: atomic_write_text(p, html), "report")
    if args.json:
        from recstack.schema.correlate_model import CorrelateDocument
        from recstack.schema.documents import check

        text = json.dumps(check(CorrelateDocument, nan_free(corr.to_dict())), indent=1, allow_nan=False) + "\n"
        write_result(args.json, lambda p: atomic_write_text(p, text), "JSON")
    for line in corr.findings():
        print(line)
    print(f"{len(points)} points, {len(models)} models, {len(corr.metrics)} metrics in "
          f"{time.perf_counter() - t0:.1f} s; report {out}, plots (PNG, SVG) in {plot_dir}")
    return 0


MAX_BOOTSTRAP = 100_000  # resamples: two (resamples x models) float arrays per metric; beyond, memory and minutes


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``correlate`` to the main CLI's sub-parsers."""
    p = add_command(sub, "correlate", cmd_correlate, help="which architecture features go with which bottlenecks, across models")
    p.add_argument("inputs", nargs="+", metavar="STORE|PROFILES",
                   help="a results store (DuckDB file), or profile JSON files and folders of them")
    p.add_argument("-o", "--output", default="correlate.html", help="report HTML (plots go to <stem>_plots/)")
    p.add_argument("--json-out", dest="json", default=None, metavar="FILE", help="also write the results as JSON")
    # its old name: --json prints JSON on every other command, here it named a file (hidden, warned about)
    p.add_argument("--json", dest="json", action=DeprecatedAlias, new="--json-out", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap", type=int_at_least("--bootstrap", 50, MAX_BOOTSTRAP), default=1000,
                   help="bootstrap resamples over models (default 1000)")
    p.add_argument("--seed", type=int_at_least("--seed", 0), default=0, help="seed of the resampling")
