"""Contention during a profile: was this process sharing its CPUs, and was the host slower than measured?

A :class:`ContentionWatch` is started right before the timed steps and
stopped right after. It collects (Linux ``/proc``; elsewhere it records why
it could not):

* load average and runnable tasks (``/proc/loadavg``, ``procs_running``), before and after;
* busy and steal ticks of the CPUs this process may run on (``/proc/stat``
  per-CPU lines, affinity mask), so work of processes this one cannot see
  (other containers) still counts;
* this process's CPU time (``getrusage``) against wall time: with T torch
  threads busy the ratio approaches T;
* every other process's CPU time over the window (``/proc/<pid>/stat``),
  excluding this process and recstack's own *planned* processes (sweep and
  serving workers, ranks: passed in or registered with
  :func:`planned_processes`), which go to ``planned_load`` instead;
* a capacity probe (:func:`recstack.hardware.probe.probe_capacity`: a copy
  between arrays beyond the last-level cache, then a GEMM; about 0.1 s) before
  and after, compared with the same probe recorded in the machine file
  (:func:`~recstack.hardware.probe.machine_probe`) when its roofs were measured.

The decision is the pure function :func:`assess` over those numbers
(:class:`Sample`), so tests drive it with recorded values. It flags:

1. **oversubscription**: torch threads + cores used by others on our CPUs
   >= usable cores + :data:`OVERSUB_MARGIN_CORES` (and at least
   :data:`MIN_TICKS` ticks of others' work, so a short window's tick noise
   does not count);
2. **steal**: the hypervisor took >= :data:`STEAL_FRACTION` of our CPUs' time;
3. **host slower than when its roofs were measured**: both probes (before
   and after) below the machine file's probe floor: its median less a margin
   set by the probe's own spread over its rounds
   (:func:`recstack.hardware.probe.probe_margin`).
4. **CPU quota**: the container's cgroup was throttled for >=
   :data:`THROTTLE_FRACTION` of the window (cgroup v2 ``cpu.stat``
   ``throttled_usec``, or v1 ``throttled_time``).

Load average, runnable tasks, the CPU-time ratio, involuntary context
switches and this process's own threads (:mod:`recstack.hardware.threads`:
per thread name, CPU time and time runnable but waiting for a core) are
recorded, not used to decide: each depends on the model as much as on the
host.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from recstack.hardware.probe import compare_probe, probe_capacity
from recstack.hardware.threads import read_threads, thread_usage

BUSY_PROCESS_CORES = 0.1  # a process listed as busy used at least this many cores over the window
MIN_TICKS = 3  # clock ticks of CPU time below which a figure is tick noise
OVERSUB_MARGIN_CORES = 0.5  # demand beyond the usable cores by at least this much is oversubscription
STEAL_FRACTION = 0.05
THROTTLE_FRACTION = 0.05  # share of the window the cgroup's CPU quota held this process back
MAX_LISTED = 5  # busy processes named in the evidence text (the record lists all)
OWN_WAIT_CORES = 0.1  # this process's threads waiting for a core this share of the window gets a note

_PLANNED: set[int] = set()


@contextlib.contextmanager
def planned_processes(pids: Iterable[int]) -> Iterator[None]:
    """Register recstack's own worker/rank processes as planned load (not contention) while inside."""
    added = {int(p) for p in pids} - _PLANNED
    _PLANNED.update(added)
    try:
        yield
    finally:
        _PLANNED.difference_update(added)


# -- collectors ------------------------------------------------------------------
@dataclass
class ProcUsage:
    pid: int
    name: str
    cpu_s: float
    threads: int = 1
    cmd: str = ""
    runnable: bool = False  # in state R at both ends of the window: busy however little CPU it got  # the command line, shortened (read for busy processes only)


@dataclass
class CpuTicks:
    busy: int
    steal: int
    total: int


def read_loadavg(path: str = "/proc/loadavg") -> dict[str, Any] | None:
    """Load averages (1, 5, 15 min) and runnable/total scheduling entities."""
    try:
        with open(path, encoding="ascii") as f:
            parts = f.read().split()
        running, total = parts[3].split("/")
        return {"load": [float(x) for x in parts[:3]], "runnable": int(running), "tasks": int(total)}
    except (OSError, ValueError, IndexError):
        return None


