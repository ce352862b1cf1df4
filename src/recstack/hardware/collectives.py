"""Collective benchmark: all-to-all, reduce-scatter and all-reduce time per message size, per world size (gloo on CPU).

``recstack machine --collectives [--world-sizes 2,4]`` runs it (it is not part
of the normal measurement, which stays as fast as it was) and stores the
figures in the machine file under ``collectives``::

    collectives:
      backend: gloo
      by_world_size:
        "2": {all_to_all: [{bytes, time_s, min_s, max_s, repeats, bandwidth_bytes_per_s}, ...],
              reduce_scatter: [...], all_reduce: [...]}

Each world size is one torchrun launch of ``python -m recstack.hardware.collectives``
(one thread per rank, each rank pinned to its own core when the ranks fit the
usable cores, as sharded profiles place theirs by default:
:mod:`recstack.hardware.placement`; ``by_world_size[W].pinned`` says whether
they were). ``bytes`` is the size of each rank's input tensor
(what ``all_to_all_single`` sends, its own part included; what
``reduce_scatter_tensor`` reduces, each rank keeping 1/W of it, as row-wise
sharding's output_dist does; what ``all_reduce`` reduces); per repeat the ranks meet at a barrier, then time one collective,
and the slowest rank's time counts (an all-reduce of the times with MAX);
``time_s`` is the median over repeats. The sizes span what the zoo models
send per step at their usual batch sizes (KJT ids, pooled embeddings, dense
gradients: kilobytes to megabytes).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from recstack.errors import ConfigError

SIZES = tuple(2 ** k for k in range(10, 25, 2))  # 1 KiB .. 16 MiB, x4
QUICK_SIZES = tuple(2 ** k for k in range(10, 23, 4))  # 1 KiB .. 4 MiB, x16
REPEATS = 15
WARMUP = 3


def measure_collectives(world_sizes: list[int], *, quick: bool = False, timeout_s: float = 600.0) -> dict[str, Any]:
    """The ``collectives`` section for ``world_sizes`` (each a torchrun launch on this host)."""
    from recstack.hardware.torchrun import torchrun

    sizes = list(QUICK_SIZES if quick else SIZES)
    by_ws: dict[str, Any] = {}
    for ws in world_sizes:
        spec = {"sizes": sizes, "repeats": 7 if quick else REPEATS, "placement": "pin"}
        by_ws[str(ws)] = torchrun("recstack.hardware.collectives", spec, ws,
                                  lambda out: json.loads((out / "collectives.json").read_text()),
                                  expect=["collectives.json"], timeout_s=timeout_s)
    return {"backend": "gloo", "threads_per_rank": 1, "by_world_size": by_ws, "placement": "pin",
            "method": "median over repeats of the slowest rank's time for one collective after a barrier"}


def _bench(sizes: list[int], repeats: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    ws = dist.get_world_size()
    out: dict[str, Any] = {"all_to_all": [], "reduce_scatter": [], "all_reduce": []}
    for nbytes in sizes:
        n = max(ws, (nbytes // 4) // ws * ws)  # float32 elements, divisible by the world size
        x = torch.ones(n)
        y = torch.empty(n)
        part = torch.empty(n // ws)
        ops = {"all_to_all": lambda x=x, y=y: dist.all_to_all_single(y, x),
               "reduce_scatter": lambda x=x, part=part: dist.reduce_scatter_tensor(part, x),
               "all_reduce": lambda x=x: dist.all_reduce(x)}
        for name, op in ops.items():
            times = []
            for i in range(WARMUP + repeats):
                dist.barrier()
                t0 = time.perf_counter()
                op()
                t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                if i >= WARMUP:
                    times.append(float(t.item()))
            med = statistics.median(times)
            out[name].append({"bytes": n * 4, "time_s": med, "min_s": min(times), "max_s": max(times),
                              "repeats": repeats, "bandwidth_bytes_per_s": n * 4 / med if med > 0 else None})
    return out


def main(argv: list[str]) -> int:
    import torch
    import torch.distributed as dist

    from recstack.hardware.placement import place_rank

    spec = json.loads(Path(argv[0]).read_text())
    torch.set_num_threads(1)
    ws = int(os.environ.get("WORLD_SIZE", "1"))
    placement = place_rank(spec.get("placement", "pin"), int(os.environ.get("LOCAL_RANK", "0")),
                           int(os.environ.get("LOCAL_WORLD_SIZE", ws)), 1)
    dist.init_process_group("gloo")
    try:
        result = {**_bench(spec["sizes"], spec["repeats"]), "pinned": placement["pinned"]}
        if dist.get_rank() == 0:
            (Path(spec["out_dir"]) / "collectives.json").write_text(json.dumps(result))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from recstack.hardware.torchrun import exit_rank

    exit_rank(main(sys.argv[1:]))  # not sys.exit: gloo can abort a finished rank at interpreter teardown


def parse_world_sizes(text: str) -> list[int]:
    """``--world-sizes 2,4`` -> [2, 4] (each within 2..64)."""
    try:
        sizes = sorted({int(w) for w in text.split(",") if w.strip()})
    except ValueError:
        raise ConfigError(f"must be world sizes like 2,4 (got {text!r})", field="--world-sizes") from None
    if not sizes or min(sizes) < 2 or max(sizes) > 64:
        raise ConfigError(f"must be world sizes within 2..64 (got {text!r})", field="--world-sizes")
    return sizes


def with_collectives(machine: dict[str, Any], sizes: list[int], quick: bool, path: Any) -> dict[str, Any]:
    """Add the all-to-all / all-reduce benchmark (``machine --collectives``) and keep it in ``path``
    (the cache, or where a contended measurement was kept)."""
    from recstack.hardware.machine import save_machine

    sys.stderr.write(f"  measuring: all-to-all, reduce-scatter and all-reduce (gloo) at world sizes {sizes}\n")
    machine = {**machine, "collectives": measure_collectives(sizes, quick=quick)}
    save_machine(machine, path)
    return machine
