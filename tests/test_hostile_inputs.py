"""Hostile inputs and a failing host (issue 29), table-driven, with the promise of tests/test_bad_inputs.py.

Damaged results stores handed to every command that opens one, a full disk (a real tmpfs, when the
tests run as root), names too long for the file system, no file descriptors left, no permission,
an unreachable Ray cluster, numbers beyond what a command can honour, and run options a command
does not use. Every case: the table's exit code, exactly one ``error:`` line (a fallback write: a
``warning:`` line and exit 0), no traceback, nothing damaged (a store keeps its bytes, no temporary
file is left), every case under a timeout.

Cases run the real CLI in-process (``recstack.cli.main``) on real DuckDB files; the environment
cases that need a process of their own (no file descriptors left, another user) run as real
processes, several cases per process. Models are tiny and no case runs a model step, so the whole
file stays within seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from recstack.cli import main

REPO = Path(__file__).resolve().parents[1]
CASE_TIMEOUT_S = 120  # per case; a case that hangs fails instead of stalling the suite
LONG = "w" * 300  # longer than NAME_MAX (255) on every Linux file system


@dataclass
class Case:
    id: str
    kind: str
    argv: list[str]
    code: int = 2
    match: str | None = None  # regex the error line (or, for exit 0, stderr) must contain
    store: str | None = None  # a store variant copied to {S}; it must keep its bytes
    absent: str | None = None  # a path the command must not leave behind
    needs: str | None = None  # "tmpfs": a full file system at {F}


CASES: list[Case] = []


def add(kind: str, id: str, argv: list[str], **kw: Any) -> None:
    CASES.append(Case(id=id, kind=kind, argv=argv, **kw))


# =====================================================================================================
# Stores: a good one, and variants damaged one way each
# =====================================================================================================
MODELS = ("rmc1", "rmc2", "ncf", "dien")


def _good_store(path: Path) -> None:
    from recstack.store import db

    db.migrate(path)
    for i, m in enumerate(MODELS):
        point = {"point_id": f"p{i:015d}", "config_hash": f"h{i}", "recstack_version": "t", "host": "h",
                 "status": "ok", "model": m, "batch_size": 8, "backend": "torch", "throughput": 100.0 * (i + 1),
                 "step_p50_s": 0.01, "step_p99_s": 0.02, "contended": False}
        stages = [{"stage": "embedding", "time_s": 1e-3, "share": 0.6, "bound": "memory", "roof_fraction": 0.3},
                  {"stage": "mlp", "time_s": 1e-3, "share": 0.4, "bound": "compute", "roof_fraction": 0.2}]
        db.write_point(path, point, stages)
    db.write_sweep(path, {"sweep_id": "s1", "name": "t", "host": "h", "points_total": len(MODELS)})


UNCONSTRAINED = ["CREATE TABLE p2 AS SELECT * FROM points", "DROP TABLE points",
                 "CREATE TABLE points AS SELECT * FROM p2", "DROP TABLE p2"]
# variant -> SQL run on a copy of the good store, or bytes (a file DuckDB may not open), with the regex
# the error line must hold
STORE_VARIANTS: dict[str, tuple[list[str] | str, str]] = {
    "truncated": ("third", r"cannot (read|open)"),
    "truncated-head": ("head", r"cannot open"),
    "garbage": ("garbage", r"cannot open|not a valid|profile JSON"),
    "empty-file": ("empty", r"cannot open|not a valid|profile JSON"),
    "version-text": (["UPDATE meta SET value='abc' WHERE key='schema_version'"], r"schema_version is 'abc'"),
    "version-null": (["UPDATE meta SET value=NULL WHERE key='schema_version'"], r"schema_version is None"),
    "version-float": (["UPDATE meta SET value='1.5' WHERE key='schema_version'"], r"schema_version is '1.5'"),
    "version-negative": (["UPDATE meta SET value='-3' WHERE key='schema_version'"], r"schema_version is '-3'"),
    "version-newer": (["UPDATE meta SET value='999' WHERE key='schema_version'"], r"newer than this recstack"),
    "no-version": (["DELETE FROM meta"], r"not a recstack results store"),
    "no-points": (["DROP TABLE points"], r"'points' is missing"),
    "no-stages": (["DROP TABLE stages"], r"'stages' is missing"),
    "no-sweeps": (["DROP TABLE sweeps"], r"'sweeps' is missing"),
    "no-serving": (["DROP TABLE serving"], r"'serving' is missing"),
    "throughput-text": (["ALTER TABLE points ALTER throughput TYPE VARCHAR", "UPDATE points SET throughput='fast'"],
                        r"points\.throughput is VARCHAR"),
    "batch-text": (["ALTER TABLE points ALTER batch_size TYPE VARCHAR", "UPDATE points SET batch_size='big'"],
                   r"points\.batch_size is VARCHAR"),
    "status-int": (["ALTER TABLE points DROP COLUMN status", "ALTER TABLE points ADD COLUMN status INTEGER"],
                   r"points\.status is INTEGER"),
    "serving-kind-int": (["ALTER TABLE serving DROP COLUMN kind", "ALTER TABLE serving ADD COLUMN kind INTEGER"],
                         r"serving\.kind is INTEGER"),
    "no-model-column": (["ALTER TABLE points DROP COLUMN model"], r"points\.model: column missing"),
    "null-model": (["UPDATE points SET model=NULL"], r"points\.model: 4 rows with no value"),
    "null-point-id": ([*UNCONSTRAINED, "UPDATE points SET point_id=NULL WHERE model='rmc1'"],
                      r"points\.point_id: 1 row with no value"),
    "null-status": ([*UNCONSTRAINED, "UPDATE points SET status=NULL"], r"points\.status: 4 rows"),
    "null-stage-point": (["CREATE TABLE s2 AS SELECT * FROM stages", "DROP TABLE stages",
                          "CREATE TABLE stages AS SELECT * FROM s2", "DROP TABLE s2", "UPDATE stages SET point_id=NULL"],
                         r"stages\.point_id: 8 rows"),
    "foreign": ("foreign", r"not a recstack results store|no table 'points'"),
    "legacy-serving-bad": ("legacy", r"serving\.|no table 'points'|not a recstack results store"),
}


def _make_variant(good: Path, path: Path, recipe: list[str] | str) -> None:
    data = good.read_bytes()
    raw = {"third": data[: len(data) // 3], "head": data[:100], "garbage": b"not a database " * 100, "empty": b""}
    if isinstance(recipe, str) and recipe in raw:
        path.write_bytes(raw[recipe])
        return
    if recipe in ("foreign", "legacy"):
        con = duckdb.connect(str(path))
        con.execute("CREATE TABLE t (x INTEGER)" if recipe == "foreign" else "CREATE TABLE serving (kind INTEGER)")
        con.close()
        return
    shutil.copy(good, path)
    con = duckdb.connect(str(path))
    for stmt in recipe:
        con.execute(stmt)
    con.execute("CHECKPOINT")
    con.close()


# Every command that opens a store: {S} is the store, {D} the data folder, {T} the case's folder.
STORE_COMMANDS: dict[str, list[str]] = {
    "results": ["results", "{S}", "--format", "csv"],
    "results-stages": ["results", "{S}", "--table", "stages", "--format", "csv"],
    "best": ["best", "{S}", "--json"],
    "sweep-report": ["sweep-report", "{S}", "-o", "{T}/report.html"],
    "correlate": ["correlate", "{S}", "-o", "{T}/c.html", "--bootstrap", "50"],
    "sweep": ["sweep", "{D}/sweep.yaml", "--store", "{S}", "-o", "{T}/sweep"],
    "serve-search": ["serve", "spin", "--service-ms", "1", "--search", "--p99", "0.1", "--store", "{S}",
                     "--duration", "0.2", "--budget", "0.01", "--grid", "max_batch=1;workers=1;threads=1"],
}
for variant, (_recipe, match) in STORE_VARIANTS.items():
    for cmd, argv in STORE_COMMANDS.items():
        add("store", f"{cmd}:{variant}", argv, store=variant, match=match, absent="{T}/report.html")

# the lock on the resolved path: tests below hold it and reach the store another way
SWEEP_SPEC = {"base": {"scale": 0.002, "iters": 3, "warmup": 0, "op_iters": 1, "machine": None},
              "points": [{"model": "rmc1", "batch_size": 4}]}


# =====================================================================================================
# The environment: a full disk, names too long, no descriptors, no permission, no cluster
# =====================================================================================================
GOOD = "{D}/good.duckdb"
for id, argv in (
    ("results-csv", ["results", GOOD, "--format", "csv", "-o", "{F}/x.csv"]),
    ("results-parquet", ["results", GOOD, "--format", "parquet", "-o", "{F}/x.parquet"]),
    ("results-table", ["results", GOOD, "-o", "{F}/x.txt"]),
    ("results-stages-csv", ["results", GOOD, "--table", "stages", "--format", "csv", "-o", "{F}/s.csv"]),
    ("sweep-store", ["sweep", "{D}/sweep.yaml", "-o", "{F}/sweep"]),
    ("sweep-store-file", ["sweep", "{D}/sweep.yaml", "--store", "{F}/own.duckdb", "-o", "{T}/sweep"]),
):
    add("enospc", id, argv, code=5, match=r"No space left on device", needs="tmpfs")
# computed results fall back to the temp folder, as the profile does: exit 0 and a warning naming where
for id, argv in (
    ("sweep-report-fallback", ["sweep-report", GOOD, "-o", "{F}/r.html"]),
    ("correlate-fallback", ["correlate", GOOD, "-o", "{F}/c.html", "--bootstrap", "50"]),
    ("correlate-json-fallback", ["correlate", GOOD, "-o", "{T}/c.html", "--json-out", "{F}/c.json", "--bootstrap", "50"]),
):
    add("enospc", id, argv, code=0, match=r"warning: cannot write .*; the \w+ is written to ", needs="tmpfs")

for id, argv in (
    ("profile-workload", ["profile", "rmc1", "--scale", "0.002", "--machine", "none", "--workload", LONG]),
    ("profile-sharding", ["profile", "rmc1", "--scale", "0.002", "--machine", "none", "--nproc", "2",
                          "--sharding", LONG]),
    ("profile-stage-rules", ["profile", "rmc1", "--scale", "0.002", "--machine", "none", "--stage-rules", LONG]),
    ("zoo-show", ["zoo", "show", LONG]),
    ("sweep-file", ["sweep", LONG + ".yaml"]),
    ("results-store", ["results", LONG + ".duckdb"]),
    ("best-store", ["best", LONG + ".duckdb"]),
    ("correlate-input", ["correlate", LONG + ".json", "-o", "{T}/c.html"]),
    ("serve-workload", ["serve", "rmc1", "--workload", LONG]),
    ("serve-arrivals", ["serve", "spin", "--service-ms", "1", "--arrivals", LONG + ".csv"]),
    ("results-output", ["results", GOOD, "--format", "csv", "-o", "{T}/" + LONG + ".csv"]),
    ("sweep-output", ["sweep", "{D}/sweep.yaml", "-o", "{T}/" + LONG]),
    ("workload-spec", ["workload", "stats", "--spec", LONG + ".yaml", "--batch-size", "8"]),
):
    add("name-too-long", id, argv, match=r"(too long|www)")

add("cluster", "ray-refused", ["sweep", "{D}/sweep.yaml", "-o", "{T}/ray", "--executor", "ray", "--address",
                               "127.0.0.1:1"], code=5, match=r"--address 127\.0\.0\.1:1: no Ray cluster answers",
    absent="{T}/ray")
add("cluster", "ray-refused-scheme", ["sweep", "{D}/sweep.yaml", "-o", "{T}/ray", "--executor", "ray", "--address",
                                      "ray://127.0.0.1:1"], code=5, match=r"no Ray cluster answers", absent="{T}/ray")
add("cluster", "ray-address-garbage", ["sweep", "{D}/sweep.yaml", "-o", "{T}/ray", "--executor", "ray",
                                       "--address", "nonsense"], match=r"--address", absent="{T}/ray")
add("cluster", "ray-address-port", ["sweep", "{D}/sweep.yaml", "-o", "{T}/ray", "--executor", "ray",
                                    "--address", "127.0.0.1:99999"], match=r"--address", absent="{T}/ray")


# =====================================================================================================
# Ranges: options a command does not use, numbers beyond what it can honour
# =====================================================================================================
SPIN = ["serve", "spin", "--service-ms", "1"]
for flag, value in (("--batch-size", "8"), ("--mode", "train"), ("--optimizer", "adagrad"),
                    ("--learning-rate", "0.1"), ("--iters", "5"), ("--warmup", "1"), ("--op-iters", "2"),
                    ("--stage-rules", "nope2.yaml"), ("--machine", "nope.json"), ("--nproc", "2"),
                    ("--sharding", "row_wise"), ("--rank-placement", "pin"), ("--compile", "nope.yaml"),
                    ("--workload-batches", "query")):
    add("unused-flag", f"serve{flag}", [*SPIN, flag, value], match=r"unrecognized arguments")
for flag, value in (("--nproc", "2"), ("--sharding", "row_wise"), ("--rank-placement", "pin"),
                    ("--compile", "nope.yaml"), ("--machine", "nope.json"), ("--op-iters", "2"),
                    ("--workload-batches", "query")):
    add("unused-flag", f"share{flag}", ["share", "rmc1", "--candidates", "2", flag, value],
        match=r"unrecognized arguments")
for flag, value in (("--nproc", "2"), ("--sharding", "row_wise"), ("--rank-placement", "pin"),
                    ("--machine", "nope.json"), ("--op-iters", "2")):
    add("unused-flag", f"compile{flag}", ["compile", "rmc1", "--compile", "nope.yaml", flag, value],
        match=r"unrecognized arguments")
add("unused-flag", "serve-issue-example", ["serve", "rmc1", "--nproc", "2", "--compile", "nope.yaml",
                                           "--stage-rules", "nope2.yaml"], match=r"unrecognized arguments")
add("unused-flag", "serve--config-nproc", [*SPIN, "--config", "{D}/run_nproc.yaml"], match=r"nproc: not used")
add("unused-flag", "share--config-compile", ["share", "--candidates", "2", "--config", "{D}/run_compile.yaml"],
    match=r"compile: not used")
add("unused-flag", "compile--config-sharding", ["compile", "--config", "{D}/run_sharding.yaml"],
    match=r"sharding: not used")

for id, extra, match in (
    ("workers-100000", ["--workers", "100000"], r"--workers must be at most 1024"),
    ("workers-spin-oversubscribed", ["--workers", "1000"], r"busy-waiting spin workers"),
    ("accel-workers-huge", ["--gpu-threshold", "10", "--sim-accel", "1", "--accel-workers", "100000"],
     r"--accel-workers must be at most"),
    ("qps-x-duration-inf", ["--qps", "1e300", "--duration", "1e300"], r"qps x duration asks for inf"),
    ("qps-x-duration-huge", ["--qps", "1e6", "--duration", "1e6"], r"qps x duration asks for"),
    ("duration-forever", ["--qps", "1e-6", "--duration", "1e9"], r"--max-wall"),
    ("arrivals-forever", ["--arrivals", "{D}/arrivals_far.csv"], r"--max-wall"),
    ("grace-forever", ["--grace", "1e12"], r"--max-wall"),
    ("max-wall-zero", ["--max-wall", "0"], r"--max-wall"),
    ("max-wall-nan", ["--max-wall", "nan"], r"--max-wall"),
    ("search-budget-forever", ["--search", "--p99", "0.1", "--budget", "1e9"], r"--max-wall"),
    ("search-grid-workers-negative", ["--search", "--p99", "0.1", "--grid", "workers=-1"], r"workers must be within"),
    ("search-grid-threads-zero", ["--search", "--p99", "0.1", "--grid", "threads=0"], r"threads must be within"),
    ("search-grid-max-batch-zero", ["--search", "--p99", "0.1", "--grid", "max_batch=0"], r"max_batch must be"),
    ("search-grid-workers-huge", ["--search", "--p99", "0.1", "--grid", "workers=100000"], r"workers must be within"),
    ("search-grid-threshold-negative", ["--search", "--p99", "0.1", "--grid", "gpu_threshold=-5"],
     r"gpu_threshold must be within"),
    ("query-size-beyond-limit", ["--query-size", "5000000"], r"--query-size must be at most"),
    ("max-batch-beyond-limit", ["--max-batch", str(2**21)], r"--max-batch must be at most"),
):
    add("range", f"serve-{id}", [*SPIN, *extra], match=match)
for id, argv, match in (
    ("sweep-timeout-1e7", ["sweep", "{D}/sweep.yaml", "-o", "{T}/s", "--timeout", "1e7"], r"--timeout must be at most"),
    ("sweep-timeout-inf", ["sweep", "{D}/sweep.yaml", "-o", "{T}/s", "--timeout", "inf"], r"--timeout"),
    ("sweep-parallel-100000", ["sweep", "{D}/sweep.yaml", "-o", "{T}/s", "--parallel", "100000"],
     r"--parallel must be at most"),
    ("sweep-parallel-zero", ["sweep", "{D}/sweep.yaml", "-o", "{T}/s", "--parallel", "0"], r"--parallel"),
    ("correlate-bootstrap-huge", ["correlate", GOOD, "-o", "{T}/c.html", "--bootstrap", "1000000000"],
     r"--bootstrap must be at most"),
    ("machine-world-sizes-0", ["machine", "--world-sizes", "0"], r"--world-sizes"),
    ("machine-world-sizes-alone", ["machine", "--world-sizes", "4"], r"--world-sizes applies to --collectives"),
    ("plan-row-wise-ranks", ["profile", "rmc1", "--scale", "0.002", "--machine", "none", "--nproc", "2",
                             "--sharding", "{D}/plan_row_wise.yaml"], r"row_wise .* takes no ranks"),
    ("plan-table-row-wise-ranks", ["profile", "rmc1", "--scale", "0.002", "--machine", "none", "--nproc", "2",
                                   "--sharding", "{D}/plan_table_row_wise.yaml"], r"table_row_wise .* takes no ranks"),
    ("plan-data-parallel-ranks", ["profile", "rmc1", "--scale", "0.002", "--machine", "none", "--nproc", "2",
                                  "--sharding", "{D}/plan_data_parallel.yaml"], r"data_parallel .* takes no ranks"),
    ("compile-dims-unknown-arg", ["compile", "compile_models:clean", "--compile", "{D}/dims_unknown.yaml",
                                  "--no-compile-time", "--iters", "2", "--warmup", "2", "--batch-sizes", "4"],
     r"dims\[nosucharg\]\.arg: 'nosucharg' is not an argument"),
):
    add("range", id, argv, match=match, absent="{T}/s")


# =====================================================================================================
# Fixtures and running a case
# =====================================================================================================
PLAN = "tables:\n  t_0: {{sharding: {kind}, ranks: [0]}}\n"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    _good_store(d / "good.duckdb")
    for name, (recipe, _m) in STORE_VARIANTS.items():
        _make_variant(d / "good.duckdb", d / f"store-{name}.duckdb", recipe)
    (d / "sweep.yaml").write_text(yaml.safe_dump(SWEEP_SPEC))
    (d / "arrivals_far.csv").write_text("0\n1e12\n")
    (d / "run_nproc.yaml").write_text("model: spin\nnproc: 2\n")
    (d / "run_compile.yaml").write_text("model: rmc1\ncompile: nope.yaml\n")
    (d / "run_sharding.yaml").write_text("model: rmc1\nsharding: row_wise\n")
    for kind in ("row_wise", "table_row_wise", "data_parallel"):
        (d / f"plan_{kind}.yaml").write_text(PLAN.format(kind=kind))
    (d / "dims_unknown.yaml").write_text("defaults:\n  backend: eager\n  dims:\n    - {arg: nosucharg, dim: 0}\n")
    return d


@pytest.fixture(scope="module")
def full_fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path | None]:
    """A real tmpfs with no space left (root only: mount needs it); None where it cannot be made."""
    if os.geteuid() != 0:
        yield None
        return
    mnt = tmp_path_factory.mktemp("mnt") / "full"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, timeout=30)
    if r.returncode != 0:
        yield None
        return
    try:
        fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RECSTACK_MEMORY_LIMIT", str(4 * 2**30))
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RECSTACK_PROGRESS", "never")


def _expand(text: str, d: Path, t: Path, s: Path | None, f: Path | None) -> str:
    out = text.replace("{D}", str(d)).replace("{T}", str(t))
    out = out.replace("{S}", str(s)) if s is not None else out
    return out.replace("{F}", str(f)) if f is not None else out


def _digest(p: Path) -> bytes:
    """The file's bytes, compared whole by :func:`_same` (hashing 3 MB twice per case cost ~10 ms a case)."""
    return p.read_bytes()


