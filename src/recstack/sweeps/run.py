"""Run a sweep: expand and validate the points, skip those the store holds, run the rest, store each.

Only this process (the driver) writes the store: one transaction per point,
the file opened for that transaction only, under the sweep's exclusive lock.
Profiles go to ``<store folder>/profiles/<point_id>.json`` (atomic writes).
A point's identity (``point_id``) is its ``config_hash`` (``RunConfig.key()``),
the recstack version and the host: running the same sweep again skips every
point the store holds (``retry_failed`` runs the failed and timed-out ones again).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recstack.config.run import RunConfig
from recstack.errors import ConfigError, EnvironmentFailure, RecstackError
from recstack.store import db
from recstack.sweeps.local import Job, LocalExecutor
from recstack.sweeps.spec import SweepSpec, as_spec
from recstack.version import __version__

DEFAULT_TIMEOUT_S = 600.0
MAX_TIMEOUT_S = 7 * 86400.0  # per point: a week; beyond, timers overflow and a hung point is never reaped
MAX_PARALLEL = 256  # worker processes side by side
EXECUTORS = ("local", "ray")


@dataclass
class SweepResult:
    store: Path
    sweep_id: str
    total: int
    skipped: int
    run: int = 0
    failed: int = 0
    wall_s: float = 0.0
    timed_s: float = 0.0  # inside the timed steps of the timing and op passes, summed over points
    store_write_s: list[float] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # point_id -> status of this run's points
    notes: list[str] = field(default_factory=list)  # what the user should know about the sweep as a whole

    @property
    def overhead_share(self) -> float | None:
        return (1 - self.timed_s / self.wall_s) if self.wall_s > 0 else None


def point_id(config_hash: str, version: str, host: str) -> str:
    return hashlib.sha256(f"{config_hash}|{version}|{host}".encode()).hexdigest()[:16]


def git_commit() -> str | None:
    """The commit of the recstack source tree, if it is a git checkout (else None)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def sweep(
    spec: SweepSpec | dict[str, Any] | str | Path,
    out: str | Path = "sweep-out",
    *,
    store: str | Path | None = None,
    executor: str = "local",
    address: str | None = None,
    parallel: int = 1,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retry_failed: bool = False,
    progress: bool = True,
    runner: Callable[..., dict[str, Any]] | None = None,
) -> SweepResult:
    """Run a sweep (a SweepSpec, a dict or a sweep YAML) into the store ``store`` (default ``out/results.duckdb``).

    Every point is validated before any runs (ConfigError naming the point and field).
    Returns counts and timings; failed points are in the store with their reason.
    ``runner``: what runs a point in a Ray task (:func:`recstack.sweeps.runner.run_point`;
    the local workers run it in their own processes).
    """
    sweep_spec, configs = as_spec(spec)
    if executor not in EXECUTORS:
        raise ConfigError(f"must be one of {', '.join(EXECUTORS)} (got {executor!r})", field="--executor")
    if not isinstance(parallel, int) or not 1 <= parallel <= MAX_PARALLEL:
        raise ConfigError(f"must be an integer within 1..{MAX_PARALLEL} (got {parallel!r})", field="--parallel")
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise ConfigError(f"must be within 0..{MAX_TIMEOUT_S:g} seconds (got {timeout_s!r})", field="--timeout")
    store_path = Path(store) if store else Path(out) / "results.duckdb"
    from recstack.outputs import check_writable

    check_writable(store_path, "-o/--store")
    t0 = time.perf_counter()
    # the executor first: an unreachable cluster is refused before the store is created or migrated
    ex = _executor(executor, address, parallel, timeout_s, store_path, runner, sweep_spec.min_timed_s)
    with db.SweepLock(store_path):
        db.migrate(store_path)
        res = _run(sweep_spec, configs, store_path, ex, parallel, retry_failed, progress, t0)
    res.notes += machine_notes(configs)
    return res


def machine_notes(configs: list[RunConfig]) -> list[str]:
    """Why the points' ``machine: auto`` (the default, as ``recstack profile``) gave them no machine file,
    or that it was measured under contention; empty when it is a quiet, current cache."""
    if not any(c.machine == "auto" for c in configs):
        return []
    from recstack.hardware.machine import cache_path, machine_with_file
    from recstack.hardware.measure_checks import is_contended

    try:
        machine, _file = machine_with_file("auto")
    except RecstackError as exc:  # an unreadable cache: the points said so too
        return [f"this host's machine file is unreadable ({exc}); `recstack machine --remeasure` replaces it"]
    if machine is None:
        return [f"no current machine file for this host ({cache_path()}): points with machine auto have no bound "
                "classes and their capacity probes were not compared; `recstack machine --quick` measures one"]
    if is_contended(machine):
        return [f"the machine file {cache_path()} was measured under contention: the points' bound classes and "
                "roof fractions are suspect; `recstack machine --remeasure` on a quiet host replaces it"]
    return []


