"""Activation bytes per stage of a zoo model, from its config and the batch's mean lengths.

Every forward stage is described by what it leaves live for the rest of the step, per sample:

* ``out``: its outputs, referenced by the model's ``forward`` (a local variable) until the forward returns;
* ``saved``: tensors autograd keeps for backward (training only), beyond ``out``; e.g. a Linear saves its
  input, a ReLU its output, a matmul both operands, a GRU its gates;
* ``work``: the largest transient inside the stage on top of ``out`` and ``saved`` (an MLP layer's pre-ReLU
  output, the flat rows before padding); in inference mode no graph is kept, so ``saved`` is transient too
  and ``work`` is the stage's largest (input, output) pair instead.

Values are float32 elements (4 bytes) unless a field says bytes; ``pair`` terms grow with the batch
squared (in-batch retrieval scores ``[B, B]``). The layer rules follow the zoo's modules
(:mod:`recstack.zoo.layers`) and what PyTorch's autograd saves for each op they call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recstack.zoo import archs
from recstack.zoo.config import ModelConfig, Table


@dataclass
class StageActs:
    stage: str
    out: float = 0.0  # elements per sample, live until the forward returns
    saved: float = 0.0  # elements per sample saved for backward (training), beyond out
    work: float = 0.0  # largest transient (elements per sample)
    out_pair: float = 0.0  # elements per (sample x sample)
    saved_pair: float = 0.0
    work_pair: float = 0.0
    work_inf: float | None = None  # inference's largest transient (None: ``work``)
    work_bwd: float | None = None  # backward's largest gradient transient (None: ``work``)
    out_saved: bool = True  # training: its consumer (or its own last op) keeps ``out`` for backward
    keeps: float = 0.0  # elements of earlier stages' outputs this stage saves for backward (already live)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Lengths:
    """Per-table IDs per sample: ``mean`` (what the workload gives on average) and ``padded`` (batch max)."""

    mean: dict[str, float]
    padded: dict[str, float]


def _mlp(widths: list[int], final_relu: bool) -> tuple[float, float, float, float]:
    """(saved, out, work_train, work_inference) of an MLP (input not counted: its producer holds it).

    Training: every Linear saves its input, a ReLU its output (the next Linear's input: one tensor), the
    pre-activation output is transient. Inference: a layer's input (the first one's belongs to its
    producer), its matmul output and its ReLU output are live together; the last output is ``out``.
    """
    outs = widths[1:]
    n = len(outs)
    relu = [i < n - 1 or final_relu for i in range(n)]
    saved = float(sum(outs[:-1]))
    out = float(outs[-1])
    work_train = float(max(outs[:-1] + [outs[-1] if final_relu else 0]))
    # nn.Sequential frees each input once the next module has returned: two consecutive values at a time
    pairs = [outs[i] * (2 if relu[i] else 1) for i in range(n)] + [widths[i] + outs[i] for i in range(1, n)]
    work_inf = max(pairs) - out
    return saved, out, work_train, float(work_inf)


def mlp_stage(stage: str, widths: list[int], final_relu: bool, *, input_saved: float = 0.0) -> StageActs:
    """An MLP as a stage; ``input_saved``: its input when the MLP's own producer does not keep it."""
    s, o, wt, wi = _mlp(widths, final_relu)
    return StageActs(stage, out=o, saved=s + input_saved, work=wt + input_saved, work_inf=wi + input_saved)


def embedding_stage(tables: list[Table], lengths: Lengths, backend: str, train: bool) -> StageActs:
    """Pooled rows [B, dim] per table; sequence rows padded to [B, padded, dim] (plus the flat rows and mask)."""
    st = StageActs("embedding", out_saved=False)  # concatenation, stacking and sums keep no input
    for t in tables:
        if t.kind == "pooled":
            st.out += t.dim
        else:
            pad = lengths.padded[t.name]
            st.out += pad * t.dim + pad / 4  # padded rows + the bool mask
            st.work = max(st.work, lengths.mean[t.name] * t.dim)  # the flat rows, freed after padding
    return st


def feature_bytes(tables: list[Table], lengths: Lengths, backend: str, train: bool) -> tuple[float, float]:
    """(live, transient) bytes per sample of feature processing's outputs (indices and offsets)."""
    ids = sum(lengths.mean[t.name] for t in tables)
    n = len(tables)
    if backend == "torch":
        return ids * 8 + n * 8, 0.0
    if backend == "torchrec":
        # hashed IDs per table, concatenated into one values tensor; lengths concatenated; KJT offsets
        return ids * 8 + n * 4 + n * 8, ids * 8
    if train:  # tbe: int64 in training; per-table hashed IDs live until the group's concatenation returns
        return ids * 8 + n * 8, ids * 8
    return ids * 4 + n * 4, ids * 16 + n * 8  # int32 for the inference kernel, after int64 hashing and cat