def _same(p: Path, before: bytes) -> bool:
    return p.read_bytes() == before


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | None, str, BaseException | None]:
    """``main(argv)`` under CASE_TIMEOUT_S (in a thread: a hang fails the case instead of the suite)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["code"] = main(["--quiet", *argv])
        except SystemExit as e:  # argparse
            box["code"] = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        except BaseException as e:  # noqa: BLE001 - a raw exception escaping main is what the case checks for
            box["exc"] = e

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(CASE_TIMEOUT_S)
    assert not th.is_alive(), f"hang: no exit within {CASE_TIMEOUT_S} s"
    return box.get("code"), capsys.readouterr().err, box.get("exc")


def check(case: Case, code: int | None, err: str, exc: BaseException | None) -> None:
    assert exc is None, f"a raw {type(exc).__name__} escaped main: {exc}"
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("USDT:")]
    assert "Traceback" not in err, err
    assert code == case.code, f"exit {code}, want {case.code}; stderr:\n{err}"
    errors = [ln for ln in lines if "error:" in ln]
    if case.code == 0:
        assert not errors, err
        if case.match:
            assert re.search(case.match, err), err
        return
    assert len(errors) == 1, f"want exactly one error line, got {len(errors)}:\n{err}"
    assert "internal error" not in errors[0], errors[0]
    if case.match:
        assert re.search(case.match, errors[0]), f"{case.match!r} not in {errors[0]!r}"


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c.kind}:{c.id}") for c in CASES])
def test_hostile(case: Case, data_dir: Path, full_fs: Path | None, tmp_path: Path,
                 capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    if case.needs == "tmpfs" and full_fs is None:
        pytest.skip("a full file system needs a tmpfs mount, which needs root (os.geteuid() != 0 or mount failed)")
    monkeypatch.syspath_prepend(str(REPO / "tests"))  # compile_models
    store = None
    if case.store:
        store = tmp_path / f"{case.store}.duckdb"
        shutil.copy(data_dir / f"store-{case.store}.duckdb", store)
        before = _digest(store)
    argv = [_expand(a, data_dir, tmp_path, store, full_fs) for a in case.argv]
    listed = set(os.listdir(tmp_path))
    good_before = _digest(data_dir / "good.duckdb")
    code, err, exc = _run(argv, capsys)
    check(case, code, err, exc)
    if case.needs == "tmpfs" and case.code != 0:
        assert str(full_fs) in err, f"the error does not name the path on the full disk:\n{err}"
    if store is not None:
        assert _same(store, before), f"{case.store}: the store's bytes changed (migrated or written into)"
        assert not Path(str(store) + ".wal").exists(), "a write-ahead log was left beside the store"
        if case.code != 0:
            assert store.name in err or case.id.startswith("correlate:"), f"the error does not name the store:\n{err}"
    assert _same(data_dir / "good.duckdb", good_before), "the good store was changed"
    if case.absent:
        assert not Path(_expand(case.absent, data_dir, tmp_path, store, full_fs)).exists(), f"{case.absent} left"
    leftovers = [n for n in set(os.listdir(tmp_path)) - listed if n.startswith(".recstack-tmp-")]
    if full_fs is not None:
        leftovers += [n for n in os.listdir(full_fs) if n.startswith(".recstack-tmp-")]
    assert not leftovers, f"temporary files left behind: {leftovers}"


# =====================================================================================================
# Locks on the resolved path
# =====================================================================================================
@pytest.mark.parametrize("spelling", ["symlink", "dotdot"])
def test_a_held_store_is_refused_however_it_is_named(spelling: str, data_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from recstack.store.db import SweepLock

    real = tmp_path / "real" / "results.duckdb"
    real.parent.mkdir()
    shutil.copy(data_dir / "good.duckdb", real)
    (tmp_path / "other").mkdir()
    if spelling == "symlink":
        other = tmp_path / "link.duckdb"
        other.symlink_to(real)
    else:
        other = tmp_path / "other" / ".." / "real" / "." / "results.duckdb"
    before = _digest(real)
    with SweepLock(real):
        code, err, exc = _run(["sweep", str(data_dir / "sweep.yaml"), "--store", str(other)], capsys)
    check(Case("lock", "lock", [], match=r"another sweep \(pid \d+\) is writing this store"), code, err, exc)
    assert _same(real, before)


# =====================================================================================================
# Real processes: no file descriptors left, another user, the new exit code end to end
# =====================================================================================================
BATCH = textwrap.dedent(
    """
    import io, json, os, resource, sys, contextlib
    from recstack.cli import main
    import duckdb, pandas, recstack.store.db, recstack.results, recstack.render.results_table  # before the fds go
    out = []
    for argv, free in json.loads(sys.argv[1]):
        fds = []
        if free is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
            with contextlib.suppress(OSError):
                while True:
                    fds.append(os.open(os.devnull, os.O_RDONLY))
            for fd in fds[:free]:
                os.close(fd)
            fds = fds[free:]
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(["--quiet", *argv])
            except SystemExit as e:
                code = e.code
            except BaseException as e:
                code = "raised " + type(e).__name__
        for fd in fds:
            os.close(fd)
        out.append([code, err.getvalue()])
    print(json.dumps(out))
    """
)


def _batch(cases: list[tuple[list[str], int | None]], prefix: list[str] | None = None) -> list[tuple[Any, str]]:
    """Run the cases in one real process (``prefix``: a command that runs it, e.g. setpriv)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), RECSTACK_PROGRESS="never")
    r = subprocess.run([*(prefix or []), sys.executable, "-c", BATCH, json.dumps(cases)], capture_output=True,
                       text=True, env=env, timeout=CASE_TIMEOUT_S, cwd="/", check=False)
    assert r.returncode == 0, r.stderr
    return [tuple(x) for x in json.loads(r.stdout.strip().splitlines()[-1])]


