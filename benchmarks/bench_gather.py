"""Is the machine's gather roof a real roof? recstack's own kernel vs the operators under study.

On one fp32 table far beyond the last-level cache and one set of uniform
random indices (bags of ``--pooling`` rows), times side by side, in
interleaved rounds:

* ``native``: recstack's pooled gather kernel (``gather.c``), the kernel the
  machine measurement uses for ``gather_bandwidth``;
* ``embedding_bag``: ``torch.nn.functional.embedding_bag(mode="sum")``;
* ``tbe``: FBGEMM's inference TBE (``IntNBitTableBatchedEmbeddingBagsCodegen``,
  fp32 rows), when fbgemm_gpu is installed;
* ``index_select``: ``torch.index_select`` (the old roof kernel, unpooled).

Bandwidth = lookups x row bytes / time for every kernel (reads of indices and
the pooled output's writes not counted). Prints max and median GB/s per
kernel and row size, and each operator's best repeat as a ratio of the native
kernel's best repeat in the same run: a ratio above 1 means the operator beats
the roof kernel and profiles of it would show more than 100% of the roof.

    python benchmarks/bench_gather.py [--table-mib 512] [--threads 2] [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np
import torch

from recstack.hardware import gather_kernel


def _tbe(table: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
    try:
        from fbgemm_gpu.split_embedding_configs import SparseType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
        from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
            IntNBitTableBatchedEmbeddingBagsCodegen,
        )
    except Exception:  # noqa: BLE001 - fbgemm is optional
        return None
    rows, dim = table.shape
    tbe = IntNBitTableBatchedEmbeddingBagsCodegen(
        [("t", rows, dim, SparseType.FP32, EmbeddingLocation.HOST)],
        device="cpu",
        pooling_mode=PoolingMode.SUM,
        output_dtype=SparseType.FP32,
    )
    tbe.initialize_weights()
    tbe.split_embedding_weights()[0][0].view(torch.float32).view(rows, dim).copy_(table)
    return lambda idx, off: tbe(idx, off)


def bench_row(row_bytes: int, args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    dim = row_bytes // 4
    rows = (args.table_mib << 20) // row_bytes
    table = torch.randn(rows, dim)
    lookups = (args.read_mib << 20) // row_bytes // args.pooling * args.pooling
    idx = torch.from_numpy(rng.integers(0, rows, lookups, dtype=np.int64))
    offsets = torch.arange(0, lookups + 1, args.pooling, dtype=torch.int64)
    out = torch.empty(lookups // args.pooling, dim)
    sel = torch.empty(min(lookups, (1 << 20) // row_bytes * 4), dim)
    chunks = list(idx.split(sel.shape[0]))
    idx32, off32 = idx.to(torch.int32), offsets.to(torch.int32)
    cases: dict[str, Callable[[], object]] = {
        "native": lambda: gather_kernel.gather_sum(table, idx, offsets, out, threads=args.threads),
        "embedding_bag": lambda: torch.nn.functional.embedding_bag(idx, table, offsets[:-1], mode="sum"),
        "index_select": lambda: [torch.index_select(table, 0, c, out=sel[: c.numel()]) for c in chunks],
    }
    tbe = _tbe(table)
    if tbe is not None:
        ref = torch.nn.functional.embedding_bag(idx[: 64 * args.pooling], table, offsets[:64], mode="sum")
        got = tbe(idx32[: 64 * args.pooling], off32[:65])
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
        cases["tbe"] = lambda: tbe(idx32, off32)
    gather_kernel.gather_sum(table, idx, offsets, out, threads=args.threads)
    torch.testing.assert_close(out, torch.nn.functional.embedding_bag(idx, table, offsets[:-1], mode="sum"))
    gbs: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            gbs[name].append(lookups * row_bytes / (time.perf_counter() - t0) / 1e9)
    best = max(gbs["native"])
    lines = []
    for name, v in gbs.items():
        lines.append(
            f"{row_bytes:5d} B  {name:14s} max {max(v):6.2f} GB/s  median {float(np.median(v)):6.2f} GB/s"
            f"  max / native max {max(v) / best:5.2f}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table-mib", type=int, default=512, help="table size per row size (default 512 MiB)")
    ap.add_argument("--read-mib", type=int, default=256, help="row bytes read per timed call (default 256 MiB)")
    ap.add_argument("--pooling", type=int, default=32)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", default="64,128,256,512", help="row sizes in bytes, comma-separated")
    args = ap.parse_args(argv)
    try:
        _lib, info = gather_kernel.load()
    except gather_kernel.KernelUnavailable as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    torch.set_num_threads(args.threads)
    print(
        f"# table {args.table_mib} MiB, {args.read_mib} MiB read per call, pooling {args.pooling}, "
        f"{args.threads} thread(s), {args.rounds} interleaved rounds; native kernel: {info['compiler']} {info['flags']}"
    )
    rng = np.random.default_rng(0)
    for r in (int(x) for x in args.rows.split(",")):
        for line in bench_row(r, args, rng):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
