"""The spec a multi-rank profile hands its ranks (``spec.json``, read by ``recstack.distributed.worker``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from recstack.schema.documents import Doc


class RankLaunchSpec(Doc):
    """What every rank of ``recstack profile --nproc N`` runs: the RunConfig and where to write."""

    config: dict[str, Any] = Field(description="the run's RunConfig (as a dict)")
    trace: str | None = Field(None, description="--trace: the folder each rank writes its trace to")
    out_dir: str | None = Field(None, description="the ranks' output folder (added by the launcher, torchrun)")
    collective_timeout_s: float | None = Field(None, gt=0, description="gloo's collective timeout (default 600)")