def _seq(tables: list[Table]) -> list[Table]:
    return [t for t in tables if t.kind == "sequence"]


def dense_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    """The stages after embedding, by the architecture's own hook (:mod:`recstack.zoo.archs`)."""
    return archs.get(cfg.arch).dense_stages(cfg, tables, lengths)


def dlrm_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    assert cfg.bottom_mlp and cfg.top_mlp
    pooled = [t for t in tables if t.kind == "pooled"]
    dense = mlp_stage("dense", cfg.bottom_mlp, True)
    width = cfg.bottom_mlp[-1] + sum(t.dim for t in pooled)
    if cfg.interaction == "dot":
        f = len(pooled) + 1
        pairs = f * (f - 1) // 2
        inter = StageActs("interaction", out=cfg.bottom_mlp[-1] + pairs, saved=f * cfg.embedding_dim,
                          work=f * f + pairs)
    elif cfg.interaction == "dcn":
        # per cross layer: its input, the low-rank value and the up-projection are saved; inference holds x0,
        # x, the up-projection and its product with x0
        layers, rank = cfg.cross_layers or 0, cfg.cross_rank or 0
        inter = StageActs("interaction", out=width, saved=width + layers * (rank + 2 * width) - width,
                          work=2 * width, work_inf=3 * width + rank)
    else:
        inter = StageActs("interaction", out=width, work=0.0)
    return [dense, inter, mlp_stage("head", cfg.top_mlp, False)]


def ncf_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    assert cfg.mlp and cfg.final_mlp
    dims = {t.name: t.dim for t in tables}
    # GMF's product saves both MF embeddings (the embedding stage's outputs)
    inter = StageActs("interaction", out=dims["mf_user"], keeps=dims["mf_user"] + dims["mf_item"])
    dense = mlp_stage("dense", cfg.mlp, True, input_saved=cfg.mlp[0])  # the concatenated input
    return [inter, dense, mlp_stage("head", cfg.final_mlp, False, input_saved=cfg.final_mlp[0])]


def wnd_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    """Wide & Deep and MT-WnD: the concatenation (interaction), the deep MLP (head), the wide part (dense)."""
    assert cfg.top_mlp
    out = [StageActs("interaction", out=cfg.top_mlp[0])]
    multi_task = archs.get(cfg.arch).tasks
    tasks = cfg.tasks if multi_task else 1
    if multi_task:
        assert cfg.task_mlp
        shared = mlp_stage("head", cfg.top_mlp, True)
        ts, to, twt, twi = _mlp(cfg.task_mlp, False)
        # every tower keeps its hidden outputs and logit; the towers' logits are concatenated
        shared.saved += shared.out + tasks * ts
        shared.out = tasks * (to + 1.0)
        shared.work, shared.work_inf = max(shared.work, twt), max(shared.work_inf or 0.0, twi)
        out.append(shared)
    else:
        out.append(mlp_stage("head", cfg.top_mlp, False))
    if cfg.wide and cfg.dense_features:
        out.append(StageActs("dense", out=2.0 * tasks))  # the wide logits and their sum with the deep ones
    return out


def din_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    """DIN's local activation unit, per position: the [behaviour, ad, behaviour x ad] input (saved by the first
    Linear), the MLP's hidden outputs, the weight, the float mask and the masked weight (saved by the
    products); the padded behaviours themselves are saved by the two products."""
    assert cfg.attention_hidden and cfg.top_mlp
    seq = _seq(tables)[0]
    L, d = lengths.padded[seq.name], seq.dim
    hidden = float(sum(cfg.attention_hidden[1:-1]))
    h1 = cfg.attention_hidden[1]
    # training: the product before the concatenation, or the first layer's pre-activation output; inference:
    # the input with the behaviour x ad product (until the concatenation returns) or the first layer's outputs
    att = StageActs("sequence", out=d, saved=L * (3 * d + hidden + 3),
                    work=L * max(d, h1), work_inf=L * (3 * d + max(d, 2 * h1)), work_bwd=L * 3 * d)
    head = mlp_stage("head", cfg.top_mlp, False, input_saved=cfg.top_mlp[0])
    return [att, head]