def _run(spec: SweepSpec, configs: list[RunConfig], store: Path, ex: Any, parallel: int, retry_failed: bool,
         show: bool, t0: float) -> SweepResult:
    executor = ex.name
    host = socket.gethostname()
    commit = git_commit()
    held = db.done_points(store)
    jobs: list[Job] = []
    for cfg in configs:
        pid = point_id(cfg.key(), __version__, host)
        status = held.get(pid)
        if status == "ok" or (status is not None and not retry_failed):
            continue
        jobs.append(Job(pid, cfg, str(store.parent / "profiles" / f"{pid}.json")))
    sweep_id = uuid.uuid4().hex[:12]
    res = SweepResult(store=store, sweep_id=sweep_id, total=len(configs), skipped=len(configs) - len(jobs))
    started = _now()
    row = {"sweep_id": sweep_id, "name": spec.name, "spec": spec.model_dump(mode="json"), "started": started,
           "host": host, "recstack_version": __version__, "executor": executor, "points_total": len(configs)}
    db.write_sweep(store, row)
    from recstack.render.sweep_progress import SweepProgress

    bar = SweepProgress(len(configs), res.skipped, varying=_varying(configs), enabled=show)
    last_write = [None]

    def on_result(job: Job, result: dict[str, Any]) -> None:
        point = _point_row(job, result, sweep_id, host, commit, executor, parallel, store)
        point["store_write_s"] = last_write[0]
        w = _write_point(store, point, result.get("stages") or [])
        last_write[0] = w
        res.store_write_s.append(w)
        res.run += 1
        res.failed += result["status"] != "ok"
        res.timed_s += result.get("timed_s") or 0.0
        res.statuses[job.point_id] = result["status"]
        bar.point_done(job.config, result)

    with bar:
        ex.run(jobs, on_result)
    res.wall_s = time.perf_counter() - t0
    row.update(finished=_now(), points_run=res.run, points_failed=res.failed, wall_s=res.wall_s)
    db.write_sweep(store, row)
    return res


def _write_point(store: Path, point: dict[str, Any], stages: list[dict[str, Any]]) -> float:
    """Store one point; where the store cannot take it (a full disk), its row goes to a fallback JSON file
    (:func:`recstack.outputs.write_result`) and the sweep stops with exit 5 naming both: nothing measured
    is lost, and a rerun after freeing space resumes (the points already stored are skipped)."""
    try:
        return db.write_point(store, point, stages)
    except EnvironmentFailure as exc:
        from recstack.outputs import atomic_write_text, fallback_path, write_result

        text = json.dumps({"point": point, "stages": stages}, default=str, indent=1) + "\n"
        alt = write_result(fallback_path(f"{store.stem}-point-{point['point_id']}.json"),
                           lambda p: atomic_write_text(p, text), "point")
        raise EnvironmentFailure(f"{exc}; the sweep stopped, the unstored point's row is in {alt}") from None


def _executor(name: str, address: str | None, parallel: int, timeout_s: float, store: Path,
              runner: Callable[..., dict[str, Any]] | None, min_timed_s: float | None) -> Any:
    if name == "ray":
        from recstack.sweeps.ray_executor import RayExecutor

        if runner is None:
            raise ConfigError("the Ray executor needs the point runner; call recstack.sweep(...)", field="runner")
        return RayExecutor(runner, address=address, timeout_s=timeout_s, min_timed_s=min_timed_s)
    if address:
        raise ConfigError("--address is for --executor ray", field="--address")
    return LocalExecutor(parallel=parallel, timeout_s=timeout_s, log=store.parent / "workers.log",
                         min_timed_s=min_timed_s)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _varying(configs: list[RunConfig]) -> list[str]:
    """The fields whose values differ between points (what a point's summary line shows)."""
    dumps = [c.model_dump(mode="json") for c in configs]
    return [f for f in RunConfig.model_fields
            if len({json.dumps(d[f], sort_keys=True) for d in dumps}) > 1] or ["model"]


def _point_row(job: Job, result: dict[str, Any], sweep_id: str, host: str, commit: str | None, executor: str,
               parallel: int, store: Path) -> dict[str, Any]:
    cfg = job.config
    fields = cfg.model_dump(mode="json")
    row: dict[str, Any] = {
        "point_id": job.point_id,
        "config_hash": cfg.key(),
        "sweep_id": sweep_id,
        "config_json": json.dumps(fields, sort_keys=True),
        "recstack_version": __version__,
        "git_commit": commit,
        "host": host,
        "executor": executor,
        "parallel": parallel if executor == "local" else None,
        "status": result["status"],
        "reason": result.get("reason"),
        "attempts": result.get("attempts", job.attempts),
        "finished": _now(),
    }
    row["started"] = row["finished"] - dt.timedelta(seconds=result.get("wall_s") or 0.0)
    for k in ("cpu_model", "contended", "contention_evidence", "step_p50_s", "step_p90_s", "step_p99_s",
              "throughput", "overhead", "iters_run", "timed_s", "wall_s", "build_s"):
        row[k] = result.get(k)
    if result["status"] == "ok":
        row["profile_path"] = str(Path(job.profile_path).relative_to(store.parent))
    for f, v in fields.items():
        row[f] = json.dumps(v, sort_keys=True) if isinstance(v, dict) else v
    from recstack.schema.documents import check
    from recstack.schema.sweep_model import PointRow

    return check(PointRow, row)


__all__ = ["DEFAULT_TIMEOUT_S", "SweepResult", "point_id", "sweep"]
