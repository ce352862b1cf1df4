"""recstack serve: real worker processes (spawn), real pipes, real signals; the spin model of known service time.

Nothing here asserts a host's speed: the checks are counts (no request lost),
bounds that physics guarantees (latency >= the busy-wait), and the exit paths.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest

from recstack.config.run import RunConfig
from recstack.errors import ConfigError, DataError
from recstack.serving.arrivals import ArrivalSpec, arrival_times, from_csv, parse_arrivals
from recstack.serving.plan import ACCEL, CPU, make_plan
from recstack.serving.service import ServeOptions, build_plan, plan_sizes, pool_for, probe
from recstack.serving.summary import decode

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = dict(os.environ, PYTHONPATH=str(SRC))


def _serve(*argv: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recstack", "serve", *argv], capture_output=True, text=True,
                          timeout=timeout, env=ENV, cwd=cwd)


def _workers_of(pid: int) -> list[int]:
    """The serving workers (spawned children, not multiprocessing's resource tracker) of process ``pid``."""
    kids = []
    for d in Path("/proc").iterdir():
        try:
            ppid = int(d.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = d.joinpath("cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and "spawn_main" in cmd:
            kids.append(int(d.name))
    return kids


# -- plan and arrivals (pure) ----------------------------------------------------------------
def test_plan_splits_every_query_into_batches_of_at_most_b_and_routes_large_ones_whole():
    sizes = np.array([1, 100, 101, 700, 250, 1000])
    plan = make_plan(np.arange(6) * 0.1, sizes, 100, 1.0, gpu_threshold=600)
    for r, n in enumerate(sizes):
        b = slice(plan.request_first_batch[r], plan.request_first_batch[r + 1])
        assert plan.batch_size[b].sum() == n  # no candidate lost or invented
        if n > 600:
            assert list(plan.batch_class[b]) == [ACCEL] and plan.batch_size[b][0] == n
        else:
            assert (plan.batch_size[b] <= 100).all() and (plan.batch_class[b] == CPU).all()
            assert b.stop - b.start == -(-n // 100)


def test_arrivals_are_seeded_and_in_range(tmp_path):
    a = arrival_times(ArrivalSpec("poisson"), 1000.0, 5.0, seed=3)
    assert np.array_equal(a, arrival_times(ArrivalSpec("poisson"), 1000.0, 5.0, seed=3))
    assert not np.array_equal(a, arrival_times(ArrivalSpec("poisson"), 1000.0, 5.0, seed=4))
    assert (np.diff(a) >= 0).all() and a[0] >= 0 and a[-1] < 5.0
    assert abs(a.size - 5000) < 6 * np.sqrt(5000)  # Poisson count: 6 sigma
    d = arrival_times(parse_arrivals("diurnal:10:1"), 1000.0, 10.0, seed=0)
    # rate 1000 (1 + sin(2 pi t / 10)): expected 5000 + 10000/pi in the first half, 5000 - 10000/pi after
    first = (d < 5).sum()
    assert abs(first - (5000 + 10000 / np.pi)) < 6 * np.sqrt(8200) and abs(d.size - 10000) < 6 * 100
    f = tmp_path / "t.csv"
    f.write_text("time\n10.5\n10.5\n11\n12.25\n")
    assert from_csv(str(f)).tolist() == [0.0, 0.0, 0.5, 1.75]
    f.write_text("1\n3\n2\n")
    with pytest.raises(DataError, match="line 3: timestamps must not decrease"):
        from_csv(str(f))
    with pytest.raises(ConfigError, match="--arrivals"):
        parse_arrivals("weibull")


# -- real processes -----------------------------------------------------------------------------
def test_spin_at_low_load_loses_no_request_and_latency_covers_the_service_time(tmp_path):
    r = _serve("spin", "--service-ms", "2", "--query-size", "3", "--max-batch", "2", "--qps", "40",
               "--duration", "2", "--workers", "2", "--json", "-o", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("achieved_qps", "offered_qps", "queue_s_mean", "service_s_mean", "utilisation", "requests",
                "failed", "late"):
        assert key in out
    assert set(out["latency_s"]) >= {"p50", "p95", "p99", "p999", "mean"}
    assert out["complete"] and out["requests"] == out["planned_requests"] == out["completed"] > 0
    assert out["failed"] == out["late"] == 0
    assert out["batches"]["served"] == out["batches"]["planned"] == 2 * out["requests"]  # 3 = 2 + 1
    # a request of two batches on two workers takes at least one busy-wait of 2 ms, from its scheduled arrival
    assert out["latency_s"]["p50"] >= 0.002 * 0.999 and out["service_s_mean"] >= 0.002
    assert out["queue_s_mean"] >= 0
    hist = decode(out["histogram"]["latency_us"])
    assert hist.get_total_count() == out["requests"]
    assert sum(w["served_batches"] for w in out["workers"]) == out["batches"]["served"]
    assert json.loads((tmp_path / "r.json").read_text())["requests"] == out["requests"]


def test_cpu_gpu_split_sends_large_queries_to_the_simulated_accelerator():
    cfg = RunConfig(model="spin", seed=1)
    opts = ServeOptions(qps=30, duration_s=1.5, max_batch=100, workers=1, service_ms=1.0, gpu_threshold=400,
                        sim_accel=(2.0, 0.0), grace_s=5.0)
    plan = build_plan(cfg, opts)
    with pool_for(cfg, opts, plan_sizes(plan)) as pool:
        pool.start()
        out = probe(pool, plan, opts)
    assert out["failed"] == 0 and out["completed"] == out["requests"] == plan.requests
    served = {w["class"]: w["served_batches"] for w in out["workers"]}
    big = plan.sizes > 400
    assert served.get("accel", 0) == int(big.sum())
    assert served["cpu"] == int((-(-plan.sizes[~big] // 100)).sum())


def test_a_worker_killed_mid_run_is_replaced_and_its_requests_fail_with_exit_4(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "recstack", "serve", "spin", "--service-ms", "150", "--qps", "10",
                          "--duration", "4", "--workers", "1", "--query-size", "1", "--grace", "1", "--json"],
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    line = p.stderr.readline()
    while line and "load started" not in line:
        line = p.stderr.readline()
    time.sleep(0.5)
    victims = _workers_of(p.pid)
    assert victims, "no worker process found"
    os.kill(victims[0], signal.SIGKILL)  # overloaded (150 ms per request at 10/s): it always holds a batch
    out_text, err = p.communicate(timeout=120)
    assert p.returncode == 4, err
    out = json.loads(out_text)
    assert out["worker_deaths"] == 1 and out["failed"] >= 1
    assert out["completed"] + out["failed"] + out["late"] == out["requests"]  # none dropped silently
    dead = [w for w in out["workers"] if not w["alive"]]
    assert len(dead) == 1 and dead[0]["replaced_by"] is not None
    assert "failed" in err and "error:" in err


def test_sigint_drains_and_writes_a_partial_result(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "recstack", "serve", "spin", "--service-ms", "2", "--qps", "50",
                          "--duration", "60", "--workers", "1", "--query-size", "1", "-o", "r.json"],
                         env=ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    line = p.stderr.readline()
    while line and "load started" not in line:
        line = p.stderr.readline()
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    out = json.loads((tmp_path / "r.json").read_text())
    assert out["complete"] is False and out["stopped"] == "SIGINT"
    assert 0 < out["requests"] < out["planned_requests"]
    assert out["completed"] + out["failed"] + out["late"] == out["requests"]
    assert "Traceback" not in err


def test_sigint_during_a_search_drains_the_probe_and_writes_the_partial_search(tmp_path):
    store = tmp_path / "s.duckdb"
    p = subprocess.Popen([sys.executable, "-m", "recstack", "serve", "spin", "--service-ms", "2", "--query-size", "1",
                          "--search", "--p99", "0.05", "--qps", "50", "--grid", "max_batch=1;workers=1;threads=1",
                          "--tail-samples", "1", "--duration", "60", "--grace", "0.5", "--budget", "5",
                          "--store", str(store), "--json"],
                         env=ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    line = p.stderr.readline()
    while line and "probe load started" not in line:
        line = p.stderr.readline()
    assert line, "the search never started a probe"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "the search is partial" in err
    v = json.loads(out)
    assert v["complete"] is False and v["stopped"] == "SIGINT"
    (conf,) = v["configurations"]
    assert conf["probes"] == 1  # the interrupted probe ended the search: no further probe started
    with duckdb.connect(str(store), read_only=True) as con:
        rows = con.execute("SELECT kind, requests, result_json FROM serving ORDER BY probe").fetchall()
    assert [k for k, *_ in rows] == ["floor", "capacity", "probe", "result", "best"]  # screening first
    res = json.loads(rows[2][2])  # the drained probe, stored with its partial figures
    assert res["complete"] is False and res["stopped"] == "SIGINT"
    assert 0 < res["requests"] == rows[2][1] < res["planned_requests"]  # 60 s at 50 QPS: stopped long before
    assert res["completed"] + res["failed"] + res["late"] == res["requests"]


def _v1_store(path: Path) -> None:
    """A results store as recstack wrote it before the serving table joined (schema 1), with a sweep row."""
    from recstack.store import db, migrations

    later = [m for m in migrations.MIGRATIONS if m.version > 1]
    del migrations.MIGRATIONS[1:]
    try:
        assert db.migrate(path) == 1
    finally:
        migrations.MIGRATIONS.extend(later)
    db.write_sweep(path, {"sweep_id": "sw1", "name": "before", "points_total": 0})


def test_search_stores_every_probe_and_respects_the_physics(tmp_path, capsys):
    from recstack.cli import main
    from recstack.report.sweep_report import render_sweep_report
    from recstack.results.serving_figures import serving_figures
    from recstack.store import db, migrations

    store = tmp_path / "s.duckdb"
    _v1_store(store)
    r = _serve("spin", "--service-ms", "5", "--query-size", "1", "--search", "--p99", "0.2", "--qps", "100",
               "--grid", "max_batch=1;workers=1;threads=1", "--tail-samples", "1", "--duration", "0.5",
               "--grace", "0.5", "--budget", "0.6", "--store", str(store), "--chart-out", str(tmp_path / "c.png"),
               "--json", timeout=180)
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    with db.connect(store, read_only=True) as con:  # the v1 store was migrated; its sweep row is kept
        assert db.schema_version(con) == migrations.latest() >= 2
        assert con.execute("SELECT name FROM sweeps").fetchall() == [("before",)]
        rows = con.execute("SELECT kind, qps, achieved_qps, p99_s, meets_target, requests, result_json "
                           "FROM serving ORDER BY probe").fetchall()
    kinds = [k for k, *_ in rows]
    assert kinds.count("probe") >= 2 and kinds.count("result") == 1 and kinds[-1] == "best"
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(v["configurations"][0]["curve"]) == kinds.count("probe")
    probes = [r for r in rows if r[0] == "probe"]
    for _kind, _offered, achieved, p99, ok, n, res in probes:
        assert n >= 1 and ok == (p99 <= 0.2)
        assert achieved <= 200 * 1.001  # one worker busy 5 ms per request completes at most 200 per second
        assert json.loads(res)["requests"] == n
    cap = v["configurations"][0]["capacity_estimate_qps"]
    assert 0 < cap <= 200 * 1.001  # from timed busy-waits of at least 5 ms
    best = v["best"]
    met = [r[1] for r in probes if r[4]]
    if best is not None:  # the answer is the highest offered load among the probes that met the target
        assert best["qps_at_target"] == max(met) and best["latency_s"]["p99"] <= 0.2
    else:
        assert v["closest"] is not None and not met
    # the store's readers: results --table serving, and the report's figures (one configuration)
    csv = tmp_path / "serving.csv"
    assert main(["--quiet", "results", str(store), "--table", "serving", "--format", "csv", "-o", str(csv)]) == 0
    import pandas as pd

    assert list(pd.read_csv(csv).kind) == kinds
    assert main(["--quiet", "results", str(store), "--table", "serving"]) == 0
    assert "probe" in capsys.readouterr().out
    (fig,) = serving_figures(db.read_table(store, "serving"))["configurations"]
    assert [p["qps"] for p in fig["points"]] == sorted(r[1] for r in probes)
    assert fig["qps_at_target"] == (max(met) if met else None) and fig["target_s"] == 0.2
    assert fig["label"] == "spin · B 1 · 1 workers · 1 threads · torch · fp32" and fig["label"] in render_sweep_report(store)


def test_serving_rows_join_a_store_a_reader_holds_and_other_files_are_refused_or_adopted(tmp_path):
    """The writer holds the file only per row, so it waits out a reader; a foreign DuckDB file is refused,
    a serve-only file from before the fold is adopted."""
    from recstack.serving.results import ServingStore, probe_row
    from recstack.store import db
    from recstack.store.migrations import SERVING_TABLE

    store = tmp_path / "fresh.duckdb"
    s = ServingStore(store)  # a new file becomes a store
    with db.connect(store, read_only=True) as con:
        assert db.schema_version(con) >= 2
    reader = subprocess.Popen([sys.executable, "-c", (
        "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], read_only=True); "
        "print('held', flush=True); time.sleep(1.5); c.close()"), str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "held"
        s.write(probe_row("x", 1, "probe", {"model": "spin", "meets_target": True}, {"qps": 5.0}, 99.0, 0.1))
    finally:
        reader.wait(timeout=60)
    assert list(db.read_table(store, "serving").qps) == [5.0]
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    with pytest.raises(DataError, match="not a recstack results store"):
        ServingStore(other)
    legacy = tmp_path / "legacy.duckdb"  # a serving table as serve wrote it before the table joined the store
    con = duckdb.connect(str(legacy))
    con.execute(SERVING_TABLE)
    con.execute("INSERT INTO serving (search_id, kind, qps) VALUES ('old', 'probe', 3)")
    con.close()
    ServingStore(legacy)
    assert list(db.read_table(legacy, "serving").search_id) == ["old"] and len(db.read_table(legacy)) == 0


@pytest.mark.parametrize(("argv", "field"), [
    (["spin", "--service-ms", "1", "--arrivals", "weibull"], "--arrivals"),
    (["spin", "--service-ms", "1", "--search"], "--p99"),
    (["spin", "--qps", "10"], "--service-ms"),
    (["rmc1", "--workers", "64", "--threads", "1", "--scale", "0.001"], "--workers"),
])
def test_bad_serving_input_is_one_line_exit_2(argv, field):
    r = _serve(*argv, "--duration", "0.2")
    assert r.returncode == 2 and r.stderr.startswith(f"error: {field}"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_csv_arrivals_are_replayed_and_cannot_be_searched(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("\n".join(str(100 + 0.05 * i) for i in range(20)) + "\n")  # 20 requests over 0.95 s
    r = _serve("spin", "--service-ms", "1", "--query-size", "1", "--arrivals", str(f), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["requests"] == out["completed"] == 20 and out["duration_s"] == pytest.approx(0.95)
    r = _serve("spin", "--service-ms", "1", "--arrivals", str(f), "--search", "--p99", "0.1")
    assert r.returncode == 2 and r.stderr.startswith("error: --arrivals"), r.stderr


@pytest.mark.parametrize("lookahead_s", [0.02, 0.0])
def test_stop_from_another_thread_marks_the_run_incomplete(lookahead_s):
    """Stopped 0.5 s into the load: incomplete, and every request due by the stop arrived and was served (none
    counted that never arrived; at lookahead 0 the loop wakes exactly at an arrival, so the stop can come then)."""
    cfg = RunConfig(model="spin")
    opts = ServeOptions(qps=100, duration_s=30, workers=1, query_size=1, service_ms=1.0, grace_s=1.0,
                        lookahead_s=lookahead_s)
    plan = build_plan(cfg, opts)
    runs = []
    with pool_for(cfg, opts, plan_sizes(plan)) as pool:
        pool.start()
        out = probe(pool, plan, opts, on_run=runs.append,
                    announce=lambda: threading.Timer(0.5, lambda: runs[0].stop()).start())  # 0.5 s into the load
    assert out["stopped"] == "stop" and not out["complete"] and 0 < out["requests"] < plan.requests
    assert out["late"] == out["failed"] == 0 and out["completed"] == out["requests"]


def test_wake_margin_follows_the_wake_up_lateness_within_its_bounds():
    from recstack.serving.timing import SPIN_MAX_S, SPIN_MIN_S, WakeMargin

    m = WakeMargin()
    for _ in range(500):
        m.observe(80e-6)  # a steady lateness: the margin converges to it
    assert abs(m.value - 80e-6) < 2e-6
    for _ in range(500):
        m.observe(5e-3)  # a stalled host: spinning stays bounded
    assert m.value == SPIN_MAX_S
    for _ in range(500):
        m.observe(0.0)
    assert m.value == SPIN_MIN_S


def _probe_once(cfg: RunConfig, opts: ServeOptions, plan) -> tuple[dict, object]:
    """One probe of ``plan`` on a fresh pool: its summary and the dispatcher's run record (per-batch times)."""
    runs = []
    with pool_for(cfg, opts, plan_sizes(plan)) as pool:
        pool.start()
        out = probe(pool, plan, opts, on_run=runs.append)
    return out, runs[0]


def test_one_spin_worker_is_a_fifo_server_whose_batches_start_at_their_arrival_or_later_and_last_d():
    """Per batch, as the dispatcher and the worker stamp them (one monotonic clock): handed over ahead of its
    arrival (the lookahead), released no earlier than scheduled and started no earlier than released, busy at
    least D, one at a time in arrival order; the workers' spin is counted."""
    d = 0.002
    cfg = RunConfig(model="spin", seed=3)
    opts = ServeOptions(qps=250, duration_s=1.0, workers=1, query_size=1, max_batch=1, service_ms=d * 1e3,
                        depth=2, grace_s=2.0)
    plan = build_plan(cfg, opts)
    out, run = _probe_once(cfg, opts, plan)
    assert out["completed"] == out["requests"] == plan.requests > 100
    arrival, sent, rel, start, end = plan.arrivals, run.t_sent, run.t_release, run.t_start, run.t_end
    assert np.any(sent < arrival)  # one worker: batches go to its pipe within the lookahead ...
    assert np.all(arrival - sent <= opts.lookahead_s + 1e-9)  # ... and never earlier
    assert np.all(rel >= arrival - 1e-9) and np.all(start >= rel) and np.all(start >= sent)  # 1e-9: t0 + a - t0
    assert np.all(end - start >= d - 1e-9)  # the busy-wait runs D from the service start
    assert np.all(start[1:] >= end[:-1])  # one worker, FIFO: a batch starts after the one before it ended
    assert out["handoff_s_mean"] >= 0 and out["queue_s_mean"] >= 0
    assert out["loadgen"]["worker_spin_cores"] >= 0 and out["loadgen"]["lookahead_s"] == opts.lookahead_s


# -- profiles of batches as serving forms them ------------------------------------------------------
def test_profile_with_query_batches_reports_declared_step_times_per_bucket():
    import jsonschema

    import recstack
    from recstack.schema import committed_json_schema
    from recstack.schema.profile_model import Profile as ProfileModel

    prof = recstack.profile_zoo("rmc1", scale=0.001, batch_size=64, workload_batches="query", iters=6, warmup=1,
                                op_iters=1, machine=None, counters=False, device="auto")
    d = json.loads(json.dumps(prof.to_dict(), allow_nan=False))
    jsonschema.Draft202012Validator(committed_json_schema()).validate(d)
    rows = ProfileModel.model_validate(d).root.step_time_by_batch_bucket
    import torch

    assert d["run"]["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert d["run"]["workload_batches"] == "query" and rows
    assert sum(r.steps for r in rows) == 6  # every uninstrumented step lands in one bucket
    for r in rows:  # MLPerf query sizes (100 ... 700) split at 64: batches of 64 and the remainders
        assert r.low <= r.batch_size_mean <= r.high <= 64 and r.mean_s > 0
    with pytest.raises(ConfigError, match="workload_batches"):
        recstack.profile(torch.nn.Linear(2, 1), [torch.zeros(4, 2)], workload_batches="query", machine=None)


@pytest.mark.parametrize("depth", [2, 4])
def test_without_lookahead_one_worker_holds_depth_batches_of_a_burst_and_serves_them_back_to_back(tmp_path, depth):
    """Six requests due at once (a CSV schedule) on one spin worker of D = 0.2 s, handed over at their arrival
    (lookahead 0): the dispatcher hands over ``depth`` of them at once (the rest only after a completion, which
    comes no earlier than D after the first start), and a batch waiting in the pipe starts exactly at its
    predecessor's end (stamped by the worker: no gap in a busy period)."""
    d, n = 0.2, 6
    (tmp_path / "burst.csv").write_text("0\n" * n)
    cfg = RunConfig(model="spin")
    opts = ServeOptions(workers=1, query_size=1, max_batch=1, service_ms=d * 1e3, depth=depth, grace_s=5.0,
                        arrivals=parse_arrivals(str(tmp_path / "burst.csv")), lookahead_s=0.0)
    plan = build_plan(cfg, opts)
    out, run = _probe_once(cfg, opts, plan)
    assert out["completed"] == n and out["failed"] == out["late"] == 0
    sent, start, end = run.t_sent, run.t_start, run.t_end
    assert np.all(sent >= 0)  # not before their arrival
    assert np.all(sent[:depth] < end[0])  # handed over together, before the first batch ended
    assert np.all(sent[depth:] >= start[0] + d - 1e-9)  # later ones only after a completion came back
    queued = sent[1:] < end[:-1]  # in the pipe before its predecessor ended: it starts at that end
    assert queued[:depth - 1].all()
    assert np.array_equal(start[1:][queued], end[:-1][queued])
    assert np.all(start[1:] >= end[:-1])


def test_with_lookahead_one_worker_holds_a_whole_burst_before_it_is_due(tmp_path):
    """A burst 0.3 s after a first request, with a 0.5 s lookahead: all six are in the one worker's pipe
    about 0.3 s before they are due (whatever the depth), the first starts at its arrival, the rest back to
    back."""
    d, n = 0.1, 6
    (tmp_path / "burst.csv").write_text("0\n" + "0.3\n" * n)
    cfg = RunConfig(model="spin")
    opts = ServeOptions(workers=1, query_size=1, max_batch=1, service_ms=d * 1e3, depth=1, grace_s=5.0,
                        arrivals=parse_arrivals(str(tmp_path / "burst.csv")), lookahead_s=0.5)
    plan = build_plan(cfg, opts)
    out, run = _probe_once(cfg, opts, plan)
    assert out["completed"] == n + 1 and out["failed"] == out["late"] == 0
    sent, rel, start, end = run.t_sent[1:], run.t_release[1:], run.t_start[1:], run.t_end[1:]
    due = plan.arrivals[1]
    assert np.all(sent < due) and rel[0] >= due - 1e-9 and start[0] == rel[0]
    assert np.array_equal(start[1:], end[:-1])  # back to back: each was in the worker's hands at once


def test_who_takes_a_batch_one_worker_idle_workers_early_and_the_fewest_below_depth_when_due():
    """The hand-out rule, no processes (the pool is not started): with one worker in the class it takes every
    batch (below the pipe cap); with two, a batch not yet due goes only to an idle worker, a due one to the
    worker holding the fewest below ``depth``; without a lookahead one worker follows the depth rule too."""
    from recstack.serving.loadgen import PIPE_FRAMES_MAX, LoadRun, Worker

    cfg = RunConfig(model="spin")
    for workers in (1, 2):
        opts = ServeOptions(qps=100, duration_s=1.0, workers=workers, query_size=1, max_batch=1, service_ms=2.0)
        plan = build_plan(cfg, opts)
        pool = pool_for(cfg, opts, plan_sizes(plan))
        ws = [Worker(k, CPU, proc=None, conn=None, ready=True) for k in range(workers)]
        pool.workers.extend(ws)
        run = LoadRun(plan, pool, depth=2)
        assert run._taker(ACCEL, early=True) is None  # no worker of that class
        ws[0].inflight.extend([0, 1, 2])
        if workers == 1:
            assert run._taker(CPU, early=True) is ws[0] and run._taker(CPU, early=False) is ws[0]
            ws[0].inflight.extend(range(3, PIPE_FRAMES_MAX))
            assert run._taker(CPU, early=False) is None
            assert LoadRun(plan, pool, depth=2, lookahead_s=0.0)._taker(CPU, early=False) is None  # 512 > depth
            continue
        assert run._taker(CPU, early=True) is ws[1]  # the idle one
        ws[1].inflight.append(3)
        assert run._taker(CPU, early=True) is None  # nobody idle: it waits in the central queue
        assert run._taker(CPU, early=False) is ws[1]  # due: the fewest, below depth 2
        ws[1].inflight.append(4)
        assert run._taker(CPU, early=False) is None
        ws[1].alive = False
        ws[0].inflight.clear()
        assert run._taker(CPU, early=True) is ws[0]


def test_a_dead_worker_fails_its_due_batches_and_gives_back_those_not_yet_due():
    """A worker dies holding a batch that was due and one handed over ahead of its arrival: the first's
    request fails, the second goes back to the head of its queue (nothing of it was lost)."""
    import multiprocessing as mp
    import time

    from recstack.serving.loadgen import LoadRun, Worker

    cfg = RunConfig(model="spin")
    opts = ServeOptions(qps=100, duration_s=1.0, workers=1, query_size=1, max_batch=1, service_ms=2.0)
    plan = build_plan(cfg, opts)
    pool = pool_for(cfg, opts, plan_sizes(plan))
    pool.replacements_left = 0
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=time.sleep, args=(0,))
    proc.start()
    proc.join()
    w = Worker(0, CPU, proc=proc, conn=parent, ready=True)
    pool.workers.append(w)
    run = LoadRun(plan, pool)
    due_b, ahead_b, later_b = 0, 1, 2
    run.t0 = time.perf_counter() - (plan.arrivals[0] + plan.arrivals[1]) / 2  # now: between the two arrivals
    run.queues[CPU].append(later_b)
    w.inflight.extend([due_b, ahead_b])
    run._inflight = 2
    run._died(w)
    assert run.failed[plan.batch_request[due_b]] and not run.failed[plan.batch_request[ahead_b]]
    assert list(run.queues[CPU]) == [ahead_b, later_b] and run._inflight == 0 and run.deaths == 1
    child.close()


def test_a_worker_can_hold_its_whole_pipe_bound_without_a_write_blocking():
    """The worker's pipe (a socketpair) takes PIPE_FRAMES_MAX result frames written one by one, and as many
    batch frames, unread, without a write blocking (the kernel counts each small write at far more than its
    size: the bound is what fits, not what 64 KiB would suggest)."""
    import multiprocessing as mp

    from recstack.serving.loadgen import PIPE_FRAMES_MAX
    from recstack.serving.worker import BATCH, BATCH_LEN, RESULT, RESULT_LEN

    parent, child = mp.get_context("spawn").Pipe(duplex=True)
    try:
        for conn in (parent, child):
            os.set_blocking(conn.fileno(), False)
        for k in range(PIPE_FRAMES_MAX):  # raises BlockingIOError if the bound does not fit
            os.write(child.fileno(), RESULT.pack(RESULT_LEN, b"R", k, 0.0, 0.0, 0.0, 0.0))
        os.write(parent.fileno(), b"".join(BATCH.pack(BATCH_LEN, k, 1, k, 0.0, 0.0) for k in range(PIPE_FRAMES_MAX)))
    finally:
        parent.close()
        child.close()
