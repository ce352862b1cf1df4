"""Hardware counters through Linux ``perf stat``: detection, a CSV parser and a per-region session.

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
counts N calls of a callable inside one enabled region; :func:`measure_stages`
records the inputs of each forward stage's root modules during one step and
counts N replays of each stage on them, one perf session per stage. Enabling
is a FIFO round trip that may take milliseconds on a busy host, during which
spinning intra-op worker threads are counted too, so regions are made long
(N calls) rather than toggled per call. Needs perf >= 5.10 (``--control``);
on older perf the result says so.

Top-down level 1 comes from Intel's ``topdown-*`` events (``slots`` as the
denominator) when they count, else from perf's metric groups ``TopdownL1``
(Intel) or ``PipelineL1`` (AMD Zen 4+), else it is ``None`` with a reason.
"""

from __future__ import annotations

import contextlib
import os
import re
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

from recstack.hardware.sysinfo import cpu_flags

EVENTS = ("cycles", "instructions", "cache-misses")
TOPDOWN_EVENTS = {
    "topdown-retiring": "retiring",
    "topdown-bad-spec": "bad_speculation",
    "topdown-fe-bound": "frontend_bound",
    "topdown-be-bound": "backend_bound",
}
TOPDOWN_GROUP = "{slots," + ",".join(TOPDOWN_EVENTS) + "}"
TOPDOWN_METRIC_GROUPS = ("TopdownL1", "PipelineL1")
TOPDOWN_METRIC_PATTERNS = {
    "retiring": re.compile(r"(^|[_\s])retiring$"),
    "bad_speculation": re.compile(r"(^|[_\s])bad[_\s]spec(ulation)?$"),
    "frontend_bound": re.compile(r"(^|[_\s])(frontend|fe)[_\s]bound$"),
    "backend_bound": re.compile(r"(^|[_\s])(backend|be)[_\s]bound$"),
}
PARANOID_PATH = Path("/proc/sys/kernel/perf_event_paranoid")
COMMAND_TIMEOUT_S = 20.0
ACK_TIMEOUT_S = 10.0
_AGGR_ID = re.compile(r"^(CPU\d+|S\d+(-D\d+)?(-[CL]\d+)?|N\d+)$")
_PMU_EVENT = re.compile(r"^[A-Za-z0-9_.\-]+/([^/=,]+)/[A-Za-z]*$")
_MODIFIER = re.compile(r":[ukhpPGHSDIW]+$")


# -- parsing --------------------------------------------------------------------
def normalize_event(raw: str) -> str:
    """``cycles:u`` / ``cpu_core/cycles/`` / ``cpu_core/cycles/u`` -> ``cycles``; other names unchanged."""
    name = raw.strip()
    m = _PMU_EVENT.match(name)
    if m:
        name = m.group(1)
    return _MODIFIER.sub("", name)


def _number(text: str) -> float | None:
    try:
        return float(text.strip().replace(" ", ""))
    except ValueError:
        return None


def parse_perf_stat_csv(text: str, sep: str = ",") -> dict[str, Any]:
    """Parse ``perf stat -x<sep>`` output (what perf writes to stderr or to ``-o FILE``).

    Returns ``{"events", "metrics", "topdown", "messages"}``:

    * ``events[name]`` (name normalised by :func:`normalize_event`; duplicate
      names from several PMUs or CPUs are summed): ``value`` (None unless
      counted), ``status`` (``counted``, ``not supported``, ``not counted``),
      ``unit``, ``raw_names``, ``running_pct`` (share of time the counter ran:
      below 100 means multiplexed and scaled), ``variance_pct`` (with ``-r``),
      ``metric`` (perf's derived figure on that line, e.g. insn per cycle).
    * ``metrics[name]``: percentage metrics (``%  tma_retiring`` -> ``tma_retiring``)
      and metric-only lines, as printed (percent stays percent).
    * ``topdown``: level-1 fractions (0..1) with ``source``, or None.
    * ``messages``: lines that are not counter lines (errors, warnings).

    Aggregation prefixes (``CPU3,`` from ``-A``; ``S0,<n>,`` from ``--per-socket``,
    ``S0-D0-C1,<n>,`` from ``--per-core``) are recognised and summed over.
    """
    events: dict[str, dict[str, Any]] = {}
    metrics: dict[str, float] = {}
    messages: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(sep)
        if fields and _AGGR_ID.match(fields[0].strip()):
            agg = fields.pop(0).strip()
            if not agg.startswith("CPU") and len(fields) > 1 and fields[0].strip().isdigit():
                fields.pop(0)  # number of CPUs aggregated
        if len(fields) < 3:
            messages.append(line)
            continue
        value_s, unit, event = fields[0].strip(), fields[1].strip(), fields[2].strip()
        rest = fields[3:]
        variance = None
        if rest and rest[0].strip().endswith("%"):
            variance = _number(rest[0].strip().rstrip("%"))
            rest = rest[1:]
        running = _number(rest[1]) if len(rest) > 1 else None
        metric_val = _number(rest[2]) if len(rest) > 2 else None
        metric_unit = rest[3].strip() if len(rest) > 3 else ""
        if not event:
            # metric-only line: the metric sits in the last two non-empty fields
            tail = [f.strip() for f in fields if f.strip()]
            if len(tail) >= 2 and _number(tail[-2]) is not None:
                _add_metric(metrics, tail[-1], float(_number(tail[-2]) or 0.0), force=True)
            elif tail:
                messages.append(line)
            continue
        if value_s.startswith("<") and value_s.endswith(">"):
            status, value = value_s.strip("<>").strip(), None
        else:
            value = _number(value_s)
            if value is None:
                messages.append(line)
                continue
            status = "counted"
        name = normalize_event(event)
        ev = events.setdefault(
            name,
            {
                "value": None,
                "status": status,
                "unit": unit,
                "raw_names": [],
                "running_pct": running,
                "variance_pct": variance,
                "metric": None,
            },
        )
        if event not in ev["raw_names"]:
            ev["raw_names"].append(event)
        if value is not None:
            ev["value"] = (ev["value"] or 0.0) + value
            ev["status"] = "counted"
            if running is not None:
                ev["running_pct"] = running if ev["running_pct"] is None else min(ev["running_pct"], running)
        if metric_val is not None and metric_unit:
            ev["metric"] = {"value": metric_val, "unit": metric_unit}
            _add_metric(metrics, metric_unit, metric_val, force=False)
    return {
        "events": events,
        "metrics": metrics,
        "topdown": topdown_level1(events, metrics),
        "messages": messages,
    }


