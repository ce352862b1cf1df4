"""The Ray executor: one point per Ray task, for sweeps over more than one machine.

Each point is a task with ``num_cpus`` = its ``threads`` (1 when threads is not
set: give ``threads`` in a Ray sweep so that Ray packs points honestly). The
task runs the point in a Ray worker (which, like a local worker, keeps its
last built model for the next task) and returns the result and the profile's
text; only the driver writes the store and the profile files. A task whose
worker dies (killed, out of memory, its node lost) is submitted once more and
the retry is recorded (``attempts`` 2, and the first failure in ``reason``); a
task past the per-point timeout (counted from submission; the executor keeps
no more tasks in flight than the cluster has CPUs) is cancelled and recorded
as ``timeout``.

Without ``address`` a local Ray is started (no dashboard, a small object store)
and shut down at the end; ``address`` (``ray://host:10001`` or ``auto``) joins a
running cluster (docs/sweeps.md).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recstack.config.run import usable_cores
from recstack.errors import ConfigError, EnvironmentFailure
from recstack.sweeps.local import Job
from recstack.sweeps.point import failed

OBJECT_STORE_BYTES = 100 * 1024 * 1024  # results and profiles are small


def _task(runner: Callable[..., dict[str, Any]], config: dict[str, Any],
          min_timed_s: float | None) -> tuple[dict[str, Any], str | None]:
    """In a Ray worker: run one point; return (result, the profile JSON text or None)."""
    os.environ["RECSTACK_PROGRESS"] = "never"
    from recstack.config.run import RunConfig

    cfg = RunConfig.model_validate(config)
    fd, tmp = tempfile.mkstemp(prefix="recstack-point-", suffix=".json")
    os.close(fd)
    try:
        result = runner(cfg, tmp, min_timed_s=min_timed_s)
        text = Path(tmp).read_text(encoding="utf-8") if result["status"] == "ok" else None
    finally:
        Path(tmp).unlink(missing_ok=True)
    result["ray_node"] = os.uname().nodename
    return result, text


START_HINT = "start one with `ray start --head` (docs/sweeps.md) or check the address"
TOKEN_HINT = ("the cluster uses Ray's token authentication and this process has no matching token: set "
              "RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
              "~/.ray/auth_token) where recstack runs (docs/sweeps.md)")
CONNECT_TIMEOUT_S = 5.0


def join_failure(address: str, exc: BaseException) -> EnvironmentFailure:
    """Why ray.init could not join ``address``: a refused token is named as such (Ray >= 2.5x turns token
    authentication on for a head that finds ~/.ray/auth_token; a client without the token is refused and
    Ray's own message blames the connection)."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    if any(type(e).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(e) for e in chain):
        return EnvironmentFailure(f"--address {address}: cannot join the Ray cluster: {TOKEN_HINT}")
    return EnvironmentFailure(f"--address {address}: cannot join the Ray cluster "
                              f"({(str(chain[0]) or type(chain[0]).__name__).splitlines()[0][:300]}); {START_HINT}")


def check_reachable(address: str) -> None:
    """Refuse (exit 5) an address where nothing answers, before Ray retries it for minutes.

    ``auto`` and ``local`` are Ray's to resolve; ``ray://host:port`` and ``host:port`` get one TCP connect.
    """
    import socket

    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{address!r} is not HOST:PORT, ray://HOST:PORT or auto", field="--address")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise EnvironmentFailure(f"--address {address}: no Ray cluster answers there "
                                 f"({exc.strerror or exc}); {START_HINT}") from None


class RayExecutor:
    name = "ray"

    def __init__(self, runner: Callable[..., dict[str, Any]], *, address: str | None = None,
                 timeout_s: float = 600.0, min_timed_s: float | None = None) -> None:
        self.runner = runner
        self.min_timed_s = min_timed_s
        self.address = address
        self.timeout_s = timeout_s
        if address:
            check_reachable(address)

    def _init(self) -> bool:
        """Connect to (or start) Ray; True when this call started it (and so shuts it down)."""
        try:
            import ray
        except ImportError:
            raise ConfigError("Ray is not installed; pip install 'recstack[ray]'", field="--executor") from None
        if ray.is_initialized():
            return False
        env = {"env_vars": {"RECSTACK_PROGRESS": "never"}}
        if self.address:
            check_reachable(self.address)
            try:
                ray.init(address=self.address, log_to_driver=False, runtime_env=env)
            except ConnectionError as exc:
                raise join_failure(self.address, exc) from None
        else:
            ray.init(num_cpus=usable_cores(), include_dashboard=False, object_store_memory=OBJECT_STORE_BYTES,
                     log_to_driver=False, runtime_env=env)
        return True

    def run(self, jobs: list[Job], on_result: Callable[[Job, dict[str, Any]], None]) -> None:
        import ray

        started = self._init()
        try:
            self._run(ray, jobs, on_result)
        finally:
            if started:
                ray.shutdown()

    def _run(self, ray: Any, jobs: list[Job], on_result: Callable[[Job, dict[str, Any]], None]) -> None:
        remote = ray.remote(max_retries=0)(_task)
        capacity = max(1, int(ray.cluster_resources().get("CPU", 1)))
        queue = list(jobs)
        inflight: dict[Any, tuple[Job, float, int, str | None]] = {}  # ref -> job, submitted, cpus, first failure

        def submit(job: Job, first_failure: str | None = None) -> None:
            cpus = min(job.config.threads or 1, capacity)
            ref = remote.options(num_cpus=cpus).remote(self.runner, job.config.model_dump(mode="json"),
                                                       self.min_timed_s)
            inflight[ref] = (job, time.monotonic(), cpus, first_failure)

        while queue or inflight:
            while queue and sum(c for _, _, c, _ in inflight.values()) + min(queue[0].config.threads or 1,
                                                                              capacity) <= capacity:
                submit(queue.pop(0))
            deadline = min(t + self.timeout_s for _, t, _, _ in inflight.values())
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            for ref in ready:
                job, t0, _, first = inflight.pop(ref)
                self._finished(ray, ref, job, t0, first, submit, on_result)
            now = time.monotonic()
            for ref, (job, t0, _, _) in list(inflight.items()):
                if now >= t0 + self.timeout_s:
                    inflight.pop(ref)
                    ray.cancel(ref, force=True)
                    on_result(job, failed(f"no result within the {self.timeout_s:g} s per-point timeout; "
                                          "the Ray task was cancelled", now - t0, status="timeout"))

    def _finished(self, ray: Any, ref: Any, job: Job, t0: float, first: str | None,
                  submit: Callable[..., None], on_result: Callable[[Job, dict[str, Any]], None]) -> None:
        died = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError,
                ray.exceptions.OwnerDiedError)
        try:
            result, text = ray.get(ref)
        except died as exc:
            why = f"the Ray worker died ({type(exc).__name__})"
            if first is None:
                job.attempts = 2
                submit(job, why)
                return
            on_result(job, {**failed(f"{first}; the retry failed too: {why}", time.monotonic() - t0),
                            "attempts": 2})
            return
        except ray.exceptions.RayError as exc:
            on_result(job, failed(f"Ray: {type(exc).__name__}: {str(exc).splitlines()[0][:500]}",
                                  time.monotonic() - t0))
            return
        if text is not None:
            from recstack.outputs import atomic_write_text

            atomic_write_text(job.profile_path, text)
        if first is not None:
            result["attempts"] = 2
            result["reason"] = f"retried once: {first}" + (f"; {result['reason']}" if result.get("reason") else "")
        on_result(job, result)


__all__ = ["RayExecutor"]
