"""Terminal text of serve results (figures come from the summary; nothing is computed here)."""

from __future__ import annotations

import json
import sys
from typing import Any


def _ms(v: Any) -> str:
    return "n/a" if v is None else f"{v * 1e3:.3g} ms"


def render_run(r: dict[str, Any]) -> None:
    lat = r["latency_s"]
    state = "complete" if r["complete"] else f"INCOMPLETE (stopped by {r['stopped']})"
    print(f"serve {r.get('model')}: {state}")
    print(f"  offered {r['offered_qps']:.4g} QPS, achieved {r['achieved_qps']:.4g} QPS (measured); "
          f"requests {r['requests']}, completed {r['completed']}, failed {r['failed']}, late {r['late']}")
    print(f"  latency from scheduled arrival (measured): p50 {_ms(lat['p50'])}  p95 {_ms(lat['p95'])}  "
          f"p99 {_ms(lat['p99'])}  p99.9 {_ms(lat['p999'])}  mean {_ms(lat['mean'])}")
    print(f"  queueing {_ms(r['queue_s_mean'])} + service {_ms(r['service_s_mean'])} (means, measured); "
          f"utilisation {r['utilisation']:.1%} (busy / elapsed), per worker "
          + ", ".join(f"{u:.0%}" for u in r["worker_utilisation"]))
    lg = r["loadgen"]
    print(f"  load generator: dispatcher {lg['cpu_cores']:.1%} of a core, workers' spin to arrivals "
          f"{lg['worker_spin_cores']:.1%} (measured), release lateness p99 "
          f"{_ms(lg['dispatch_lateness_s']['p99'])}")
    cont = r.get("contention") or {}
    if cont.get("detected"):
        print("  warning: contended run: " + "; ".join(str(e) for e in cont.get("evidence", [])[:2]))


def _ci(r: dict[str, Any], key: str = "p99") -> str:
    ci = (r.get("latency_ci95_s") or {}).get(key)
    return f" [95% CI {_ms(ci[0])} .. {_ms(ci[1])}]" if ci else " [95% CI: too few samples]"


def _conf(c: dict[str, Any]) -> str:
    gpu = "" if c.get("gpu_threshold") is None else f" gpu>{c['gpu_threshold']}"
    return f"B={c.get('max_batch')} workers={c.get('workers')} threads={c.get('threads')} " \
           f"{c.get('backend')}/{c.get('dtype')}{gpu}"


def render_probe(kind: str, point: dict[str, Any], r: dict[str, Any] | None) -> None:
    if not r:
        return
    if kind == "capacity":
        cap, floor = point.get("capacity_qps"), point.get("service_floor_s")
        n = f"{r['completed']} of {r['requests']} requests back to back (cut at its limit)" if r["late"] \
            else f"{r['completed']} requests back to back"
        print(f"  screen {_conf(point)}: capacity {'n/a' if cap is None else f'{cap:.4g}'} QPS "
              f"({n}, measured); service floor {_ms(floor)} for a "
              f"{point.get('query_size')}-candidate query ({_floor_how(point)})", flush=True)
        return
    p99 = (r.get("latency_s") or {}).get("p99")
    label = "screening" if r.get("screening") else "full"
    print(f"  probe ({label}) {_conf(point)}: offered {r['offered_qps']:.4g} QPS -> p99 {_ms(p99)}{_ci(r)} "
          f"({'meets' if point.get('meets_target') else 'misses'}; {r['requests']} requests, "
          f"{r['samples_beyond_target_percentile']:g} beyond p99, failed {r['failed']})", flush=True)


def _floor_how(c: dict[str, Any]) -> str:
    return "served alone, measured" if c.get("floor_measured") else "estimate from warm-up timings"


def _outcome(c: dict[str, Any]) -> str:
    q = c["qps_at_target"]
    if q is not None:
        return f"{q:.4g} QPS at p99 {_ms((c.get('latency_s') or {}).get('p99'))}{_ci(c)} (full probe)"
    if c.get("screening_qps") is not None:
        return f"met at {c['screening_qps']:.4g} QPS in screening only, not confirmed by a full probe"
    if c.get("unreachable"):
        return "target out of reach (missed with the workers mostly idle)"
    return "target not met"


def render_search(v: dict[str, Any]) -> None:
    t = v["target"]
    screen = (f"; screening probes {t['screen_samples']} samples, >= {t['screen_requests']} requests, "
              "then a full probe confirms" if t.get("screen_samples") else "")
    print(f"search: p{t['percentile']:g} <= {_ms(t['latency_s'])} (full probes {t['tail_samples']} samples beyond "
          f"the percentile, >= {t['min_requests']} requests{screen})")
    for c in v["configurations"]:
        cap = c.get("capacity_qps")
        print(f"  {_conf(c)}: {_outcome(c)} ({c['probes']} probes, {c.get('full_probes', c['probes'])} full"
              f"{', contended' if c.get('contended') else ''}"
              + (f"; capacity {cap:.4g} QPS back to back, measured" if cap else "")
              + (f"; service floor {_ms(c['service_floor_s'])}" if c.get("service_floor_s") is not None else "")
              + ")")
    if v["best"]:
        b = v["best"]
        print(f"best: {b['qps_at_target']:.4g} QPS at p99 <= {_ms(t['latency_s'])} with {_conf(b)} "
              "(measured, full probe)")
    else:
        c = v.get("closest")
        where = (f"; closest: {_conf(c)} p99 {_ms((c.get('latency_s') or {}).get('p99'))}"
                 f"{' (screening probe)' if c.get('screening_probe') else ' (full probe)'}") if c else ""
        print(f"target not met by any configuration (no full probe met it){where}")
        screened = [c for c in v["configurations"] if c.get("screening_qps") is not None]
        if screened:
            s = max(screened, key=lambda c: c["screening_qps"])
            print(f"  unconfirmed: {_conf(s)} met the target at {s['screening_qps']:.4g} QPS in a screening probe "
                  f"({t['screen_samples']} samples beyond the percentile); a larger --budget would confirm it")
        f = v.get("service_floor")
        if f and f["above_target"]:
            print(f"  impossible on this host: the p{t['percentile']:g}-sized query ({f['query_size']} candidates) "
                  f"needs {_ms(f['service_floor_s'])} of service even at the lowest-floor configuration "
                  f"{_conf(f)} ({_floor_how(f)}) > target {_ms(t['latency_s'])}")
    for n in v["not_probed"]:
        print(f"  not probed: {_conf(n)}: {n.get('reason') or 'budget spent'}")


def emit(result: dict[str, Any], args: Any, render: Any) -> None:
    """Write the result to ``args.output`` (if given; the path written goes back there), then print it: as one
    JSON line with ``args.json``, else as ``render`` draws it."""
    if args.output:
        from recstack.outputs import atomic_write_text, write_result

        text = json.dumps(result, indent=2, default=str) + "\n"
        args.output = str(write_result(args.output, lambda p: atomic_write_text(p, text), "result"))
    if args.json:
        sys.stdout.write(json.dumps(result, default=str) + "\n")
    else:
        render(result)
        if args.output:
            print(f"result written to {args.output}")
    sys.stdout.flush()
