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
    BehaviourTransformer,
    ConcatHead,
    ConcatInteraction,
    DCNInteraction,
    DenseFieldEmbedding,
    DotInteraction,
    FMInteraction,
    HSTUAttentionStack,
    InBatchDotProduct,
    InterestAttention,
    InterestEvolution,
    InterestExtractor,
    LocalActivationUnit,
    PairMLP,
    SumHead,
    TaskTowers,
    Tower,
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
        elif cfg.interaction == "dcn":
            if cfg.cross_layers is None or cfg.cross_rank is None:
                raise ConfigError("interaction dcn needs cross_layers and cross_rank", field="cross_layers")
            top_in = cfg.bottom_mlp[-1] + sum(t.dim for t in self.tables if t.kind == "pooled")
            self.inter_arch = DCNInteraction(names, top_in, cfg.cross_layers, cfg.cross_rank)
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
        elif isinstance(self.inter_arch, DCNInteraction):
            inter = self.inter_arch.crossnet.macs()
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


class DeepFM(RecModel):
    """DeepFM (Guo et al., 2017): an FM and a deep MLP share the field embeddings; their logits add.

    Sparse fields are the pooled tables (each row ``[w, v_1..v_k, padding]``); every dense feature is a
    numeric field with its own factor vector.
    """

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        k = cfg.fm_factors
        if k is None or cfg.top_mlp is None:
            raise ConfigError("arch deepfm needs fm_factors and top_mlp (the deep part)", field="fm_factors")
        for t in self.tables:
            if t.kind != "pooled" or t.dim < k + 1:
                raise ConfigError(
                    f"table {t.name}: deepfm tables are pooled with dim >= fm_factors + 1 = {k + 1}", field="tables"
                )
        fields = cfg.dense_features + len(self.tables)
        _expect("top_mlp[0]", cfg.top_mlp[0], fields * k, "fields x fm_factors")
        self.dense_arch = DenseFieldEmbedding(cfg.dense_features, k)
        self.inter_arch = FMInteraction([t.name for t in self.tables], k)
        self.over_arch = SumHead(cfg.top_mlp)

    def forward(self, batch: RawBatch) -> torch.Tensor:
        embs = self.sparse_arch(self.feature_processing(batch))
        dense_fields, dense_linear = self.dense_arch(batch.dense)
        fm, fields = self.inter_arch(dense_fields, dense_linear, embs)
        return self.over_arch(fm, fields)

    def dense_macs_per_sample(self) -> int:
        k, f = self.cfg.fm_factors or 0, self.cfg.dense_features + len(self.tables)
        return self.cfg.dense_features * k + 2 * f * k + self.over_arch.mlp.macs()


class _InBatchRetrieval(RecModel):
    """Retrieval models scored against in-batch candidates: logits ``[B, B]``, sampled-softmax loss on the diagonal."""

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        return F.cross_entropy(logits, torch.arange(logits.shape[0], device=logits.device))


class TwoTower(_InBatchRetrieval):
    """Two-tower retrieval: user and item towers, dot-product scores of every user against the batch's items."""

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        if cfg.user_tower is None or cfg.item_tower is None:
            raise ConfigError("arch twotower needs user_tower and item_tower", field="user_tower")
        user = [t for t in self.tables if t.name.startswith("user")]
        item = [t for t in self.tables if t.name.startswith("item")]
        if not user or not item or len(user) + len(item) != len(self.tables):
            raise ConfigError("arch twotower: every table is named user* (query side) or item* (candidates)", field="tables")
        _expect("user_tower[0]", cfg.user_tower[0], sum(t.dim for t in user), "user tables' dims")
        _expect("item_tower[0]", cfg.item_tower[0], sum(t.dim for t in item), "item tables' dims")
        _expect("item_tower[-1]", cfg.item_tower[-1], cfg.user_tower[-1], "the towers' outputs are dot-multiplied")
        self.query_dense_arch = Tower([t.name for t in user], cfg.user_tower)
        self.candidate_dense_arch = Tower([t.name for t in item], cfg.item_tower)
        self.inter_arch = InBatchDotProduct()

    def forward(self, batch: RawBatch) -> torch.Tensor:
        embs = self.sparse_arch(self.feature_processing(batch))
        return self.inter_arch(self.query_dense_arch(embs), self.candidate_dense_arch(embs))

    def dense_macs_per_sample(self, batch_size: int = 1) -> int:
        # the score matrix costs batch_size x output width per sample (one candidate per sample at batch 1)
        return self.query_dense_arch.mlp.macs() + self.candidate_dense_arch.mlp.macs() + batch_size * (self.cfg.user_tower or [0])[-1]


def _one_sequence(tables: list[Table], arch: str) -> Table:
    seq = [t for t in tables if t.kind == "sequence"]
    if not seq:
        raise ConfigError(f"arch {arch} needs a sequence table (the behaviours)", field="tables")
    return seq[0]


