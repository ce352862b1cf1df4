"""Reports over saved profiles: the HTML report, profile diffs, and the CLI commands for them.

    from recstack.report import write_report, diff_profiles
    write_report(Profile.load("out.json"), "report.html")
    result = diff_profiles(Profile.load("a.json"), Profile.load("b.json"))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstack.report.build import render_report, write_report
    from recstack.report.diff import DiffResult, NodeDelta, NoiseRule, diff_profiles
    from recstack.report.diff_render import render_diff_html, write_diff_html

# Lazy: the CLI registers report.commands at start-up, which must not load the profile schema and numpy.
_WHERE = {
    "render_report": "build",
    "write_report": "build",
    "DiffResult": "diff",
    "NodeDelta": "diff",
    "NoiseRule": "diff",
    "diff_profiles": "diff",
    "render_diff_html": "diff_render",
    "write_diff_html": "diff_render",
}

__all__ = [
    "DiffResult",
    "NodeDelta",
    "NoiseRule",
    "diff_profiles",
    "render_diff_html",
    "render_report",
    "write_diff_html",
    "write_report",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"recstack.report.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'recstack.report' has no attribute {name!r}")
