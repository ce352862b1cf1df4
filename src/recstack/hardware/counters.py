"""Hardware counters through Linux ``perf stat``: detection and a per-region session of this process.

Detection (:func:`detect_perf`) never assumes: it runs
``perf stat -x, -e cycles,instructions,cache-misses -- true`` and reads what
came back. perf may be absent, the Debian/Ubuntu wrapper may lack a binary
for the running kernel, ``kernel.perf_event_paranoid`` may forbid access, or
the PMU may not exist (a VM without a virtual PMU reports ``<not supported>``);
each case yields ``available: false`` and a reason that says what to do.

Method (:class:`PerfSession`): ``perf stat -p <this pid> --delay=-1
--control fifo:<ctl>,<ack>`` attaches to this process with its counters
*disabled*; ``enable()`` / ``disable()`` write to the control FIFO and wait
for perf's ``ack``, so only the code between them is counted (across all
threads of the process that existed when perf attached: warm up the
callable first so the intra-op thread pool exists). :func:`measure_counters`
counts N calls of a callable inside one enabled region. Enabling is a FIFO
round trip that may take milliseconds on a busy host, during which spinning
intra-op worker threads are counted too, so regions are made long (N calls)
rather than toggled per call. Needs perf >= 5.10 (``--control``); on older
perf the result says so.

Parsing perf's output is :mod:`recstack.hardware.perf_stat`; counting a
profiled model stage by stage (replaying each stage's recorded calls) is
:mod:`recstack.profiling.counters_replay`. This module knows nothing of
models or profiles.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recstack.hardware.perf_stat import (
    TOPDOWN_EVENTS,
    TOPDOWN_GROUP,
    TOPDOWN_METRIC_GROUPS,
    derived,
    normalize_event,
    parse_perf_stat_csv,
    topdown_level1,
)
from recstack.hardware.sysinfo import cpu_flags

__all__ = [
    "METHOD",
    "PerfError",
    "PerfSession",
    "PerfStatus",
    "TOPDOWN_EVENTS",
    "derived",
    "detect_perf",
    "measure_counters",
    "normalize_event",
    "parse_perf_stat_csv",
    "topdown_level1",
    "unavailable_reason",
    "unusable_reason",
]

EVENTS = ("cycles", "instructions", "cache-misses")
PARANOID_PATH = Path("/proc/sys/kernel/perf_event_paranoid")
COMMAND_TIMEOUT_S = 20.0
ACK_TIMEOUT_S = 10.0


# -- detection ------------------------------------------------------------------
@dataclass
class PerfStatus:
    """What :func:`detect_perf` found. ``available`` means hardware counters can be measured."""

    available: bool
    reason: str
    perf: str | None = None
    version: str | None = None
    paranoid: int | None = None
    events: list[str] = field(default_factory=list)
    control: bool = False
    topdown: str | None = None
    topdown_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def perf_event_paranoid(path: Path = PARANOID_PATH) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def find_perf() -> str | None:
    """``$RECSTACK_PERF`` if set (a path, or empty to mean 'no perf'), else ``perf`` on PATH."""
    env = os.environ.get("RECSTACK_PERF")
    if env is not None:
        return env if env and Path(env).exists() else None
    return shutil.which("perf")


def _run(args: list[str], timeout: float = COMMAND_TIMEOUT_S) -> tuple[int, str]:
    """Run a command, returning (exit status, stdout+stderr); (-1, reason) when it cannot run."""
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s"
    except OSError as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout or "") + (proc.stderr or "")


def unavailable_reason(rc: int, output: str, paranoid: int | None, hypervisor: bool) -> str | None:
    """Why a ``perf stat -e cycles,instructions,cache-misses`` run shows no usable counter (None: usable)."""
    output = "\n".join(ln for ln in output.splitlines() if not ln.lstrip().startswith("#"))
    low = output.lower()
    if (
        "access to performance monitoring" in low
        or "perf_event_paranoid setting is" in low
        or "permission denied" in low
        or "no permission" in low
    ):
        return (
            f"perf_event_paranoid is {paranoid if paranoid is not None else 'restrictive'} and this process lacks "
            "CAP_PERFMON: set `sysctl kernel.perf_event_paranoid=1` (or lower) or grant CAP_PERFMON"
        )
    if (
        "not found for kernel" in low
        or ("linux-perf" in low and "not installed" in low)
        or "exec: perf_" in low
    ):
        first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")
        return (
            f"the perf wrapper has no perf binary for the running kernel ({first}); install "
            "linux-tools-$(uname -r) (Ubuntu) or the linux-perf matching the kernel (Debian)"
        )
    parsed = parse_perf_stat_csv(output)
    hw = [parsed["events"][e] for e in EVENTS if e in parsed["events"]]
    if any(e["status"] == "counted" for e in hw):
        return None
    if hw and all(e["status"] == "not supported" for e in hw):
        why = "hardware counters are not supported here (perf reports <not supported> for cycles, instructions, cache-misses)"
        if hypervisor:
            why += (
                "; this is a virtual machine (hypervisor CPU flag) without a virtual PMU exposed to the guest"
            )
        return why
    if hw and any(e["status"] == "not counted" for e in hw):
        return "perf could open but not count cycles/instructions/cache-misses (<not counted>: PMU busy or in use)"
    if rc != 0:
        first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "no output")
        return f"perf stat failed (exit {rc}): {first}"
    return "perf stat printed no counter lines for cycles, instructions, cache-misses"


def detect_perf(perf: str | None = None) -> PerfStatus:
    """Probe perf (``perf`` on PATH unless given): presence, permission, PMU, ``--control``, top-down."""
    exe = perf if perf is not None else find_perf()
    paranoid = perf_event_paranoid()
    if not exe or (not Path(exe).exists() and shutil.which(exe) is None):
        return PerfStatus(
            False,
            "perf is not installed (no `perf` on PATH): install linux-perf (Debian) or "
            "linux-tools-common and linux-tools-$(uname -r) (Ubuntu)",
            paranoid=paranoid,
        )
    rc_v, version = _run([exe, "--version"])
    version = version.strip().splitlines()[0] if rc_v == 0 and version.strip() else None
    rc, out = _run([exe, "stat", "-x,", "-e", ",".join(EVENTS), "--", "true"])
    reason = unavailable_reason(rc, out, paranoid, "hypervisor" in cpu_flags())
    _rc_h, helptext = _run([exe, "stat", "-h"])
    control = "--control" in helptext
    status = PerfStatus(False, "", perf=exe, version=version, paranoid=paranoid, control=control)
    if reason is not None:
        status.reason = reason
        status.topdown_reason = "no hardware counters"
        return status
    parsed = parse_perf_stat_csv(out)
    status.events = [e for e in EVENTS if parsed["events"].get(e, {}).get("status") == "counted"]
    if not control:
        status.reason = f"{version or 'this perf'} lacks `perf stat --control` (needs perf >= 5.10)"
        return status
    status.available = True
    status.reason = "ok"
    status.topdown, status.topdown_reason = _detect_topdown(exe)
    return status


def _detect_topdown(exe: str) -> tuple[str | None, str | None]:
    rc, out = _run([exe, "stat", "-x,", "-e", TOPDOWN_GROUP, "--", "true"])
    parsed = parse_perf_stat_csv(out)
    if parsed["topdown"] is not None:
        return "events", None
    for group in TOPDOWN_METRIC_GROUPS:
        rc, out = _run([exe, "stat", "-x,", "-M", group, "--", "true"])
        if rc == 0 and parse_perf_stat_csv(out)["topdown"] is not None:
            return f"metrics:{group}", None
    return None, "no topdown-* events and no TopdownL1/PipelineL1 metric group on this CPU/perf"


# -- measuring ------------------------------------------------------------------
class PerfError(RuntimeError):
    """The perf session could not start or did not answer (a measurement failure, not bad input)."""


class PerfSession:
    """``perf stat`` attached to a process with counters off until :meth:`enable` (see module docstring).

    Use as a context manager; after exit ``result`` holds :func:`parse_perf_stat_csv` of perf's output
    and ``raw`` the text. ``args`` are extra perf stat arguments (``["-M", "TopdownL1"]``).
    """

    def __init__(
        self, perf: str, events: list[str], *, args: list[str] | None = None, pid: int | None = None
    ) -> None:
        self.perf = perf
        self.events = list(events)
        self.args = list(args or [])
        self.pid = pid if pid is not None else os.getpid()
        self.enabled_regions = 0
        self.raw = ""
        self.result: dict[str, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None
        self._ctl = -1
        self._ack = -1

    def __enter__(self) -> PerfSession:
        self._dir = tempfile.mkdtemp(prefix="recstack-perf-")
        ctl, ack, out = (os.path.join(self._dir, n) for n in ("ctl", "ack", "out.csv"))
        os.mkfifo(ctl)
        os.mkfifo(ack)
        self._ack = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
        cmd = [self.perf, "stat", "-x,", "-o", out, "--delay=-1", "--control", f"fifo:{ctl},{ack}"]
        if self.events:
            cmd += ["-e", ",".join(self.events)]
        cmd += self.args + ["-p", str(self.pid)]
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            deadline = time.monotonic() + ACK_TIMEOUT_S
            while True:
                try:
                    self._ctl = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
                    break
                except OSError:
                    if self._proc.poll() is not None or time.monotonic() > deadline:
                        err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                        raise PerfError(f"perf stat did not start: {err.strip() or 'no output'}") from None
                    time.sleep(0.01)
        except BaseException:
            self._cleanup()
            raise
        return self

    def _command(self, word: str) -> None:
        os.write(self._ctl, (word + "\n").encode())
        deadline = time.monotonic() + ACK_TIMEOUT_S
        got = b""
        while b"ack" not in got:
            left = deadline - time.monotonic()
            if left <= 0 or (self._proc is not None and self._proc.poll() is not None):
                raise PerfError(f"perf did not acknowledge {word!r}")
            ready, _, _ = select.select([self._ack], [], [], min(left, 0.05))
            if ready:
                chunk = os.read(self._ack, 64)
                if chunk:
                    got += chunk.replace(b"\x00", b"")
                else:
                    time.sleep(0.001)  # no writer yet: EOF on a FIFO
        if word == "enable":
            self.enabled_regions += 1

    def enable(self) -> None:
        self._command("enable")

    def disable(self) -> None:
        self._command("disable")

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.send_signal(signal.SIGINT)
                try:
                    self._proc.wait(timeout=ACK_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            if self._dir:
                with contextlib.suppress(OSError):
                    self.raw = Path(self._dir, "out.csv").read_text(encoding="utf-8", errors="replace")
            self.result = parse_perf_stat_csv(self.raw)
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        for fd in (self._ctl, self._ack):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._ctl = self._ack = -1
        if self._proc is not None and self._proc.stderr:
            self._proc.stderr.close()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _plan(status: PerfStatus, events: list[str] | None) -> tuple[list[str], list[str]]:
    """(events, extra perf args) for a session: the requested events, else the detected ones + top-down."""
    if events is not None:
        return list(events), []
    evs = list(status.events)
    if status.topdown == "events":
        evs.append(TOPDOWN_GROUP)
        return evs, []
    if status.topdown and status.topdown.startswith("metrics:"):
        return evs, ["-M", status.topdown.split(":", 1)[1]]
    return evs, []


def unusable_reason(status: PerfStatus, events: list[str] | None) -> str | None:
    """Why a session for ``events`` (None: the detected hardware events) cannot run here; None when it can."""
    if events is None:
        return None if status.available else status.reason
    if status.perf is None:
        return status.reason
    if not status.control:
        return f"{status.version or 'this perf'} lacks `perf stat --control` (needs perf >= 5.10)"
    return None


def measure_counters(
    fn: Callable[[], Any],
    repeats: int = 10,
    *,
    warmup: int = 1,
    events: list[str] | None = None,
    status: PerfStatus | None = None,
) -> dict[str, Any]:
    """Count ``repeats`` calls of ``fn`` (after ``warmup`` uncounted ones) for this whole process.

    ``events`` None: the detected hardware events (+ top-down); then the result
    is ``{"available": False, "reason": ...}`` where counters are unavailable.
    Explicit ``events`` (e.g. software events ``task-clock``) need only perf
    with ``--control``. Otherwise ``{"available": True, "method", ...derived}``.
    """
    st = status or detect_perf()
    why = unusable_reason(st, events)
    if why is not None:
        return {"available": False, "reason": why}
    assert st.perf is not None
    evs, args = _plan(st, events)
    for _ in range(warmup):
        fn()
    try:
        with PerfSession(st.perf, evs, args=args) as session:
            session.enable()
            for _ in range(repeats):
                fn()
            session.disable()
    except PerfError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, "method": METHOD, "perf": st.version, **derived(session.result, repeats)}


METHOD = (
    "perf stat -p <pid> --delay=-1 --control fifo: counters enabled only around the measured calls, "
    "all threads of the process that existed at attach"
)
