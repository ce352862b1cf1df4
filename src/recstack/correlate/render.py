"""Draw ``correlate``'s results: the offline HTML report and a scatter plot per metric and its top feature.

Nothing here computes a figure: the rank correlations, intervals, fits and findings come from
:mod:`recstack.correlate.stats`; the plots draw the points' own feature and metric values.
"""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

from recstack.correlate.points import Point
from recstack.correlate.stats import Correlation, MetricResult, signed
from recstack.outputs import atomic_write_bytes, atomic_write_text
from recstack.report.html import asset
from recstack.units import sig

LOG_FEATURES = ("table_bytes", "mlp_flops_per_sample", "params", "lookups_per_sample", "batch_size", "tables")

# Beside the pages' shared theme (report/assets/style.css): the correlation grid and the plots.
CSS = """
table.data td, table.data th { text-align: right; white-space: nowrap; }
table.data td.name, table.data th.name { text-align: left; }
table.rho th { writing-mode: vertical-rl; transform: rotate(180deg); max-height: 160px; font-weight: 600; }
table.rho th.name, table.rho th.n { writing-mode: horizontal-tb; transform: none; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
.plot { border: 1px solid var(--line); border-radius: 8px; padding: 4px; background: #fff; }
.scroll { overflow-x: auto; }
"""


def _esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def _cell_color(rho: float | None) -> str:
    """A diverging colour for rho in [-1, 1] (blue negative, red positive; white at 0)."""
    if rho is None or rho != rho:
        return "#eee"
    v = max(-1.0, min(1.0, rho))
    a = int(255 - 155 * abs(v))
    return f"rgb(255,{a},{a})" if v > 0 else f"rgb({a},{a},255)"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def _matplotlib():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in the SVG (smaller, and much faster)
    return matplotlib


def model_colours(models: list[str]) -> dict[str, str]:
    """One marker colour per model (tab20, in model order), shared by every plot and the legend."""
    cmap = _matplotlib().colormaps["tab20"]
    return {m: matplotlib_hex(cmap(i % 20)) for i, m in enumerate(models)}


def matplotlib_hex(rgba: tuple[float, ...]) -> str:
    return "#" + "".join(f"{int(round(255 * c)):02x}" for c in rgba[:3])


