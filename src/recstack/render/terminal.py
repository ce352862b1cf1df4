"""Terminal renderers (rich). Renderers format figures; they never compute them."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.tree import Tree


def console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000.0
    return f"{n:.2f} TB"


def human_count(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n:g}"


def zoo_table(rows: list[dict[str, Any]]) -> None:
    t = Table(title="recstack model zoo (published sizes unless --scale)")
    for col in ("model", "arch", "tables", "rows", "dim", "table bytes", "lookups/sample", "dense FLOPs/sample", "params"):
        t.add_column(col, justify="left" if col in ("model", "arch") else "right")
    for r in rows:
        t.add_row(
            r["name"],
            r["arch"],
            str(r["tables"]),
            human_count(r["rows"]),
            str(r["embedding_dim"]),
            human_bytes(r["table_bytes"]),
            f"{r['lookups_per_sample']:g}",
            human_count(r["dense_flops_per_sample"]),
            human_count(r["params"]),
        )
    c = console()
    c.print(t)
    c.print("dense FLOPs/sample = 2 x multiply-adds of every non-embedding layer (analytic, from the config)")


def zoo_show(info: dict[str, Any]) -> None:
    c = console()
    cfg = info["config"]
    s = info["summary"]
    c.print(f"[bold]{cfg['name']}[/bold] ({cfg['arch']}): {cfg.get('description', '')}")
    c.print(
        f"tables {s['tables']}, rows {human_count(s['rows'])}, table bytes {human_bytes(s['table_bytes'])}, "
        f"lookups/sample {s['lookups_per_sample']:g}, dense FLOPs/sample {human_count(s['dense_flops_per_sample'])}, "
        f"params {human_count(s['params'])}, scale {s['scale']:g}"
    )
    t = Table(title="tables")
    for col in ("table", "feature", "rows", "dim", "kind", "pooling", "max len"):
        t.add_column(col)
    for tb in info["tables"]:
        t.add_row(
            tb["name"], tb["feature"], f"{tb['rows']:,}", str(tb["dim"]), tb["kind"], f"{tb['pooling']:g}",
            str(tb["max_length"] or "-"),
        )
    c.print(t)
    tree = Tree("[bold]modules[/bold]")
    stack: list[tuple[int, Tree]] = [(-1, tree)]
    for row in info["modules"]:
        while stack and stack[-1][0] >= row["depth"]:
            stack.pop()
        node = stack[-1][1].add(f"{row['path']}  [dim]{row['type']}  params {human_count(row['params'])}[/dim]")
        stack.append((row["depth"], node))
    c.print(tree)
