"""The Ray executor across two nodes (issue 29): a head and a worker node as separate processes on this
machine, joined as a user's cluster is (``ray start --head`` / ``ray start --address``, loopback only, one
CPU each), and the worker node killed mid-sweep.

What must hold: the point that was running on the lost node is retried on the head (``attempts`` 2, the
reason recorded) or recorded failed with the reason and the sweep exits 4; nothing is written twice; the
store is whole. docs/sweeps.md's multi-node how-to is the commands this test runs. Every wait is
bounded; a cluster that does not come up within START_S fails the test with the nodes' logs (a skip
would hide it). Only the processes this test starts are
stopped (each node runs ``--block`` in a session of its own and is killed by its process group; ``ray
stop`` would stop every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import os
import secrets
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
START_S = 120  # the cap on a node's start on a loaded host (it takes 3-15 s); past it the test fails, saying why
SWEEP_S = 300
# Token authentication, as Ray >= 2.5x enables it on a head when ~/.ray/auth_token exists: every process of
# the test (head, worker node, the node count, the sweep) carries the same token, so the test does not
# depend on that file (with it and no token in the client, nothing could join: the test used to skip).
TOKEN = secrets.token_hex(16)

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
    """The environment of every process of the test; the head declares a lost node dead after 3 missed 1 s
    health checks (Ray's default: 5 missed 3 s checks, so the test would wait ~15 s more)."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN,
               RAY_health_check_initial_delay_ms="1000", RAY_health_check_period_ms="1000",
               RAY_health_check_failure_threshold="3", **extra)
    for name in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
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


def _port_open(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return False
    return True


# Counts the alive nodes as `ray status` does (Ray's GCS client: no driver joins the cluster), in one child
# process started beside the head, so that its `import ray` overlaps the nodes' start; prints the count.
WAIT_NODES = """
import socket, sys, time
from ray._raylet import GcsClient
host, port, want, deadline = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), time.monotonic() + float(sys.argv[4])
while time.monotonic() < deadline:
    try:
        socket.create_connection((host, port), timeout=2).close()
        break
    except OSError:
        time.sleep(0.2)
gcs, alive = GcsClient(address=f"{host}:{port}"), 0
while time.monotonic() < deadline:
    alive = sum(1 for n in gcs.get_all_node_info().values() if n.state == 0)  # 0: ALIVE
    if alive >= want:
        break
    time.sleep(0.2)
print(alive)
"""


def _tails(logs: list[Path]) -> str:
    return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-1500:]}" for p in logs if p.exists())


def _wait_port(address: str, nodes: list[subprocess.Popen], logs: list[Path], deadline: float) -> None:
    """Poll the head's port; the head exiting or a start past ``deadline`` fails the test, with the logs."""
    while not _port_open(address):
        if time.monotonic() > deadline or nodes[0].poll() is not None:
            pytest.fail(f"Ray's head did not open its port within {START_S} s (exit code {nodes[0].poll()}):\n"
                        + _tails(logs))
        time.sleep(0.2)


def _nodes_alive(waiter: subprocess.Popen, want: int, deadline: float, logs: list[Path]) -> None:
    try:
        out, err = waiter.communicate(timeout=max(1.0, deadline - time.monotonic()) + 30)
    except subprocess.TimeoutExpired:
        waiter.kill()
        out, err = waiter.communicate()
    lines = out.strip().splitlines()
    alive = int(lines[-1]) if waiter.returncode == 0 and lines and lines[-1].isdigit() else -1
    if alive < want:
        pytest.fail(f"{alive} of {want} Ray nodes alive within {START_S} s: {err[-1500:]}\n{_tails(logs)}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A head and a worker node, started once per module; ready when the head's port answers and both nodes
    are alive (a readiness wait capped at START_S that fails, saying why, instead of skipping)."""
    if not RAY.is_file():
        pytest.skip(f"no ray command beside {sys.executable}")
    tmp_path = tmp_path_factory.mktemp("ray-nodes")
    temp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # Ray's socket paths must stay short
    port = _free_port()
    address = f"127.0.0.1:{port}"
    marker = tmp_path / "marker"
    head_args = ["--head", f"--port={port}", "--num-cpus=1", "--node-ip-address=127.0.0.1",
                 "--include-dashboard=false", f"--dashboard-port={_free_port()}",
                 "--object-store-memory=100000000", "--include-log-monitor=false",
                 "--disable-usage-stats", f"--temp-dir={temp}"]
    worker_args = [f"--address={address}", "--num-cpus=1", "--node-ip-address=127.0.0.1",
                   "--object-store-memory=100000000", "--include-log-monitor=false"]
    logs = [tmp_path / "head.log", tmp_path / "worker.log"]
    nodes: list[subprocess.Popen] = []
    waiter = None
    try:
        deadline = time.monotonic() + START_S
        nodes.append(_node(head_args, logs[0], _env()))
        waiter = subprocess.Popen([sys.executable, "-c", WAIT_NODES, "127.0.0.1", str(port), "2", str(START_S)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        _wait_port(address, nodes, logs, deadline)
        nodes.append(_node(worker_args, logs[1], _env(RECSTACK_TEST_NODE="worker", RECSTACK_TEST_MARKER=str(marker))))
        _nodes_alive(waiter, 2, deadline, logs)
        yield {"address": address, "worker": nodes[1], "marker": marker, "tmp": tmp_path}
    finally:
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
            waiter.wait(timeout=30)
        for n in reversed(nodes):
            _stop(n)
        shutil.rmtree(temp, ignore_errors=True)
        # `ray start --head` records its address for later drivers (ray.init() with no address joins it);
        # `ray stop` would remove the record, a killed head does not: the test removes its own
        current = Path("/tmp/ray/ray_current_cluster")
        with contextlib.suppress(OSError):
            if current.read_text().strip().endswith(f":{port}"):
                current.unlink()


def test_a_lost_node_s_point_is_retried_or_recorded(cluster: dict[str, object]) -> None:
    tmp_path = Path(str(cluster["tmp"]))
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


def test_a_refused_token_is_named_not_blamed_on_the_address() -> None:
    """A head with token authentication refuses a client without its token; Ray raises ConnectionError
    ('Failed to connect') from an AuthenticationError, and the error line must say what to set."""
    from ray.exceptions import AuthenticationError

    from recstack.sweeps.ray_executor import join_failure

    try:
        try:
            raise AuthenticationError("RPC error: InvalidAuthToken: Authentication token is missing or incorrect")
        except AuthenticationError as cause:
            raise ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6379") from cause
    except ConnectionError as exc:
        token, plain = str(join_failure("h:6379", exc)), str(join_failure("h:6379", ConnectionError("refused")))
    assert "RAY_AUTH_MODE=token" in token and "ray start --head" not in token and "\n" not in token, token
    assert "(refused)" in plain and "ray start --head" in plain, plain
