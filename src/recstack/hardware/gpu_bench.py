"""GPU equivalents of the CPU figures (only called when ``torch.cuda.is_available()``).

* **HBM bandwidth**: ``dst.copy_(src)`` on large device buffers, ``2 x size``
  bytes per copy (read + write).
* **GEMM**: ``torch.mm`` per dtype: fp32 (TF32 disabled), tf32 (fp32 tensors
  with ``allow_tf32``), bf16 and fp16; ``2 n^3`` FLOPs.
* **Gather**: ``torch.index_select`` on device tables from L2-sized to far
  beyond L2, uniform and Zipf indices (generated on the host, copied once),
  bytes = lookups x row bytes.

Timing uses CUDA events around ``inner`` back-to-back launches per repeat, so
launch gaps are amortised; each repeat is one rate in the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from recstack.hardware.bench import summarize
from recstack.hardware.cpu_bench import gather_indices
from recstack.hardware.plan import ROW_BYTES, ZIPF_EXPONENT, pow2_floor

Progress = Callable[[str], None]


def _event_rates(fn: Callable[[], Any], amount: float, repeats: int, inner: int) -> dict[str, Any]:
    """``amount`` per second for each of ``repeats`` event-timed groups of ``inner`` calls."""
    fn()
    torch.cuda.synchronize()
    out: list[float] = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
        out.append(amount * inner / max(ms * 1e-3, 1e-12))
    return summarize(out)


def hbm_bandwidth(nbytes: int, repeats: int) -> dict[str, Any]:
    n = max(1 << 20, nbytes // 4)
    src = torch.ones(n, device="cuda")
    dst = torch.empty_like(src)
    st = _event_rates(lambda: dst.copy_(src), 2.0 * n * 4, repeats, inner=5)
    return {"copy": st, "array_bytes": n * 4, "method": "dst.copy_(src) on device, 2 x size bytes per copy"}


def gemm_flops(n: int, repeats: int) -> dict[str, dict[str, Any]]:
    """FLOP/s of ``torch.mm`` for fp32, tf32, bf16 and fp16 at ``n x n``."""
    out: dict[str, dict[str, Any]] = {}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, dtype, tf32 in (
            ("fp32", torch.float32, False),
            ("tf32", torch.float32, True),
            ("bf16", torch.bfloat16, False),
            ("fp16", torch.float16, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            st = _event_rates(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), 2.0 * n**3, repeats, inner=3)
            st["n"] = n
            out[name] = st
            del a, b, c
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    return out


def gather_bandwidth(
    l2_bytes: int, max_bytes: int, lookups: int, repeats: int, progress: Progress
) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    tables = sorted({pow2_floor(l2_bytes // 2), pow2_floor(l2_bytes) * 4, pow2_floor(max_bytes)})
    buf = torch.ones(max(tables) // 4, device="cuda")
    cells: list[dict[str, Any]] = []
    for r in ROW_BYTES:
        out = torch.empty(lookups, r // 4, device="cuda")
        for tb in tables:
            rows = tb // r
            table = buf[: rows * (r // 4)].view(rows, r // 4)
            for dist in ("uniform", "zipf"):
                progress(f"gpu gather {dist} {r} B rows, {tb >> 20} MiB table")
                idx = gather_indices(dist, rows, lookups, rng).to("cuda")
                unique = int(torch.unique(idx).numel())
                st = _event_rates(
                    lambda table=table, idx=idx, out=out: torch.index_select(table, 0, idx, out=out),
                    float(lookups * r),
                    repeats,
                    inner=3,
                )
                cells.append(
                    {
                        "threads": 1,
                        "dist": dist,
                        "row_bytes": r,
                        "table_bytes": rows * r,
                        "rows": rows,
                        "lookups": lookups,
                        "unique_fraction": unique / lookups,
                        "bandwidth": st,
                    }
                )
                del idx
    return {
        "kernel": "torch.index_select on device",
        "bytes_counted": "lookups x row bytes",
        "zipf_exponent": ZIPF_EXPONENT,
        "row_bytes": list(ROW_BYTES),
        "table_bytes": tables,
        "threads": [1],
        "grid": cells,
    }


def measure_gpu(mode: str, progress: Progress) -> dict[str, Any]:
    """All GPU figures for device 0; sizes scale with ``mode`` (full, quick, tiny)."""
    props = torch.cuda.get_device_properties(0)
    total = int(getattr(props, "total_memory", 8 << 30))
    l2 = int(getattr(props, "L2_cache_size", 0) or (40 << 20))
    free, _ = torch.cuda.mem_get_info(0)
    scale = {"full": 1.0, "quick": 0.25, "tiny": 0.02}[mode]
    repeats = {"full": 15, "quick": 7, "tiny": 3}[mode]
    copy_bytes = min(int(free * 0.2), max(256 << 20, int((2 << 30) * scale)))
    progress("gpu hbm bandwidth")
    hbm = hbm_bandwidth(copy_bytes, repeats)
    progress("gpu gemm")
    n = {"full": 8192, "quick": 4096, "tiny": 1024}[mode]
    gemm = gemm_flops(n, repeats)
    gather_max = min(int(free * 0.25), max(64 << 20, int((4 << 30) * scale)))
    lookups = {"full": 1 << 21, "quick": 1 << 20, "tiny": 1 << 16}[mode]
    gather = gather_bandwidth(l2, gather_max, lookups, repeats, progress)
    torch.cuda.empty_cache()
    return {
        "name": torch.cuda.get_device_name(0),
        "total_memory_bytes": total,
        "l2_bytes": l2,
        "hbm_bandwidth": hbm,
        "gemm_flops": gemm,
        "gather_bandwidth": gather,
    }