EMFILE_CASES = [  # argv, descriptors left free before main runs
    (["results", GOOD, "--format", "csv"], 0),
    (["results", GOOD, "--format", "csv"], 1),
    (["best", GOOD, "--json"], 0),
    (["best", GOOD, "--json"], 1),
    (["results", GOOD, "--table", "stages", "--format", "csv"], 1),
]
PROCESS_CASES = len(EMFILE_CASES) + 4 + 1  # + the permission cases + the end-to-end exit 5


def test_no_file_descriptors_left(data_dir: Path) -> None:
    cases = [([a.replace("{D}", str(data_dir)) for a in argv], free) for argv, free in EMFILE_CASES]
    for (argv, free), (code, err) in zip(cases, _batch(cases), strict=True):
        case = Case(f"emfile-{free}", "emfile", argv, code=5, match=r"[Tt]oo many open files")
        check(case, code, err, None)


def test_no_permission(data_dir: Path, tmp_path: Path) -> None:
    """A store the user may not read, a folder they may not write in: root runs the cases without its
    override of file permissions (setpriv drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv (util-linux), to run the cases without the permission override")
    store = tmp_path / "locked.duckdb"
    shutil.copy(data_dir / "good.duckdb", store)
    os.chmod(store, 0)
    ro = tmp_path / "readonly"
    ro.mkdir()
    os.chmod(ro, 0o555)
    cases = [
        (["results", str(store), "--format", "csv"], None),
        (["best", str(store)], None),
        (["results", GOOD.replace("{D}", str(data_dir)), "--format", "csv", "-o", str(ro / "x.csv")], None),
        (["sweep", str(data_dir / "sweep.yaml"), "-o", str(ro / "sweep")], None),
    ]
    wants = [(5, r"locked\.duckdb.*[Pp]ermission denied"), (5, r"locked\.duckdb.*[Pp]ermission denied"),
             (2, r"cannot write in .*readonly"), (2, r"cannot write in .*readonly")]
    prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]
    results = _batch(cases, prefix=prefix)
    for (argv, _f), (code, err), (want, match) in zip(cases, results, wants, strict=True):
        check(Case("perm", "permission", argv, code=want, match=match), code, err, None)
    os.chmod(store, 0o600)
    assert _same(store, _digest(data_dir / "good.duckdb")) and not os.listdir(ro)


def test_exit_5_end_to_end(data_dir: Path, tmp_path: Path) -> None:
    """A real ``python -m recstack`` process: exit 5, one error line naming the address, no store made."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), RECSTACK_PROGRESS="never")
    r = subprocess.run([sys.executable, "-m", "recstack", "sweep", str(data_dir / "sweep.yaml"), "-o",
                        str(tmp_path / "out"), "--executor", "ray", "--address", "127.0.0.1:1"],
                       capture_output=True, text=True, env=env, timeout=CASE_TIMEOUT_S, check=False)
    check(Case("e2e", "process", [], code=5, match=r"127\.0\.0\.1:1"), r.returncode, r.stderr, None)
    assert not (tmp_path / "out").exists()


