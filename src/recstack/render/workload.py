"""``recstack workload``'s tables: a fitted spec's features, and a workload's locality statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def wide_console() -> Console:
    """Rich console; wide enough for the tables when stdout is not a terminal (pipes, logs)."""
    from rich.console import Console  # lazy: CLI start-up

    console = Console()
    return console if console.is_terminal else Console(width=140)


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec)


def print_stats(result: dict[str, Any], published: dict[str, Any], buckets: list[str], console: Console) -> None:
    """A readable table: ours next to Meta's published 2022 figures (batch 131,072)."""
    pub = published
    from rich.table import Table

    table = Table(
        title=(
            f"{result['spec']}: {result['tables']} tables, batch {result['batch_size']:,}, seed {result['seed']} "
            f"(published: {pub['tables']} tables, batch {pub['batch_size']:,})"
        )
    )
    for col in ("re-use bucket", "rows share", "published", "lookups share", "published"):
        table.add_column(col, justify="right")
    for j, label in enumerate(buckets):
        table.add_row(
            label,
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


def print_fit(spec: Any, rows: list[dict[str, Any]], file: str, console: Console) -> None:
    """The fitted features as a table, with the label column and the skipped ones."""
    src = spec.fitted_from
    from rich.table import Table

    table = Table(
        title=f"fitted {len(spec.features or [])} features, {len(spec.dense.features)} dense from {file}"
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
    for row in rows:
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


__all__ = ["print_fit", "print_stats", "wide_console"]
