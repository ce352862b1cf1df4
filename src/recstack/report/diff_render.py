"""Render a :class:`~recstack.report.diff.DiffResult`: a rich terminal table and a self-contained HTML page.

Renderers only format: every figure and verdict comes from the DiffResult.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from recstack.report.diff import DiffResult, NodeDelta
from recstack.report.html import render_page, write_page
from recstack.report.payload import clean
from recstack.units import percent
from recstack.units import seconds as fmt_time
from recstack.units import si as fmt_si

DIFF_SCRIPTS = ["units.js", "common.js", "diff-ranks.js", "diff.js"]
_STYLE = {"regression": "bold red", "improvement": "bold green", "noise": "dim", "added": "yellow", "removed": "yellow"}


def _short(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= 40)


def _pct(d: NodeDelta) -> str:
    return percent(d.rel, decimals=1, signed=True)


def _spread(sp: tuple[float, float] | None) -> str:
    """p10-p90 in one unit, chosen by p90: "302-381 us"."""
    if sp is None:
        return "-"
    hi = fmt_time(sp[1])
    unit = hi.split(" ")[1]
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}[unit]
    return f"{sp[0] * scale:.3g}-{sp[1] * scale:.3g} {unit}"


def short_path(path: str, width: int = 56) -> str:
    """``path`` cut in the middle to ``width`` characters, keeping its stage and its leaf."""
    if len(path) <= width:
        return path
    keep = width - 1
    return path[: keep // 3] + "…" + path[-(keep - keep // 3) :]


def _row(d: NodeDelta, name: str) -> list[str]:
    """Table cells for ``d``; ``name`` comes from the model, so it is escaped for rich markup."""
    delta = d.delta_s
    return [
        escape(name),
        fmt_time(d.time_a),
        fmt_time(d.time_b),
        "-" if delta is None else "0" if delta == 0 else ("+" if delta > 0 else "") + fmt_time(delta),
        _pct(d),
        _spread(d.spread_a),
        _spread(d.spread_b),
        f"[{_STYLE[d.verdict]}]{d.verdict}[/]",
    ]


def print_diff(result: DiffResult, *, top: int = 15, file: Any = None, fail_pct: float | None = None) -> None:
    """Print the comparison: header, run and stage table, the largest node changes, cost changes, verdict."""
    c = Console(highlight=False, soft_wrap=False, file=file, width=160 if file is not None else None)
    if not c.is_terminal:  # CI logs: do not squeeze the tables into 80 columns
        c.width = max(c.width, 140)
    c.print(f"[bold]recstack diff[/bold]  A = {escape(result.label_a)}   B = {escape(result.label_b)}")
    c.print(f"matched at [bold]{result.matched_level}[/bold] level: {escape(result.match_note)}")
    c.print(f"[dim]noise rule: {escape(result.rule.describe())}[/dim]")
    for note in result.notes:
        c.print(f"[bold yellow]note[/bold yellow]: {escape(note)}")
    if result.setting_changes:
        shown = ", ".join(
            f"{k}: {v_a} -> {v_b}" if _short(v_a) and _short(v_b) else f"{k} (differs)"
            for k, v_a, v_b in result.setting_changes[:8]
        )
        more = len(result.setting_changes) - 8
        c.print(f"[dim]settings that differ: {escape(shown)}{f' (+{more} more)' if more > 0 else ''}[/dim]")
    t = Table(show_edge=False, box=None, header_style="bold", pad_edge=False)
    for col in ("node", "A time/step", "B time/step", "delta", "delta %", "A p10-p90", "B p10-p90", "verdict"):
        t.add_column(col, justify="left" if col in ("node", "verdict") else "right", no_wrap=True)
    t.add_row(*_row(result.run, f"run ({result.run.name})"))
    for d in result.stages:
        t.add_row(*_row(d, "  " + d.name))
    c.print(t)
    if result.nodes:
        changed = sorted(
            (d for d in result.nodes if d.verdict != "noise"), key=lambda d: -abs(d.delta_s or d.time_a or d.time_b or 0)
        )
        if changed:
            t2 = Table(title=f"modules and ops beyond noise (top {min(top, len(changed))} of {len(changed)})",
                       show_edge=False, box=None, header_style="bold", pad_edge=False)
            for col in ("path", "level", "A time/step", "B time/step", "delta", "delta %", "verdict"):
                t2.add_column(col, justify="left" if col in ("path", "level", "verdict") else "right", no_wrap=True,
                              overflow="ellipsis")
            for d in changed[:top]:
                r = _row(d, short_path(d.path))
                t2.add_row(r[0], escape(d.level), *r[1:5], r[7])
            c.print(t2)
        else:
            c.print("[dim]no module or op changed beyond the noise floor[/dim]")
    cost = [d for d in result.all() if d.cost_changed]
    if cost:
        t3 = Table(title="FLOP / byte changes (formula; no noise)", show_edge=False, box=None, header_style="bold")
        for col in ("path", "A FLOPs", "B FLOPs", "A bytes", "B bytes"):
            t3.add_column(col, justify="left" if col == "path" else "right")
        for d in cost[:top]:
            t3.add_row(escape(short_path(d.path)), fmt_si(d.flops_a, "FLOP"), fmt_si(d.flops_b, "FLOP"), fmt_si(d.bytes_a, "B"),
                       fmt_si(d.bytes_b, "B"))
        c.print(t3)
    reg, imp = result.regressions(), result.improvements()
    c.print(f"{len(reg)} regression(s), {len(imp)} improvement(s) beyond noise")
    if fail_pct is not None:
        fails = result.failures(fail_pct)
        if fails:
            names = escape(", ".join(f"{d.name} {_pct(d)}" for d in fails))
            c.print(f"[bold red]FAIL[/bold red]: slower by more than {fail_pct:g}% beyond noise: {names}")
        else:
            c.print(f"[green]OK[/green]: no run or stage slower by more than {fail_pct:g}% beyond noise")


def diff_payload(result: DiffResult, *, fail_pct: float | None = None) -> dict[str, Any]:
    """The data the diff page draws (JSON-safe)."""
    from recstack.version import __version__

    d = result.to_dict()
    d["kind"] = "diff"
    d["recstack_version"] = __version__
    d["fail_pct"] = fail_pct
    d["failures"] = [x.name for x in result.failures(fail_pct)] if fail_pct is not None else None
    return clean(d)


def render_diff_html(result: DiffResult, *, fail_pct: float | None = None) -> str:
    """The diff as one self-contained HTML page."""
    return render_page(
        title=f"recstack diff · {result.label_a} vs {result.label_b}",
        scripts=DIFF_SCRIPTS,
        data=diff_payload(result, fail_pct=fail_pct),
    )


def write_diff_html(result: DiffResult, path: str | Path, *, fail_pct: float | None = None) -> Path:
    return write_page(render_diff_html(result, fail_pct=fail_pct), path)
