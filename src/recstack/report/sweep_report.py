"""The sweep report: a results store as one self-contained HTML page (same no-network rules as the
profile report, :mod:`recstack.report.html`). The figures are computed by
:func:`recstack.results.sweep_figures.sweep_figures`, for the ``serving`` table
:func:`recstack.results.serving_figures.serving_figures` and for the ``advice`` table
:func:`recstack.results.advice.advice_section`; ``assets/sweep.js`` draws them."""

from __future__ import annotations

from pathlib import Path

from recstack.report.html import render_page, write_page
from recstack.version import __version__

SWEEP_SCRIPTS = ["units.js", "common.js", "sweep.js"]


def render_sweep_report(store: str | Path, *, x: str = "batch_size", y: str = "backend") -> str:
    from recstack.results import load
    from recstack.results.advice import advice_section
    from recstack.results.serving_figures import serving_figures
    from recstack.results.sweep_figures import sweep_figures

    points = load(store)
    sweeps = load(store, "sweeps")
    advice = load(store, "advice")
    figures = sweep_figures(points, load(store, "stages"), x=x, y=y, advice=advice)
    figures["serving"] = serving_figures(load(store, "serving"))
    figures["advice"] = advice_section(advice)
    names = sorted({str(n) for n in sweeps["name"].dropna()}) if len(sweeps) else []
    title = "Sweep " + (", ".join(names) if names else Path(store).parent.name or str(store))
    data = {"title": title, "store": str(store), "recstack_version": __version__, "sweeps": len(sweeps),
            "figures": figures}
    return render_page(title=f"recstack sweep report · {title}", scripts=SWEEP_SCRIPTS, data=data)


def write_sweep_report(store: str | Path, path: str | Path, *, x: str = "batch_size", y: str = "backend") -> Path:
    return write_page(render_sweep_report(store, x=x, y=y), path)


__all__ = ["render_sweep_report", "write_sweep_report"]
