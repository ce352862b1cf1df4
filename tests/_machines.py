"""A synthetic machine file with exact figures, shared by the tests that classify against one."""

from __future__ import annotations

from typing import Any

GB = 1e9


def synthetic_machine() -> dict[str, Any]:
    """Exact figures: peak fp32 100 GFLOP/s at 1 thread and 180 at 2; stream 20 GB/s at 2 threads;
    uniform gather 40 GB/s on 1 MiB tables and 4 GB/s on 1 GiB tables (all row sizes), 2 threads."""

    def st(v: float) -> dict[str, Any]:
        return {"median": v, "min": v * 0.9, "max": v, "p10": v * 0.92, "p90": v, "repeats": 5}

    grid = []
    for t, scale in ((1, 0.5), (2, 1.0)):
        for dist, boost in (("uniform", 1.0), ("zipf", 1.5)):
            for r in (64, 128, 256, 512):
                for tb, bw in ((1 << 20, 40 * GB), (1 << 30, 4 * GB)):
                    grid.append(
                        {
                            "threads": t,
                            "dist": dist,
                            "row_bytes": r,
                            "table_bytes": tb,
                            "bandwidth": st(bw * scale * boost),
                        }
                    )
    return {
        "schema": "recstack.machine",
        "schema_version": 1,
        "host": "test-host",
        "cpu_model": "Test CPU",
        "cpu_hash": "0",
        "measured_at": "2024-01-01T00:00:00+00:00",
        "quick": False,
        "mode": "full",
        "caches": [
            {"level": 3, "type": "Unified", "size_bytes": 32 << 20, "instances": 1, "total_bytes": 32 << 20}
        ],
        "gemm_flops": {
            "fp32": {"native": True, "by_threads": {"1": st(100 * GB), "2": st(180 * GB)}},
            "bf16": {"native": False, "emulated": True, "by_threads": {"1": st(2 * GB), "2": st(3 * GB)}},
        },
        "stream_bandwidth": {
            "by_threads": {
                "1": {"copy": st(9 * GB), "triad": st(10 * GB)},
                "2": {"copy": st(18 * GB), "triad": st(20 * GB)},
            }
        },
        "gather_bandwidth": {"grid": grid},
        "latency_ns": {"dram": st(95.0), "by_size": []},
        "gpu": None,
    }
