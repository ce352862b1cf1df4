"""Terminal text of serve results (figures come from the summary; nothing is computed here)."""

from __future__ import annotations

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
    print(f"  load generator: {lg['cpu_cores']:.1%} of a core, dispatch lateness p99 "
          f"{_ms(lg['dispatch_lateness_s']['p99'])}")
    cont = r.get("contention") or {}
    if cont.get("detected"):
        print("  warning: contended run: " + "; ".join(str(e) for e in cont.get("evidence", [])[:2]))


def render_probe(point: dict[str, Any], r: dict[str, Any] | None) -> None:
    if not r:
        return
    p99 = (r.get("latency_s") or {}).get("p99")
    print(f"  probe B={point.get('max_batch')} workers={point.get('workers')} threads={point.get('threads')} "
          f"{point.get('backend')}/{point.get('dtype')}: offered {r['offered_qps']:.4g} QPS -> p99 {_ms(p99)} "
          f"({'meets' if point.get('meets_target') else 'misses'}; {r['requests']} requests, failed {r['failed']})",
          flush=True)


def render_search(v: dict[str, Any]) -> None:
    t = v["target"]
    print(f"search: p{t['percentile']:g} <= {_ms(t['latency_s'])} ({t['tail_samples']} samples beyond the "
          f"percentile per probe, >= {t['min_requests']} requests)")
    for c in v["configurations"]:
        q = c["qps_at_target"]
        ci = (c.get("latency_ci95_s") or {}).get("p99")
        ci_text = f" [95% CI {_ms(ci[0])} .. {_ms(ci[1])}]" if ci else ""
        print(f"  B={c['max_batch']} workers={c['workers']} threads={c['threads']} {c['backend']}/{c['dtype']}"
              f"{'' if c.get('gpu_threshold') is None else ' gpu>' + str(c['gpu_threshold'])}: "
              + (f"{q:.4g} QPS at p99 {_ms((c.get('latency_s') or {}).get('p99'))}{ci_text}" if q is not None
                 else "target out of reach (missed with the workers mostly idle)" if c.get("unreachable")
                 else "target not met") + f" ({c['probes']} probes{', contended' if c.get('contended') else ''}"
              + (f"; back-to-back capacity estimate {c['capacity_estimate_qps']:.4g} QPS"
                 if c.get("capacity_estimate_qps") else "") + ")")
    if v["best"]:
        b = v["best"]
        print(f"best: {b['qps_at_target']:.4g} QPS at p99 <= {_ms(t['latency_s'])} with B={b['max_batch']} "
              f"workers={b['workers']} threads={b['threads']} {b['backend']}/{b['dtype']} (measured)")
    else:
        c = v.get("closest")
        where = (f"; closest: B={c['max_batch']} workers={c['workers']} threads={c['threads']} p99 "
                 f"{_ms((c.get('latency_s') or {}).get('p99'))}") if c else ""
        print(f"target not met by any configuration{where}")
    if v["not_probed"]:
        print(f"  {len(v['not_probed'])} configurations not probed (budget spent or stopped)")