def _add_metric(metrics: dict[str, float], unit: str, value: float, *, force: bool) -> None:
    """Keep percentage metrics (``%  name``) always, other units only from metric-only lines."""
    u = unit.strip()
    if u.startswith("%"):
        metrics[u.lstrip("%").strip()] = value
    elif force:
        metrics[u] = value


def topdown_level1(events: dict[str, dict[str, Any]], metrics: dict[str, float]) -> dict[str, Any] | None:
    """Level-1 top-down fractions from ``topdown-*`` events (over ``slots``) or from perf's metrics."""
    counted = {
        k: events[k]["value"] for k in TOPDOWN_EVENTS if k in events and events[k]["value"] is not None
    }
    if len(counted) == len(TOPDOWN_EVENTS):
        slots = events.get("slots", {}).get("value")
        total = slots if slots else sum(counted.values())
        if total and total > 0:
            out: dict[str, Any] = {TOPDOWN_EVENTS[k]: v / total for k, v in counted.items()}
            out["source"] = "events (topdown-* / slots)" if slots else "events (topdown-*, normalised)"
            return out
    found: dict[str, Any] = {}
    for key, pat in TOPDOWN_METRIC_PATTERNS.items():
        for mname, val in metrics.items():
            if pat.search(mname.lower().strip()):
                found[key] = val / 100.0
                break
    if len(found) == len(TOPDOWN_METRIC_PATTERNS):
        found["source"] = "metrics"
        return found
    return None


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


def derived(parsed: dict[str, Any], calls: int) -> dict[str, Any]:
    """Per-call counts, IPC, cache misses per 1000 instructions and top-down from a parsed session."""
    ev = parsed.get("events", {})

    def val(name: str) -> float | None:
        e = ev.get(name)
        return e["value"] if e and e["status"] == "counted" else None

    cycles, instr, misses = val("cycles"), val("instructions"), val("cache-misses")
    return {
        "calls": calls,
        "cycles": cycles,
        "instructions": instr,
        "cache_misses": misses,
        "cycles_per_call": cycles / calls if cycles is not None and calls else None,
        "instructions_per_call": instr / calls if instr is not None and calls else None,
        "ipc": instr / cycles if instr is not None and cycles else None,
        "cache_misses_per_kinstr": 1000.0 * misses / instr if misses is not None and instr else None,
        "topdown": parsed.get("topdown"),
        "multiplexed": any(
            e.get("running_pct") is not None and e["running_pct"] < 99.99
            for e in ev.values()
            if e["status"] == "counted"
        ),
        "events": ev,
    }


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


def _usable(status: PerfStatus, events: list[str] | None) -> str | None:
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
    why = _usable(st, events)
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


def capture_stage_calls(
    model: Any, step: Callable[[], Any], roots: dict[str, str]
) -> dict[str, list[tuple[Any, tuple, dict]]]:
    """Run ``step()`` once and record every outermost call of each stage root: (module, args, kwargs)."""
    mods = dict(model.named_modules())
    missing = [p for p in roots if p not in mods]
    if missing:
        raise ValueError(f"stage roots not in the model: {', '.join(missing)}")
    calls: dict[str, list[tuple[Any, tuple, dict]]] = {s: [] for s in roots.values()}
    depth = {s: 0 for s in roots.values()}
    handles = []
    for path, stage in roots.items():

        def pre(m: Any, args: tuple, kwargs: dict, _s: str = stage) -> None:
            if depth[_s] == 0:
                calls[_s].append((m, args, kwargs))
            depth[_s] += 1

        def post(_m: Any, _a: tuple, _k: dict, _o: Any, _s: str = stage) -> None:
            depth[_s] -= 1

        handles.append(mods[path].register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mods[path].register_forward_hook(post, with_kwargs=True, always_call=True))
    try:
        step()
    finally:
        for h in handles:
            h.remove()
    return calls


