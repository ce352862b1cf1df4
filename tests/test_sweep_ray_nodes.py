"""The Ray executor across two nodes (issue 29): a head and a worker node as separate processes on this
machine, joined as a user's cluster is (``ray start --head`` / ``ray start --address``, loopback only, one
CPU each), and the worker node killed mid-sweep.

What must hold: the point that was running on the lost node is retried on the head (``attempts`` 2, the
reason recorded) or recorded failed with the reason and the sweep exits 4; nothing is written twice; the
store is whole. docs/sweeps.md's multi-node how-to is the commands this test runs. Every wait is
bounded; the test skips, saying why, when Ray cannot start here. Only the processes this test starts are
stopped (each node runs ``--block`` in a session of its own and is killed by its process group; ``ray
stop`` would stop every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

pytest.importorskip("ray")

SRC = Path(__file__).resolve().parents[1] / "src"
RAY = Path(sys.executable).with_name("ray")
START_S = 90  # a node's start on a loaded host
SWEEP_S = 300

# Hangs on the worker node (its raylet's environment says so) after saying where; runs on the head.
FACTORY = '''
import os, time
from pathlib import Path
import torch

def slow_on_worker(batch_size, seed):
    if os.environ.get("RECSTACK_TEST_NODE") == "worker":
        Path(os.environ["RECSTACK_TEST_MARKER"]).write_text(str(os.getpid()))
        time.sleep(600)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    return model, lambda i: torch.randn(batch_size, 8)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **extra)
    env.pop("RAY_ADDRESS", None)
    return env


def _node(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    """``ray start ARGS --block`` in a session of its own (its daemons share its process group)."""
    with open(log, "wb") as f:
        return subprocess.Popen([str(RAY), "start", *args, "--block"], stdout=f, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _alive_nodes(address: str) -> int:
    """Alive nodes, asked in a child process (a driver in this process would stay connected); 0 while the
    head's port does not answer (ray.init would wait for it far longer than we do)."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return 0
    code = (f"import ray; ray.init(address={address!r}, log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env(),
                           check=False)
    except subprocess.TimeoutExpired:
        return 0
    lines = r.stdout.strip().splitlines()
    return int(lines[-1]) if r.returncode == 0 and lines and lines[-1].isdigit() else 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, object]]:
    if not RAY.is_file():
        pytest.skip(f"no ray command beside {sys.executable}")
    temp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # Ray's socket paths must stay short
    port = _free_port()
    address = f"127.0.0.1:{port}"
    marker = tmp_path / "marker"
    head_args = ["--head", f"--port={port}", "--num-cpus=1", "--node-ip-address=127.0.0.1",
                 "--include-dashboard=false", f"--dashboard-port={_free_port()}",
                 "--object-store-memory=100000000",
                 "--disable-usage-stats", f"--temp-dir={temp}"]
    worker_args = [f"--address={address}", "--num-cpus=1", "--node-ip-address=127.0.0.1",
                   "--object-store-memory=100000000"]
    nodes: list[subprocess.Popen] = []
    try:
        nodes.append(_node(head_args, tmp_path / "head.log", _env()))
        deadline = time.monotonic() + START_S
        while _alive_nodes(address) < 1:
            if time.monotonic() > deadline or nodes[0].poll() is not None:
                pytest.skip("Ray's head node did not start here: " + (tmp_path / "head.log").read_text()[-500:])
            time.sleep(1)
        nodes.append(_node(worker_args, tmp_path / "worker.log",
                           _env(RECSTACK_TEST_NODE="worker", RECSTACK_TEST_MARKER=str(marker))))
        while _alive_nodes(address) < 2:
            if time.monotonic() > deadline + START_S or nodes[1].poll() is not None:
                pytest.skip("Ray's worker node did not join here: " + (tmp_path / "worker.log").read_text()[-500:])
            time.sleep(1)
        yield {"address": address, "worker": nodes[1], "marker": marker}
    finally:
        for n in reversed(nodes):
            _stop(n)
        shutil.rmtree(temp, ignore_errors=True)


def test_a_lost_node_s_point_is_retried_or_recorded(cluster: dict[str, object], tmp_path: Path) -> None:
    (tmp_path / "nodefactories.py").write_text(FACTORY)
    spec = {"base": {"iters": 3, "warmup": 0, "op_iters": 1, "machine": None, "threads": 1},
            "points": [{"model": "nodefactories:slow_on_worker", "batch_size": b} for b in (4, 8)]}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    env = _env(PYTHONPATH=os.pathsep.join([str(SRC), str(tmp_path)]), RECSTACK_PROGRESS="never")
    sweep = subprocess.Popen([sys.executable, "-m", "recstack", "sweep", str(tmp_path / "sweep.yaml"), "-o",
                              str(tmp_path / "out"), "--executor", "ray", "--address", str(cluster["address"]),
                              "--timeout", "150"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             cwd=tmp_path)
    try:
        marker = Path(str(cluster["marker"]))
        deadline = time.monotonic() + SWEEP_S
        while not marker.exists() and sweep.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert marker.exists(), "no point reached the worker node"
        _stop(cluster["worker"])  # type: ignore[arg-type]  # the node is lost mid-point
        out, err = sweep.communicate(timeout=SWEEP_S)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    store = tmp_path / "out" / "results.duckdb"
    con = duckdb.connect(str(store), read_only=True)
    try:
        rows = con.execute("SELECT point_id, status, attempts, reason, profile_path FROM points").fetchall()
        dup = con.execute("SELECT config_hash FROM points GROUP BY 1 HAVING count(*) > 1").fetchall()
        orphans = con.execute("SELECT count(*) FROM stages WHERE point_id NOT IN (SELECT point_id FROM points)")
        assert orphans.fetchone() == (0,)
    finally:
        con.close()
    assert len(rows) == 2 and dup == [], rows  # every point once
    lost = [r for r in rows if r[2] == 2 or r[1] != "ok"]
    assert len(lost) == 1, rows  # the lost node's point, and only it
    _pid, status, attempts, reason, profile = lost[0]
    assert reason and "Ray worker died" in reason, reason  # the reason is recorded either way
    if status == "ok":
        assert attempts == 2 and reason.startswith("retried once") and sweep.returncode == 0, (rows, err)
        assert (tmp_path / "out" / profile).is_file()
    else:
        assert sweep.returncode == 4 and err.count("error:") == 1, err  # a point lost: exit 4
    assert "Traceback" not in err
