"""One serve run and one capacity search, from a RunConfig and ServeOptions to the result document.

``recstack serve`` (:mod:`recstack.serving.commands`) checks the flags, calls :func:`serve` or
:func:`search`, and prints or writes what they return.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from recstack.errors import ConfigError


def check_wall(bound_s: float, limit_s: float, what: str) -> None:
    """Refuse a run whose wall time is bounded (from its inputs) above ``limit_s`` (``--max-wall``)."""
    if not bound_s <= limit_s:
        raise ConfigError(f"this run may take {bound_s:.4g} s ({what}), beyond --max-wall {limit_s:g} s; "
                          "shorten it or raise --max-wall", field="--max-wall")


def _described(doc: dict[str, Any], cfg: Any, opts: Any) -> dict[str, Any]:
    doc["model"] = cfg.model
    doc["run_config"] = cfg.model_dump(mode="json")
    doc["serve"] = asdict(opts)
    return doc


def serve(cfg: Any, opts: Any, max_wall_s: float) -> dict[str, Any]:
    """Serve ``cfg`` under the load ``opts`` describes, once: the run's result document."""
    from recstack.render.progress import phase
    from recstack.serving.service import build_plan, plan_sizes, pool_for, probe

    plan = build_plan(cfg, opts)
    check_wall(plan.duration_s + opts.grace(), max_wall_s, "the schedule plus --grace")
    with pool_for(cfg, opts, plan_sizes(plan)) as pool:
        with phase("starting workers"):
            pool.start()

        def announce() -> None:
            sys.stderr.write(f"serving: load started, {plan.requests} requests over {plan.duration_s:g} s "
                             f"on {len(pool.live())} workers\n")
            sys.stderr.flush()

        result = probe(pool, plan, opts, announce=announce)
    return _described(result, cfg, opts)


def search(cfg: Any, opts: Any, target: Any, *, budget_s: float, grid: Any, max_wall_s: float,
           store_path: str | None, start_qps: float | None,
           show_probe: Callable[[str, dict[str, Any], dict[str, Any] | None], None] | None) -> dict[str, Any]:
    """The latency-bounded QPS of ``cfg`` at ``target`` (:mod:`recstack.serving.search`), each probe written to
    the results store at ``store_path`` (if any) and shown by ``show_probe``: the search's verdict document."""
    from recstack.serving.results import ServingStore, probe_row
    from recstack.serving.search import Search, parse_grid

    check_wall(budget_s + opts.duration_s + opts.grace(), max_wall_s, "--budget plus one probe")
    points = parse_grid(grid, cfg, opts)
    store = ServingStore(store_path) if store_path else None  # migrated now; opened again per probe
    counter = [0]
    run: Search

    def on_probe(kind: str, point: dict[str, Any], result: dict[str, Any] | None) -> None:
        counter[0] += 1
        if store is not None:
            store.write(probe_row(run.search_id, counter[0], kind, point, result, target.pct, target.latency_s))
        if kind in ("probe", "capacity") and show_probe is not None:
            show_probe(kind, point, result)

    def announce(qps: float) -> None:
        sys.stderr.write(f"serving: probe load started, {qps:.4g} QPS\n")
        sys.stderr.flush()

    run = Search(cfg, opts, target, budget_s=budget_s, points=points, on_probe=on_probe,
                 start_qps=start_qps, announce=announce)
    return _described(run.run(), cfg, opts)


__all__ = ["check_wall", "search", "serve"]