def measure_stages(
    model: Any,
    step: Callable[[], Any],
    roots: dict[str, str],
    repeats: int = 10,
    *,
    warmup: int = 1,
    events: list[str] | None = None,
    status: PerfStatus | None = None,
    context: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Counters per forward stage; ``roots`` maps module paths (stage roots) to stage names.

    One ``step()`` records the inputs of every stage root (outermost calls);
    then, per stage, one perf session counts ``repeats`` replays of that
    stage's root calls on those inputs (under ``context()``, default
    ``torch.inference_mode()``) with no toggling inside the region.
    Limits: a replayed stage finds its weights warmer in cache than in the
    full step; a stage root nested in another stage's root is counted in
    both. Returns ``{"available": False, "reason"}`` or
    ``{"available": True, "method", "perf", "stages": {stage: derived + roots}}``.
    """
    st = status or detect_perf()
    why = _usable(st, events)
    if why is not None:
        return {"available": False, "reason": why}
    for _ in range(warmup):
        step()
    calls = capture_stage_calls(model, step, roots)
    if context is None:
        import torch

        context = torch.inference_mode
    stages: dict[str, Any] = {}
    for stage in sorted(calls):
        recorded = calls[stage]
        if not recorded:
            stages[stage] = {"available": False, "reason": "stage root was not called during the step"}
            continue

        def replay(_rec: list[tuple[Any, tuple, dict]] = recorded) -> None:
            with context():
                for mod, args, kwargs in _rec:
                    mod(*args, **kwargs)

        res = measure_counters(replay, repeats, warmup=warmup, events=events, status=st)
        if not res.get("available"):
            return {"available": False, "reason": res.get("reason", "perf session failed")}
        res.pop("available")
        stages[stage] = {
            "roots": [p for p, s in roots.items() if s == stage],
            "root_calls_per_step": len(recorded),
            **{k: v for k, v in res.items() if k not in ("method", "perf")},
        }
    return {
        "available": True,
        "method": METHOD + "; per stage: replays of the stage roots on inputs recorded from one step",
        "perf": st.version,
        "stages": stages,
    }


def attach_counters(profile: Any, counters: dict[str, Any]) -> None:
    """Store a :func:`measure_stages` result on a Profile.

    ``profile.extra["counters"]`` gets ``available`` and ``reason`` or
    ``method``/``perf`` and a compact per-stage summary; each stage node's
    ``extra["counters"]`` gets per-step cycles, instructions and cache
    misses (one replay of the stage = one step), IPC, misses per 1000
    instructions and top-down level 1.
    """
    top = {k: v for k, v in counters.items() if k != "stages"}
    profile.extra["counters"] = top
    if not counters.get("available"):
        return
    summary: dict[str, Any] = {}
    for stage, c in counters.get("stages", {}).items():
        if c.get("available") is False:
            summary[stage] = {"available": False, "reason": c.get("reason")}
            continue
        calls = max(1, int(c.get("calls") or 1))
        compact = {
            k: (c[k] / calls if c.get(k) is not None else None)
            for k in ("cycles", "instructions", "cache_misses")
        }
        compact.update(
            ipc=c.get("ipc"),
            cache_misses_per_kinstr=c.get("cache_misses_per_kinstr"),
            topdown=c.get("topdown"),
            multiplexed=c.get("multiplexed"),
        )
        summary[stage] = compact
        node = profile.stage(stage)
        if node is not None:
            node.extra["counters"] = compact
    top["stages"] = summary


def counters_for_profile(
    profile: Any,
    model: Any,
    step: Callable[[], Any],
    repeats: int = 10,
    *,
    events: list[str] | None = None,
    status: PerfStatus | None = None,
) -> dict[str, Any]:
    """Measure per-stage counters for a profiled model and attach them (:func:`attach_counters`).

    The stage roots come from ``profile.run["stage_roots"]`` (module path ->
    ``{"stage": ...}``, as the profiler records them); ``step()`` runs one
    forward step of ``model`` on a pre-generated batch. Returns what was
    attached: ``{"available": False, "reason"}`` where counters are unavailable.
    """
    roots = {p: v["stage"] for p, v in (profile.run.get("stage_roots") or {}).items() if v.get("stage")}
    if not roots:
        result: dict[str, Any] = {"available": False, "reason": "the profile records no stage roots"}
    else:
        result = measure_stages(model, step, roots, repeats, events=events, status=status)
    attach_counters(profile, result)
    return result