def read_cpu_ticks(cpus: set[int] | None, path: str = "/proc/stat") -> CpuTicks | None:
    """Busy, steal and total ticks summed over ``cpus`` (all CPUs when None)."""
    busy = steal = total = 0
    try:
        with open(path, encoding="ascii") as f:
            lines = [ln for ln in f if ln.startswith("cpu") and ln[3:4].isdigit()]
    except OSError:
        return None
    for ln in lines:
        parts = ln.split()
        if cpus is not None and int(parts[0][3:]) not in cpus:
            continue
        # user nice system idle iowait irq softirq steal [guest guest_nice: already inside user/nice]
        v = [int(x) for x in parts[1:9]] + [0] * max(0, 9 - len(parts))
        busy += v[0] + v[1] + v[2] + v[5] + v[6]
        steal += v[7]
        total += sum(v[:8])
    return CpuTicks(busy, steal, total) if total else None


ProcStat = tuple[str, int, int, int, str]  # name, parent pid, utime + stime ticks, threads, state


def scan_processes(root: str = "/proc") -> dict[tuple[int, int], ProcStat]:
    """``(pid, start time) -> (name, parent pid, CPU ticks, threads, state)`` of every readable process."""
    out: dict[tuple[int, int], ProcStat] = {}
    try:
        names = os.listdir(root)
    except OSError:
        return out
    for entry in names:
        if not entry.isdigit():
            continue
        try:
            with open(f"{root}/{entry}/stat", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        lp, rp = text.find("("), text.rfind(")")
        rest = text[rp + 2 :].split()
        try:
            ppid, ticks, threads, start = int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[17]), int(rest[19])
        except (IndexError, ValueError):
            continue
        out[(int(entry), start)] = (text[lp + 1 : rp], ppid, ticks, threads, rest[0])
    return out


def _cgroup_dirs() -> list[str]:
    """This process's cgroup directories: v2 (unified), then v1's cpu controller."""
    out: list[str] = []
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for ln in lines:
        hid, ctrls, rel = (ln.split(":", 2) + ["", ""])[:3]
        if hid == "0" and not ctrls:
            out.append(f"/sys/fs/cgroup{rel.rstrip('/')}")
        elif "cpu" in ctrls.split(","):
            out.append(f"/sys/fs/cgroup/{ctrls}{rel.rstrip('/')}")
    return out


def read_cgroup_cpu() -> dict[str, float] | None:
    """``{"quota_cores", "throttled_s"}`` of this process's cgroup (v2 ``cpu.max``/``cpu.stat``, or v1), if any."""
    for d in _cgroup_dirs():
        try:
            with open(f"{d}/cpu.stat", encoding="ascii") as f:
                stat = dict(ln.split() for ln in f if len(ln.split()) == 2)
        except (OSError, ValueError):
            continue
        quota = None
        try:
            if "throttled_usec" in stat:  # v2
                with open(f"{d}/cpu.max", encoding="ascii") as f:
                    q, period = f.read().split()
                quota = None if q == "max" else int(q) / int(period)
                throttled = int(stat["throttled_usec"]) * 1e-6
            elif "throttled_time" in stat:  # v1, nanoseconds
                with open(f"{d}/cpu.cfs_quota_us", encoding="ascii") as f:
                    q1 = int(f.read())
                with open(f"{d}/cpu.cfs_period_us", encoding="ascii") as f:
                    quota = q1 / int(f.read()) if q1 > 0 else None
                throttled = int(stat["throttled_time"]) * 1e-9
            else:
                continue
        except (OSError, ValueError):
            continue
        return {"quota_cores": quota, "throttled_s": throttled}
    return None


def _own_usage() -> tuple[float, int | None]:
    """This process's CPU seconds (all threads) and involuntary context switches (None where unknown)."""
    try:
        import resource
    except ImportError:  # not POSIX
        t = os.times()
        return t.user + t.system, None
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_nivcsw