def legend_figure(colours: dict[str, str]):
    """The models' colour key (one figure for every plot: a legend in each would double the drawing time)."""
    from matplotlib.figure import Figure

    _matplotlib()
    fig = Figure(figsize=(4.2, 0.25 + 0.18 * ((len(colours) + 2) // 3)), dpi=90)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    for i, (m, c) in enumerate(colours.items()):
        x, y = (i % 3) / 3 + 0.02, 1 - (i // 3 + 0.8) / ((len(colours) + 2) // 3 + 0.5)
        ax.scatter([x], [y], s=22, color=c, transform=ax.transAxes)
        ax.text(x + 0.03, y, m, fontsize=7, va="center", transform=ax.transAxes)
    return fig


def scatter_figure(points: list[Point], feature: str, metric: str, result: MetricResult, colours: dict[str, str]):
    """A matplotlib figure: metric against feature, one marker colour per model, rho and interval in the title."""
    from matplotlib.figure import Figure

    _matplotlib()
    fig = Figure(figsize=(4.2, 3.2), dpi=90)
    fig.subplots_adjust(left=0.17, bottom=0.15, right=0.97, top=0.9)
    ax = fig.add_subplot()
    for m, colour in colours.items():
        xs, ys = [], []
        for p in points:
            if p.model != m or metric not in p.metrics:
                continue
            xs.append(float(p.interaction == feature.split("=", 1)[1]) if feature.startswith("interaction=")
                      else p.features[feature])
            ys.append(p.metrics[metric])
        if xs:
            ax.scatter(xs, ys, s=22, color=colour)
    if feature in LOG_FEATURES:
        ax.set_xscale("log")
    ax.set_xlabel(feature)
    ax.set_ylabel(metric)
    ax.set_title(f"rho {signed(result.rho[feature])} [{signed(result.low[feature])}, {signed(result.high[feature])}]",
                 fontsize=9)
    ax.tick_params(labelsize=7)
    if feature in LOG_FEATURES:
        from matplotlib.ticker import LogLocator, NullFormatter

        # labels at 1, 2 and 5 per decade, thinned to at most 5; none on the minor ticks (they overlapped)
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0), numticks=5))
        ax.xaxis.set_minor_formatter(NullFormatter())
    return fig


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _save(fig, stem: Path) -> str:
    """Write ``stem``.svg and ``stem``.png; return the SVG markup (for inlining)."""
    svg = _svg(fig)
    atomic_write_text(stem.with_suffix(".svg"), svg)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(stem.with_suffix(".png"), buf.getvalue())
    return svg


def write_plots(points: list[Point], corr: Correlation, folder: Path) -> list[tuple[MetricResult | None, str, str]]:
    """PNG and SVG of each metric against its top feature in ``folder``, and the models' colour key
    (``legend``; first, with result None); returns (result, feature, inline svg) per plot."""
    folder.mkdir(parents=True, exist_ok=True)
    colours = model_colours(corr.models)
    out: list[tuple[MetricResult | None, str, str]] = [(None, "", _save(legend_figure(colours), folder / "legend"))]
    for m in corr.metrics:
        fig = scatter_figure(points, m.top, m.metric, m, colours)
        out.append((m, m.top, _save(fig, folder / f"{slug(m.metric)}__{slug(m.top)}")))
    return out


def render_html(points: list[Point], corr: Correlation, plots: list[tuple[MetricResult | None, str, str]]) -> str:
    """The offline report page (no scripts or network: tables and inline SVG only), in the other pages' theme."""
    feats = corr.features
    head = "".join(f"<th title='{_esc(f)}'>{_esc(f)}</th>" for f in feats)
    rows = []
    for m in corr.metrics:
        cells = "".join(
            f"<td style='background:{_cell_color(m.rho[f])}' title='rho {signed(m.rho[f])}, "
            f"interval [{signed(m.low[f])}, {signed(m.high[f])}], top in {m.top_share[f]:.0%} of resamples'>"
            f"{signed(m.rho[f])}</td>"
            for f in feats
        )
        rows.append(f"<tr><td class='name'>{_esc(m.metric)}</td><td>{m.models}</td>{cells}</tr>")
    fits = "".join(
        f"<tr><td class='name'>{_esc(m.metric)}</td><td>{sig(m.cv_r2, 2)}</td><td>{m.ridge_alpha:g}</td>"
        f"<td class='name'>{_esc(', '.join(f'{k} {signed(v)}' for k, v in sorted(m.coefficients.items(), key=lambda kv: -abs(kv[1]))[:4]))}</td></tr>"
        for m in corr.metrics if m.cv_r2 is not None
    )
    findings = "".join(f"<li>{_esc(s)}</li>" for s in corr.findings())
    legend = "".join(svg for m, _f, svg in plots if m is None)
    figs = "".join(f"<div class='plot' data-metric='{_esc(m.metric)}' data-feature='{_esc(f)}'>{svg}</div>"
                   for m, f, svg in plots if m is not None)
    pts = "".join(
        f"<tr><td class='name'>{_esc(p.model)}</td><td>{p.batch_size}</td><td class='name'>{_esc(p.backend)}</td>"
        f"<td class='name'>{_esc(p.mode)}</td><td class='name'>{_esc(p.interaction)}</td></tr>"
        for p in points
    )
    skipped = "".join(f"<li>{_esc(k)}: {_esc(v)}</li>" for k, v in sorted(corr.skipped.items()))
    payload = _esc(json.dumps({"models": corr.models, "points": corr.points, "metrics": len(corr.metrics)}))
    return f"""<!doctype html><html lang='en'><head><meta charset='utf-8'><title>recstack correlate</title>
<style>{asset("style.css")}{CSS}</style></head><body><div id='app' data-summary="{payload}">
<header class='top'><div><div class='brand'>recstack · correlate</div>
<h1 id='title'>Architecture features vs bottleneck metrics</h1>
<div class='sub'>{corr.points} points from {len(corr.models)} models: {_esc(', '.join(corr.models))}</div></div></header>
<main>
<section class='card'><h2>Findings</h2><ul id='findings'>{findings}</ul>
<p class='lead' id='method'>Spearman rank correlations (computed); {int(100 * 0.95)}% intervals from {corr.bootstrap}
bootstrap resamples of <b>models</b> (all of a resampled model's points together; seed {corr.seed}); a feature
<i>dominates</i> a metric when it has the largest |rho| in at least 80% of resamples and its interval excludes 0.
Ridge regression on standardised features, alpha chosen by leave-one-model-out R^2 (computed). With this few
models, intervals are wide and the chosen alpha's R^2 is optimistic; see docs/correlate.md.</p></section>
<section class='card'><h2>Rank correlations</h2><p class='lead'>rho of each metric (row) and feature (column);
hover a cell for its interval.</p><div class='scroll'>
<table class='data rho' id='rho'><tr><th class='name'>metric</th><th class='n'>models</th>{head}</tr>{''.join(rows)}</table></div></section>
<section class='card'><h2>Ridge regression</h2><div class='scroll'>
<table class='data' id='fits'><tr><th class='name'>metric</th><th>LOMO R^2</th><th>alpha</th><th class='name'>largest standardised coefficients</th></tr>{fits}</table></div></section>
<section class='card'><h2>Each metric against its strongest feature</h2><div id='legend'>{legend}</div>
<div class='plots' id='plots'>{figs}</div></section>
<section class='card'><h2>Not analysed</h2><ul id='skipped'>{skipped or '<li>none</li>'}</ul></section>
<section class='card'><h2>Points</h2><div class='scroll'><table class='data' id='points'><tr><th class='name'>model</th><th>batch</th><th class='name'>backend</th>
<th class='name'>mode</th><th class='name'>interaction</th></tr>{pts}</table></div></section>
</main></div></body></html>
"""
