"""Terminal rendering of a ``recstack compile`` report (figures come from the report; none computed here)."""

from __future__ import annotations

import json
import sys
from typing import Any


def _s(v: Any) -> str:
    return "-" if v is None else (f"{v * 1e3:.3f} ms" if isinstance(v, float) else str(v))


def print_compile_report(r: dict[str, Any]) -> None:
    c = r["compile"]
    print(f"recstack compile: {r['model']} ({r['mode']}, batch {r['batch_size']}), {c['mode']}: "
          + ", ".join(x["path"] for x in c["regions"]))
    print(f"{'stage':22} {'eager':>12} {'compiled':>12} {'speedup':>8} {'library':>8} {'ceiling':>8}")
    for name, st in r["stages"].items():
        sp = "-" if st.get("speedup") is None else f"{st['speedup']:.2f}x"
        share = "" if "library_share" not in st else ("-" if st["library_share"] is None
                                                      else f"{100 * st['library_share']:.0f}%")
        ceil = "" if "library_share" not in st else ("none" if st.get("ceiling_speedup") is None
                                                      else f"{st['ceiling_speedup']:.2f}x")
        print(f"{name:22} {_s(st.get('eager_s')):>12} {_s(st.get('compiled_s')):>12} {sp:>8} {share:>8} {ceil:>8}"
              + (f"  {st['unavailable']}" if st.get("unavailable") else ""))
    if r.get("ceiling"):
        print(f"library: share of the stage's eager time in library kernels; ceiling: {r['ceiling']['formula']} "
              "(none: no library op ran, no bound)")
    n = r["numerics"]
    print(f"numerics: max abs err {n['max_abs_err']:.3g}, max rel err {n['max_rel_err']:.3g}: "
          f"{'ok' if n['ok'] else 'FAILED'}")
    ct = r["compile_time_s"]
    print(f"compile time: cold {_sec(ct.get('cold'))}, warm {_sec(ct.get('warm'))}")
    print(f"graphs: {len(r['graphs'])}, graph breaks: {len(r['graph_breaks'])}, recompiles: {len(r['recompiles'])}, "
          f"fallbacks: {len(r['fallbacks'])}")
    for b in r["graph_breaks"]:
        print(f"  break {b['file']}:{b['line']} [{b['module_path']} / {b['stage']}]: {b['reason']}")
    for x in r["recompiles"]:
        print(f"  recompile {x['file']}:{x['line']} [{x['region']}]: {x['guard']}")
    for f in r["fallbacks"]:
        print(f"  FALLBACK [{f['region']}]: {f['error']}")
    for h in r.get("hazards", []):
        print(f"  hazard [{h['region']}]: {h['reason']} -> {h['action']}")
    for share in c.get("shared_recompile_budgets", []):
        print(f"  shared recompile budget: {', '.join(share['regions'])}")


def _sec(v: Any) -> str:
    return "-" if v is None else f"{v:.2f} s"


def print_recommendation(r: dict[str, Any]) -> None:
    print(f"recstack compile --recommend: {r['model']} ({r['mode']}), {len(r['candidates'])} candidates "
          f"in {r['elapsed_s']:.0f} s")
    for c in r["candidates"]:
        sp = "-" if c.get("speedup") is None else f"{c['speedup']:.2f}x"
        print(f"  {c['name']:40} run {sp:>7}  recompiles {c.get('recompiles', '-')}  "
              f"{'ok' if c.get('eligible') else 'rejected: ' + str(c.get('why'))}")
    th = r.get("gain_thresholds") or {}
    if th:
        print("gain thresholds (max of 1.02 and 1 + the stage's eager-vs-eager deviation): "
              + ", ".join(f"{k} {v:.2f}x" for k, v in th.items() if not k.startswith(("[", "other"))))
    for d in (r.get("chosen_result") or {}).get("dropped", []):
        sp = "no visible time" if d.get("speedup") is None else f"{d['speedup']:.2f}x"
        print(f"  dropped {d['path']} ({d['stage']}): {sp} in the composite, round {d['round']}: runs eagerly")
    print(f"chosen: {r['chosen']}; config written to {r['written']}")
    if r.get("store"):
        st = r["store"]
        print(f"results: {st['path']} (table {st['table']}, search_id {st['search_id']})")


def emit(report: dict[str, Any], as_json: bool, *, recommend: bool = False) -> None:
    """The report (or the recommendation) on stdout: as one JSON object, or as the terminal view."""
    if as_json:
        json.dump(report, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return
    (print_recommendation if recommend else print_compile_report)(report)