def _cmdline(pid: int, limit: int = 60) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read(4 * limit).decode("utf-8", errors="replace").split("\0")
    except OSError:
        return ""
    text = " ".join(" ".join([os.path.basename(argv[0]), *argv[1:]]).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def usable_cpus() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


# -- the sample and the decision -------------------------------------------------
@dataclass
class Sample:
    """Everything :func:`assess` decides on (collected by :class:`ContentionWatch`, or recorded)."""

    wall_s: float
    torch_threads: int
    usable_cores: int
    clk_tck: int = 100
    own_cpu_s: float | None = None
    own_involuntary_ctx: int | None = None
    cpu_ticks: CpuTicks | None = None  # deltas over the window, our CPUs only
    others: list[ProcUsage] = field(default_factory=list)
    planned: list[ProcUsage] = field(default_factory=list)
    load_before: dict[str, Any] | None = None
    load_after: dict[str, Any] | None = None
    probe_before: dict[str, Any] | None = None
    probe_after: dict[str, Any] | None = None
    machine_probe: dict[str, Any] | None = None  # the machine file's "probe" section
    machine_measured_at: str | None = None
    machine_known: bool = True  # False: the profile had no machine file at all
    machine_contention: dict[str, Any] | None = None  # the machine file's own contention record
    cgroup_quota_cores: float | None = None  # the container's CPU quota, when it has one
    cgroup_throttled_s: float | None = None  # time the quota throttled this process's cgroup in the window
    own_threads: list[dict[str, Any]] | None = None  # this process's threads (threads.thread_usage), recorded


def _proc_list(procs: list[ProcUsage], wall_s: float) -> list[dict[str, Any]]:
    rows = [
        {"pid": p.pid, "name": p.name, "cmd": p.cmd or p.name, "cores": round(p.cpu_s / wall_s, 3), "threads": p.threads}
        for p in procs
    ]
    return sorted(rows, key=lambda r: -r["cores"])


def _probe_verdict(s: Sample) -> Verdict:
    """Host slower than when its roofs were measured: both probes below the machine probe's floor."""
    return compare_probe(s.probe_before, s.probe_after, s.machine_probe, s.machine_known, s.machine_measured_at,
                         machine_contention=s.machine_contention)


Verdict = tuple[list[str], list[str], dict[str, Any]]  # evidence (contention), notes (not), figures recorded


def _is_busy(p: ProcUsage, s: Sample) -> bool:
    wall = max(s.wall_s, 1e-9)
    return p.runnable or (p.cpu_s / wall >= BUSY_PROCESS_CORES and p.cpu_s * s.clk_tck >= MIN_TICKS)


def _cpu_share_verdict(s: Sample) -> Verdict:
    """Oversubscription: torch threads + cores others used on our CPUs against the usable cores."""
    wall = max(s.wall_s, 1e-9)
    busy = [p for p in s.others if _is_busy(p, s)]
    rows = _proc_list(busy, wall)
    # /proc/stat sees every process (also other containers'): our CPUs' busy time less ours and the
    # planned processes'. The process list stands in when /proc/stat or getrusage is unreadable.
    other_ticks = sum(p.cpu_s for p in busy) * s.clk_tck
    if s.cpu_ticks is not None and s.cpu_ticks.total > 0 and s.own_cpu_s is not None:
        other_ticks = s.cpu_ticks.busy - (s.own_cpu_s + sum(p.cpu_s for p in s.planned)) * s.clk_tck
    other_cores = max(0.0, other_ticks / s.clk_tck / wall)
    over = s.torch_threads + other_cores >= s.usable_cores + OVERSUB_MARGIN_CORES and other_ticks >= MIN_TICKS
    evidence, notes = [], []
    if over:
        names = ", ".join(f"{r['cmd']} (pid {r['pid']}) {r['cores']:.2f}" for r in rows[:MAX_LISTED])
        evidence.append(
            f"CPUs oversubscribed: other processes used {other_cores:.2f} cores of the {s.usable_cores} this "
            f"process may use, beside its {s.torch_threads} torch thread(s) (busy: {names or 'none visible here'})"
        )
    elif rows:
        notes.append(
            f"other processes used {other_cores:.2f} cores; with {s.torch_threads} torch thread(s) on "
            f"{s.usable_cores} usable cores that is no oversubscription"
        )
    if wall * s.clk_tck < 20:
        notes.append(
            f"window {wall * 1e3:.0f} ms is short against the {1e3 / s.clk_tck:.0f} ms clock tick: "
            "other processes' CPU time is coarse"
        )
    record = {
        "busy_processes": rows,
        "planned_load": _proc_list(s.planned, wall),
        "other_cores": round(other_cores, 3),
        "oversubscribed": over,
        "torch_threads": s.torch_threads,
        "usable_cores": s.usable_cores,
    }
    return evidence, notes, record


def _steal_verdict(s: Sample) -> Verdict:
    t = s.cpu_ticks
    frac = t.steal / t.total if t is not None and t.total > 0 else None
    evidence = []
    if frac is not None and t is not None and frac >= STEAL_FRACTION and t.steal >= MIN_TICKS:
        evidence.append(f"CPU steal time {frac:.0%} of the window: the hypervisor ran other guests on these CPUs")
    return evidence, [], {"steal_fraction": None if frac is None else round(frac, 4)}


def _quota_verdict(s: Sample) -> Verdict:
    if s.cgroup_throttled_s is None:
        return [], [], {"cgroup": None}
    throttled = s.cgroup_throttled_s / max(s.wall_s, 1e-9)
    quota = s.cgroup_quota_cores
    evidence, notes = [], []
    if throttled >= THROTTLE_FRACTION:
        what = f"{quota:g} cores" if quota else "a quota"
        evidence.append(f"the container's CPU quota ({what}) throttled this process for {throttled:.0%} of the window")
    if quota and s.torch_threads > quota:
        notes.append(f"{s.torch_threads} torch threads exceed the container's CPU quota of {quota:g} cores")
    return evidence, notes, {"cgroup": {"quota_cores": quota, "throttled_fraction": round(throttled, 4)}}


def assess(s: Sample) -> dict[str, Any]:
    """The ``environment.contention`` record: ``detected``, ``evidence`` (why), and every figure used."""
    wall = max(s.wall_s, 1e-9)
    evidence: list[str] = []
    out: dict[str, Any] = {"detected": False, "evidence": evidence, "notes": []}
    for verdict in (_cpu_share_verdict, _steal_verdict, _quota_verdict, _probe_verdict):
        ev, notes, record = verdict(s)
        evidence += ev
        out["notes"] += notes
        out.update(record)
    out["detected"] = bool(evidence)
    out["own_threads"] = _own_threads(s, out["notes"])
    ratio = (s.own_cpu_s / wall) if s.own_cpu_s is not None else None
    if evidence and ratio is not None:
        evidence.append(f"this process got {ratio:.2f} CPU-seconds per second with {s.torch_threads} torch thread(s)")
    out.update(
        cpu_time_ratio=None if ratio is None else round(ratio, 3),
        involuntary_ctx_switches_per_s=None
        if s.own_involuntary_ctx is None
        else round(s.own_involuntary_ctx / wall, 1),
        load_avg={"before": (s.load_before or {}).get("load"), "after": (s.load_after or {}).get("load")},
        runnable={"before": (s.load_before or {}).get("runnable"), "after": (s.load_after or {}).get("runnable")},
        window_s=round(wall, 4),
        method="recstack.hardware.contention: /proc/stat ticks of this process's CPUs, /proc/<pid>/stat, "
        "cgroup cpu.stat, getrusage, and a GEMM + copy probe against the machine file's probe",
    )
    return out


def _own_threads(s: Sample, notes: list[str]) -> list[dict[str, Any]] | None:
    """This process's threads, rounded; a note when they waited for a core for at least
    :data:`OWN_WAIT_CORES` of the window (its own threads outnumber its cores: recorded, not contention)."""
    if s.own_threads is None:
        return None
    waiting = sum(t["waiting_cores"] for t in s.own_threads)
    if waiting >= OWN_WAIT_CORES:
        top = max(s.own_threads, key=lambda t: t["waiting_cores"])
        notes.append(f"this process's own threads waited for a core {waiting:.2f} of the time on average "
                     f"(runnable, not running; most: {top['name']} x{top['threads']}, {top['waiting_cores']:.2f})")
    return [{k: round(v, 6) if isinstance(v, float) else v for k, v in t.items()} for t in s.own_threads]


# -- the watch -------------------------------------------------------------------
def _descends(pid: int, parents: dict[int, int], roots: set[int]) -> bool:
    seen = 0
    while pid > 1 and seen < 64:
        if pid in roots:
            return True
        pid = parents.get(pid, 0)
        seen += 1
    return False


class ContentionWatch:
    """Collect a :class:`Sample` around the timed steps; ``stop()`` returns :func:`assess`'s record."""

    def __init__(
        self,
        machine: dict[str, Any] | None = None,
        planned_pids: Iterable[int] = (),
        *,
        probe: bool = True,
        threads: int | None = None,
    ) -> None:
        self.machine = machine
        self.planned = {int(p) for p in planned_pids}
        self.probe = probe
        self.threads = threads  # the threads the watched work runs (default: torch's at stop)
        self.cpus = usable_cpus()
        self.sample: Sample | None = None
        self.result: dict[str, Any] | None = None

    def start(self) -> ContentionWatch:
        self._probe_before = probe_capacity() if self.probe else None
        self._load0 = read_loadavg()
        self._procs0 = scan_processes()
        self._ticks0 = read_cpu_ticks(self.cpus)
        self._cg0 = read_cgroup_cpu()
        self._own0 = _own_usage()
        self._threads0 = read_threads()
        self._t0 = time.perf_counter()
        return self

    def stop(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._t0
        threads1 = read_threads()
        own1 = _own_usage()
        ticks1 = read_cpu_ticks(self.cpus)
        cg1 = read_cgroup_cpu()
        procs1 = scan_processes()
        load1 = read_loadavg()
        probe_after = probe_capacity() if self.probe else None
        try:
            clk = os.sysconf("SC_CLK_TCK")
        except (AttributeError, ValueError, OSError):
            clk = 100
        others, planned = self._split(procs1, clk, wall)
        d_ticks = None
        if self._ticks0 is not None and ticks1 is not None:
            d_ticks = CpuTicks(
                ticks1.busy - self._ticks0.busy, ticks1.steal - self._ticks0.steal, ticks1.total - self._ticks0.total
            )
        mp = (self.machine or {}).get("probe") if isinstance(self.machine, dict) else None
        self.sample = Sample(
            wall_s=wall,
            torch_threads=self.threads or torch.get_num_threads(),
            usable_cores=len(self.cpus) if self.cpus else (os.cpu_count() or 1),
            clk_tck=int(clk),
            own_cpu_s=own1[0] - self._own0[0],
            own_involuntary_ctx=None if own1[1] is None or self._own0[1] is None else own1[1] - self._own0[1],
            cpu_ticks=d_ticks,
            others=others,
            planned=planned,
            load_before=self._load0,
            load_after=load1,
            probe_before=self._probe_before,
            probe_after=probe_after,
            machine_probe=mp if isinstance(mp, dict) else None,
            machine_measured_at=(self.machine or {}).get("measured_at") if isinstance(self.machine, dict) else None,
            machine_known=isinstance(self.machine, dict),
            machine_contention=(self.machine or {}).get("contention") if isinstance(self.machine, dict) else None,
            cgroup_quota_cores=cg1["quota_cores"] if cg1 else None,
            cgroup_throttled_s=(cg1["throttled_s"] - self._cg0["throttled_s"]) if cg1 and self._cg0 else None,
            own_threads=thread_usage(self._threads0, threads1, wall),
        )
        self.result = assess(self.sample)
        return self.result

    def _split(
        self, procs1: dict[tuple[int, int], ProcStat], clk: int, wall: float
    ) -> tuple[list[ProcUsage], list[ProcUsage]]:
        me = os.getpid()
        roots = self.planned | _PLANNED
        parents = {pid: v[1] for (pid, _), v in procs1.items()}
        others: list[ProcUsage] = []
        planned: list[ProcUsage] = []
        for key, (name, _ppid, ticks, threads, state) in procs1.items():
            pid = key[0]
            if pid == me:
                continue
            before = self._procs0.get(key)
            delta = ticks - (before[2] if before else 0)
            is_planned = bool(roots) and _descends(pid, parents, roots)
            runnable = state == "R" and before is not None and before[4] == "R"
            # A process runnable at both ends counts even if the scheduler gave it no tick in the window.
            if delta <= 0 and not runnable and not (is_planned and pid in roots):
                continue
            usage = ProcUsage(pid, name, max(delta, 0) / clk, threads, runnable=runnable)
            if usage.cpu_s >= BUSY_PROCESS_CORES * wall or is_planned or runnable:
                usage.cmd = _cmdline(pid) or name
            (planned if is_planned else others).append(usage)
        return others, planned


__all__ = [
    "ContentionWatch",
    "Sample",
    "assess",
    "planned_processes",
]
