"""The profiling ranks of a multi-rank run, launched by :func:`recstack.hardware.torchrun.torchrun`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recstack.hardware.torchrun import DEFAULT_TIMEOUT_S, torchrun
from recstack.schema.documents import check
from recstack.schema.launch_model import RankLaunchSpec

WORKER = "recstack.distributed.worker"


def run_ranks(config: dict[str, Any], nproc: int, *, timeout_s: float = DEFAULT_TIMEOUT_S,
              workdir: Path | None = None, trace: str | None = None,
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run ``nproc`` profiling ranks on ``config`` (a RunConfig dict); their profiles and rank infos, by rank."""
    def read(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        profiles = [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]
        return profiles, [json.loads((out / f"rank{r}.info.json").read_text()) for r in range(nproc)]

    spec = check(RankLaunchSpec, {"config": config, "trace": trace})
    return torchrun(WORKER, spec, nproc, read,
                    expect=[f"rank{r}.json" for r in range(nproc)], timeout_s=timeout_s, workdir=workdir)
