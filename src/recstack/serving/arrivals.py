"""Arrival times of an open-loop load (seconds from the start, increasing, seeded).

* ``poisson``: exponential inter-arrival times at the offered rate;
* ``diurnal[:PERIOD[:AMPLITUDE]]``: a non-homogeneous Poisson process with rate
  ``qps * (1 + AMPLITUDE * sin(2 pi t / PERIOD))`` (defaults: period = the
  duration, amplitude 0.5), drawn by thinning (Lewis and Shedler) so that it is
  exact, not a step approximation;
* a CSV file: one timestamp (seconds) per line, replayed relative to the first
  (a header line that is not a number is skipped); ``--qps`` then does not apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recstack.errors import ConfigError, DataError

ARRIVALS_FIELD = "--arrivals"
MAX_ARRIVALS = 50_000_000


@dataclass(frozen=True)
class ArrivalSpec:
    """What ``--arrivals`` names: a kind and its parameters."""

    kind: str  # poisson | diurnal | csv
    period_s: float | None = None
    amplitude: float = 0.5
    path: str | None = None


def parse_arrivals(text: str) -> ArrivalSpec:
    """``poisson``, ``diurnal[:PERIOD[:AMPLITUDE]]`` or a CSV file name."""
    head, _, rest = text.partition(":")
    if head == "poisson" and not rest:
        return ArrivalSpec("poisson")
    if head == "diurnal":
        parts = [p for p in rest.split(":") if p] if rest else []
        try:
            nums = [float(p) for p in parts]
        except ValueError:
            raise ConfigError(f"diurnal takes numbers, diurnal:PERIOD_S:AMPLITUDE (got {text!r})",
                              field=ARRIVALS_FIELD) from None
        if len(nums) > 2 or (nums and not (math.isfinite(nums[0]) and nums[0] > 0)):
            raise ConfigError(f"expected diurnal[:PERIOD_S[:AMPLITUDE]] with PERIOD_S > 0 (got {text!r})",
                              field=ARRIVALS_FIELD)
        amp = nums[1] if len(nums) == 2 else 0.5
        if not 0 <= amp <= 1:
            raise ConfigError(f"the diurnal amplitude must be within 0..1 (got {amp})", field=ARRIVALS_FIELD)
        return ArrivalSpec("diurnal", period_s=nums[0] if nums else None, amplitude=amp)
    if Path(text).is_file():
        return ArrivalSpec("csv", path=text)
    raise ConfigError(f"expected poisson, diurnal[:PERIOD_S[:AMPLITUDE]] or an existing CSV file (got {text!r})",
                      field=ARRIVALS_FIELD)


def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(entropy=int(seed), spawn_key=(14, 1))))


def poisson(qps: float, duration_s: float, seed: int) -> np.ndarray:
    """Poisson arrivals at ``qps`` within ``[0, duration_s)``."""
    rng = _rng(seed)
    expected = qps * duration_s
    if not math.isfinite(expected) or expected > MAX_ARRIVALS:
        raise ConfigError(f"qps x duration asks for {expected:.3g} requests; at most {MAX_ARRIVALS:.0e}",
                          field="--duration")
    n = int(expected + 6 * math.sqrt(expected) + 16)  # enough draws, with overwhelming probability
    if n > MAX_ARRIVALS:
        raise ConfigError(f"qps x duration asks for {expected:.3g} requests; at most {MAX_ARRIVALS:.0e}",
                          field="--duration")
    times = np.cumsum(rng.exponential(1.0 / qps, n))
    while times[-1] < duration_s:  # practically never: extend
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(1.0 / qps, n))])
    return times[times < duration_s]


def diurnal(qps: float, duration_s: float, seed: int, period_s: float | None, amplitude: float) -> np.ndarray:
    """Thinning: Poisson at the peak rate, each kept with probability rate(t) / peak."""
    period = period_s or duration_s
    peak = qps * (1 + amplitude)
    cand = poisson(peak, duration_s, seed)
    rate = qps * (1 + amplitude * np.sin(2 * np.pi * cand / period))
    keep = _rng(seed + 1).random(cand.size) * peak < rate
    return cand[keep]


def from_csv(path: str) -> np.ndarray:
    """Timestamps (one per line) relative to the first; must not decrease."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{ARRIVALS_FIELD}: cannot read {path} ({exc})") from None
    values: list[float] = []
    for i, line in enumerate(lines, 1):
        cell = line.split(",")[0].strip()
        if not cell:
            continue
        try:
            v = float(cell)
        except ValueError:
            if not values and i == 1:
                continue  # a header
            raise DataError(f"{ARRIVALS_FIELD}: {path} line {i}: expected a timestamp in seconds, got {cell!r}") from None
        if not math.isfinite(v):
            raise DataError(f"{ARRIVALS_FIELD}: {path} line {i}: timestamp must be finite (got {cell!r})")
        values.append(v)
    if not values:
        raise DataError(f"{ARRIVALS_FIELD}: {path} has no timestamps; write one time in seconds per line")
    arr = np.asarray(values, dtype=np.float64)
    bad = np.flatnonzero(np.diff(arr) < 0)
    if bad.size:
        raise DataError(f"{ARRIVALS_FIELD}: {path} line {int(bad[0]) + 2}: timestamps must not decrease; sort the file")
    return arr - arr[0]


def arrival_times(spec: ArrivalSpec, qps: float, duration_s: float, seed: int) -> np.ndarray:
    """The schedule of ``spec`` (seconds from the start)."""
    if spec.kind == "poisson":
        return poisson(qps, duration_s, seed)
    if spec.kind == "diurnal":
        return diurnal(qps, duration_s, seed, spec.period_s, spec.amplitude)
    assert spec.path is not None
    return from_csv(spec.path)
