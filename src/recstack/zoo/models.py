"""The zoo's model architectures.

Every model takes a :class:`~recstack.workload.batch.RawBatch` and returns
logits ``[B, outputs]``. Its ``forward`` only calls submodules, whose names
follow TorchRec's DLRM where they can (``sparse_arch``, ``dense_arch``,
``inter_arch``, ``over_arch``), so the profiler's stage rules find every stage:

* ``feature_processing``: raw IDs -> backend inputs;
* ``sparse_arch``: the embedding backend;
* ``dense_arch``: bottom MLP / dense towers / wide part;
* ``inter_arch``: interaction (concat, dot, GMF);
* sequence modules (``attention``, ``interest_extractor``, ``interest_evolution``);
* ``over_arch`` / ``task_towers``: top MLP and task heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from recstack.errors import ConfigError
from recstack.workload.batch import FeatureRequest, RawBatch
from recstack.zoo.config import ModelConfig, Table
from recstack.zoo.embedding import EmbeddingBackend, FeatureProcessing
from recstack.zoo.layers import (
    GMF,
    MLP,
    ConcatHead,
    ConcatInteraction,
    DotInteraction,
    InterestAttention,
    InterestEvolution,
    InterestExtractor,
    LocalActivationUnit,
    PairMLP,
    TaskTowers,
    WideLinear,
    rnn_macs,
)


def _expect(field: str, got: int, want: int, why: str) -> None:
    if got != want:
        raise ConfigError(f"input width is {got} but must be {want} ({why})", field=field)


class RecModel(nn.Module):
    """Base class: feature processing + embedding backend; subclasses add the dense part."""

    num_outputs = 1

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__()
        self.cfg = cfg
        self.tables: list[Table] = cfg.resolved_tables()
        self.feature_processing = FeatureProcessing(backend)
        self.sparse_arch = backend
        self.dense_dtype = torch.float32

    # -- inputs -----------------------------------------------------------------
    def features(self) -> list[FeatureRequest]:
        """The categorical features this model reads (one per distinct ``feature`` name)."""
        feats: dict[str, FeatureRequest] = {}
        for t in self.tables:
            prev = feats.get(t.feature)
            if prev is not None and prev.side != t.side:
                raise ConfigError(
                    f"tables reading feature {t.feature!r} disagree on its side ({prev.side}, {t.side}); "
                    "give them the same side",
                    field="tables",
                )
            id_range = max(t.rows, prev.id_range if prev else 0)
            feats[t.feature] = FeatureRequest(
                name=t.feature,
                id_range=id_range,
                pooling=t.pooling,
                kind=t.kind,
                max_length=t.max_length,
                fixed_length=t.fixed_length or (t.kind == "pooled" and t.pooling == 1),
                side=t.side,
            )
        return list(feats.values())

    @property
    def num_dense(self) -> int:
        return self.cfg.dense_features

    @property
    def num_tasks(self) -> int:
        return 1

    # -- precision --------------------------------------------------------------
    def set_dense_dtype(self, dtype: torch.dtype) -> None:
        """Run every non-embedding layer in ``dtype`` (embeddings stay in their table dtype)."""
        self.dense_dtype = dtype
        for name, mod in self.named_children():
            if name not in ("sparse_arch", "feature_processing"):
                mod.to(dtype)

    # -- training -----------------------------------------------------------------
    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """BCE with logits on every output (one per task); 2-class heads use softmax cross-entropy."""
        logits = logits.float()
        if self.num_outputs == 2:
            return F.cross_entropy(logits, labels[:, 0].long())
        return F.binary_cross_entropy_with_logits(logits, labels[:, : logits.shape[1]])

    # -- analytic size ----------------------------------------------------------
    def dense_macs_per_sample(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def lookups_per_sample(self) -> float:
        return float(sum(t.pooling for t in self.tables))

    def forward(self, batch: RawBatch) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class DLRM(RecModel):
    """DLRM (RMC1-3): bottom MLP over dense features, concat or dot interaction, top MLP."""

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        if cfg.bottom_mlp is None or cfg.top_mlp is None:
            raise ConfigError("arch dlrm needs bottom_mlp and top_mlp", field="bottom_mlp")
        names = [t.name for t in self.tables if t.kind == "pooled"]
        _expect("bottom_mlp[0]", cfg.bottom_mlp[0], cfg.dense_features, "dense_features")
        if cfg.bottom_mlp[-1] != cfg.embedding_dim and cfg.interaction == "dot":
            raise ConfigError("must end at embedding_dim for the dot interaction", field="bottom_mlp")
        self.dense_arch = MLP(cfg.bottom_mlp, final_relu=True)
        if cfg.interaction == "concat":
            self.inter_arch: nn.Module = ConcatInteraction(names)
            top_in = cfg.bottom_mlp[-1] + sum(t.dim for t in self.tables if t.kind == "pooled")
        else:
            self.inter_arch = DotInteraction(names)
            f = len(names) + 1
            top_in = cfg.bottom_mlp[-1] + f * (f - 1) // 2
        _expect("top_mlp[0]", cfg.top_mlp[0], top_in, f"{cfg.interaction} interaction output")
        self.over_arch = MLP(cfg.top_mlp)

    def forward(self, batch: RawBatch) -> torch.Tensor:
        processed = self.feature_processing(batch)
        embs = self.sparse_arch(processed)
        dense = self.dense_arch(batch.dense)
        return self.over_arch(self.inter_arch(dense, embs))

    def dense_macs_per_sample(self) -> int:
        inter = 0
        if isinstance(self.inter_arch, DotInteraction):
            f = len(self.inter_arch.table_names) + 1
            inter = f * f * self.cfg.embedding_dim
        return self.dense_arch.macs() + inter + self.over_arch.macs()


class NCF(RecModel):
    """NCF: GMF (elementwise product of MF embeddings) beside an MLP over MLP embeddings; final FC."""

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        if cfg.mlp is None or cfg.final_mlp is None:
            raise ConfigError("arch ncf needs mlp and final_mlp", field="mlp")
        dims = {t.name: t.dim for t in self.tables}
        need = ("mf_user", "mf_item", "mlp_user", "mlp_item")
        missing = [n for n in need if n not in dims]
        if missing:
            raise ConfigError(f"arch ncf needs tables {', '.join(need)}; missing {', '.join(missing)}", field="tables")
        _expect("mlp[0]", cfg.mlp[0], dims["mlp_user"] + dims["mlp_item"], "mlp_user + mlp_item dims")
        _expect("final_mlp[0]", cfg.final_mlp[0], dims["mf_user"] + cfg.mlp[-1], "GMF dim + mlp output")
        self.inter_arch = GMF()
        self.dense_arch = PairMLP(cfg.mlp)
        self.over_arch = ConcatHead(cfg.final_mlp)

    def forward(self, batch: RawBatch) -> torch.Tensor:
        e = self.sparse_arch(self.feature_processing(batch))
        gmf = self.inter_arch(e["mf_user"], e["mf_item"])
        mlp = self.dense_arch(e["mlp_user"], e["mlp_item"])
        return self.over_arch(gmf, mlp)

    def dense_macs_per_sample(self) -> int:
        return self.dense_arch.mlp.macs() + self.over_arch.mlp.macs()


class WideAndDeep(RecModel):
    """Wide & Deep: deep MLP over [dense features, embeddings]; wide linear over dense features."""

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        if cfg.top_mlp is None:
            raise ConfigError("arch wnd needs top_mlp", field="top_mlp")
        names = [t.name for t in self.tables]
        _expect("top_mlp[0]", cfg.top_mlp[0], cfg.dense_features + sum(t.dim for t in self.tables), "dense + embeddings")
        self.dense_arch = WideLinear(cfg.dense_features, 1) if cfg.wide and cfg.dense_features else None
        self.inter_arch = ConcatInteraction(names)
        self.over_arch = MLP(cfg.top_mlp)

    def forward(self, batch: RawBatch) -> torch.Tensor:
        embs = self.sparse_arch(self.feature_processing(batch))
        deep = self.over_arch(self.inter_arch(batch.dense, embs))
        if self.dense_arch is None:
            return deep
        return self.dense_arch(batch.dense, deep)

    def dense_macs_per_sample(self) -> int:
        wide = self.cfg.dense_features if self.dense_arch is not None else 0
        return self.over_arch.macs() + wide


class MultiTaskWideAndDeep(RecModel):
    """MT-WnD: shared MLP over [dense, embeddings], then one tower per task (plus wide logits)."""

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        if cfg.top_mlp is None or cfg.task_mlp is None:
            raise ConfigError("arch mtwnd needs top_mlp (shared) and task_mlp", field="task_mlp")
        names = [t.name for t in self.tables]
        _expect("top_mlp[0]", cfg.top_mlp[0], cfg.dense_features + sum(t.dim for t in self.tables), "dense + embeddings")
        _expect("task_mlp[0]", cfg.task_mlp[0], cfg.top_mlp[-1], "shared MLP output")
        if cfg.task_mlp[-1] != 1:
            raise ConfigError("each task tower must end in 1 output", field="task_mlp")
        self.num_outputs = cfg.tasks
        self.dense_arch = WideLinear(cfg.dense_features, cfg.tasks) if cfg.wide and cfg.dense_features else None
        self.inter_arch = ConcatInteraction(names)
        self.over_arch = MLP(cfg.top_mlp, final_relu=True)
        self.task_towers = TaskTowers(cfg.task_mlp, cfg.tasks)

    @property
    def num_tasks(self) -> int:
        return self.cfg.tasks

    def forward(self, batch: RawBatch) -> torch.Tensor:
        embs = self.sparse_arch(self.feature_processing(batch))
        shared = self.over_arch(self.inter_arch(batch.dense, embs))
        wide = self.dense_arch(batch.dense) if self.dense_arch is not None else None
        return self.task_towers(shared, wide)

    def dense_macs_per_sample(self) -> int:
        wide = self.cfg.dense_features * self.cfg.tasks if self.dense_arch is not None else 0
        return self.over_arch.macs() + sum(t.macs() for t in self.task_towers.towers) + wide


class DIN(RecModel):
    """DIN: a local activation unit weights each behaviour by its relevance to the candidate ad."""

    num_outputs = 2

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        if cfg.attention_hidden is None or cfg.top_mlp is None:
            raise ConfigError("arch din needs attention_hidden and top_mlp", field="attention_hidden")
        seq = [t for t in self.tables if t.kind == "sequence"]
        pooled = [t for t in self.tables if t.kind == "pooled"]
        if len(seq) != 1:
            raise ConfigError("arch din needs exactly one sequence table (the behaviours)", field="tables")
        names = {t.name for t in pooled}
        for need in ("ad",):
            if need not in names:
                raise ConfigError(f"arch din needs a pooled table named {need!r}", field="tables")
        d = cfg.embedding_dim
        _expect("attention_hidden[0]", cfg.attention_hidden[0], 3 * d, "[behaviour, ad, behaviour*ad]")
        if cfg.attention_hidden[-1] != 1:
            raise ConfigError("must end in 1 (the behaviour's weight)", field="attention_hidden")
        self.seq_table = seq[0].name
        self.pooled_names = [t.name for t in pooled]
        _expect("top_mlp[0]", cfg.top_mlp[0], sum(t.dim for t in pooled) + seq[0].dim, "pooled embeddings + interest")
        if cfg.top_mlp[-1] != 2:
            raise ConfigError("DIN's head ends in 2 outputs (softmax over click / no click)", field="top_mlp")
        self.attention = LocalActivationUnit(cfg.attention_hidden)
        self.over_arch = ConcatHead(cfg.top_mlp)

    def forward(self, batch: RawBatch) -> torch.Tensor:
        processed = self.feature_processing(batch)
        e = self.sparse_arch(processed)
        interest = self.attention(e[self.seq_table], processed.seq_lengths[self.seq_table], e["ad"])
        return self.over_arch(*[e[n] for n in self.pooled_names], interest)

    def dense_macs_per_sample(self, sequence_length: int | None = None) -> int:
        L = sequence_length or next(t for t in self.tables if t.kind == "sequence").pooling
        return int(self.attention.mlp.macs() * L) + self.over_arch.mlp.macs()


class DIEN(RecModel):
    """DIEN: GRU interest extractor over T behaviour steps, attention against the ad, AUGRU evolution."""

    num_outputs = 2

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        if cfg.top_mlp is None or cfg.extractor_hidden is None or cfg.attention_dim is None:
            raise ConfigError("arch dien needs extractor_hidden, attention_dim and top_mlp", field="top_mlp")
        prefix = (cfg.sequence_tables or "behaviour") + "_"
        steps = [t.name for t in self.tables if t.name.startswith(prefix)]
        if not steps:
            raise ConfigError(f"no tables named {prefix}<i>; set sequence_tables to the step tables' name", field="sequence_tables")
        others = [t for t in self.tables if not t.name.startswith(prefix)]
        names = {t.name for t in others}
        for need in ("ad", "context"):
            if need not in names:
                raise ConfigError(f"arch dien needs a table named {need!r}", field="tables")
        d, h, a = cfg.embedding_dim, cfg.extractor_hidden, cfg.attention_dim
        _expect("attention_dim", a, 2 * d, "the query is [ad; context]")
        self.steps = len(steps)
        self.other_names = [t.name for t in others]
        _expect("top_mlp[0]", cfg.top_mlp[0], sum(t.dim for t in others) + h, "embeddings + final interest")
        if cfg.top_mlp[-1] != 2:
            raise ConfigError("DIEN's head ends in 2 outputs", field="top_mlp")
        self.interest_extractor = InterestExtractor(steps, d, h, cfg.extractor_cell)
        self.attention = InterestAttention(h, a)
        self.interest_evolution = InterestEvolution(h, h, cfg.evolution_cell)
        self.over_arch = ConcatHead(cfg.top_mlp)

    def forward(self, batch: RawBatch) -> torch.Tensor:
        e = self.sparse_arch(self.feature_processing(batch))
        states = self.interest_extractor(e)
        scores = self.attention(states, e["ad"], e["context"])
        final = self.interest_evolution(states, scores)
        return self.over_arch(*[e[n] for n in self.other_names], final)

    def dense_macs_per_sample(self) -> int:
        cfg = self.cfg
        d, h, a, T = cfg.embedding_dim, cfg.extractor_hidden or 0, cfg.attention_dim or 0, self.steps
        evo = "gru" if cfg.evolution_cell == "augru" else cfg.evolution_cell
        return (
            T * rnn_macs(cfg.extractor_cell, d, h)
            + T * (h * a + a)  # FC per step + the score dot product
            + T * rnn_macs(evo, h, h)
            + self.over_arch.mlp.macs()
        )


ARCH_CLASSES: dict[str, type[RecModel]] = {
    "dlrm": DLRM,
    "ncf": NCF,
    "wnd": WideAndDeep,
    "mtwnd": MultiTaskWideAndDeep,
    "din": DIN,
    "dien": DIEN,
}
