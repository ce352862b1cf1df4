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
    from rich.console import Console

from recstack.config.limits import TABLE_COUNT_MAX
from recstack.errors import ConfigError
from recstack.workload.presets import list_presets


def register(subparsers: Any) -> None:
    """Add ``workload fit`` and ``workload stats`` to an argparse sub-parsers object."""
    wl = subparsers.add_parser("workload", help="fit workload specs from data; workload locality statistics")
    sub = wl.add_subparsers(dest="workload_command", metavar="{fit,stats}")
    sub.required = True

    fit = sub.add_parser("fit", help="fit a workload spec from a CSV file with a header line")
    fit.add_argument("file", help="CSV file (first line: column names)")
    fit.add_argument("--columns", help="comma-separated columns to fit (default: all but the label)")
    fit.add_argument("--dense", help="comma-separated numeric columns to treat as dense features")
    fit.add_argument(
        "--delimiter", default="^", help="separator of multi-hot lists inside a cell (default '^')"
    )
    fit.add_argument("--name", help="spec name (default: the file name)")
    fit.add_argument("-o", "--output", required=True, help="where to write the spec YAML")
    fit.set_defaults(func=cmd_fit)

    st = sub.add_parser("stats", help="locality statistics (re-use histograms) of a workload at a batch size")
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
    st.set_defaults(func=cmd_stats)


def _console() -> Console:
    from rich.console import Console  # lazy: CLI start-up
    """Rich console; wide enough for the tables when stdout is not a terminal (pipes, logs)."""
    console = Console()
    return console if console.is_terminal else Console(width=140)


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    return items or None


def cmd_fit(args: argparse.Namespace) -> int:
    """Fit a spec from ``args.file`` and write it to ``args.output``; prints a summary table."""
    from recstack.outputs import check_writable
    from recstack.workload.fit import fit_csv, fit_summary

    check_writable(args.output, "-o/--output")
    spec = fit_csv(
        args.file,
        columns=_split(args.columns),
        delimiter_in_cells=args.delimiter,
        dense_columns=_split(args.dense),
        name=args.name,
    )
    path = spec.to_yaml(args.output)
    console = _console()
    src = spec.fitted_from
    from rich.table import Table

    table = Table(
        title=f"fitted {len(spec.features or [])} features, {len(spec.dense.features)} dense from {args.file}"
    )
    for col, justify in (
        ("column", "left"),
        ("type", "left"),
        ("distinct", "right"),
        ("top-1 share", "right"),
        ("zipf s", "right"),
        ("hot rows (mass)", "right"),
        ("tail / dist", "left"),
        ("mean len", "right"),
    ):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in fit_summary(spec):
        table.add_row(
            row["column"],
            row["type"],
            _fmt(row["distinct"]),
            _fmt(row["top1_share"], ".3f"),
            _fmt(row["zipf_s"], ".2f"),
            "" if row["hot"] is None else f"{row['hot']} ({row['hot_mass']:.2f})",
            row["tail"],
            _fmt(row["mean_length"], ".2f"),
        )
    console.print(table)
    notes = []
    if src is not None and src.label_column:
        notes.append(f"label column {src.label_column!r}: click rate {spec.labels.click_rate}")
    if src is not None and src.skipped:
        notes.append(f"skipped (no values): {', '.join(src.skipped)}")
    for note in notes:
        console.print(note)
    console.print(f"wrote {path}")
    return 0


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec)


def cmd_stats(args: argparse.Namespace) -> int:
    """Print the locality statistics of a preset or spec file at ``--batch-size``."""
    from recstack.config.run import check_field  # one rule for --batch-size and --seed, as in profile
    from recstack.workload.presets import load_spec_file, load_workload
    from recstack.workload.stats import workload_stats

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
    render_stats(result, _console())
    return 0


def bucket_label(j: int) -> str:
    """'(lo, hi]' label of re-use bucket ``j``."""
    from recstack.workload.stats import BUCKET_BOUNDS

    if j == 0:
        return "(0, 1]"
    lo, hi = BUCKET_BOUNDS[j - 1], BUCKET_BOUNDS[j]
    return f"({lo}, {hi}]" if hi is not None else f"({lo}, inf)"


def render_stats(result: dict[str, Any], console: Console) -> None:
    """A readable table: ours next to Meta's published 2022 figures (batch 131,072)."""
    from recstack.workload.stats import BUCKET_BOUNDS, PUBLISHED_2022

    pub = PUBLISHED_2022
    from rich.table import Table

    table = Table(
        title=(
            f"{result['spec']}: {result['tables']} tables, batch {result['batch_size']:,}, seed {result['seed']} "
            f"(published: {pub['tables']} tables, batch {pub['batch_size']:,})"
        )
    )
    for col in ("re-use bucket", "rows share", "published", "lookups share", "published"):
        table.add_column(col, justify="right")
    for j in range(len(BUCKET_BOUNDS)):
        table.add_row(
            bucket_label(j),
            f"{result['rows_share'][j]:.3f}",
            f"{pub['rows_share'][j]:.3f}",
            f"{result['lookups_share'][j]:.3f}",
            f"{pub['lookups_share'][j]:.3f}",
        )
    console.print(table)
    console.print(
        f"lookups {result['lookups']:,}  unique rows {result['unique_rows']:,}  "
        f"avg pooling {_fmt(result['avg_pooling'], '.2f')} (published {pub['avg_pooling']:.1f})  "
        f"avg re-use {_fmt(result['avg_reuse'], '.2f')} (published {pub['avg_reuse']})  "
        f"max re-use {result['max_reuse']:,}"
    )
