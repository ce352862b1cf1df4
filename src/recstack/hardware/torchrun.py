"""Launch ranks on this host with torchrun (multi-rank profiles, the collective benchmark); none outlives the call.

torchrun (``python -m torch.distributed.run``) runs in its own process group
(a new session) on a free loopback port (127.0.0.1 only), with no restarts:
when a rank fails, torchrun stops the others. Whatever way this function
ends (success, a rank's failure, a timeout, SIGINT/SIGTERM), the whole group
gets SIGTERM, then SIGKILL after a grace period, so no rank is left running.

A failed rank is named with its error: the ``rank<R>.error.json`` its worker
wrote (an exception), else torchrun's own failure summary (a rank that died
without a word: a signal or ``os._exit``). Bad input found by every rank
before it ran (exit 2) stays exit 2; anything else is exit 4.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from recstack.errors import EXIT_BAD_INPUT, PartialResultsError, RecstackError

T = TypeVar("T")
GRACE_S = 10.0  # SIGTERM -> SIGKILL
DEFAULT_TIMEOUT_S = 3600.0
_SUMMARY = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank.*?\)\s*exitcode\s*:\s*(-?\d+)", re.S)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def exit_rank(code: int) -> NoReturn:
    """End a rank's process with ``code`` once its outputs are written, skipping interpreter teardown.

    After ``barrier`` and ``destroy_process_group`` a gloo worker thread can
    still be dropping the last finished work, whose tensors belong to Python
    objects. If the interpreter is finalizing by then, that thread's GIL
    acquire exits the thread inside a C++ destructor and the process aborts
    ("terminate called without an active exception", SIGABRT): a rank that
    did all its work reads as failed. Seen in about 1 run in 40 of a two-rank
    gloo script on a 2-core host (core dump: ``ProcessGroupGloo::runLoop`` ->
    ``~AsyncBarrierWork`` -> ``decref_pyobject`` -> ``PyThread_exit_thread``).
    Every file this process writes is closed (atomic writes) before it gets
    here, so nothing is lost by leaving at once.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def torchrun_command(nproc: int, port: int, module: str, spec_path: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(port), "--max-restarts", "0",
            "-m", module, str(spec_path)]


def _env() -> dict[str, str]:
    """The ranks import this recstack (its folder first on PYTHONPATH) and run one OpenMP thread unless told."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # the folder holding the recstack package
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM to the whole process group, SIGKILL after the grace period; reaps the leader."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        proc.wait()
        return
    for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, GRACE_S)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.1)
        if not _group_alive(pgid):
            break
    proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def torchrun(module: str, spec: dict[str, Any], nproc: int, read: Callable[[Path], T], *, expect: list[str],
             timeout_s: float = DEFAULT_TIMEOUT_S, workdir: Path | None = None) -> T:
    """Run ``python -m module SPEC.json`` on ``nproc`` ranks (``spec`` plus ``out_dir``: a temporary folder
    where the ranks write ``expect``); ``read(out_dir)`` once every rank succeeded."""
    with tempfile.TemporaryDirectory(prefix="recstack-ranks-", dir=workdir) as tmp:
        out = Path(tmp)
        spec_path = out / "spec.json"
        spec_path.write_text(json.dumps({**spec, "out_dir": str(out)}))
        log_path = out / "torchrun.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(torchrun_command(nproc, free_port(), module, spec_path), stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                kill_group(proc)  # the ranks too, whatever happened (also on SIGINT/SIGTERM)
        log_text = log_path.read_text(errors="replace")
        if rc is None:
            raise PartialResultsError(f"the {nproc} ranks did not finish within {timeout_s:.0f} s; all were "
                                      f"stopped ({_tail(log_text)})")
        if rc != 0 or any(not (out / name).exists() for name in expect):
            raise _rank_failure(out, nproc, rc, log_text)
        return read(out)


def _rank_failure(out: Path, nproc: int, rc: int, log_text: str) -> RecstackError:
    """The failed rank and its error. A rank that died without a word (a signal, ``os._exit``) comes
    first: the others' errors are then only its consequence (a peer closed the connection)."""
    errors: dict[int, tuple[float, dict[str, Any]]] = {}
    for r in range(nproc):
        p = out / f"rank{r}.error.json"
        if p.exists():
            try:
                errors[r] = (p.stat().st_mtime, json.loads(p.read_text()))
            except json.JSONDecodeError:  # cut short by torchrun stopping the rank (older workers): no report
                continue
    # torchrun's summary: the root cause (first observed failure) first, then the ranks it stopped.
    root_cause = log_text.rpartition("Root Cause")[2]
    died = [(int(r), int(c)) for r, c in _SUMMARY.findall(root_cause) + _SUMMARY.findall(log_text)]
    # SIGTERM is how torchrun stops the survivors: a silent rank with another code is the one that died.
    silent = [(r, c) for r, c in died if r not in errors and c != -signal.SIGTERM]
    if silent:
        r, code = silent[0]
        how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return PartialResultsError(f"rank {r} died ({how}) without reporting an error; the other ranks were "
                                   f"stopped ({_tail(log_text)})")
    if errors:
        first = min(errors.values(), key=lambda e: e[0])[1]
        if first.get("exit_code") == EXIT_BAD_INPUT and len(errors) == nproc:
            return RecstackError(f"rank {first['rank']}: {first['error']}")  # every rank refused the input
        return PartialResultsError(f"rank {first['rank']} failed: {first['error']}; the other ranks were stopped")
    return PartialResultsError(f"torchrun exited with code {rc} before every rank wrote its profile "
                               f"({_tail(log_text)})")


def _tail(text: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "Warning" not in ln]
    return "last output: " + " | ".join(lines[-n:])[-600:] if lines else "no output"
