"""The sharing report page: request-side share of every stage and the saving curve, for share results.

``write_share_report(results, path)`` writes one self-contained page for one or
more ``recstack share`` results (e.g. one model at C = 10, 100, 1000). The
payload is the results as the analysis computed them; ``share.js`` draws it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recstack.report.html import render_page, write_page
from recstack.version import __version__

SHARE_SCRIPTS = ["units.js", "common.js", "share.js"]


def share_payload(results: list[dict[str, Any]], title: str | None = None) -> dict[str, Any]:
    """The page's data: the results in the order given, a title and the version."""
    models = list(dict.fromkeys(str(r.get("model")) for r in results))
    return {"kind": "share", "title": title or "request sharing · " + ", ".join(models),
            "recstack_version": __version__, "results": results}


def render_share_report(results: dict[str, Any] | list[dict[str, Any]], *, title: str | None = None) -> str:
    """The page for one share result or a list of them, as an HTML string."""
    items = [results] if isinstance(results, dict) else list(results)
    data = share_payload(items, title)
    return render_page(title=f"recstack · {data['title']}", scripts=SHARE_SCRIPTS, data=data)


def write_share_report(results: dict[str, Any] | list[dict[str, Any]], path: str | Path, *,
                       title: str | None = None) -> Path:
    """Write the sharing page to ``path`` (atomically); returns the path."""
    return write_page(render_share_report(results, title=title), path)


__all__ = ["SHARE_SCRIPTS", "render_share_report", "share_payload", "write_share_report"]
