"""The ``recstack zoo list --json`` rows: one per model, from its config (and its skeleton's dense figures)."""

from __future__ import annotations

from pydantic import Field

from recstack.schema.documents import Doc, NonNeg


class ZooRow(Doc):
    """One zoo model's sizes (``zoo list``; ``recstack.zoo.build.summary``)."""

    name: str = Field(description="zoo id or the YAML's name")
    arch: str = Field(description="its architecture (a record of recstack.zoo.archs)")
    description: str
    tables: int = Field(ge=1, description="embedding tables")
    rows: int = Field(ge=1, description="table rows in all, at this scale")
    embedding_dim: int = Field(ge=1)
    table_bytes: int = Field(ge=0, description="fp32 bytes of every table")
    lookups_per_sample: NonNeg = Field(description="IDs looked up per sample (the config's pooling)")
    dense_flops_per_sample: NonNeg = Field(description="2 x multiply-adds of every non-embedding layer")
    dense_params: int = Field(ge=0)
    params: int = Field(ge=0, description="table rows x dims + dense_params")
    dense_features: int = Field(ge=0)
    scale: float = Field(gt=0, description="the config's scale times --scale")
