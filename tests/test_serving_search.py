"""The latency-bounded search: screening, order, pruning, confirmation (real spin workers, tiny budgets).

The spin model busy-waits a known time per batch, so the checks are what that
physics guarantees (capacity <= workers / service, service floors >= the busy
waits) and what the search's rules guarantee (order by measured capacity, the
answer is a full probe, every pruned point names its rule). Nothing asserts a
host's speed.
"""

from __future__ import annotations

import json
from typing import Any

from recstack.config.run import RunConfig
from recstack.render.serving import render_search
from recstack.serving.search import CAPACITY_MARGIN, START_FRACTION, Search, Target, _counts, parse_grid
from recstack.serving.service import ServeOptions

SERVICE_S = 0.005  # spin: every batch busy-waits 5 ms


def _search(target: Target, grid: str, *, budget_s: float, start_qps: float | None = None,
            query_size: int = 1) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any], dict[str, Any] | None]]]:
    cfg = RunConfig.build(None, {"model": "spin"})
    opts = ServeOptions(duration_s=0.2, grace_s=0.3, query_size=query_size, service_ms=SERVICE_S * 1e3)
    rows: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    search = Search(cfg, opts, target, budget_s=budget_s, points=parse_grid(grid, cfg, opts),
                    on_probe=lambda kind, point, res: rows.append((kind, dict(point), res)),
                    start_qps=start_qps, screen_share=0.5, rel_tol=0.25)
    return search.run(), rows


def test_default_axes_take_the_powers_of_two_up_to_the_cores():
    assert _counts(1) == [1] and _counts(2) == [1, 2] and _counts(6) == [1, 2, 4, 6] and _counts(8) == [1, 2, 4, 8]


