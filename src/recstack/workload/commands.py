"""``recstack workload ...`` sub-commands: ``fit`` (CSV -> spec YAML) and ``stats`` (locality statistics).

``register(subparsers)`` adds the ``workload`` command to the main CLI's sub-parsers;
each leaf sets ``func(args) -> int``. Bad input raises RecstackError subclasses (the
main CLI prints ``error: <message>`` and exits 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

from recstack.cli_base import add_command
from recstack.config.limits import TABLE_COUNT_MAX
from recstack.errors import ConfigError
from recstack.render.workload import print_fit, print_stats, wide_console
from recstack.workload.presets import list_presets


def register(subparsers: Any) -> None:
    """Add ``workload fit`` and ``workload stats`` to an argparse sub-parsers object."""
    wl = subparsers.add_parser("workload", help="fit workload specs from data; workload locality statistics")
    sub = wl.add_subparsers(dest="workload_command", metavar="{fit,stats}")
    sub.required = True

    fit = add_command(sub, "fit", cmd_fit, help="fit a workload spec from a CSV file with a header line")
    fit.add_argument("file", help="CSV file (first line: column names)")
    fit.add_argument("--columns", type=_names, help="comma-separated columns to fit (default: all but the label)")
    fit.add_argument("--dense", type=_names, help="comma-separated numeric columns to treat as dense features")
    fit.add_argument(
        "--delimiter", default="^", help="separator of multi-hot lists inside a cell (default '^')"
    )
    fit.add_argument("--name", help="spec name (default: the file name)")
    fit.add_argument("-o", "--output", required=True, help="where to write the spec YAML")

    st = add_command(sub, "stats", cmd_stats, help="locality statistics (re-use histograms) of a workload at a batch size")
    src = st.add_mutually_exclusive_group(required=True)
    src.add_argument("--preset", help=f"preset name ({', '.join(list_presets())})")
    src.add_argument("--spec", help="workload spec YAML file")
    st.add_argument("--batch-size", type=int, required=True, help="samples per batch (>= 1)")
    st.add_argument(
        "--tables",
        type=int,
        help="tables to draw (population: default 32; fitted spec: default all features)",
    )
    st.add_argument("--seed", type=int, default=0, help="seed of the table draws and IDs (default 0)")
    st.add_argument("--json", action="store_true", help="print the statistics as JSON")


def _names(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"must name columns, comma-separated (got {text!r})")
    return items


def cmd_fit(args: argparse.Namespace) -> int:
    """Fit a spec from ``args.file`` and write it to ``args.output``; prints a summary table."""
    from recstack.outputs import check_writable
    from recstack.workload.fit import fit_csv, fit_summary

    check_writable(args.output, "-o/--output")
    spec = fit_csv(
        args.file,
        columns=args.columns,
        delimiter_in_cells=args.delimiter,
        dense_columns=args.dense,
        name=args.name,
    )
    path = spec.to_yaml(args.output)
    console = wide_console()
    print_fit(spec, fit_summary(spec), args.file, console)
    console.print(f"wrote {path}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print the locality statistics of a preset or spec file at ``--batch-size``."""
    from recstack.config.run import check_field  # one rule for --batch-size and --seed, as in profile
    from recstack.workload.presets import load_spec_file, load_workload
    from recstack.workload.stats import BUCKET_BOUNDS, PUBLISHED_2022, bucket_label, workload_stats

    check_field("batch_size", args.batch_size, "--batch-size")
    if args.tables is not None and not 1 <= args.tables <= TABLE_COUNT_MAX:
        raise ConfigError(f"must be in 1 .. {TABLE_COUNT_MAX} (got {args.tables})", field="--tables")
    check_field("seed", args.seed, "--seed")
    spec = load_workload(args.preset) if args.preset else load_spec_file(args.spec)
    result = workload_stats(spec, args.batch_size, tables=args.tables, seed=args.seed)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print_stats(result, PUBLISHED_2022, [bucket_label(j) for j in range(len(BUCKET_BOUNDS))], wide_console())
    return 0


