"""Where the ranks of one host run: each on its own cores, or wherever the scheduler puts them.

Used by the sharded profile's ranks (:mod:`recstack.distributed.worker`) and
the collective benchmark's (:mod:`recstack.hardware.collectives`), so that a
communication stage and the benchmark it is compared with ran the same way.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any


def place_rank(mode: str, local_rank: int, local_ranks: int, threads: int) -> dict[str, Any]:
    """Pin this rank to its own ``threads`` cores (``mode`` pin, when every rank of the host fits the usable
    cores) and keep torch to one inter-op thread; called before the process group starts, so gloo's threads
    inherit the mask. Returns what was done (recorded per rank)."""
    import torch

    from recstack.config.run import usable_cores

    can_pin = hasattr(os, "sched_setaffinity")
    usable = sorted(os.sched_getaffinity(0)) if can_pin else list(range(usable_cores()))
    pinned = can_pin and mode == "pin" and local_ranks * threads <= len(usable)
    if pinned:
        os.sched_setaffinity(0, set(usable[local_rank * threads:(local_rank + 1) * threads]))
    with contextlib.suppress(RuntimeError):  # only settable before torch's first inter-op work
        torch.set_num_interop_threads(1)
    reason = ("its own cores" if pinned else "rank_placement os: the scheduler places it" if mode != "pin" else
              "no sched_setaffinity on this platform: unpinned" if not can_pin else
              f"{local_ranks} ranks x {threads} threads > {len(usable)} usable cores: oversubscribed, unpinned")
    cpus = sorted(os.sched_getaffinity(0)) if can_pin else usable
    return {"mode": mode, "pinned": pinned, "cpus": cpus, "usable_cpus": usable,
            "interop_threads": torch.get_num_interop_threads(), "reason": reason}