def dien_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    assert cfg.top_mlp and cfg.extractor_hidden and cfg.attention_dim
    prefix = (cfg.sequence_tables or "behaviour") + "_"
    T = sum(1 for t in tables if t.name.startswith(prefix))
    d, h, a = cfg.embedding_dim, cfg.extractor_hidden, cfg.attention_dim
    gates = 3 if cfg.extractor_cell == "gru" else 1
    # extractor: stacked input [T, d] and the RNN's outputs and gate workspace [T, (gates + 1) h]
    extractor = T * (d + h + gates * h + h)
    # attention: keys [T, a], scores and softmax [T] x 2, the query
    attention = T * (a + 2) + a
    # AUGRU per step: x2h and h2h [3h] each, r, u, n, their products, the new h: 12 h per step (measured)
    evo = T * 12 * h if cfg.evolution_cell == "augru" else T * (h + gates * h + h)
    # transients: the stacked input before the RNN takes it, then one step's gates at a time
    seq = StageActs("sequence", out=T * h + h, saved=extractor + attention + evo, work=T * d + 4 * h,
                    work_inf=T * (d + 4 * h), work_bwd=T * h)
    head = mlp_stage("head", cfg.top_mlp, False, input_saved=cfg.top_mlp[0])
    return [seq, head]


def deepfm_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    """DeepFM: the numeric fields' factors [dense x k]; the FM over the stacked rows (transient) and the
    concatenated fields [F x k] (saved by the square); the deep MLP reads the fields as they are (a view)."""
    assert cfg.top_mlp and cfg.fm_factors
    k, nd, T = cfg.fm_factors, cfg.dense_features, len(tables)
    dim = tables[0].dim
    f = nd + T
    dense = StageActs("dense", out=nd * k + 1, work=nd)
    inter = StageActs("interaction", out=f * k + 1, saved=3 * k, work=T * dim + f * k)
    return [dense, inter, mlp_stage("head", cfg.top_mlp, False)]


def twotower_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    assert cfg.user_tower and cfg.item_tower
    """Two towers, each an MLP over its concatenated embeddings (saved by its first Linear); the [B, B] scores."""
    us, uo, uwt, uwi = _mlp(cfg.user_tower, False)
    is_, io, iwt, iwi = _mlp(cfg.item_tower, False)
    ui, ii = cfg.user_tower[0], cfg.item_tower[0]
    dense = StageActs("dense", out=uo + io, saved=us + is_ + ui + ii, work=max(uwt, iwt),
                      work_inf=max(ui + uwi, ii + iwi))
    inter = StageActs("interaction", out_pair=1.0)
    return [dense, inter]


def bst_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    """BST's post-norm transformer blocks, per position and block: the qkv projection [3d] (kept by the score
    and value matmuls), the softmax output [heads x n], the re-laid-out attention output [d], both LayerNorms'
    inputs [d] and the first one's output [d], the FFN's hidden ReLU output; the scores are transient."""
    assert cfg.top_mlp and cfg.blocks and cfg.attention_heads and cfg.ffn_dim
    seq = _seq(tables)[0]
    n, d, h, ffn = lengths.padded[seq.name] + 1, seq.dim, cfg.attention_heads, cfg.ffn_dim
    per_block = n * (7 * d + h * n + ffn + 4)
    # the block input, the last block's output, the pooled behaviours' product
    # inference, at the FFN: the block's locals stay live until it returns (the qkv projection behind q, k, v,
    # the masked scores, the attention output), beside its input, the first norm's output and the FFN's two
    # hidden outputs; plus the summed behaviours
    work_inf = n * (6 * d + h * n + 2 * ffn) + n * d
    tr = StageActs("sequence", out=2 * d, saved=cfg.blocks * per_block + 3 * n * d,
                   work=n * 2 * h * n, work_inf=work_inf)
    head = mlp_stage("head", cfg.top_mlp, False, input_saved=cfg.top_mlp[0])
    return [tr, head]


def hstu_stages(cfg: ModelConfig, tables: list[Table], lengths: Lengths) -> list[StageActs]:
    """HSTU layers, per position and layer: the input and its LayerNorm output [d], the projection before and
    after SiLU [w = heads (2 linear + 2 attention dims)], the attention output, its norm and its product with U
    [heads x linear] each, LayerNorm statistics; per layer three [heads x n x n] matrices (q k^T, its SiLU, the
    masked and normalised scores). The float mask [n x n] is shared by the layers."""
    assert cfg.blocks and cfg.attention_heads and cfg.linear_dim and cfg.attention_dim
    seq = _seq(tables)[0]
    n, d = lengths.padded[seq.name], seq.dim
    h, dl, da = cfg.attention_heads, cfg.linear_dim, cfg.attention_dim
    w = h * (2 * dl + 2 * da)
    per_layer = n * (2 * d + 2 * w + 3 * h * dl + 4) + 3 * h * n * n
    enc = StageActs("sequence", out=d, saved=cfg.blocks * per_layer + n * d + n * n + n * n / 4,
                    work=2 * h * n * n, work_inf=n * (d + w) + 2 * h * n * n + n * n)
    inter = StageActs("interaction", out_pair=1.0)
    return [enc, inter]

