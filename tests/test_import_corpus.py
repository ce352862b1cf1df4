"""``recstack import`` on real traces recorded elsewhere, against golden figures summed from their raw events.

The traces live outside the repository, in ``../shared/data/traces/`` beside it (public files, each with its
source and licence in that folder's README; ``RECSTACK_TRACE_CORPUS`` names another folder). Beside each
trace ``NAME`` is ``NAME.golden.json``, written by ``python benchmarks/trace_goldens.py --write NAME``: the
figures summed straight from the trace's events with the standard library, independently of recstack's
fold. Per trace (one rank): device time by kind over the trace and launched inside the steps, the ten
kernels with the most time, and per step the GPU's busy time. Skipped, saying why, when the folder or a golden file is absent.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from recstack.traceimport import import_trace

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("RECSTACK_TRACE_CORPUS", REPO.parent / "shared" / "data" / "traces"))
KINDS = ("kernel", "memcpy", "memset", "collective")
REL = 0.005  # the goal: within 0.5% of the raw sums


def _traces() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))
                  and not p.name.endswith(".golden.json"))


def _close(a: float, b: float, what: str) -> None:
    assert a == pytest.approx(b, rel=REL, abs=1e-9), f"{what}: recstack {a!r} vs raw {b!r}"


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no real-trace corpus at {CORPUS} (public traces with golden "
                    "figures; see benchmarks/trace_goldens.py)")
@pytest.mark.parametrize("trace", _traces() or [None], ids=lambda p: p.name if p else "none")
def test_real_trace_imports_to_its_golden_figures(trace: Path | None) -> None:
    if trace is None:
        pytest.skip(f"{CORPUS} holds no .json / .json.gz traces")
    golden_path = Path(f"{trace}.golden.json")
    if not golden_path.is_file():
        pytest.skip(f"no {golden_path.name} beside it (python benchmarks/trace_goldens.py --write {trace})")
    g: dict[str, Any] = json.loads(golden_path.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # notes are checked below, through the record
        p = import_trace(trace)
    d = json.loads(json.dumps(p.to_dict(), allow_nan=False))
    f = d["import"]["files"][0]
    if g["rank"] is not None:
        assert f["rank"] == g["rank"]
    assert f["categories"] == g["events_by_category"]
    steps = g["steps"]
    if steps:
        assert f["steps"] == len(steps)
    dev = f["device"]
    if dev is None:
        assert sum(g["device_us"].values()) == 0
        return
    for k in KINDS:
        _close(dev["raw_s"][k] * 1e6, g["device_us"][k], f"raw {k}")
        launched = g["device_us_in_steps"][k] if steps else g["device_us"][k] - g["device_us_unlaunched"][k]
        _close(dev["in_tree_s"][k] * 1e6, launched, f"in the tree: {k}")
    kernel_nodes = sum(n.time_s for n in p.nodes() if n.level == "kernel") * f["steps"] * 1e6
    _close(kernel_nodes, sum(dev["in_tree_s"].values()) * 1e6, "kernel nodes over the steps")
    mine_by_name: dict[str, float] = {}
    for n in p.nodes():
        if n.level == "kernel":
            mine_by_name[n.name] = mine_by_name.get(n.name, 0.0) + n.time_s * f["steps"] * 1e6
    for name, us in g.get("top_kernels", []):  # the independent breakdown's top 10, each within 0.5%
        _close(mine_by_name.get(name, 0.0), us, f"kernel {name[:60]}")
    for i, (mine, raw) in enumerate(zip(dev["steps"], steps, strict=False)):
        _close(mine["busy_s"] * 1e6, raw["busy_us"], f"step {i} GPU busy")
        _close(mine["span_s"] * 1e6, raw["end_us"] - raw["start_us"], f"step {i} span")
