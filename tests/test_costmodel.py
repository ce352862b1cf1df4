"""The analytic cost model: hand-computed formulas, the dispatch-mode counter, costs on real profiles."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _batches import raw_batch
from torch import nn

import recstack
from recstack.costmodel import BACKWARD, CostCounter, OpCost, TensorMeta, attach_costs, has_formula, op_cost
from recstack.costmodel.attach import normalize
from recstack.costmodel.ops_embedding import row_bytes
from recstack.profiling.runner import ProfileOptions, Step
from recstack.zoo import build_model, builtin_names

TINY = 0.0005
F32 = 4


# --- formulas ------------------------------------------------------------------------------------


def test_addmm_is_2mnk_plus_bias():
    m, k, n = 4, 16, 8
    bias, a, b = torch.randn(n), torch.randn(m, k), torch.randn(k, n)
    c = op_cost("aten::addmm", (bias, a, b))
    assert isinstance(c, OpCost)
    assert c.flops == 2 * m * n * k + m * n
    assert c.extra["matmul_flops"] == 2 * m * n * k
    assert c.bytes_read == (n + m * k + k * n) * F32 and c.bytes_written == m * n * F32
    assert c.intensity == pytest.approx(c.flops / c.bytes)
    # overload spellings, and a non-unit beta costs one more multiply per output
    assert op_cost("aten::addmm.default", (bias, a, b)).flops == c.flops
    assert op_cost("aten.addmm.default", (bias, a, b)).flops == c.flops
    assert op_cost("aten::addmm", (bias, a, b), {"beta": 0.5}).flops == c.flops + m * n
    # meta tensors are enough
    meta = [t.to("meta") for t in (bias, a, b)]
    assert op_cost("aten::addmm", meta).flops == c.flops


def test_mm_bmm_baddbmm_matmul_linear():
    assert op_cost("aten::mm", (torch.empty(3, 5), torch.empty(5, 7))).flops == 2 * 3 * 7 * 5
    a, b = torch.empty(6, 3, 5), torch.empty(6, 5, 7)
    assert op_cost("aten::bmm", (a, b)).flops == 2 * 6 * 3 * 7 * 5
    c = op_cost("aten::baddbmm", (torch.empty(6, 3, 7), a, b))
    assert c.flops == 2 * 6 * 3 * 7 * 5 + 6 * 3 * 7 and c.extra["matmul_flops"] == 2 * 6 * 3 * 7 * 5
    c = op_cost("aten::matmul", (torch.empty(2, 3, 4, 5), torch.empty(5, 6)))  # broadcast batch
    assert c.flops == 2 * (2 * 3) * 4 * 6 * 5 and c.bytes_written == 2 * 3 * 4 * 6 * F32
    x, w, bias = torch.empty(2, 9, 16), torch.empty(8, 16), torch.empty(8)
    c = op_cost("aten::linear", (x, w, bias))
    assert c.flops == 2 * 18 * 8 * 16 + 18 * 8
    assert c.bytes_read == (x.numel() + w.numel() + 8) * F32 and c.bytes_written == 18 * 8 * F32


def _bag_inputs(seed: int = 0, rows: int = 50, dim: int = 16, bags: int = 6):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 9, (bags,), generator=g)
    indices = torch.randint(0, rows, (int(lengths.sum()),), generator=g)  # repeats on purpose
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]])
    return torch.randn(rows, dim), indices, offsets


def test_embedding_bag_bytes_unique_rows_and_per_sample_weights():
    w, idx, off = _bag_inputs()
    lookups, dim, bags = idx.numel(), w.shape[1], off.numel()
    row = dim * F32
    c = op_cost("aten::_embedding_bag", (w, idx, off, False, 0))
    assert c.flops == lookups * dim
    assert c.bytes_read == lookups * row + idx.numel() * 8 + off.numel() * 8
    assert c.bytes_written == bags * dim * F32
    assert c.extra["lookups"] == lookups and c.extra["table_bytes"] == lookups * row
    unique = len(set(idx.tolist()))
    assert unique < lookups  # the test data has repeats
    assert c.extra["unique_rows"] == unique and c.extra["unique_bytes"] == unique * row
    # the CompositeImplicit packet name works the same; meta indices give bytes but no unique rows
    assert op_cost("aten::embedding_bag.padding_idx", (w, idx, off, False, 0, False, None, False, None)).bytes == c.bytes
    m = op_cost("aten::_embedding_bag", (w, idx.to("meta"), off.to("meta"), False, 0))
    assert m.bytes == c.bytes and "unique_rows" not in m.extra
    # per-sample weights: one more multiply per element, and the weights are read
    psw = torch.rand(lookups)
    cw = op_cost("aten::_embedding_bag", (w, idx, off, False, 0, False, psw))
    assert cw.flops == 2 * lookups * dim and cw.bytes_read == c.bytes_read + lookups * F32
    # mean: one divide per output element, plus offset2bag and bag_size written
    cm = op_cost("aten::_embedding_bag", (w, idx, off, False, 1))
    assert cm.flops == lookups * dim + bags * dim
    assert cm.bytes_written == bags * dim * F32 + lookups * 8 + bags * 8


def test_embedding_bag_padding_idx_rows_are_skipped():
    w, idx, off = _bag_inputs(seed=3)
    pad = int(idx[0])
    valid = int((idx != pad).sum())
    c = op_cost("aten::_embedding_bag", (w, idx, off, False, 0, False, None, False, pad))
    assert c.extra["lookups"] == valid and c.flops == valid * w.shape[1]
    assert c.extra["unique_rows"] == len(set(idx.tolist()) - {pad})


def test_embedding_gathers_without_flops():
    w, idx = torch.randn(30, 8), torch.randint(0, 30, (4, 5))
    c = op_cost("aten::embedding", (w, idx))
    assert c.flops == 0
    assert c.bytes_read == 20 * 8 * F32 + idx.numel() * 8 and c.bytes_written == 20 * 8 * F32


def test_tbe_inference_rows_carry_scale_and_bias():
    """int8 rows are dim + 4 bytes (fp16 scale and bias); fp16 rows 2*dim; counted per table from the offsets."""
    from fbgemm_gpu.split_embedding_configs import SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
    from fbgemm_gpu.split_table_batched_embeddings_ops_inference import (
        IntNBitTableBatchedEmbeddingBagsCodegen,
    )

    assert row_bytes(16, 2) == 20 and row_bytes(16, 1) == 32 and row_bytes(16, 0) == 64 and row_bytes(16, 3) == 12
    specs = [("a", 50, 16, SparseType.INT8), ("b", 60, 32, SparseType.INT8)]
    tbe = IntNBitTableBatchedEmbeddingBagsCodegen(
        [(n, r, d, t, EmbeddingLocation.HOST) for n, r, d, t in specs],
        device="cpu",
        pooling_mode=PoolingMode.SUM,
        output_dtype=SparseType.FP32,
    )
    tbe.initialize_weights()
    g = torch.Generator().manual_seed(0)
    b = 4
    lengths = torch.randint(1, 6, (2 * b,), generator=g)
    l0, l1 = int(lengths[:b].sum()), int(lengths[b:].sum())
    idx = torch.cat([torch.randint(0, 50, (l0,), generator=g), torch.randint(0, 60, (l1,), generator=g)]).int()
    off = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).int()
    with torch.inference_mode(), CostCounter(tbe) as cc:
        out = tbe(idx, off)
    c = cc.counts[("", "fbgemm::int_nbit_split_embedding_codegen_lookup_function")]
    assert c.covered_calls == 1
    assert c.extra["table_bytes"] == l0 * 20 + l1 * 36
    assert c.flops == 3 * (l0 * 16 + l1 * 32)  # add + dequantise (scale * q + bias)
    assert c.bytes_written == out.numel() * F32 == b * 48 * F32
    uniq = len(set(idx[:l0].tolist())) + len(set(idx[l0:].tolist()))
    assert c.extra["unique_rows"] == uniq and c.extra["unique_bytes"] == len(set(idx[:l0].tolist())) * 20 + len(
        set(idx[l0:].tolist())
    ) * 36
    assert cc.counts[("", "fbgemm::bounds_check_indices")].covered_calls == 1


def test_gru_layer_formula_and_counted_decomposition():
    bsz, steps, din, hid = 4, 5, 6, 8
    gru = nn.GRU(din, hid, batch_first=True)
    x, h0 = torch.randn(bsz, steps, din), torch.zeros(1, bsz, hid)
    params = [gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0]
    c = op_cost("aten::gru.input", (x, h0, params, True, 1, 0.0, False, False, True))
    rows = bsz * steps
    gates_mm = 2 * 3 * hid * (din + hid)
    assert c.extra["matmul_flops"] == rows * gates_mm
    assert c.flops == rows * (gates_mm + 2 * 3 * hid + 17 * hid)
    assert c.bytes_read == (x.numel() + h0.numel() + sum(p.numel() for p in params)) * F32
    assert c.bytes_written == (rows * hid + bsz * hid) * F32
    # a real run: CompositeImplicit on CPU, so the counter sees addmm/mm; their matmul FLOPs are the formula's
    for ctx in (torch.inference_mode, torch.no_grad):
        with ctx(), CostCounter(gru) as cc:
            gru(x)
        assert not cc.uncovered()
        assert sum(v.extra.get("matmul_flops", 0.0) for v in cc.counts.values()) == rows * gates_mm


def test_lstm_and_cells():
    lstm = nn.LSTM(6, 8)
    with torch.inference_mode(), CostCounter(lstm) as cc:
        lstm(torch.randn(5, 3, 6))  # runs aten::mkldnn_rnn_layer on CPU
    assert not cc.uncovered()
    assert sum(v.extra.get("matmul_flops", 0.0) for v in cc.counts.values()) == 15 * 2 * 4 * 8 * (6 + 8)
    x, h = torch.randn(3, 6), torch.randn(3, 8)
    w_ih, w_hh = torch.randn(24, 6), torch.randn(24, 8)
    c = op_cost("aten::gru_cell", (x, h, w_ih, w_hh))
    assert c.flops == 3 * (2 * 24 * (6 + 8) + 17 * 8)


def test_cat_copies_and_views_cost_nothing():
    a, b = torch.empty(4, 6), torch.empty(4, 2)
    c = op_cost("aten::cat", ([a, b], 1))
    assert c.flops == 0 and c.bytes_read == (24 + 8) * F32 and c.bytes_written == 32 * F32
    assert op_cost("aten::stack", ([a, a],)).bytes == 2 * 2 * 24 * F32
    for name, args in [
        ("aten::view", (a, [24])),
        ("aten::t", (a,)),
        ("aten::transpose.int", (a, 0, 1)),
        ("aten::expand", (torch.empty(1, 6), [4, 6])),
        ("aten::slice.Tensor", (a, 0, 1, 3)),
        ("aten::select.int", (a, 0, 1)),
        ("aten::split.Tensor", (a, 2)),
        ("aten::chunk", (a, 2)),
        ("aten::narrow", (a, 1, 0, 2)),
        ("aten::unsqueeze", (a, 0)),
        ("aten::as_strided", (a, [2], [1])),
        ("aten::empty.memory_format", ([4, 6],)),
        ("aten::detach", (a,)),
    ]:
        cost = op_cost(name, args)
        assert cost is not None, name  # covered...
        assert cost.flops == 0 and cost.bytes == 0, name  # ...and free
    # reshape / contiguous copy only non-contiguous inputs; to() only when something changes
    assert op_cost("aten::reshape", (a, [24])).bytes == 0
    assert op_cost("aten::reshape", (a.t(), [24])).bytes == 2 * 24 * F32
    assert op_cost("aten::to.dtype", (a, torch.float32)).bytes == 0
    assert op_cost("aten::to.dtype", (a, torch.float16)).bytes == 24 * F32 + 24 * 2
    assert op_cost("aten::copy_", (torch.empty(4, 6), torch.empty(6))).bytes == 6 * F32 + 24 * F32


def test_elementwise_reductions_softmax_losses():
    x, row = torch.empty(8, 16), torch.empty(16)
    c = op_cost("aten::add.Tensor", (x, row))
    assert c.flops == 128 and c.bytes_read == (128 + 16) * F32 and c.bytes_written == 128 * F32
    assert op_cost("aten::add.Tensor", (x, row), {"alpha": 2}).flops == 256
    assert op_cost("aten::sigmoid", (x,)).flops == 4 * 128
    assert op_cost("aten::relu_", (x,)).bytes == 2 * 128 * F32
    assert op_cost("aten::gt.Scalar", (x, 0.0)).bytes_written == 128  # bool output
    ids = torch.randint(0, 1000, (100,))
    r = op_cost("aten::remainder.Scalar", (ids, 7))
    assert r.flops == 0 and r.extra["int_ops"] == 4 * 100  # integer arithmetic is not FLOPs
    assert op_cost("aten::where.self", (torch.empty(8, 16, dtype=torch.bool), x, x)).bytes_read == 128 * (1 + 4 + 4)
    assert op_cost("aten::sum.dim_IntList", (x, [1])).bytes_written == 8 * F32
    assert op_cost("aten::mean.dim", (x, [1])).flops == 128 + 8
    assert op_cost("aten::max.dim", (x, 1)).bytes_written == 8 * F32 + 8 * 8  # values + int64 indices
    assert op_cost("aten::cumsum", (x, 0)).flops == 128
    assert op_cost("aten::_softmax", (x, 1, False)).flops == 5 * 128
    assert op_cost("aten::native_layer_norm", (x, [16], row, row, 1e-5)).flops == 8 * 128 + 2 * 8
    bce = op_cost("aten::binary_cross_entropy_with_logits", (x, x))
    assert bce.flops == 7 * 128 + 128 + 1 and bce.bytes_written == F32
    assert op_cost("aten::fill_.Scalar", (x, 1.0)).bytes == 128 * F32
    assert op_cost("aten::zero_", (x,)).bytes_read == 0


def test_unknown_ops_have_no_formula():
    assert op_cost("aten::sort", (torch.empty(5),)) is None
    assert op_cost("mylib::custom_thing", ()) is None
    assert not has_formula("aten::sort") and has_formula("aten::addmm.default")
    assert has_formula("fbgemm::split_embedding_backward_codegen_rowwise_adagrad_unweighted_pt2_wrapper")


def test_jagged_fbgemm_ops_are_covered():
    import fbgemm_gpu  # noqa: F401

    lengths = torch.tensor([[2, 0, 1], [1, 3, 0]], dtype=torch.int32)
    values = torch.arange(7, dtype=torch.int64)
    offsets = torch.tensor([0, 2, 2, 3, 4, 7, 7])
    with CostCounter() as cc:
        torch.ops.fbgemm.asynchronous_complete_cumsum(lengths.view(-1))
        torch.ops.fbgemm.permute_2D_sparse_data(torch.tensor([1, 0], dtype=torch.int32), lengths, values, None, 7)
        torch.ops.fbgemm.segment_sum_csr(1, torch.tensor([0, 2, 7], dtype=torch.int32), values.float())
        torch.ops.fbgemm.jagged_to_padded_dense(torch.randn(7, 4), [offsets], [3])
        torch.ops.fbgemm.dense_to_jagged(torch.randn(6, 3, 4), [offsets])
    assert not cc.uncovered() and not cc.error_messages
    cum = cc.counts[("", "fbgemm::asynchronous_complete_cumsum")]
    assert cum.bytes_read == 6 * 4 and cum.bytes_written == 7 * 4 and cum.extra["int_ops"] == 6
    perm = cc.counts[("", "fbgemm::permute_2D_sparse_data")]
    assert perm.bytes_written == 6 * 4 + 7 * 8  # permuted lengths + values
    pad = next(v for (p, n), v in cc.counts.items() if n.startswith("fbgemm::jagged_to_padded_dense") and v.calls)
    assert pad.bytes_written == 6 * 3 * 4 * F32


# --- the counter ------------------------------------------------------------------------------------


def test_inference_mode_decomposes_like_the_profiler():
    """Under inference_mode CompositeImplicit ops reach the mode whole; the counter decomposes them the way a
    plain run does (here matmul folds to mm + clone: it would pick bmm if views lost requires_grad)."""
    from torch.profiler import profile

    lin = nn.Linear(8, 6)
    x = torch.randn(5, 4, 8).transpose(0, 1)  # non-contiguous 3-D input: matmul path
    with torch.inference_mode(), profile() as prof:
        lin(x)
    seen = {e.name for e in prof.events()}
    with torch.inference_mode(), CostCounter(lin) as cc:
        lin(x)
    executed = {n for (_, n), c in cc.counts.items() if c.calls}
    # same ops, up to in-place/out-of-place (under a mode linear adds its bias with add, not add_)
    assert {normalize(n) for n in executed} <= {normalize(n) for n in seen}, executed - seen
    assert "aten::mm" in executed and "aten::bmm" not in executed
    assert cc.counts[("", "aten::linear")].decomposed_calls == 1
    mm = cc.counts[("", "aten::mm")]
    assert len(mm.contexts) == 1
    assert next(iter(mm.contexts)).chain == ("aten::linear", "aten::matmul")
    assert mm.flops == 2 * 20 * 6 * 8


def test_grad_and_no_grad_see_decomposed_ops_and_module_paths():
    net = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
    x = torch.randn(3, 8)
    for ctx in (torch.no_grad, torch.enable_grad):
        with ctx(), CostCounter(net) as cc:
            net(x)
        assert ("0", "aten::linear") not in cc.counts  # autograd decomposed it before the mode
        assert cc.counts[("0", "aten::addmm")].flops == 2 * 3 * 4 * 8 + 3 * 4
        assert next(iter(cc.counts[("0", "aten::addmm")].contexts)).chain == ()
        assert cc.counts[("1", "aten::relu")].covered_calls == 1


def test_backward_ops_are_tagged_with_node_and_forward_module():
    net = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 1))
    x = torch.randn(3, 8)
    with CostCounter(net) as cc:
        loss = net(x).sum()
        loss.backward()
    mm = cc.counts[(BACKWARD, "aten::mm")]
    origins = {(c.node, c.origin) for c in mm.contexts}
    assert ("AddmmBackward0", "0") in origins and ("AddmmBackward0", "2") in origins
    # weight grads of both layers + input grad of the second (the first's input needs no grad)
    assert mm.extra["matmul_flops"] == 2 * 3 * 4 * 8 + 2 * 3 * 1 * 4 + 2 * 3 * 4 * 1
    assert cc.total(backward=True).flops > 0 and not cc.uncovered()


def test_fbgemm_training_ops_seen_on_cpu_with_no_grad_and_in_backward():
    model = build_model("din", scale=TINY, backend="tbe", mode="train")
    batch = raw_batch(model, 8, seed=0)
    with torch.no_grad(), CostCounter(model) as cc:
        model(batch)  # the training TBE kernel cannot run under inference_mode
    names = {n for (_, n), c in cc.counts.items() if c.calls}
    assert "fbgemm::split_embedding_codegen_forward_unweighted_pt2_wrapper" in names
    assert "fbgemm::split_embedding_nobag_codegen_forward_unweighted_pt2_wrapper" in names
    assert not cc.uncovered() and not cc.error_messages
    step = Step(model, ProfileOptions(mode="train"), None)
    with CostCounter(model) as cc:
        step.run(batch)
    bw = {n for (p, n), c in cc.counts.items() if p == BACKWARD and c.calls}
    assert "fbgemm::split_embedding_backward_codegen_sgd_unweighted_pt2_wrapper" in bw
    assert "fbgemm::split_embedding_nobag_backward_codegen_sgd_unweighted_pt2_wrapper" in bw
    assert not cc.uncovered() and not cc.error_messages
    fwd = cc.counts[("sparse_arch.groups.pooled", "fbgemm::split_embedding_codegen_forward_unweighted_pt2_wrapper")]
    bwd = cc.counts[(BACKWARD, "fbgemm::split_embedding_backward_codegen_sgd_unweighted_pt2_wrapper")]
    assert bwd.extra["lookups"] == fwd.extra["lookups"] and bwd.extra["unique_rows"] == fwd.extra["unique_rows"]


@pytest.mark.parametrize("backend", ["torch", "torchrec", "tbe"])
def test_every_zoo_model_is_fully_covered_in_inference(backend):
    for name in builtin_names():
        model = build_model(name, scale=TINY, backend=backend, mode="inference")
        step = Step(model, ProfileOptions(mode="inference"), None)
        batch = raw_batch(model, 8, seed=1)
        with CostCounter(model) as cc:
            step.run(batch)
        assert cc.uncovered() == {}, (name, cc.uncovered())
        assert not cc.error_messages, (name, cc.error_messages)
        assert cc.total().flops > 0, name


# --- attaching to real profiles ----------------------------------------------------------------------


def _profile_and_count(name: str, backend: str, mode: str = "inference", batch: int = 32):
    model = build_model(name, scale=TINY, backend=backend, mode=mode)
    prof = recstack.profile(
        model, lambda i: raw_batch(model, batch, seed=i), batch_size=batch, mode=mode, iters=3, warmup=1, op_iters=1
    )
    step = Step(model, ProfileOptions(mode=mode), None)
    b = raw_batch(model, batch, seed=0)  # generated outside the counter
    with CostCounter(model) as counter:
        step.run(b)
    return model, prof, counter


def _check_sums(root):
    """Every node that is not a cost site holds the sums of its children; unknown is None, never 0."""
    for n in root.walk():
        if n.level == "kernel" or n.extra.get("cost_in_parent"):
            continue
        kids = [c for c in n.children if c.level != "kernel" and c.flops is not None]
        if n.level != "op" or any(c.level == "op" and c.flops is not None for c in n.children):
            if not kids or (n.flops is None and not any(c.flops or c.bytes for c in kids)):
                assert n.flops is None, n.path  # nothing known, or only free ops beside unknown ones
                continue
            assert n.flops == pytest.approx(sum(c.flops for c in kids)), n.path
            assert n.bytes == pytest.approx(sum(c.bytes for c in kids)), n.path
            assert n.extra["bytes_read"] + n.extra["bytes_written"] == pytest.approx(n.bytes)
        if n.flops is not None:
            assert n.bytes is not None and n.extra["provenance"]["flops"] == "formula"
            assert n.intensity is None if n.bytes == 0 else n.intensity == pytest.approx(n.flops / n.bytes)


def test_attach_costs_on_a_real_rmc1_profile():
    b = 32
    model, prof, counter = _profile_and_count("rmc1", "torch", batch=b)
    summary = attach_costs(prof.root, counter.counts, steps=1)
    root = prof.root
    _check_sums(root)
    assert summary["uncovered_time_share"] < 0.02 and summary["uncovered_ops"] == []
    assert summary["unplaced"] == [] and summary["formula_errors"] == 0
    assert root.flops == summary["flops"] > 0 and root.extra["covered_time_share"] == 1.0
    # matmul FLOPs of the dense stage: 2 * B * sum(in * out) over its Linear layers, exactly
    dense = prof.stage("dense")
    linears = [m for m in model.dense_arch.modules() if isinstance(m, nn.Linear)]
    want = 2 * b * sum(m.in_features * m.out_features for m in linears)
    assert dense.extra["cost_detail"]["matmul_flops"] == want
    addmm = [n for n in dense.walk() if n.name == "aten::addmm"]
    assert len(addmm) == len(linears) and all(n.extra["cost_match"] == "exact" for n in addmm)
    assert sum(n.flops for n in addmm) == want + b * sum(m.out_features for m in linears)  # + bias adds
    # embeddings: bytes from the lookups, unique rows per table from the real indices
    emb = prof.stage("embedding")
    bags = [n for n in emb.walk() if n.name == "aten::_embedding_bag"]
    assert len(bags) == 8
    detail = emb.extra["cost_detail"]
    assert detail["table_bytes"] == detail["lookups"] * 32 * F32 and 0 < detail["unique_rows"] <= detail["lookups"]
    # nested ops inside a costed op hold no figures of their own
    inner = [n for n in bags[0].walk() if n is not bags[0]]
    assert inner and all(n.flops is None and n.extra.get("cost_in_parent") for n in inner)
    # provenance
    assert root.extra["provenance"]["time_s"] == "measured"
    assert dense.extra["provenance"] == {"time_s": "measured", "flops": "formula", "bytes": "formula",
                                         "intensity": "derived"}
    assert addmm[0].extra["provenance"]["time_s"] == "derived"
    for s in root.children:
        if s.flops is not None:
            assert s.extra["covered_time_share"] == 1.0


@pytest.mark.parametrize(("name", "backend"), [("ncf", "torchrec"), ("din", "torch"), ("dien", "tbe")])
def test_uncovered_time_share_on_real_profiles(name, backend):
    """Sequence models too: index_put/padding (DIN), the GRU decomposed under inference_mode and the AUGRU
    loop (DIEN); every site matches its counter entry exactly."""
    _, prof, counter = _profile_and_count(name, backend, batch=8)
    summary = attach_costs(prof.root, counter.counts, steps=1)
    assert summary["uncovered_time_share"] < 0.02, summary["uncovered_ops"]
    assert summary["unplaced"] == [] and summary["formula_errors"] == 0
    matches = {n.extra["cost_match"] for n in prof.root.walk() if "cost_match" in n.extra}
    assert matches == {"exact"}
    _check_sums(prof.root)


def test_unknown_costs_stay_none():
    _, prof, counter = _profile_and_count("rmc1", "tbe", batch=16)
    counts = {k: v for k, v in counter.counts.items() if k[0] != "feature_processing"}  # as if never counted
    counts.pop(("inter_arch", "aten::cat"))
    summary = attach_costs(prof.root, counts, steps=1)
    fp = prof.stage("feature_processing")
    assert fp.flops is None and fp.bytes is None and fp.intensity is None
    assert fp.extra["covered_time_share"] < 0.5  # only its free ops (views, no-op casts) are covered
    assert all(not n.flops and not n.bytes for n in fp.walk())
    ops = [n for n in fp.walk() if n.level == "op" and n.extra.get("uncovered")]
    assert ops and all(n.flops is None and n.extra["provenance"]["flops"] is None for n in ops)
    cat = next(n for n in prof.stage("interaction").walk() if n.name == "aten::cat")
    assert cat.flops is None and cat.extra["uncovered"]
    names = {u["name"] for u in summary["uncovered_ops"]}
    assert "aten::cat" in names and "aten::remainder" in names
    assert 0 < summary["uncovered_time_share"] < 1
    assert prof.root.flops is not None and prof.root.extra["partial"]  # the covered rest still adds up
    _check_sums(prof.root)
    # tbe inference: the embedding stage is one fbgemm call, covered
    emb = prof.stage("embedding")
    assert emb.extra["covered_time_share"] == 1.0 and emb.extra["cost_detail"]["lookups"] > 0


def test_attach_costs_in_training_places_backward_exactly():
    b = 16
    model, prof, counter = _profile_and_count("rmc1", "tbe", mode="train", batch=b)
    summary = attach_costs(prof.root, counter.counts, steps=1)
    _check_sums(prof.root)
    assert summary["uncovered_time_share"] < 0.02 and summary["unplaced"] == []
    bw = prof.stage("backward")
    by_stage = {c.name: c for c in bw.children}
    assert {"embedding", "dense", "head"} <= set(by_stage)
    # dense backward: weight grads of every layer, input grads of all but the first (dense features need none)
    layers = [m for m in model.dense_arch.modules() if isinstance(m, nn.Linear)]
    fwd_mm = 2 * b * sum(m.in_features * m.out_features for m in layers)
    first = 2 * b * layers[0].in_features * layers[0].out_features
    assert by_stage["dense"].extra["cost_detail"]["matmul_flops"] == 2 * fwd_mm - first
    # the fused TBE backward lands in backward/embedding with the forward's lookups
    tbe_bw = next(n for n in by_stage["embedding"].walk() if n.name.startswith("fbgemm::split_embedding_backward"))
    fwd = next(n for n in prof.stage("embedding").walk() if n.name.endswith("forward_unweighted_pt2_wrapper"))
    assert tbe_bw.extra["cost_detail"]["lookups"] == fwd.extra["cost_detail"]["lookups"]
    assert tbe_bw.extra["cost_match"] == "exact" and tbe_bw.flops > 0
    assert prof.stage("optimizer").flops > 0 and bw.extra["covered_time_share"] == 1.0


def test_attach_costs_divides_by_steps_and_rejects_bad_steps():
    _, prof, counter = _profile_and_count("ncf", "torchrec", batch=8)
    one = attach_costs(prof.root, counter.counts, steps=1)["flops"]
    assert attach_costs(prof.root, counter.counts, steps=2)["flops"] == pytest.approx(one / 2)
    with pytest.raises(ValueError):
        attach_costs(prof.root, counter.counts, steps=0)


def test_tensor_meta_sparse_bytes():
    i = torch.tensor([[0, 2, 2]])
    v = torch.randn(3, 4)
    sp = torch.sparse_coo_tensor(i, v, (5, 4), check_invariants=True)
    dense = torch.zeros(5, 4)
    c = op_cost("aten::add_.Tensor", (dense, sp), {"alpha": -0.1})
    assert c.flops == 2 * 12  # multiply by alpha and add, nnz rows only
    assert c.bytes_written == 12 * F32 and c.bytes_read == (12 * F32 + 3 * 8) + 12 * F32
    meta = TensorMeta((5, 4), torch.float32, sparse_nnz=3, sparse_dim=1)
    assert meta.nbytes == 3 * (4 * F32 + 8)


def test_functional_loss_backward_in_counter():
    x = torch.randn(6, 3, requires_grad=True)
    with CostCounter() as cc:
        F.cross_entropy(x, torch.tensor([0, 1, 2, 0, 1, 2])).backward()
    assert not cc.uncovered()
    assert cc.counts[(BACKWARD, "aten::nll_loss_backward")].bytes_written == 18 * F32