class BST(RecModel):
    """Behaviour Sequence Transformer (Chen et al., 2019): transformer blocks over [target item; behaviours].

    The behaviour token is the sum of its sequence tables' rows (item and category); the target token the
    sum of the ``target*`` tables' rows. Every other pooled table is an "other feature" fed to the MLP.
    """

    num_outputs = 1

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        if cfg.top_mlp is None or cfg.blocks is None or cfg.attention_heads is None or cfg.ffn_dim is None:
            raise ConfigError("arch bst needs blocks, attention_heads, ffn_dim and top_mlp", field="blocks")
        first = _one_sequence(self.tables, "bst")
        self.seq_names = [t.name for t in self.tables if t.kind == "sequence"]
        self.target_names = [t.name for t in self.tables if t.kind == "pooled" and t.name.startswith("target")]
        self.other_names = [t.name for t in self.tables if t.kind == "pooled" and not t.name.startswith("target")]
        d = first.dim
        if not self.target_names or any(t.dim != d for t in self.tables if t.name in self.seq_names + self.target_names):
            raise ConfigError(f"arch bst needs target* tables, all sequence and target tables of dim {d}", field="tables")
        if d % cfg.attention_heads:
            raise ConfigError(f"must divide the token width {d}", field="attention_heads")
        others = sum(t.dim for t in self.tables if t.name in self.other_names)
        _expect("top_mlp[0]", cfg.top_mlp[0], 2 * d + others, "target output + pooled behaviours + other features")
        self.max_length = first.max_length or 1
        self.transformer = BehaviourTransformer(d, self.max_length, cfg.blocks, cfg.attention_heads, cfg.ffn_dim)
        self.over_arch = ConcatHead(cfg.top_mlp)

    def forward(self, batch: RawBatch) -> torch.Tensor:
        processed = self.feature_processing(batch)
        e = self.sparse_arch(processed)
        behaviours = sum(e[n] for n in self.seq_names)
        target = sum(e[n] for n in self.target_names)
        seq = self.transformer(target, behaviours, processed.seq_lengths[self.seq_names[0]])
        return self.over_arch(seq, *[e[n] for n in self.other_names])

    def dense_macs_per_sample(self, sequence_length: float | None = None) -> int:
        cfg = self.cfg
        n = 1 + (sequence_length or _one_sequence(self.tables, "bst").pooling)
        d = self.transformer.position.shape[1]
        per_block = n * (3 * d * d + d * d + 2 * d * (cfg.ffn_dim or 0)) + 2 * n * n * d
        return int((cfg.blocks or 0) * per_block) + self.over_arch.mlp.macs()


class HSTU(_InBatchRetrieval):
    """A generative recommender in the style of HSTU (Zhai et al., 2024), retrieval mode.

    The user's action history runs through stacked HSTU layers; the last valid state is scored against the
    batch's target items (in-batch candidates), like the two-tower model's scoring.
    """

    def __init__(self, cfg: ModelConfig, backend: EmbeddingBackend) -> None:
        super().__init__(cfg, backend)
        need = (cfg.blocks, cfg.attention_heads, cfg.linear_dim, cfg.attention_dim)
        if any(v is None for v in need):
            raise ConfigError("arch hstu needs blocks, attention_heads, linear_dim and attention_dim", field="blocks")
        seq = _one_sequence(self.tables, "hstu")
        targets = [t for t in self.tables if t.kind == "pooled"]
        if len(targets) != 1 or targets[0].dim != seq.dim:
            raise ConfigError(f"arch hstu needs one pooled target table of dim {seq.dim}", field="tables")
        self.seq_name, self.target_name = seq.name, targets[0].name
        self.encoder = HSTUAttentionStack(
            seq.dim, seq.max_length or 1, cfg.blocks or 1, cfg.attention_heads or 1, cfg.linear_dim or 1, cfg.attention_dim or 1
        )
        self.inter_arch = InBatchDotProduct()

    def forward(self, batch: RawBatch) -> torch.Tensor:
        processed = self.feature_processing(batch)
        e = self.sparse_arch(processed)
        user = self.encoder(e[self.seq_name], processed.seq_lengths[self.seq_name])
        return self.inter_arch(user, e[self.target_name])

    def dense_macs_per_sample(self, sequence_length: float | None = None) -> int:
        cfg = self.cfg
        seq = _one_sequence(self.tables, "hstu")
        n = sequence_length or seq.pooling
        h, dl, da, d = cfg.attention_heads or 0, cfg.linear_dim or 0, cfg.attention_dim or 0, seq.dim
        per_layer = n * (d * h * (2 * dl + 2 * da) + h * dl * d) + n * n * h * (da + dl)
        return int((cfg.blocks or 0) * per_layer) + d

