"""CPU micro-benchmarks: GEMM FLOP/s, streaming and random-gather bandwidth, memory latency.

Every function returns plain data with a spread (:func:`recstack.hardware.bench.summarize`)
and restores the torch thread count it found.

* **GEMM**: ``torch.mm(a, b, out=c)`` on square ``n x n`` matrices, ``2 n^3``
  FLOPs per call; at several sizes, the size with the best repeat is kept.
* **Stream**: *copy* ``b.copy_(a)`` counts ``2 * n * 4`` bytes (read a, write b);
  *triad* ``torch.add(b, c, alpha=s, out=a)`` (one fused pass, ``a = b + s c``)
  counts ``3 * n * 4``. Write-allocate reads of the destination are not
  counted (the STREAM convention), so these are lower than the bus traffic.
* **Gather**: recstack's own pooled gather kernel (``gather.c``, built at
  first use with the host's C compiler, see :mod:`recstack.hardware.gather_kernel`),
  *not* ``aten::embedding_bag`` or FBGEMM (the operators under study): bags
  of :data:`GATHER_POOLING` random rows of a 2-D fp32 table whose row is
  64..512 bytes are summed, with software read-ahead of
  :data:`~recstack.hardware.gather_kernel.DEFAULT_DISTANCE` rows, threads
  splitting the bags. Bytes = lookups x row bytes (the reads of the index
  array and the writes of the pooled output, 1/pooling of that, are not
  counted). All lookups of a cell go in one call. Indices are uniform or
  Zipf(1.05); Zipf ranks are scattered over the table by an odd
  multiplicative hash (a bijection on power-of-two row counts), so hot rows
  are not adjacent. *Tables in turn* cells (``tables_in_turn`` T > 1,
  uniform only) split the largest table's buffer into T tables and make one
  call of ``lookups_per_call`` lookups per table in turn, as an embedding
  stage does: the other tables' page-table entries and lines are evicted
  between calls, which a single table of the same size does not show.
  Where no C compiler works, the fallback is
  ``torch.index_select(table, 0, idx, out=buf)`` in chunks whose output
  (>= 2048 rows, about 1 MiB) stays in cache; the machine file then says
  so and why (that kernel reaches well under the embedding operators'
  bandwidth on large tables, so the roof is then too low).
* **Latency**: one random cyclic permutation over cache lines (one 8-byte
  entry per 64-byte line) walked as a dependent chain ``p = next[p]`` in
  native code (``recstack_chase`` in ``gather.c``, built and loaded like the
  gather kernel), ns per load = thread CPU time of the walk / loads. Chains
  of half the L1, L2 and LLC and one of at least 8x the LLC (DRAM); rounds
  interleaved over the chains. TLB misses are included (as they are for a
  real gather), and transparent huge pages change them. Where no compiler
  works, the walk runs in a Python loop minus the interpreter's cost per step
  (measured on an L1-resident chain): the result then carries
  ``method: "python-fallback"`` and ``trusted: false`` (the interpreter's
  cost, 20-60 ns, swamps the difference; the figure is shown, never used).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from recstack.hardware import gather_kernel
from recstack.hardware.bench import StopRule, interleaved, rates, summarize
from recstack.hardware.plan import ZIPF_EXPONENT, Plan

LINE_BYTES = 64
GATHER_CHUNK_MIN_ROWS = 2048
GATHER_CHUNK_BYTES = 1 << 20
GATHER_POOLING = 32  # rows summed per bag by the native kernel
SCATTER_MULT = 0x9E3779B97F4A7C15  # odd: x -> x * M mod 2^k is a bijection
Progress = Callable[[str], None]


def _quiet(_msg: str) -> None:
    return None


def _at(threads: int, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run at ``threads`` torch threads (set per call so that interleaved cases can differ)."""

    def call() -> Any:
        torch.set_num_threads(threads)
        return fn()

    return call


