"""The advice page: a ``recstack.advice`` document (``recstack advise --report``) as one self-contained HTML file.

Same no-network rules and machinery as the profile report (:mod:`recstack.report.html`): the document is the
page's data block as written, and ``assets/advice.js`` draws the ranked table and, per recommended lever and
for the measured combination, before/after bars of each stage's time. The page computes no figure: every
number it shows is one of the document's (docs/advise.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recstack.report.html import render_page, write_page

ADVICE_SCRIPTS = ["units.js", "common.js", "advice.js"]


def render_advice_html(doc: dict[str, Any]) -> str:
    """The page for one advice document (a dict as :func:`recstack.advise` returns it)."""
    return render_page(title=f"recstack advise · {doc['model']}", scripts=ADVICE_SCRIPTS, data=doc)


def write_advice_html(doc: dict[str, Any], path: str | Path) -> Path:
    """Write the advice page to ``path`` (atomically); returns the path."""
    return write_page(render_advice_html(doc), path)


__all__ = ["ADVICE_SCRIPTS", "render_advice_html", "write_advice_html"]