def test_case_count() -> None:
    """Issue 29 asks for at least 150 cases; the counts per kind are in the module's table."""
    kinds = Counter(c.kind for c in CASES)
    total = sum(kinds.values()) + PROCESS_CASES + 2  # + the two lock spellings
    assert total >= 150, kinds
    assert set(kinds) >= {"store", "enospc", "name-too-long", "cluster", "unused-flag", "range"}
    print(dict(kinds), "process:", PROCESS_CASES, "lock: 2", "total:", total)


def test_a_point_the_full_store_cannot_take_goes_to_a_fallback_file(tmp_path: Path) -> None:
    """The disk fills mid-sweep: the point's row goes to a JSON file in the temp folder, the sweep stops with
    exit 5 naming both, and the store keeps what it held (the failed COMMIT is reported, not its ROLLBACK)."""
    if os.geteuid() != 0:
        pytest.skip("a full file system needs a tmpfs mount, which needs root")
    from recstack.errors import EnvironmentFailure
    from recstack.store import db
    from recstack.sweeps.run import _write_point

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True,
                      timeout=30).returncode != 0:
        pytest.skip("mount -t tmpfs failed here")
    try:
        store = mnt / "results.duckdb"
        db.migrate(store)
        fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        point = {"point_id": "p0", "config_hash": "h0", "recstack_version": "t", "host": "h", "status": "ok",
                 "model": "rmc1", "config_json": "x" * 100_000}
        with pytest.raises(EnvironmentFailure) as info:
            for i in range(50):
                _write_point(store, {**point, "point_id": f"p{i}", "config_hash": f"h{i}"}, [])
        msg = str(info.value)
        assert str(store) in msg and "No space left on device" in msg and "\n" not in msg, msg
        alt = Path(re.search(r"the unstored point's row is in (\S+)$", msg).group(1))  # type: ignore[union-attr]
        assert json.loads(alt.read_text())["point"]["status"] == "ok"
        alt.unlink()
        os.unlink(mnt / "fill")
        assert len(db.read_table(store)) == i  # the points stored before the disk filled, each once
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)