def gemm_flops(
    dtype: torch.dtype,
    sizes: list[int],
    threads: list[int],
    stop: StopRule,
    info: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """FLOP/s of ``torch.mm`` per thread count (key: ``str(threads)``), the best size kept (``n``).

    Rounds follow ``stop`` (:class:`~recstack.hardware.bench.StopRule`, its
    warm-up included); ``info`` receives the rounds taken and why they stopped."""
    old = torch.get_num_threads()
    gen = torch.Generator().manual_seed(0)
    cases: dict[tuple[int, int], Callable[[], Any]] = {}
    for n in sizes:
        a, b = (torch.randn(n, n, generator=gen).to(dtype) for _ in range(2))
        c = torch.empty(n, n, dtype=dtype)
        for t in threads:
            cases[(n, t)] = _at(t, lambda a=a, b=b, c=c: torch.mm(a, b, out=c))
    try:
        secs = interleaved(cases, stop=stop, info=info)
    finally:
        torch.set_num_threads(old)
    out: dict[str, dict[str, Any]] = {}
    for (n, t), s in secs.items():
        st = summarize(rates(2.0 * n**3, s))
        st["n"] = n
        if str(t) not in out or st["max"] > out[str(t)]["max"]:
            out[str(t)] = st
    return {str(t): out[str(t)] for t in threads}


def stream_bandwidth(nbytes: int, threads: list[int], stop: StopRule) -> dict[str, Any]:
    """Copy and triad bytes/s per thread count on three fp32 arrays of ``nbytes`` each (rounds by ``stop``)."""
    n = max(1024, nbytes // 4)
    a = torch.empty(n).fill_(1.0)
    b = torch.empty(n).fill_(2.0)
    c = torch.empty(n).fill_(0.5)
    old = torch.get_num_threads()
    cases: dict[tuple[int, str], Callable[[], Any]] = {}
    for t in threads:
        cases[(t, "copy")] = _at(t, lambda: b.copy_(a))
        cases[(t, "triad")] = _at(t, lambda: torch.add(b, c, alpha=3.0, out=a))
    info: dict[str, Any] = {}
    try:
        secs = interleaved(cases, stop=stop, info=info)
    finally:
        torch.set_num_threads(old)
    moved = {"copy": 2.0 * n * 4, "triad": 3.0 * n * 4}
    by_threads = {
        str(t): {kind: summarize(rates(moved[kind], secs[(t, kind)])) for kind in ("copy", "triad")}
        for t in threads
    }
    return {
        "array_bytes": n * 4,
        "by_threads": by_threads,
        "method": "copy: b.copy_(a), 2 x 4n bytes; triad: torch.add(b, c, alpha=3, out=a), 3 x 4n bytes; "
        "fp32 arrays; write-allocate traffic not counted; repeats interleaved across thread counts",
        "stopping": info,
    }


def zipf_ranks(rows: int, count: int, rng: np.random.Generator, s: float = ZIPF_EXPONENT) -> np.ndarray:
    """``count`` Zipf(s) ranks in ``[0, rows)`` (rank 0 hottest) by the continuous inverse CDF."""
    u = rng.random(count)
    if abs(s - 1.0) < 1e-9:
        k = np.exp(u * np.log(rows + 1.0))
    else:
        k = ((rows + 1.0) ** (1.0 - s) - 1.0) * u + 1.0
        k = k ** (1.0 / (1.0 - s))
    return np.clip(np.floor(k).astype(np.int64) - 1, 0, rows - 1)


def scatter_rows(ranks: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """Map popularity ranks to table rows so that hot rows are spread over the whole table."""
    if rows & (rows - 1) == 0:
        mixed = (ranks.astype(np.uint64) * np.uint64(SCATTER_MULT)) & np.uint64(rows - 1)
        return mixed.astype(np.int64)
    return rng.permutation(rows)[ranks]


def gather_indices(dist: str, rows: int, count: int, rng: np.random.Generator) -> torch.Tensor:
    if dist == "uniform":
        idx = rng.integers(0, rows, count, dtype=np.int64)
    elif dist == "zipf":
        idx = scatter_rows(zipf_ranks(rows, count, rng), rows, rng)
    else:
        raise ValueError(f"dist must be uniform or zipf (got {dist!r})")
    return torch.from_numpy(idx)


def _native_gather_case(
    table: torch.Tensor, idx: torch.Tensor, threads: int
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(timed call, warm-up call) of the native pooled kernel over all of ``idx``."""
    bags = idx.numel() // GATHER_POOLING
    offsets = torch.arange(0, bags * GATHER_POOLING + 1, GATHER_POOLING, dtype=torch.int64)
    out = torch.empty(bags, table.shape[1], dtype=torch.float32)
    head = max(1, min(bags, (2 * GATHER_CHUNK_MIN_ROWS) // GATHER_POOLING))

    def run() -> None:
        gather_kernel.gather_sum(table, idx, offsets, out, threads=threads)

    def warm() -> None:
        gather_kernel.gather_sum(table, idx, offsets[: head + 1], out[:head], threads=threads)

    return run, warm


def _in_turn(runs: list[tuple[Callable[[], Any], Callable[[], Any]]]) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(timed call, warm-up call) over per-table cases: every table's call in turn; warm the first."""

    def run() -> None:
        for r, _w in runs:
            r()

    return run, runs[0][1]


def _fallback_gather_case(
    table: torch.Tensor, idx: torch.Tensor, threads: int, chunk: int
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(timed call, warm-up call) of chunked ``torch.index_select`` (no C compiler here)."""
    out = torch.empty(chunk, table.shape[1], dtype=torch.float32)
    chunks = list(idx.to(torch.int32).split(chunk))

    def run() -> None:
        for ch in chunks:
            torch.index_select(table, 0, ch, out=out[: ch.numel()])

    def warm() -> None:
        for ch in chunks[:2]:
            torch.index_select(table, 0, ch, out=out[: ch.numel()])

    return _at(threads, run), _at(threads, warm)


def gather_bandwidth(plan: Plan, progress: Progress = _quiet) -> dict[str, Any]:
    """The random-gather grid: bytes/s per (threads, distribution, row bytes, table bytes).

    All cells are set up first, then timed in interleaved rounds; before each
    timed pass a cell's first few thousand lookups run untimed so that a
    cache-sized table is warm.
    """
    fallback: str | None = None
    try:
        _lib, build_info = gather_kernel.load()
    except gather_kernel.KernelUnavailable as exc:
        fallback, build_info = str(exc), {}
        progress(f"gather: native kernel unavailable ({exc}); falling back to torch.index_select")
    rng = np.random.default_rng(0)
    biggest = max(plan.gather_table_bytes)
    buf = torch.empty(biggest // 4, dtype=torch.float32).fill_(1.0)
    old = torch.get_num_threads()
    Key = tuple[int, str, int, int, int]  # threads, dist, row bytes, table bytes, tables in turn
    cases: dict[Key, Callable[[], Any]] = {}
    warms: dict[Key, Callable[[], Any]] = {}
    meta: dict[Key, dict[str, Any]] = {}
    for r in plan.gather_row_bytes:
        chunk = max(GATHER_CHUNK_MIN_ROWS, GATHER_CHUNK_BYTES // r)
        lookups = max(chunk, (plan.gather_lookups // chunk) * chunk)
        for tb in plan.gather_table_bytes:
            rows = tb // r
            if rows < 1:
                continue
            table = buf[: rows * (r // 4)].view(rows, r // 4)
            for dist in ("uniform", "zipf"):
                progress(f"gather setup {dist} {r} B rows, {tb >> 10} KiB table")
                idx = gather_indices(dist, rows, lookups, rng)
                unique = int(torch.unique(idx).numel())
                for t in plan.gather_threads:
                    key = (t, dist, r, rows * r, 1)
                    if fallback is None:
                        cases[key], warms[key] = _native_gather_case(table, idx, t)
                    else:
                        cases[key], warms[key] = _fallback_gather_case(table, idx, t, chunk)
                    meta[key] = {
                        "rows": rows,
                        "lookups": lookups,
                        "unique_fraction": unique / lookups,
                        "lookups_per_call": lookups,
                    }
        # Tables in turn: the largest buffer split into T tables, one call of C lookups per table.
        per_call = max(GATHER_POOLING, plan.gather_call_lookups // GATHER_POOLING * GATHER_POOLING)
        for n_tables in plan.gather_tables_in_turn:
            rows = biggest // n_tables // r
            if rows < 1 or n_tables < 2:
                continue
            progress(f"gather setup {n_tables} tables in turn, {r} B rows, {rows * r >> 10} KiB each")
            width = r // 4
            tables = [buf[i * rows * width : (i + 1) * rows * width].view(rows, width) for i in range(n_tables)]
            idxs = [gather_indices("uniform", rows, per_call, rng) for _ in range(n_tables)]
            unique = sum(int(torch.unique(i).numel()) for i in idxs)
            for t in plan.gather_threads:
                key = (t, "uniform", r, rows * r, n_tables)
                cases[key], warms[key] = _in_turn(
                    [
                        _native_gather_case(tb_, ix, t) if fallback is None else _fallback_gather_case(tb_, ix, t, chunk)
                        for tb_, ix in zip(tables, idxs, strict=True)
                    ]
                )
                meta[key] = {
                    "rows": rows,
                    "lookups": per_call * n_tables,
                    "unique_fraction": unique / (per_call * n_tables),
                    "lookups_per_call": per_call,
                }
    info: dict[str, Any] = {}
    stop = plan.gather_stop
    # No timed warm-up per cell (a cell's call is long); each timed call is preceded by a short warm call.
    stop = StopRule(stop.block, stop.margin, stop.min_rounds, stop.max_rounds, stop.budget_s, 0.0)
    try:
        secs = interleaved(
            cases,
            warmup=0,
            before=warms,
            stop=stop,
            info=info,
            progress=lambda i: progress(f"gather round {i + 1} ({len(cases)} cells)"),
        )
    finally:
        torch.set_num_threads(old)
    cells = []
    for key in sorted(cases):
        t, dist, r, tb, n_tables = key
        m = meta[key]
        cells.append(
            {
                "threads": t,
                "dist": dist,
                "row_bytes": r,
                "table_bytes": tb,
                "tables_in_turn": n_tables,
                "footprint_bytes": tb * n_tables,
                "rows": m["rows"],
                "lookups": m["lookups"],
                "lookups_per_call": m["lookups_per_call"],
                "unique_fraction": m["unique_fraction"],
                "bandwidth": summarize(rates(float(m["lookups"] * r), secs[key])),
            }
        )
    if fallback is None:
        kernel = (
            f"recstack native pooled gather (gather.c): sum of {GATHER_POOLING} random rows per bag, "
            f"read-ahead {gather_kernel.DEFAULT_DISTANCE} rows, threads split the bags"
        )
    else:
        kernel = "torch.index_select(table, 0, idx, out=buf) on a 2-D fp32 table (fallback)"
    return {
        "kernel": kernel,
        "native": fallback is None,
        "fallback_reason": fallback,
        "build": build_info,
        "pooling": GATHER_POOLING if fallback is None else 1,
        "read_ahead_rows": gather_kernel.DEFAULT_DISTANCE if fallback is None else 0,
        "bytes_counted": "lookups x row bytes",
        "zipf_exponent": ZIPF_EXPONENT,
        "row_bytes": list(plan.gather_row_bytes),
        "table_bytes": sorted({c["table_bytes"] for c in cells if c["tables_in_turn"] == 1}),
        "tables_in_turn": sorted({c["tables_in_turn"] for c in cells}),
        "threads": list(plan.gather_threads),
        "chunk_output_bytes": None if fallback is None else GATHER_CHUNK_BYTES,
        "stopping": info,
        "grid": cells,
    }


def cyclic_chain(nbytes: int, rng: np.random.Generator) -> np.ndarray:
    """An int64 array holding one random cycle over its cache lines (entry ``8 * line`` -> next line)."""
    per_line = LINE_BYTES // 8
    lines = max(2, nbytes // LINE_BYTES)
    order = rng.permutation(lines).astype(np.int64) * per_line
    arr = np.zeros(lines * per_line, dtype=np.int64)
    arr[order[:-1]] = order[1:]
    arr[order[-1]] = order[0]
    return arr


def _walk(mv: memoryview, steps: int) -> int:
    p = 0
    for _ in range(steps // 8):
        p = mv[mv[mv[mv[mv[mv[mv[mv[p]]]]]]]]
    return p


def _by_size(points: list[tuple[str, np.ndarray]], ns: list[list[float]]) -> list[dict[str, Any]]:
    return [
        {"level": level, "bytes": int(arr.nbytes), "ns": summarize(d)}
        for (level, arr), d in zip(points, ns, strict=True)
    ]


def memory_latency(
    plan: Plan, progress: Progress = _quiet, clock: Callable[[], int] = time.thread_time_ns
) -> dict[str, Any]:
    """ns per dependent load at each level's chain (native walk; see the module docstring).

    Rounds are interleaved over the chains; each walk continues where the
    previous one of its chain stopped. Without a working compiler, the
    Python fallback (:func:`python_latency`) with ``trusted: false``.
    """
    try:
        _lib, build_info = gather_kernel.load()
    except gather_kernel.KernelUnavailable as exc:
        progress(f"latency: native kernel unavailable ({exc}); Python fallback (not trusted)")
        return python_latency(plan, progress, reason=str(exc))
    rng = np.random.default_rng(1)
    steps = max(8, plan.latency_steps)
    points: list[tuple[str, np.ndarray]] = []
    pos: list[int] = []
    for level, size in plan.latency_points:
        progress(f"latency setup {level} {size >> 10} KiB chain")
        points.append((level, cyclic_chain(size, rng)))
        pos.append(gather_kernel.chase(points[-1][1], 0, min(steps, points[-1][1].size)))  # warm caches, TLB
    ns: list[list[float]] = [[] for _ in points]
    for r in range(plan.latency_repeats):
        progress(f"latency round {r + 1}/{plan.latency_repeats}")
        for i, (_level, arr) in enumerate(points):
            t0 = clock()
            pos[i] = gather_kernel.chase(arr, pos[i], steps)
            ns[i].append(max(clock() - t0, 1) / steps)
    by_size = _by_size(points, ns)
    return {
        "method": "native",
        "trusted": True,
        "description": "dependent loads p = next[p] over a random cyclic permutation of cache lines, in C "
        "(recstack_chase, unrolled by 8); thread CPU time per load; rounds interleaved over chains",
        "build": build_info,
        "by_size": by_size,
        "dram": by_size[-1]["ns"],
        "dram_bytes": by_size[-1]["bytes"],
        "steps": steps,
    }


def python_latency(plan: Plan, progress: Progress = _quiet, reason: str = "") -> dict[str, Any]:
    """The fallback: the chain walked by a Python loop minus the interpreter's cost per step.

    Not trusted (``trusted: false``): the interpreter's 20-60 ns per step is
    as large as the figure, so the difference is mostly noise; shown, never
    used for classification.
    """
    rng = np.random.default_rng(1)
    base = memoryview(cyclic_chain(plan.latency_base_bytes, rng))
    steps = max(8, min(plan.latency_steps, 40_000) // 8 * 8)
    clock = time.thread_time_ns
    points = [(level, cyclic_chain(size, rng)) for level, size in plan.latency_points]
    views = [memoryview(arr) for _level, arr in points]
    for mv in views:
        _walk(mv, steps)
    diffs: list[list[float]] = [[] for _ in points]
    overhead: list[float] = []
    for r in range(plan.latency_repeats):
        progress(f"latency round {r + 1}/{plan.latency_repeats} (Python fallback)")
        for i, mv in enumerate(views):
            t0 = clock()
            _walk(base, steps)
            t1 = clock()
            _walk(mv, steps)
            t2 = clock()
            overhead.append((t1 - t0) / steps)
            # floored at 0.01 ns: a figure must stay positive even when the noise cancels it
            diffs[i].append(max(0.01, ((t2 - t1) - (t1 - t0)) / steps))
    by_size = _by_size(points, diffs)
    return {
        "method": "python-fallback",
        "trusted": False,
        "fallback_reason": reason,
        "description": "Python loop over a memoryview minus the per-step cost of an L1-resident chain "
        "(not trusted: the interpreter's cost swamps the load latency)",
        "by_size": by_size,
        "dram": by_size[-1]["ns"],
        "dram_bytes": by_size[-1]["bytes"],
        "overhead_ns": summarize(overhead),
        "steps": steps,
    }
