"""How big and how often: the sizes and repeat counts of the three measurement modes.

``full`` (the default, minutes), ``quick`` (under a minute on two cores, for
``make demo``) and ``tiny`` (a few seconds, for tests: its arrays are *not*
far beyond the last-level cache, so its bandwidths are optimistic; the
machine file records the mode so nothing mistakes it for a real one).

Quick and full estimate the same statistics: the same GEMM sizes, stream
arrays of the same size (4x the LLC, the STREAM rule), the same latency
chains (the DRAM one 8x the LLC) and the same stopping rule
(:data:`STOP_RULE`, :class:`recstack.hardware.bench.StopRule`). Quick
differs only in what it leaves out (thread counts between 1 and all,
gather cells) and in the time caps of the rule; gather cells time the same calls.
Sizes derived from the caches are rounded down to powers of two so that
table row counts are powers of two (see :mod:`recstack.hardware.cpu_bench`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recstack.hardware.bench import StopRule
from recstack.hardware.sysinfo import level_bytes, llc_bytes

MODES = ("full", "quick", "tiny")
ROW_BYTES = (64, 128, 256, 512)
ZIPF_EXPONENT = 1.05
MIN_STREAM_BYTES = 64 << 20
MEMORY_FRACTION = 0.25  # no single benchmark allocates more than this share of MemAvailable
STREAM_LLC_FACTOR = 4  # each stream array at least 4x the LLC (STREAM's rule)
DRAM_LLC_FACTOR = 8  # the DRAM latency chain at least 8x the LLC
TINY_DRAM_CHAIN_BYTES = 256 << 20  # tests: the DRAM chain capped here (noted in the machine file)
# One stopping rule for quick and full (same statistic); the modes differ in the time caps.
STOP_RULE = StopRule(block=5, margin=0.01, min_rounds=10, max_rounds=200, budget_s=30.0, warm_s=0.25)
TINY_STOP_RULE = StopRule(block=2, margin=0.05, min_rounds=3, max_rounds=4, budget_s=0.3, warm_s=0.01)
# Time caps per benchmark group (seconds of timed rounds): quick stays under a minute in all.
BUDGETS_S = {
    "quick": {"gemm": 4.0, "stream": 5.0, "gather": 12.0},
    "full": {"gemm": 30.0, "stream": 30.0, "gather": 120.0},
    "tiny": {"gemm": 0.2, "stream": 0.2, "gather": 0.5},
}


def pow2_floor(n: float) -> int:
    n = max(1, int(n))
    return 1 << (n.bit_length() - 1)


@dataclass
class Plan:
    mode: str
    threads: list[int]
    gemm_sizes: list[int]
    gemm_sizes_emulated: list[int]
    gemm_stop: StopRule
    stream_bytes: int
    stream_stop: StopRule
    gather_row_bytes: tuple[int, ...]
    gather_table_bytes: list[int]
    gather_lookups: int
    gather_stop: StopRule
    gather_threads: list[int]
    # Tables read in turn: T tables of (largest table / T) bytes each, uniform indices,
    # ``gather_call_lookups`` lookups per call per table, like an embedding stage's per-table calls.
    gather_tables_in_turn: list[int]
    gather_call_lookups: int
    latency_points: list[tuple[str, int]]  # (level, chain bytes): L1, L2, LLC, DRAM
    latency_base_bytes: int
    latency_steps: int
    latency_repeats: int
    notes: list[str] = field(default_factory=list)


def thread_sweep(n: int, mode: str) -> list[int]:
    """1..N for small N, else powers of two and N (full); the two ends (quick, tiny)."""
    if mode != "full":
        return sorted({1, n})
    if n <= 8:
        return list(range(1, n + 1))
    out = {n}
    t = 1
    while t < n:
        out.add(t)
        t *= 2
    return sorted(out)


def make_plan(mode: str, caches: list[dict], cpus: int, mem_available: int | None) -> Plan:
    """The plan for ``mode`` on a host with these caches, CPU count and free memory."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} (got {mode!r})")
    llc = llc_bytes(caches)
    l1 = level_bytes(caches, 1) or 32 << 10
    l2 = level_bytes(caches, 2) or 512 << 10
    cap = int(mem_available * MEMORY_FRACTION) if mem_available else 4 << 30
    notes: list[str] = []

    def capped(n: int, what: str) -> int:
        if n > cap:
            notes.append(f"{what} capped at {cap >> 20} MiB ({MEMORY_FRACTION:.0%} of available memory)")
            return pow2_floor(cap)
        return n

    sweep = thread_sweep(cpus, mode)
    ends = sorted({1, cpus})
    if mode == "tiny":
        notes.append(
            "tiny mode (tests): arrays are not far beyond the last-level cache; figures are optimistic"
        )
        dram = min(DRAM_LLC_FACTOR * llc, TINY_DRAM_CHAIN_BYTES)
        if dram < DRAM_LLC_FACTOR * llc:
            notes.append(f"tiny mode: DRAM latency chain {dram >> 20} MiB, under {DRAM_LLC_FACTOR}x the LLC")
        budget = BUDGETS_S["tiny"]
        return Plan(
            mode=mode,
            threads=ends,
            gemm_sizes=[256],
            gemm_sizes_emulated=[128],
            gemm_stop=TINY_STOP_RULE.capped(budget["gemm"]),
            stream_bytes=8 << 20,
            stream_stop=TINY_STOP_RULE.capped(budget["stream"]),
            gather_row_bytes=(64, 512),
            gather_table_bytes=[pow2_floor(l2 // 2), 8 << 20],
            gather_lookups=1 << 14,
            gather_stop=TINY_STOP_RULE.capped(budget["gather"]),
            gather_threads=ends,
            gather_tables_in_turn=[4],
            gather_call_lookups=1 << 12,
            latency_points=_latency_points(l1, l2, llc, capped(dram, "latency chain")),
            latency_base_bytes=pow2_floor(l1 // 2),
            latency_steps=50_000,
            latency_repeats=3,
            notes=notes,
        )
    quick = mode == "quick"
    budget = BUDGETS_S[mode]
    stream = capped(max(STREAM_LLC_FACTOR * llc, MIN_STREAM_BYTES), "stream arrays")
    # Up to model-sized footprints: a step of RMC1/RMC2 cycles through ~4 GiB of tables, and
    # footprints far beyond the LLC still differ (page-walk entries stop fitting in the caches).
    far = capped(pow2_floor(llc) * (32 if quick else 128), "largest gather table")
    tables = [pow2_floor(l2 // 2), pow2_floor(llc // 2), min(far, pow2_floor(llc) * 4), far]
    if not quick:
        tables += [min(far, pow2_floor(llc) * 2), min(far, pow2_floor(llc) * 16)]
    return Plan(
        mode=mode,
        threads=sweep,
        gemm_sizes=[1024, 2048],
        gemm_sizes_emulated=[256, 512],
        gemm_stop=STOP_RULE.capped(budget["gemm"]),
        stream_bytes=stream,
        stream_stop=STOP_RULE.capped(budget["stream"]),
        gather_row_bytes=ROW_BYTES,
        gather_table_bytes=sorted(set(tables)),
        gather_lookups=1 << 20,  # quick and full time the same calls (shorter ones read 0.6-0.97 of full)
        gather_stop=STOP_RULE.capped(budget["gather"]),
        gather_threads=ends,
        gather_tables_in_turn=[8] if quick else [8, 32],
        gather_call_lookups=1 << 16,
        latency_points=_latency_points(l1, l2, llc, capped(DRAM_LLC_FACTOR * llc, "latency chain")),
        latency_base_bytes=pow2_floor(l1 // 2),
        latency_steps=200_000,
        latency_repeats=7 if quick else 11,
        notes=notes,
    )


def _latency_points(l1: int, l2: int, llc: int, dram: int) -> list[tuple[str, int]]:
    """(level, chain bytes): half of each cache (it fits with room for the rest) and the DRAM chain."""
    points = [("L1", pow2_floor(l1 // 2)), ("L2", pow2_floor(l2 // 2)), ("LLC", pow2_floor(llc // 2)), ("DRAM", dram)]
    out: list[tuple[str, int]] = []
    for level, size in points:
        if not out or size > out[-1][1]:
            out.append((level, size))
    return out
