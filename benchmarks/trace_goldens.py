"""Golden figures of a torch.profiler (Kineto) trace, computed straight from its raw events.

Independent of recstack's importer on purpose (the standard library's ``json`` and ``gzip`` only, no
recstack code): what a trace records, summed without any fold, so that ``recstack import`` can be held to it.
Per trace file (one rank):

* ``rank``: ``distributedInfo.rank`` (null when absent);
* ``events_by_category``: complete (``ph: X``) events per category, as spelled in the file;
* ``device_us``: device time by kind summed over every device event (``kernel``, ``memcpy``, ``memset``,
  ``collective``: a kernel whose name holds ``nccl`` or ``rccl``), any spelling of the category;
* ``steps``: per ``ProfilerStep#N`` host range (by start; a ``gpu_user_annotation`` twin is not a step): its span, device time by kind of the device events
  whose launching runtime call (same correlation id) starts inside it, and ``busy_us``: the union of the
  device events' intervals clipped to the span;
* ``device_us_in_steps``: the device time by kind launched inside some step; ``device_us_unlaunched``: with
  no runtime call of the same correlation id in the trace;
* ``top_kernels``: the ten device events (by name) with the most time launched inside the steps (the whole
  trace when it has no steps): an independent kernel breakdown, [name, us] each.

    python benchmarks/trace_goldens.py TRACE [TRACE ...] [--write]   # --write: TRACE.golden.json beside each
    python benchmarks/trace_goldens.py --compare TRACE ...           # and recstack's import beside the raw sums
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

DEVICE = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}
RUNTIME = {"cuda_runtime", "cuda_driver", "runtime"}
KINDS = ("kernel", "memcpy", "memset", "collective")


def load(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rt") if gz else path.open()) as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {"traceEvents": data}


def kind_of(cat: str, name: str) -> str | None:
    k = DEVICE.get(cat.lower())
    if k == "kernel" and ("nccl" in name.lower() or "rccl" in name.lower()):
        return "collective"
    return k


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def goldens(path: Path) -> dict[str, Any]:
    data = load(path)
    events = [e for e in data.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    by_cat: dict[str, int] = {}
    for e in events:
        cat = str(e.get("cat", ""))
        by_cat[cat] = by_cat.get(cat, 0) + 1
    launch = {}  # correlation id -> launching runtime call's start
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if str(e.get("cat", "")).lower() in RUNTIME and corr is not None:
            launch[corr] = float(e["ts"])
    steps = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["name"]) for e in events
                   if str(e.get("name", "")).startswith("ProfilerStep#")
                   and str(e.get("cat", "")).lower() != "gpu_user_annotation")  # host ranges (its device twin apart)
    zero = dict.fromkeys(KINDS, 0.0)
    total, in_steps, unlaunched = dict(zero), dict(zero), dict(zero)
    by_name: dict[str, float] = {}
    per_step = [{"name": n, "start_us": s, "end_us": t, "device_us": dict(zero), "intervals": []}
                for s, t, n in steps]
    for e in events:
        k = kind_of(str(e.get("cat", "")), str(e.get("name", "")))
        if k is None:
            continue
        dur, ts = float(e.get("dur", 0)), float(e["ts"])
        total[k] += dur
        for st in per_step:
            if ts < st["end_us"] and ts + dur > st["start_us"]:
                st["intervals"].append((max(ts, st["start_us"]), min(ts + dur, st["end_us"])))
        t0 = launch.get((e.get("args") or {}).get("correlation"))
        if t0 is None:
            unlaunched[k] += dur
            continue
        if not per_step:
            by_name[e["name"]] = by_name.get(e["name"], 0.0) + dur
        for st in per_step:
            if st["start_us"] <= t0 < st["end_us"]:
                st["device_us"][k] += dur
                in_steps[k] += dur
                by_name[e["name"]] = by_name.get(e["name"], 0.0) + dur
                break
    for st in per_step:
        st["busy_us"] = _union(st.pop("intervals"))
    rank = (data.get("distributedInfo") or {}).get("rank")
    return {"file": path.name, "rank": rank, "events_by_category": by_cat, "device_us": total,
            "device_us_in_steps": in_steps, "device_us_unlaunched": unlaunched, "steps": per_step,
            "top_kernels": sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))[:10]}


def recstack_figures(path: Path) -> dict[str, Any]:
    """recstack's import of ``path``: device time summed from the tree (ops' device_time_s and kernel nodes,
    per step x steps) and the import's own record."""
    import warnings

    from recstack.traceimport import import_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = import_trace(path)
    d = p.to_dict()
    steps = d["import"]["files"][0]["steps"]
    ops = sum(n.extra.get("device_time_s", 0.0) for n in p.nodes() if n.level == "op") * steps * 1e6
    kern = sum(n.time_s for n in p.nodes() if n.level == "kernel") * steps * 1e6
    return {"steps": steps, "tree_op_device_us": ops, "tree_kernel_nodes_us": kern,
            "record": d["import"]["files"][0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--write", action="store_true", help="write TRACE.golden.json beside each trace")
    ap.add_argument("--compare", action="store_true", help="also import with recstack and print both")
    args = ap.parse_args(argv)
    for path in args.traces:
        if path.name.endswith(".golden.json"):  # a shell glob over the corpus folder also matches the goldens
            continue
        g = goldens(path)
        if args.write:
            Path(f"{path}.golden.json").write_text(json.dumps(g, indent=1) + "\n")
        raw = sum(g["device_us_in_steps"].values())
        line = {"file": g["file"], "rank": g["rank"], "steps": len(g["steps"]),
                "device_us": {k: round(v, 3) for k, v in g["device_us"].items()},
                "device_us_in_steps": round(raw, 3)}
        if args.compare:
            r = recstack_figures(path)
            line.update(recstack_tree_op_device_us=round(r["tree_op_device_us"], 3),
                        recstack_tree_kernel_nodes_us=round(r["tree_kernel_nodes_us"], 3))
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
