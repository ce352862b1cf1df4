"""The ``advice`` table: every what-if of ``recstack advise`` in a results store (``--store FILE``).

The table is migration 4 of the results store (:mod:`recstack.store.migrations`): ``--store`` may name a
sweep's store (the rows join its points), an older store (migrated forward) or a new file (made a store); a
store that is damaged, foreign or newer is refused before anything is measured (exit 2). One row per lever
of the ranking (singles, the compile lever, the measured combination) with its rank, verdict, interval and
costs, and ``what_if_config``: the RunConfig that reproduces it. Read it with ``recstack results STORE
--table advice`` or ``recstack.results.load(STORE, "advice")``; columns: docs/sweeps.md.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

from recstack.store import db
from recstack.store.migrations import ADVICE_COLUMNS
from recstack.version import __version__


def check_store_arg(path: str | Path) -> None:
    """Create or migrate the store now (the guarded open: a bad store is a DataError, exit 2)."""
    db.migrate(path)


def write_advice(doc: dict[str, Any], path: str | Path) -> int:
    """Append the document's ranking to the store's ``advice`` table, one transaction per row; returns the rows."""
    db.migrate(path)
    advice_id = uuid.uuid4().hex[:12]
    common = _common(doc, advice_id)
    for rank, r in enumerate(doc["ranking"], 1):
        db.append_row(path, "advice", ADVICE_COLUMNS, {**common, **lever_row(doc, rank, r)})
    return len(doc["ranking"])


def _common(doc: dict[str, Any], advice_id: str) -> dict[str, Any]:
    from recstack.config.run import RunConfig

    base = RunConfig.model_validate(doc["baseline"])
    return {"advice_id": advice_id, "host": socket.gethostname(), "recstack_version": __version__,
            "model": doc["model"], "mode": base.mode, "goal": doc["goal"], "config_key": base.key(),
            "run_config": doc["baseline"], "tolerance": doc["tolerance"], "contended": doc["contended"]}


def lever_row(doc: dict[str, Any], rank: int, r: dict[str, Any]) -> dict[str, Any]:
    """The row of one ranked lever (``r``: an entry of the document's ``ranking``)."""
    from recstack.config.run import RunConfig

    step, dev, loss = r["step"], r.get("deviation") or {}, r.get("loss") or {}
    iv = step.get("interval") or [None, None]
    what_if = RunConfig.model_validate(doc["baseline"]).updated(**r["change"]).model_dump(mode="json")
    return {
        "name": r["name"], "rank": rank, "lever_kind": r["kind"], "stage": r["stage"], "change": r["change"],
        "options": r["options"], "exact_change": r["exact_change"], "recommended": r["recommended"],
        "winner": r["name"] == doc["winner"], "reason": r["reason"], "step_speedup": step.get("speedup"),
        "step_ci_low": iv[0], "step_ci_high": iv[1], "verdict": step.get("verdict"), "base_s": step.get("base_s"),
        "what_if_s": step.get("what_if_s"), "stage_speedup": r["stage_result"].get("speedup"),
        "deviation_max_abs": dev.get("max_abs"), "deviation_max_rel": dev.get("max_rel"),
        "within_tolerance": r.get("within_tolerance"), "loss_steps": loss.get("steps"),
        "loss_base": loss.get("base"), "loss_what_if": loss.get("what_if"), "loss_rel_dev": loss.get("rel_dev"),
        "build_s": r["build_s"], "baseline_bytes": r["resident"]["baseline_bytes"],
        "what_if_bytes": r["resident"]["what_if_bytes"], "what_if_config": what_if, "result_json": r,
    }


__all__ = ["check_store_arg", "lever_row", "write_advice"]
