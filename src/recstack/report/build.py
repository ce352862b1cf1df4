"""The profile report: one self-contained HTML file per profile.

``render_report(profile)`` returns the page text; ``write_report(profile, path)``
writes it. The page carries the profile payload (:mod:`recstack.report.payload`)
and the scripts that draw it, concatenated in the order of :data:`REPORT_SCRIPTS`:
``units.js`` (number formats), ``common.js`` (DOM helpers), ``report-core.js``
(the section registry and what the sections share), one ``report-<section>.js``
per section of the page, in page order, and ``report-main.js``, which starts it.
"""

from __future__ import annotations

from pathlib import Path

from recstack.report.html import render_page, write_page
from recstack.report.payload import report_payload
from recstack.tree import Profile

REPORT_SECTIONS = (
    "header",
    "warnings",
    "summary",
    "kpis",
    "metadata",
    "provenance",
    "ranks",
    "hierarchy",
    "stages",
    "findings",
    "roofline",
    "embedding",
    "memory",
    "counters",
    "coverage",
    "shapes",
    "extra",
    "footer",
)
"""The report's sections in page order; each is ``assets/report-<name>.js``."""

REPORT_SCRIPTS = ["units.js", "common.js", "report-core.js", *(f"report-{s}.js" for s in REPORT_SECTIONS), "report-main.js"]


def render_report(profile: Profile, *, title: str | None = None) -> str:
    """The report page for ``profile`` as one HTML string (no external resources)."""
    data = report_payload(profile, title=title)
    return render_page(title=f"recstack report · {data['title']}", scripts=REPORT_SCRIPTS, data=data)


def write_report(profile: Profile, path: str | Path, *, title: str | None = None) -> Path:
    """Write the report page for ``profile`` to ``path``; returns the path."""
    return write_page(render_report(profile, title=title), path)
