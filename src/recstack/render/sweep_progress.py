"""A sweep's progress on stderr: a rich bar (done/total, failures, elapsed, ETA) and one line per point.

Follows :mod:`recstack.render.progress`: a live bar when stderr is a terminal,
plain lines when forced (``RECSTACK_PROGRESS=always``), nothing under
``--quiet`` / ``RECSTACK_PROGRESS=never``. The driver runs no timed work (the
points run in workers), so the bar's refresh thread costs the measurements nothing.
"""

from __future__ import annotations

from typing import Any

from recstack.render import progress
from recstack.units import count, seconds


def point_line(cfg: Any, result: dict[str, Any], varying: list[str], done: int, total: int) -> str:
    """``[3/10] ok  model=rmc1 batch_size=16  p50 1.2 ms  p99 1.5 ms  13.3k samples/s``."""
    what = " ".join(f"{f}={getattr(cfg, f)}" for f in varying)
    status = result["status"]
    if status == "ok":
        tput = result.get("throughput")
        figs = (f"p50 {seconds(result['step_p50_s'])}  p99 {seconds(result['step_p99_s'])}  "
                + (f"{count(tput)} samples/s" if tput else ""))
        if result.get("contended"):
            figs += "  (contended)"
    else:
        figs = str(result.get("reason") or "")[:160]
    return f"[{done}/{total}] {status:<7} {what}  {figs}"


class SweepProgress:
    def __init__(self, total: int, skipped: int, *, varying: list[str], enabled: bool = True) -> None:
        self.total = total
        self.done = skipped
        self.failed = 0
        self.varying = varying
        self.mode = progress._mode() if enabled else "off"
        self.bar: Any = None
        self.task: Any = None
        self.skipped = skipped

    def __enter__(self) -> SweepProgress:
        if self.mode == "off":
            return self
        con = progress._file()
        if self.done:
            con.print(f"recstack sweep: {self.done} of {self.total} points are in the store already; skipped",
                      markup=False)
        if self.mode == "live":
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            label = f"sweep ({self.done} in the store)" if self.done else "sweep"
            self.bar = Progress(TextColumn(label, markup=False), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(),
                                TextColumn("ETA"), TimeRemainingColumn(), console=con, transient=True,
                                refresh_per_second=2, redirect_stderr=False, redirect_stdout=False)
            # The bar counts this run's points only, so that the ETA is not skewed by skipped ones.
            self.skipped = self.done
            self.task = self.bar.add_task("sweep", total=self.total - self.done, completed=0, failed=0)
            self.bar.start()
        return self

    def point_done(self, cfg: Any, result: dict[str, Any]) -> None:
        self.done += 1
        self.failed += result["status"] != "ok"
        if self.mode == "off":
            return
        progress._file().print(point_line(cfg, result, self.varying, self.done, self.total), markup=False)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done - self.skipped, failed=self.failed)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


__all__ = ["SweepProgress", "point_line"]
