"""The Ray executor on a local Ray (2 CPUs, no dashboard, a small object store): same configs and
statuses as the local executor, a worker killed mid-point is retried once and the retry recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray")

SRC = Path(__file__).resolve().parents[1] / "src"
TINY = {"scale": 0.002, "iters": 3, "warmup": 2, "op_iters": 1, "machine": None, "threads": 1}

# Kills its own (Ray worker) process the first time it runs; the retry finds the marker and runs.
FACTORY = '''
import os, signal
from pathlib import Path
import torch

MARKER = Path(os.environ["RECSTACK_TEST_MARKER"])

def die_once(batch_size, seed):
    if not MARKER.exists():
        MARKER.write_text("died")
        os.kill(os.getpid(), signal.SIGKILL)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    return model, lambda i: torch.randn(batch_size, 8)
'''


def _sweep(tmp: Path, spec: dict, marker: Path, *args: str) -> subprocess.Popen:
    f = tmp / "sweep.yaml"
    f.write_text(yaml.safe_dump(spec))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(tmp)])
    env["RECSTACK_TEST_MARKER"] = str(marker)
    env["RECSTACK_PROGRESS"] = "never"
    return subprocess.Popen([sys.executable, "-m", "recstack", "sweep", str(f), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _wait(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def test_ray_executor_matches_local_and_retries_a_dead_worker(tmp_path: Path) -> None:
    import recstack

    (tmp_path / "rayfactories.py").write_text(FACTORY)
    spec = {"base": TINY, "points": [{"model": "rmc1", "batch_size": 8}, {"model": "rayfactories:die_once",
                                                                           "batch_size": 8}]}
    local_marker = tmp_path / "local.marker"
    local_marker.write_text("the local run does not die")
    # Both executors at once (the host's speed is never compared, only configs and statuses).
    ray_run = _sweep(tmp_path, spec, tmp_path / "ray.marker", "-o", str(tmp_path / "ray"), "--executor", "ray")
    local_run = _sweep(tmp_path, spec, local_marker, "-o", str(tmp_path / "local"))
    rc, err = _wait(ray_run)
    assert rc == 0, err[-3000:]
    rc, err = _wait(local_run)
    assert rc == 0, err[-3000:]
    ray_df = recstack.results.load(tmp_path / "ray" / "results.duckdb").set_index("config_hash")
    assert set(ray_df.executor) == {"ray"}
    assert (ray_df.status == "ok").all()
    died = ray_df[ray_df.model == "rayfactories:die_once"].iloc[0]
    assert died.attempts == 2 and died.reason.startswith("retried once: the Ray worker died")
    assert ray_df[ray_df.model == "rmc1"].iloc[0].attempts == 1
    for p in ray_df.profile_path:
        assert (tmp_path / "ray" / p).is_file()  # the driver wrote the profiles beside the store

    local_df = recstack.results.load(tmp_path / "local" / "results.duckdb").set_index("config_hash")
    assert sorted(local_df.index) == sorted(ray_df.index)
    assert local_df.status.to_dict() == ray_df.status.to_dict()
