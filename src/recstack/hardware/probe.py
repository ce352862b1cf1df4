"""The capacity probe: a few milliseconds of GEMM and of streaming, the same everywhere.

A profile runs it before and after its timed steps
(:class:`recstack.profiling.contention.ContentionWatch`); the machine file
records it when its roofs are measured (:func:`machine_probe`, called by
:func:`recstack.hardware.machine.measure_machine`), so a profile can tell
whether the host is slower now than when its roofs were measured. Sizes are
fixed so that figures compare across runs; the copy arrays may sit in a large
last-level cache, so the stream figure is compared only with itself, never
with the machine's stream roof.
"""

from __future__ import annotations

import time
from typing import Any

import torch

PROBE_GEMM_N = 512
PROBE_GEMM_REPEATS = 5
PROBE_STREAM_BYTES = 16 << 20
PROBE_STREAM_REPEATS = 3
MACHINE_PROBE_ROUNDS = 5


def probe_capacity(threads: int | None = None) -> dict[str, Any]:
    """Best-of-k FLOP/s of an fp32 ``n x n`` GEMM and bytes/s of a ``copy_`` of two fixed arrays.

    Fixed sizes (:data:`PROBE_GEMM_N`, :data:`PROBE_STREAM_BYTES`), so a figure
    compares with the same probe anywhere; a few ms each. The copy arrays may sit
    in a large last-level cache: the figure is compared only with itself.
    """
    old = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        n = PROBE_GEMM_N
        gen = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
        c = torch.empty(n, n)
        gemm = _best(lambda: torch.mm(a, b, out=c), PROBE_GEMM_REPEATS)
        m = PROBE_STREAM_BYTES // 4
        src, dst = torch.ones(m), torch.empty(m)
        copy = _best(lambda: dst.copy_(src), PROBE_STREAM_REPEATS)
        return {
            "threads": torch.get_num_threads(),
            "gemm_flops": 2.0 * n**3 / gemm,
            "stream_bytes_per_s": 2.0 * m * 4 / copy,
        }
    finally:
        torch.set_num_threads(old)


def _best(fn: Any, repeats: int) -> float:
    fn()  # warm-up: thread pool, page faults of the outputs
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, max(time.perf_counter_ns() - t0, 1) * 1e-9)
    return best


def probe_settings() -> dict[str, Any]:
    return {
        "gemm_n": PROBE_GEMM_N,
        "gemm_repeats": PROBE_GEMM_REPEATS,
        "stream_array_bytes": PROBE_STREAM_BYTES,
        "stream_repeats": PROBE_STREAM_REPEATS,
    }


def machine_probe(threads: list[int], rounds: int = MACHINE_PROBE_ROUNDS) -> dict[str, Any]:
    """The probe as the machine file records it: ``rounds`` probes per thread count, with their spread.

    Called by :func:`recstack.hardware.machine.measure_machine`, so that a
    profile's probe compares with the host's capacity when its roofs were measured.
    """
    from recstack.hardware.bench import summarize

    runs: dict[int, list[dict[str, Any]]] = {t: [] for t in threads}
    for _ in range(rounds):
        for t in threads:
            runs[t].append(probe_capacity(t))
    return {
        **probe_settings(),
        "method": "fp32 torch.mm n x n best of k, 2 n^3 FLOPs; copy_ of two fp32 arrays best of k, 2 x size bytes",
        "by_threads": {
            str(t): {k: summarize([r[k] for r in rs]) for k in ("gemm_flops", "stream_bytes_per_s")}
            for t, rs in runs.items()
        },
    }
