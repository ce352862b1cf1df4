"""Was a machine measurement made on a quiet host? The checks a profile runs, applied to ``recstack machine``.

:func:`recstack.hardware.machine.measure_machine` runs a
:class:`recstack.hardware.contention.ContentionWatch` (no capacity probe:
the measurement is what the probe is compared with) around its benchmarks
and judges the result with :func:`judge_measurement`, which adds to the
watch's verdict (oversubscription, steal, CPU quota, busy processes) two
checks of its own:

* **load before**: the 1-minute load average before the measurement started
  was at least the usable cores (others alone filled every core);
* **repeat spread against the stopping rule** (evidence only beside another sign of load; alone, a note:
  on a quiet 2-vCPU guest a quick measurement's repeats spread 27-41%, as much as under load): the median spread of a
  group's repeats (``(p90 - p10) / median``,
  :func:`recstack.hardware.repeatability.within_run_spread`) is above
  :data:`SPREAD_LIMIT`, or above :data:`recstack.hardware.repeatability.TOLERANCE`
  while the stopping rule never saw the best repeat settle (stopped by its
  time or round cap). On a quiet host the repeats agree within a few percent
  and the rule stops on ``stable``.

The record goes to the machine file's ``contention`` (``detected``,
``evidence``, ``notes`` and the figures). A contended measurement is never
cached silently (:func:`recstack.hardware.machine.get_machine`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recstack.hardware.repeatability import TOLERANCE

SPREAD_LIMIT = 0.2  # a group's median repeat spread above this is a measurement under load
SPREAD_GROUPS = ("gemm", "stream", "gather")  # latency is a single-thread walk: its spread is not judged
KEPT = ("busy_processes", "planned_load", "other_cores", "oversubscribed", "torch_threads", "usable_cores",
        "steal_fraction", "cgroup", "load_avg", "runnable", "cpu_time_ratio", "window_s")


def _stopping(machine: dict[str, Any]) -> dict[str, str | None]:
    """Each group's ``stopped_by`` (None where the file has no stopping record)."""
    gemm = machine.get("gemm_flops") or {}
    stops = [(gemm.get("fp32") or {}).get("stopping"), (gemm.get("bf16") or {}).get("stopping")]
    by = {
        "gemm": next((s.get("stopped_by") for s in stops if isinstance(s, dict) and s.get("stopped_by") != "stable"),
                     "stable" if any(isinstance(s, dict) for s in stops) else None),
        "stream": ((machine.get("stream_bandwidth") or {}).get("stopping") or {}).get("stopped_by"),
        "gather": ((machine.get("gather_bandwidth") or {}).get("stopping") or {}).get("stopped_by"),
    }
    return by


def spread_evidence(spread: dict[str, Any], stopping: dict[str, str | None]) -> list[str]:
    """Evidence lines for groups whose repeats spread beyond what a quiet host shows."""
    out = []
    for g in SPREAD_GROUPS:
        s = spread.get(g)
        if not s:
            continue
        med, stopped = float(s["median_spread"]), stopping.get(g)
        if med > SPREAD_LIMIT:
            out.append(f"{g} repeats spread {med:.0%} (median over {s['figures']} figures; noisiest "
                       f"{s['noisiest']} {s['max_spread']:.0%}), above {SPREAD_LIMIT:.0%}: the host was busy")
        elif med > TOLERANCE and stopped not in (None, "stable"):
            out.append(f"{g} repeats spread {med:.0%} and the best repeat never settled (stopped by {stopped}): "
                       "the host was busy")
    return out


def load_evidence(record: dict[str, Any]) -> list[str]:
    """Evidence when the 1-minute load before the measurement filled every usable core."""
    before = (record.get("load_avg") or {}).get("before")
    cores = record.get("usable_cores")
    if not before or not cores or float(before[0]) < float(cores):
        return []
    return [f"load average {float(before[0]):.2f} before the measurement on {cores} usable core(s): "
            "other work filled every core"]


def judge_measurement(record: dict[str, Any], spread: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any]:
    """The machine file's ``contention``: the watch's ``record``
    (:func:`recstack.hardware.contention.assess`) plus the load and spread checks."""
    evidence = [e for e in record.get("evidence") or [] if not e.startswith("this process got ")]
    evidence += load_evidence(record)
    noisy = spread_evidence(spread, _stopping(machine))
    notes = list(record.get("notes") or [])
    if evidence:  # the spread corroborates what the watch or the load saw
        evidence += noisy
    else:  # alone it is no verdict: quick measurements on a quiet 2-vCPU guest spread 27-41% (gemm, stream, gather)
        notes += [f"noisy repeats, but no other sign of load (not counted as contention): {e}" for e in noisy]
    out: dict[str, Any] = {"detected": bool(evidence), "evidence": evidence, "notes": notes}
    out.update({k: record.get(k) for k in KEPT if k in record})
    out["method"] = ("recstack.hardware.measure_checks: the profile's contention watch around the benchmarks "
                     "(no probe), the load average before, and each group's repeat spread against the stopping rule")
    return out


def is_contended(machine: dict[str, Any] | None) -> bool:
    """True when a machine dict carries a contention record that found contention, or, measured by an older
    recstack (no record), its own recorded load average before the measurement filled every CPU."""
    rec = (machine or {}).get("contention")
    if isinstance(rec, dict):
        return bool(rec.get("detected"))
    return bool(legacy_evidence(machine or {}))


def legacy_evidence(machine: dict[str, Any]) -> list[str]:
    """The load check applied to a file an older recstack wrote without a contention record (its
    ``load_avg`` and ``cpus``): a measurement taken while other work filled every core is not the machine."""
    return load_evidence({"load_avg": machine.get("load_avg"), "usable_cores": machine.get("cpus")})


def contended_path(cache: Path) -> Path:
    """Where a contended measurement goes when the cache holds a quiet one: beside it."""
    return cache.with_name(cache.stem + ".contended.json")


def summary(machine: dict[str, Any]) -> str:
    """One line for people: the measurement's contention verdict."""
    rec = machine.get("contention")
    if not isinstance(rec, dict):
        old = legacy_evidence(machine)
        if old:
            return "WARNING: measured under contention (an older recstack's file, judged by its own load record): " \
                + "; ".join(old)
        return "contention: not checked (measured by an older recstack)"
    if not rec.get("detected"):
        return "contention: none found (load, steal, busy processes, CPU quota, repeat spread)"
    return "WARNING: measured under contention: " + "; ".join(str(e) for e in rec.get("evidence") or [])


__all__ = ["SPREAD_LIMIT", "contended_path", "is_contended", "judge_measurement", "legacy_evidence", "spread_evidence",
           "summary"]
