"""Reports over saved profiles: the HTML report, profile diffs, and the CLI commands for them.

    from recstack.report import write_report, diff_profiles
    write_report(Profile.load("out.json"), "report.html")
    result = diff_profiles(Profile.load("a.json"), Profile.load("b.json"))
"""

from __future__ import annotations

from recstack.report.build import render_report, write_report
from recstack.report.diff import DiffResult, NodeDelta, NoiseRule, diff_profiles
from recstack.report.diff_render import render_diff_html, write_diff_html

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
