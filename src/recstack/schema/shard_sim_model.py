"""The ``recstack shard-sim`` prediction (``--json``: its ``prediction``): per-rank time for K ranks."""

from __future__ import annotations

from pydantic import Field

from recstack.schema.documents import Doc, NonNeg


class SimRank(Doc):
    """One rank's predicted figures (``per_rank[]``); times in seconds per step."""

    rank: int = Field(ge=0)
    shards: int = Field(ge=0, description="table shards placed on the rank")
    embedding_bytes: NonNeg = Field(description="embedding bytes the rank gathers per step")
    embedding_s: NonNeg = Field(description="cost_per_byte_s x embedding_bytes")
    dense_s: NonNeg = Field(description="the profile's dense time (every rank runs the whole dense part)")
    compute_s: NonNeg = Field(description="embedding_s + dense_s")
    transfer_s: NonNeg = Field(description="the rank's collectives' predicted transfer time")
    phase_bytes: dict[str, NonNeg] = Field(description="bytes per communication phase")
    wait_s: NonNeg = Field(description="waiting for the slowest rank's compute")
    communication_s: NonNeg = Field(description="what the rank's communication stage would hold")
    time_s: NonNeg = Field(description="the step: slowest compute + slowest transfer + fixed")


class ShardSimPrediction(Doc):
    """Per-rank predicted times and the imbalance for ``ranks`` ranks under ``sharding``."""

    ranks: int = Field(ge=1)
    sharding: str = Field(description="table_wise, column_wise, row_wise or data_parallel")
    step_s: NonNeg = Field(description="predicted step time")
    communication_fixed_s: NonNeg = Field(description="the communication's fixed part (calibrated)")
    imbalance_compute: NonNeg | None = Field(description="slowest rank's compute over the mean (null: no compute)")
    max_wait_s: NonNeg
    comm_model: str = Field(description="where the transfer times come from")
    per_rank: list[SimRank]