def test_search_screens_orders_by_capacity_prunes_by_floor_and_confirms_with_a_full_probe(capsys):
    # query of 16 candidates: B=1 is 16 batches (floor >= 80 ms on 1 worker, >= 40 ms on 2), B=16 one (>= 5 ms)
    target = Target(99.0, 0.035, tail_samples=4, screen_samples=1)
    v, rows = _search(target, "max_batch=1,16;workers=1,2;threads=1", budget_s=12, query_size=16)
    screens = {(s["max_batch"], s["workers"]): s for s in v["screening"]}
    assert all(s["screened"] for s in screens.values())  # bursts shrink to fit the share: every point screened
    for (b, w), s in screens.items():  # measured alone: w workers take ceil(batches / w) busy-waits in turn
        batches = -(-16 // b)
        assert s["query_size"] == 16 and s["floor_measured"]
        assert s["service_floor_s"] >= SERVICE_S * -(-batches // w) * 0.999
        if b == 1:  # ruled out by the floor: no burst, not probed, and the output says so
            assert s["capacity_qps"] is None
        else:
            assert 0 < s["capacity_qps"] <= w / SERVICE_S * 1.001  # w workers, each busy 5 ms per query
    reasons = {(n["max_batch"], n["workers"]): n["reason"] for n in v["not_probed"]}
    assert reasons[(1, 1)].startswith("service floor") and reasons[(1, 2)].startswith("service floor")
    floors = [r for k, _p, r in rows if k == "floor"]
    assert len(floors) == 4 and all(r["completed"] == 5 and r["floor_query_size"] == 16 for r in floors)
    bursts = [r for k, _p, r in rows if k == "capacity"]
    assert len(bursts) == 2  # closed loop: all at time 0; a burst cut at its limit leaves some unfinished
    for r in bursts:
        assert r["burst"] and r["failed"] == 0 and r["completed"] + r["late"] == r["requests"] > 0
        assert r["capacity_qps"] == r["completed"] / r["elapsed_s"]

    probes = [(p, r) for k, p, r in rows if k == "probe"]
    first_point, first = probes[0]
    top = max((s for s in screens.values() if s["capacity_qps"]), key=lambda s: s["capacity_qps"])
    assert (first_point["max_batch"], first_point["workers"]) == (top["max_batch"], top["workers"])
    assert first["qps"] == START_FRACTION * top["capacity_qps"] and first["screening"] is True
    for _p, r in probes:  # screening probes are shorter, and labelled; full ones hold the tail samples
        assert r["requests"] >= 1 and r["completed"] + r["failed"] + r["late"] == r["requests"]
        assert r["tail_samples_planned"] == (1 if r["screening"] else 4)
        assert r["achieved_qps"] <= 2 / SERVICE_S * 1.001
    (first_conf, *rest) = v["configurations"]
    assert (first_conf["max_batch"], first_conf["workers"]) == (top["max_batch"], top["workers"])
    for c in v["configurations"]:  # the answer is a full probe that met, never a screening one
        full_met = [r["qps"] for p, r in probes if (p["max_batch"], p["workers"]) == (c["max_batch"], c["workers"])
                    and not r["screening"] and r["meets_target"]]
        assert c["qps_at_target"] == (max(full_met) if full_met else None)
        if c["qps_at_target"] is not None:
            assert c["screening_probe"] is False and c["latency_s"]["p99"] <= 0.035
    other = (top["max_batch"], top["workers"] ^ 3)  # the B=16 point with the other worker count
    best_first = first_conf["qps_at_target"]
    if other in reasons:  # pruned: by capacity below the first's confirmed answer, or by the budget
        cap = screens[other]["capacity_qps"]
        assert (reasons[other].startswith("capacity") and cap * (1 + CAPACITY_MARGIN) < best_first) or \
            reasons[other].startswith("budget")
    else:  # probed: the capacity rule did not rule it out
        assert best_first is None or screens[other]["capacity_qps"] * (1 + CAPACITY_MARGIN) >= best_first
    render_search(v)
    out = capsys.readouterr().out
    assert "probe" not in out or "screening" in out
    assert out.count("not probed: ") == len(v["not_probed"]) and "service floor" in out


def test_a_target_below_the_service_time_is_reported_impossible_with_the_measured_floor(capsys):
    # every batch busy-waits 5 ms: no p99 can be 3 ms; the lowest-floor point is still probed for the closest
    target = Target(99.0, 0.003, tail_samples=1)
    v, rows = _search(target, "max_batch=1;workers=1,2;threads=1", budget_s=20, start_qps=30)
    assert v["met"] is False and v["best"] is None and v["closest"] is not None
    floor = v["service_floor"]
    assert floor["above_target"] is True and floor["floor_measured"] and floor["service_floor_s"] >= SERVICE_S * 0.999
    assert len(v["configurations"]) == 1 and len(v["not_probed"]) == 1
    assert v["not_probed"][0]["reason"].startswith("service floor")
    assert v["closest"]["latency_s"]["p99"] >= SERVICE_S * 0.999  # latency >= the busy-wait, measured
    assert [k for k, _p, _r in rows if k == "capacity"] == []  # no burst for points their floor rules out
    assert json.dumps(v, default=str)  # the verdict is plain data (the CLI's --json)
    render_search(v)
    out = capsys.readouterr().out
    assert "target not met by any configuration" in out and "impossible on this host" in out


def test_the_report_takes_the_qps_at_target_from_full_probes_only(tmp_path):
    from recstack.results.serving_figures import serving_figures
    from recstack.serving.results import ServingStore, probe_row
    from recstack.store import db

    store = ServingStore(tmp_path / "s.duckdb")
    point = {"model": "spin", "max_batch": 1, "workers": 1, "threads": 1, "backend": "torch", "dtype": "fp32"}
    for i, (qps, ok, screening) in enumerate([(100.0, True, False), (150.0, True, True), (200.0, False, True)]):
        res = {"qps": qps, "latency_s": {"p99": 0.01 if ok else 0.05}, "screening": screening}
        store.write(probe_row("s1", i, "probe", {**point, "meets_target": ok}, res, 99.0, 0.02))
    store.write(probe_row("s1", 3, "capacity", {**point, "meets_target": None}, {"qps": None, "burst": True},
                          99.0, 0.02))
    (conf,) = serving_figures(db.read_table(store.path, "serving"))["configurations"]
    assert [(p["qps"], p["screening"]) for p in conf["points"]] == [(100.0, False), (150.0, True), (200.0, True)]
    assert conf["qps_at_target"] == 100.0  # the screening probe that met at 150 QPS is drawn, not the answer
