"""Predicted memory of a zoo model from its config and run options alone (nothing is allocated).

Resident (for the whole run):

* tables in their storage dtype, as each backend lays them out. FBGEMM's inference kernel
  (``IntNBitTableBatchedEmbeddingBagsCodegen``) stores a row as ``dim x 4`` (fp32), ``dim x 2`` (fp16) or
  ``dim + 4`` bytes (int8: an fp16 scale and bias per row), rounded up to the row alignment (1 byte on CPU,
  16 on GPU), and every table's block rounded up to a 128-byte cache line (fbgemm_gpu/fbgemm_gpu/
  split_table_batched_embeddings_ops_inference.py: ``rounded_row_size_in_bytes``, ``align_to_cacheline``,
  ``nbit_construct_split_state``). The training kernel stores fp32 rows unpadded, its optimizer state per
  table as ``rows`` (row-wise) or ``rows x dim`` elements (fbgemm_gpu/fbgemm_gpu/
  split_table_batched_embeddings_ops_training.py: ``construct_split_state``); both keep per-table int32/int64
  offsets, placements and sizes (``TBE_META_*`` below).
* dense parameters (from the model's meta-device skeleton, exact) and its buffers;
* optimizer state: SGD none; Adagrad one fp32 sum per element (+ a 4-byte step per parameter tensor in
  ``torch.optim``); row-wise Adagrad one fp32 per row; Adam two per element (+ step). TBE's ``adagrad`` is
  FBGEMM's row-wise Adagrad (that is what recstack's tbe backend runs);
* the generated input batches (the profiler keeps ``NUM_BATCHES``).

Per step (:mod:`recstack.zoo.footprint.activations` for the activation rules): feature processing's indices and
offsets, each stage's outputs and (training) what autograd saves for backward, the loss, gradients
(dense parameters; table gradients: sparse ``lookups x (dim x 4 + 8)`` for the torch backend, dense
``rows x dim x 4`` for unsharded TorchRec, none for TBE whose update is fused into backward) and the
optimizer step's temporaries. Each stage's predicted peak is the resident bytes plus what is live at that
stage's own peak. Per rank, a sharding plan moves table bytes to their owners and adds the all-to-all
buffers (:func:`per_rank`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from recstack.errors import ConfigError
from recstack.zoo import archs
from recstack.zoo.config import ModelConfig, Table
from recstack.zoo.footprint.activations import (
    Lengths,
    StageActs,
    dense_stages,
    embedding_stage,
    feature_bytes,
)
from recstack.zoo.footprint.stages import stage_of_child

if TYPE_CHECKING:
    from recstack.workload.spec import WorkloadSpec

OPTIMIZERS = ("sgd", "adagrad", "rowwise_adagrad", "adam")
BACKENDS = ("torch", "torchrec", "tbe")
TABLE_DTYPES = ("fp32", "fp16", "int8")
NUM_BATCHES = 4  # batches the profiler generates up front (api.profile's num_batches)
ELEM = {"fp32": 4, "fp16": 2, "int8": 1}
INT8_SCALE_BIAS = 4  # fp16 scale + fp16 bias per int8 row (FBGEMM's DEFAULT_SCALE_BIAS_SIZE_IN_BYTES)
CACHELINE = 128
# FBGEMM TBE metadata buffers per group: bytes = base + per_table x tables (the modules' registered buffers:
# D_offsets, rows_per_table, weights_offsets/placements, feature dims and types, cache and counter placeholders).
TBE_META_TRAIN = (248, 40)  # plus the optimizer's (see _tbe_meta)
TBE_META_INFER = (156, 25)


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def row_bytes(dim: int, table_dtype: str, *, backend: str, mode: str, device: str = "cpu") -> int:
    """Bytes of one stored row (FBGEMM's inference layout pads int8/fp16 rows; see the module doc)."""
    unpadded = dim * ELEM[table_dtype] + (INT8_SCALE_BIAS if table_dtype == "int8" else 0)
    if backend == "tbe" and mode == "inference":
        return _round_up(unpadded, 1 if device == "cpu" else 16)
    return unpadded


def table_bytes(t: Table, table_dtype: str, *, backend: str, mode: str, device: str = "cpu") -> int:
    n = t.rows * row_bytes(t.dim, table_dtype, backend=backend, mode=mode, device=device)
    if backend == "tbe" and mode == "inference":
        n = _round_up(n, CACHELINE)
    return n


def optimizer_state_bytes(t_rows: int, dim: int, optimizer: str, *, backend: str, tensors: int = 1) -> int:
    """State of one table (or dense tensor) of ``t_rows x dim`` elements; ``tensors``: parameter tensors."""
    step = 4 * tensors if backend != "tbe" else 0  # torch.optim keeps a float32 step per parameter
    if optimizer == "sgd":
        return 0
    if optimizer == "adagrad" and backend == "tbe":
        optimizer = "rowwise_adagrad"  # the tbe backend runs FBGEMM's row-wise Adagrad
    if optimizer == "adagrad":
        return t_rows * dim * 4 + step
    if optimizer == "rowwise_adagrad":
        return t_rows * 4 + step
    return 2 * t_rows * dim * 4 + step  # adam


@dataclass
class Consumer:
    """One holder of bytes: what (tables, optimizer_state, activations, ...), the stage, the bytes."""

    what: str
    stage: str
    bytes: int
    detail: str = ""


@dataclass
class Prediction:
    model: str
    backend: str
    mode: str
    optimizer: str
    table_dtype: str
    batch_size: int
    scale: float
    device: str
    resident: dict[str, int]  # tables, table_metadata, dense_parameters, dense_buffers, optimizer_state
    inputs: int  # generated batches
    stage_peaks: dict[str, int]  # per stage: resident + inputs + what is live at the stage's peak
    stage_dynamic: dict[str, int]  # the per-step part of each stage's peak
    consumers: list[Consumer] = field(default_factory=list)
    rank: int | None = None
    world_size: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def resident_total(self) -> int:
        return sum(self.resident.values())

    @property
    def step_peak(self) -> int:
        return max(self.stage_dynamic.values(), default=0)

    @property
    def peak(self) -> int:
        return max(self.stage_peaks.values(), default=self.resident_total + self.inputs)

    @property
    def peak_stage(self) -> str:
        return max(self.stage_peaks, key=lambda s: self.stage_peaks[s]) if self.stage_peaks else ""

    def top_consumers(self, n: int = 8) -> list[Consumer]:
        return sorted(self.consumers, key=lambda c: -c.bytes)[:n]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(peak=self.peak, peak_stage=self.peak_stage, step_peak=self.step_peak,
                 resident_total=self.resident_total)
        return d


@dataclass(frozen=True)
class Shape:
    """What the prediction needs from a config: tables, lengths and the dense skeleton's sizes."""

    cfg: ModelConfig
    tables: list[Table]
    mean: dict[str, float]  # per table: the workload's mean IDs per sample
    length_models: dict[str, Any]  # per table: the workload's length model (None: fixed at the mean)
    dense_params: int
    dense_tensors: int
    dense_largest: int  # elements of the largest dense parameter
    dense_buffers: int
    dense_by_stage: dict[str, int]  # dense parameter elements per stage
    num_dense: int
    num_tasks: int
    features: int
    ids_per_sample: float  # raw IDs per sample, all features

    def lengths(self, batch_size: int) -> Lengths:
        """Mean and padded (a batch's expected longest) IDs per sample of every table at ``batch_size``."""
        return Lengths(self.mean, {t.name: _padded(self.length_models.get(t.name), self.mean[t.name], batch_size)
                                   for t in self.tables})

    def scaled(self, factor: float) -> Shape:
        """The same model with every table's rows multiplied by ``factor`` (at least one row)."""
        tables = [t.model_copy(update={"rows": max(1, math.ceil(t.rows * factor))}) for t in self.tables]
        return replace(self, tables=tables, cfg=self.cfg.model_copy(update={"scale": self.cfg.scale * factor}))


def _padded(length_model: Any, mean: float, batch_size: int) -> float:
    """The expected longest sequence of a batch: the draws' 1 - 1/(2B) quantile, clamped; the mean when fixed."""
    if getattr(length_model, "exact", None) is not None or length_model is None:
        return mean
    q = float(np.asarray(length_model.dist.quantile(np.array([1.0 - 0.5 / max(1, batch_size)]))).ravel()[0])
    high = length_model.high if length_model.high is not None else math.inf
    return float(min(high, max(length_model.low, math.ceil(q))))


def shape_of(cfg: ModelConfig, workload: WorkloadSpec | None = None) -> Shape:
    """Tables, per-table lengths (the workload's; default: the config's pooling) and dense sizes of ``cfg``."""
    from recstack.zoo.skeleton import dense_param_count, skeleton

    skel = skeleton(cfg)
    requests = skel.features()
    mean = {f.name: float(f.pooling) for f in requests}
    models: dict[str, Any] = {}
    if workload is not None:
        from recstack.workload.generate import bind

        bound = bind(workload, requests, skel.num_dense, skel.num_tasks)
        for f in bound.features:
            mean[f.name] = f.lengths.mean()
            models[f.name] = f.lengths
    tables = cfg.resolved_tables()
    dense = [p for n, p in skel.named_parameters() if not n.startswith(("sparse_arch.", "feature_processing."))]
    bufs = [b for n, b in skel.named_buffers() if not n.startswith(("sparse_arch.", "feature_processing."))]
    by_stage: dict[str, int] = {}
    for n, p in skel.named_parameters():
        st = stage_of_child(n.split(".", 1)[0])
        if st is not None and st != "embedding":
            by_stage[st] = by_stage.get(st, 0) + p.numel()
    return Shape(
        cfg, tables, {t.name: mean[t.feature] for t in tables},
        {t.name: models[t.feature] for t in tables if t.feature in models}, dense_param_count(skel), len(dense), max((p.numel() for p in dense), default=0),
        sum(b.numel() * b.element_size() for b in bufs), by_stage, skel.num_dense, skel.num_tasks, len(requests),
        sum(mean.values()),
    )


def input_bytes(shape: Shape, batch_size: int, num_batches: int = NUM_BATCHES) -> int:
    """Generated batches: int64 IDs, int32 lengths per feature, float32 dense features and labels."""
    per = shape.ids_per_sample * 8 + shape.features * 4 + shape.num_dense * 4 + shape.num_tasks * 4
    return int(num_batches * batch_size * per)


def _check(backend: str, mode: str, optimizer: str, table_dtype: str) -> None:
    for flag, value, allowed in (("--backend", backend, BACKENDS), ("--optimizer", optimizer, OPTIMIZERS),
                                 ("--table-dtype", table_dtype, TABLE_DTYPES), ("--mode", mode, ("inference", "train"))):
        if value not in allowed:
            raise ConfigError(f"must be one of {', '.join(allowed)} (got {value!r})", field=flag)
    if table_dtype != "fp32" and (backend != "tbe" or mode == "train"):
        raise ConfigError("fp16/int8 tables need --backend tbe in inference mode", field="--table-dtype")


def _tbe_meta(tables: list[Table], mode: str, optimizer: str) -> int:
    out = 0
    for group in ([t for t in tables if t.kind == "pooled"], [t for t in tables if t.kind == "sequence"]):
        if not group:
            continue
        n = len(group)
        if mode != "train":
            out += TBE_META_INFER[0] + TBE_META_INFER[1] * n
            continue
        momenta = {"sgd": 0, "adagrad": 1, "rowwise_adagrad": 1, "adam": 2}[optimizer]
        # SGD keeps a placeholder for momentum1 (5 x 8 bytes); each momentum has offsets and placements per
        # table; the base includes momentum2's placeholder, which Adam replaces
        extra = {0: 40, 1: 12 * n, 2: 24 * n - 40}[momenta]
        out += TBE_META_TRAIN[0] + TBE_META_TRAIN[1] * n + extra
    return out


def predict(shape: Shape, *, backend: str = "torch", mode: str = "inference", optimizer: str = "sgd",
            table_dtype: str = "fp32", batch_size: int = 1024, device: str = "cpu",
            num_batches: int = NUM_BATCHES, tables: list[Table] | None = None) -> Prediction:
    """The prediction for ``batch_size`` samples of ``shape`` (``tables``: this rank's, default all)."""
    _check(backend, mode, optimizer, table_dtype)
    train = mode == "train"
    tabs = shape.tables if tables is None else tables
    B = batch_size
    consumers: list[Consumer] = []
    tb = {t.name: table_bytes(t, table_dtype, backend=backend, mode=mode, device=device) for t in tabs}
    state = {t.name: optimizer_state_bytes(t.rows, t.dim, optimizer, backend=backend) for t in tabs} if train else {}
    dense_state = optimizer_state_bytes(shape.dense_params, 1, optimizer, backend="torch", tensors=shape.dense_tensors)
    if optimizer == "rowwise_adagrad":
        dense_state = optimizer_state_bytes(shape.dense_params, 1, "adagrad", backend="torch", tensors=shape.dense_tensors)
    resident = {
        "tables": sum(tb.values()),
        "table_metadata": _tbe_meta(tabs, mode, optimizer) if backend == "tbe" else 0,
        "dense_parameters": shape.dense_params * 4,
        "dense_buffers": shape.dense_buffers,
        "optimizer_state": (sum(state.values()) + dense_state) if train else 0,
    }
    for t in tabs:
        consumers.append(Consumer("table", "embedding", tb[t.name], t.name))
        if state.get(t.name):
            consumers.append(Consumer("optimizer_state", "embedding", state[t.name], t.name))
    consumers.append(Consumer("dense_parameters", "dense", resident["dense_parameters"]))
    if train and dense_state:
        consumers.append(Consumer("optimizer_state", "dense", dense_state, "dense layers"))
    inputs = input_bytes(shape, B, num_batches)
    consumers.append(Consumer("input_batches", "feature_processing", inputs, f"{num_batches} generated batches"))
    dyn = _dynamic(shape, shape.lengths(B), tabs, backend, train, optimizer, B, consumers)
    base = sum(resident.values()) + inputs
    return Prediction(
        shape.cfg.name, backend, mode, optimizer, table_dtype, B, shape.cfg.scale, device, resident, inputs,
        {s: base + v for s, v in dyn.items()}, dyn, consumers,
    )


def _dynamic(shape: Shape, lengths: Lengths, tabs: list[Table], backend: str, train: bool, optimizer: str, B: int,
             consumers: list[Consumer]) -> dict[str, int]:
    """Per stage, the per-step bytes live at its peak (above resident bytes and inputs)."""
    fp_live, fp_work = feature_bytes(tabs, lengths, backend, train)
    stages: list[StageActs] = [embedding_stage(tabs, lengths, backend, train)]
    stages += dense_stages(shape.cfg, shape.tables, lengths)
    if archs.get(shape.cfg.arch).embedding_out_saved:
        stages[0].out_saved = True  # e.g. DIN's two products with the behaviours keep the padded rows for backward
    out: dict[str, int] = {"feature_processing": int(B * (fp_live + fp_work))}
    live = B * fp_live
    consumers.append(Consumer("indices_offsets", "feature_processing", int(B * fp_live)))
    for st in stages:
        keep = st.out * B + st.out_pair * B * B
        saved = (st.saved * B + st.saved_pair * B * B) if train else 0.0
        work = (st.work if train or st.work_inf is None else st.work_inf) * B + st.work_pair * B * B
        out[st.stage] = max(out.get(st.stage, 0), int(live + 4 * (keep + saved + work)))
        live += 4 * (keep + saved)
        consumers.append(Consumer("activations", st.stage, int(4 * (keep + saved))))
    if not train:
        return out
    tgrads, tgrad_max = _table_grads(tabs, lengths, backend, B)
    out.update(_backward(shape, stages, B, B * fp_live, tgrads, tgrad_max))
    if tgrads:
        consumers.append(Consumer("table_gradients", "backward", int(tgrads)))
    dense_grads = shape.dense_params * 4
    consumers.append(Consumer("dense_gradients", "backward", int(dense_grads)))
    # FBGEMM's training kernel keeps the step's indices and offsets (its _indices, _offsets) until the next step
    kept = B * fp_live if backend == "tbe" else 0.0
    sparse_max = max((_sparse_step(t, B * lengths.mean[t.name]) for t in tabs), default=0.0)
    out["optimizer"] = int(dense_grads + tgrads + kept + _optimizer_work(shape, tabs, backend, optimizer, sparse_max))
    return out


def _backward(shape: Shape, stages: list[StageActs], B: int, fp_live: float, tgrads: float,
              tgrad_max: float) -> dict[str, int]:
    """The loss and backward peaks: after the forward returns only what backward needs stays live.

    Backward walks the stages in reverse: at stage ``s`` the values saved by ``s`` and the stages before it
    are live, the gradients of the dense parameters of ``s`` and the stages after it have been made, and
    the gradients flowing through ``s`` (of its output and input, and its largest intermediate) are live.
    The embedding stage ends it with the table gradients.
    """
    def held(st: StageActs) -> float:
        keep = (st.out * B + st.out_pair * B * B) if st.out_saved else 0.0
        return 4 * (keep + st.saved * B + st.saved_pair * B * B + st.keeps * B)

    def size(st: StageActs) -> float:
        return 4 * (st.out * B + st.out_pair * B * B)

    live_after = fp_live + sum(held(st) for st in stages)
    loss = 4 * B * shape.num_tasks * 4
    peak = 0.0
    grads_after = 0.0  # dense gradients of the stages already through backward
    for i in range(len(stages) - 1, -1, -1):
        st = stages[i]
        before = fp_live + sum(held(x) for x in stages[:i])
        # inside a stage, layers go in reverse: a layer's saved values are freed as its gradients appear
        own = 4.0 * shape.dense_by_stage.get(st.stage, 0)
        if st.stage == "embedding":
            # each table's indices are freed as its gradient is made; a dense (TorchRec) gradient has a copy
            flowing = size(st) + max(fp_live + held(st), tgrads) + tgrad_max - fp_live
        else:
            work = st.work if st.work_bwd is None else st.work_bwd
            flowing = max(held(st), own) + size(st) + (size(stages[i - 1]) if i else 0.0) \
                + 4 * (work * B + st.work_pair * B * B)
        peak = max(peak, before + grads_after + flowing)
        grads_after += own
    return {"loss": int(live_after + loss), "backward": int(peak)}


def _table_grads(tabs: list[Table], lengths: Lengths, backend: str, B: int) -> tuple[float, float]:
    """(all table gradients, the largest transient) in bytes: sparse (values and int64 indices per lookup) for
    the torch backend, which AccumulateGrad takes over without a copy; dense for TorchRec, whose backward first
    makes one gradient row per lookup (plus sorted int64 indices) and then sums them into the table's rows."""
    if backend == "tbe":  # the update is fused into backward: no gradient; its sort keeps ~4 bytes per lookup
        return 0.0, 4.0 * B * sum(lengths.mean[t.name] for t in tabs)
    if backend == "torch":
        per = [B * lengths.mean[t.name] * (t.dim * 4 + 8) for t in tabs]
        return float(sum(per)), 0.0
    per = [t.rows * t.dim * 4.0 for t in tabs]
    rows = [B * lengths.mean[t.name] * (t.dim * 4 + 16) for t in tabs]
    return float(sum(per)), float(max(rows, default=0.0))


def _sparse_step(t: Table, lookups: float) -> float:
    """Sparse Adagrad's temporaries for one table: the gradient coalesced, then its square, the state masked by
    it and the quotient, each over the distinct rows touched (expected for uniform IDs: a skewed workload touches
    fewer, so this errs high)."""
    unique = t.rows * -math.expm1(-lookups / t.rows) if t.rows else 0.0
    return (lookups + 2.5 * unique) * (t.dim * 4 + 8)


def _optimizer_work(shape: Shape, tabs: list[Table], backend: str, optimizer: str, sparse_max: float) -> float:
    """Temporaries of one optimizer step on CPU (torch.optim's single-tensor path, one parameter at a time):
    Adagrad's ``std`` (Adam: two) of the largest parameter, or a sparse gradient's (:func:`_sparse_step`); with
    TorchRec's dense table gradients two table-sized temporaries were measured live together (torch 2.13)."""
    if optimizer == "sgd":
        return 0.0
    factor = 2.0 if optimizer == "adam" else 1.0
    dense = factor * shape.dense_largest * 4.0
    if backend == "tbe":
        return dense
    if backend == "torch":
        return max(dense, sparse_max)
    return max(dense, 2 * factor * max((t.rows * t.dim * 4.0 for t in tabs), default=0.0))


def predict_config(model: str | ModelConfig, *, scale: float = 1.0, batch_size: int = 1024, backend: str = "torch",
                   mode: str = "inference", optimizer: str = "sgd", table_dtype: str = "fp32",
                   workload: WorkloadSpec | None = None, tasks: int | None = None, device: str = "cpu",
                   num_batches: int = NUM_BATCHES) -> Prediction:
    from recstack.zoo.skeleton import resolve_config

    cfg = resolve_config(model, scale, tasks)
    return predict(shape_of(cfg, workload), backend=backend, mode=mode, optimizer=optimizer,
                   table_dtype=table_dtype, batch_size=batch_size, device=device, num_batches=num_batches)


def _placement(tables: list[Table], sharding: str, world: int, plan: dict[str, Any] | None) -> list[list[Table]]:
    """Each rank's table shards: whole tables (table-wise, greedy largest first onto the lightest rank), rows or
    columns split over the ranks (row_wise, table_row_wise; column_wise), or every table everywhere (data_parallel);
    a plan file's ``tables: {name: {sharding, ranks}}`` per table."""
    ranks: list[list[Table]] = [[] for _ in range(world)]
    load = [0] * world
    for t in sorted(tables, key=lambda t: -t.rows * t.dim):
        tp = (plan or {}).get(t.name)
        kind = tp.sharding if tp is not None else sharding
        owners = list(tp.ranks) if tp is not None and tp.ranks else None
        if kind == "data_parallel":
            for r in range(world):
                ranks[r].append(t)
        elif kind in ("row_wise", "table_row_wise"):
            for r in owners or range(world):
                ranks[r].append(t.model_copy(update={"rows": -(-t.rows // len(owners or range(world)))}))
        elif kind == "column_wise":
            who = owners or list(range(world))
            for r in who:
                ranks[r].append(t.model_copy(update={"dim": max(1, t.dim // len(who))}))
        else:  # table_wise (and auto: recstack's placement, not TorchRec's planner)
            r = owners[0] if owners else min(range(world), key=lambda i: load[i])
            ranks[r].append(t)
            load[r] += t.rows * t.dim
    return ranks


def per_rank(shape: Shape, *, world_size: int, sharding: str = "table_wise", plan: dict[str, Any] | None = None,
             backend: str = "torchrec", mode: str = "inference", optimizer: str = "sgd", table_dtype: str = "fp32",
             batch_size: int = 1024, device: str = "cpu", num_batches: int = NUM_BATCHES) -> list[Prediction]:
    """One prediction per rank under a sharding plan; ``batch_size`` is each rank's (local) batch.

    All-to-all buffers (TorchRec's input and output distribution) are added to the embedding stage: the
    indices a rank sends and receives (int64, both directions: its local batch's IDs out, the IDs of every
    rank's batch for its own shards in) and the pooled embeddings it sends (its shards' rows for the global
    batch) and receives (every table's rows for its local batch); in training the gradients travel back
    the same way. Data-parallel tables exchange no all-to-all; their gradients are all-reduced in place.
    """
    out = []
    lengths = shape.lengths(batch_size)
    B, W = batch_size, world_size
    for rank, tabs in enumerate(_placement(shape.tables, sharding, W, plan)):
        pred = predict(shape, backend=backend, mode=mode, optimizer=optimizer, table_dtype=table_dtype,
                       batch_size=B, device=device, num_batches=num_batches, tables=tabs)
        kinds = {t.name: (plan[t.name].sharding if plan and t.name in plan else sharding) for t in tabs}
        sharded = [t for t in tabs if kinds[t.name] != "data_parallel"]
        ids_out = 8 * B * sum(lengths.mean[t.name] for t in shape.tables)
        ids_in = 8 * B * W * sum(lengths.mean[t.name] for t in sharded)
        emb_send = 4 * B * W * sum(t.dim for t in sharded if t.kind == "pooled")
        emb_recv = 4 * B * sum(t.dim for t in shape.tables if t.kind == "pooled")
        a2a = int((ids_out + ids_in + emb_send + emb_recv) * (2 if mode == "train" else 1))
        pred.consumers.append(Consumer("all_to_all", "embedding", a2a, "input and output distribution buffers"))
        pred.stage_dynamic["embedding"] = pred.stage_dynamic.get("embedding", 0) + a2a
        pred.stage_peaks["embedding"] = pred.stage_peaks.get("embedding", 0) + a2a
        pred.rank, pred.world_size = rank, W
        out.append(pred)
    return out
