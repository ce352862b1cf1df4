"""Terminal renderers (rich). Renderers format figures; they never compute them."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.tree import Tree


def console(file: Any = None) -> Console:
    """A rich console; when output is not a terminal (pipes, files, CI logs), 140 columns wide."""
    c = Console(highlight=False, soft_wrap=False, file=file)
    if not c.is_terminal:
        c = Console(highlight=False, soft_wrap=False, file=file, width=140)
    return c


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


def _fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def profile_tree(prof: Any, *, depth: int = 3, top: int = 8, file: Any = None) -> None:
    """Print a profile as an indented table: name, stage, time, share, calls, cost columns when present."""
    from recstack.tree import Node, Profile

    assert isinstance(prof, Profile)
    c = console(file)
    run, ov = prof.run, prof.overhead
    c.print(
        f"[bold]{run.get('model')}[/bold]  mode={run.get('mode')} ({run.get('grad_mode')})  batch={run.get('batch_size')}  "
        f"backend={run.get('backend', '-')}  dtype={run.get('dtype')}"
        + (f" [{run['dtype_note']}]" if run.get("dtype_note") else "")
        + f"  threads={run.get('threads')}  scale={run.get('scale', '-')}  workload={run.get('workload', '-')}"
    )
    root = prof.root
    lat = root.extra.get("latency_s") or {}
    thr = root.extra.get("throughput_samples_per_s")
    c.print(
        f"step latency (uninstrumented) p50 {_fmt_time(lat.get('p50'))}  p90 {_fmt_time(lat.get('p90'))}  "
        f"p99 {_fmt_time(lat.get('p99'))}  throughput {thr:,.0f} samples/s" if thr else "step latency: -"
    )
    ci = ov.get("stage_pass_ratio_ci") or [None, None]
    opr = ov.get("op_pass_ratio")
    spr = ov.get("stage_pass_ratio")
    c.print(
        "profiler overhead: "
        + (
            f"stage pass {spr:.3f}x"
            + (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if None not in ci[:2] else "")
            if isinstance(spr, (int, float))
            else "stage pass not measured"
        )
        + ", "
        + (f"op pass {opr:.2f}x" if opr else "op pass not run")
        + " vs uninstrumented (measured)"
    )
    has_cost = any(n.flops is not None or n.bytes is not None for n in root.walk())
    has_bound = any(n.extra.get("bound") for n in root.walk())
    t = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    t.add_column("node")
    t.add_column("level")
    t.add_column("time/step", justify="right")
    t.add_column("share", justify="right")
    t.add_column("p10-p90", justify="right")
    t.add_column("calls", justify="right")
    if has_cost:
        for col in ("FLOPs", "bytes", "FLOP/B"):
            t.add_column(col, justify="right")
    if has_bound:
        t.add_column("% roof", justify="right")
        t.add_column("bound")
    total = root.time_s or 1.0

    def add(n: Node, d: int, prefix: str) -> None:
        p10, p90 = n.extra.get("time_s_p10"), n.extra.get("time_s_p90")
        spread = f"{_fmt_time(p10)}-{_fmt_time(p90)}" if p10 is not None else ""
        label = n.name if n.level != "module" else n.name.rsplit(".", 1)[-1] if d > 2 else n.name
        row = [prefix + label, n.level, _fmt_time(n.time_s), f"{100 * n.time_s / total:5.1f}%", spread, str(n.calls)]
        if has_cost:
            row += [human_count(n.flops), human_bytes(n.bytes), f"{n.intensity:.2f}" if n.intensity is not None else "-"]
        if has_bound:
            frac = (n.extra.get("roofline") or {}).get("ceiling_fraction")
            row += [f"{100 * frac:.0f}%" if isinstance(frac, (int, float)) else "-", n.extra.get("bound") or "-"]
        t.add_row(*row)
        if d >= depth:
            return
        kids = sorted(n.children, key=lambda k: -k.time_s)
        shown = kids[:top]
        for k in shown:
            add(k, d + 1, "  " * (d + 1))
        if len(kids) > len(shown):
            rest = sum(k.time_s for k in kids[len(shown) :])
            t.add_row("  " * (d + 1) + f"... {len(kids) - len(shown)} more", "", _fmt_time(rest), f"{100 * rest / total:5.1f}%", "", "")

    add(root, 0, "")
    c.print(t)
    c.print(
        "[dim]times per step: interquartile means (central steps, so stages add up); stage times measured (timing pass), module/op times apportioned from the "
        "op pass within each stage (see docs/profiling.md)[/dim]"
    )
    m = prof.extra.get("machine") or {}
    if m:
        c.print(
            f"[dim]% roof: against {m.get('host')} measured {m.get('measured_at')} ({m.get('mode')}); "
            f"{m.get('peak_label')}; see docs/machine.md[/dim]"
        )
    for note in m.get("notes") or []:
        c.print(f"roofline note: {note}")
