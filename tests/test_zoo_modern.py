"""The five modern zoo models (dlrmv2, deepfm, twotower, bst, hstu): published sizes, the layers' formulas,
in-batch retrieval, padding and causality of the sequence models, preflight, workload lengths.

(Building and matching outputs on all three backends, and stage detection in inference and training, are
covered for every zoo model by the parametrised tests in test_zoo.py, test_profiler.py and test_costmodel.py.)
"""

from __future__ import annotations

import pytest
import torch
from _batches import raw_batch

from recstack.errors import MemoryPreflightError
from recstack.workload import load_workload
from recstack.workload.generate import bind
from recstack.zoo import build_model, summary
from recstack.zoo.build import BuildOptions, memory_estimate, resolve_config
from recstack.zoo.layers import FMInteraction, HSTULayer, LowRankCrossNet, TransformerBlock
from recstack.zoo.memory import check_fits

TINY = 0.0005
MLPERF_ROWS = [40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209, 11938,
               155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36]
MLPERF_HOT = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]


def _macs(widths: list[int]) -> int:
    return sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=False))


def test_dlrmv2_is_the_mlperf_configuration():
    s = summary("dlrmv2")
    assert s["tables"] == 26 and s["rows"] == sum(MLPERF_ROWS) == 204_184_588
    assert s["table_bytes"] == sum(MLPERF_ROWS) * 128 * 4  # ~104.5 GB of fp32 tables
    assert s["lookups_per_sample"] == sum(MLPERF_HOT)
    width = 128 + 26 * 128  # bottom MLP output + 26 pooled embeddings = 3456
    cross = 3 * (2 * width * 512 + width)
    assert s["dense_flops_per_sample"] == 2 * (_macs([13, 512, 256, 128]) + cross + _macs([3456, 1024, 1024, 512, 256, 1]))
    cfg = resolve_config("dlrmv2")
    assert [t.pooling for t in cfg.resolved_tables()] == MLPERF_HOT
    assert all(t.fixed_length for t in cfg.resolved_tables())  # MLPerf's multi-hot sizes are fixed per table


def test_deepfm_has_39_fields_and_bst_hstu_sizes():
    model = build_model("deepfm", scale=TINY)
    assert model.cfg.dense_features + len(model.tables) == 39
    assert model.over_arch.mlp.widths == [390, 400, 400, 400, 1]
    bst, hstu = summary("bst"), summary("hstu")
    assert bst["lookups_per_sample"] == 20 + 20 + 1 + 1 + 3 + 3
    assert hstu["lookups_per_sample"] == 100 + 1
    # HSTU layer: uvqk projection, output projection, and n^2 (QK^T and AV) per head, 8 layers, n = 100
    n, d, h, dl, da = 100, 64, 2, 32, 32
    per_layer = n * (d * h * (2 * dl + 2 * da) + h * dl * d) + n * n * h * (da + dl)
    assert hstu["dense_flops_per_sample"] == 2 * (8 * per_layer + d)


def test_low_rank_cross_layer_formula():
    torch.manual_seed(0)
    net = LowRankCrossNet(width=6, layers=2, rank=3)
    x0 = torch.randn(4, 6)
    x = x0
    for down, up in zip(net.down, net.up, strict=True):
        x = x0 * (x @ down.weight.t() @ up.weight.t() + up.bias) + x
    torch.testing.assert_close(net(x0), x)


def test_fm_second_order_equals_the_pairwise_sum():
    torch.manual_seed(0)
    fm = FMInteraction(["a", "b", "c"], factors=4)
    embs = {n: torch.randn(5, 6) for n in "abc"}
    dense_fields, dense_linear = torch.randn(5, 2, 4), torch.randn(5, 1)
    logit, fields = fm(dense_fields, dense_linear, embs)
    assert fields.shape == (5, 5, 4)
    pairs = sum((fields[:, i] * fields[:, j]).sum(dim=1) for i in range(5) for j in range(i + 1, 5))
    first = sum(embs[n][:, 0] for n in "abc") + dense_linear[:, 0]
    torch.testing.assert_close(logit[:, 0], first + pairs, rtol=1e-5, atol=1e-5)


def test_twotower_scores_users_against_in_batch_items():
    model = build_model("twotower", scale=TINY, mode="train")
    batch = raw_batch(model, 6)
    scores = model(batch)
    assert scores.shape == (6, 6)
    with torch.no_grad():
        embs = model.sparse_arch(model.feature_processing(batch))
        q, c = model.query_dense_arch(embs), model.candidate_dense_arch(embs)
    torch.testing.assert_close(scores.detach(), q @ c.t())
    loss = model.loss(scores, batch.labels)  # softmax over the batch's items; the diagonal is the positive
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(scores, torch.arange(6)))
    loss.backward()
    assert model.query_dense_arch.mlp.layers[0].weight.grad.abs().sum() > 0
    assert model.candidate_dense_arch.mlp.layers[0].weight.grad.abs().sum() > 0


def test_transformer_block_ignores_padded_keys():
    torch.manual_seed(0)
    block = TransformerBlock(dim=8, heads=2, ffn_dim=16)
    x = torch.randn(1, 7, 8)
    valid = torch.tensor([[True, True, True, False, False, False, False]])
    padded_other = x.clone()
    padded_other[:, 3:] = torch.randn(1, 4, 8)  # change only padded positions
    torch.testing.assert_close(block(x, valid)[:, :3], block(padded_other, valid)[:, :3])


def test_hstu_layer_is_causal():
    torch.manual_seed(0)
    layer = HSTULayer(dim=8, heads=2, linear_dim=4, attention_dim=4)
    n = 6
    mask = torch.ones(n, n).tril().view(1, 1, n, n)
    counts = torch.full((1, 1, 1, 1), float(n))
    x = torch.randn(1, n, 8)
    later = x.clone()
    later[:, 4:] = torch.randn(1, 2, 8)  # change the future
    torch.testing.assert_close(layer(x, mask, counts)[:, :4], layer(later, mask, counts)[:, :4])
    assert not torch.allclose(layer(x, mask, counts)[:, 4:], layer(later, mask, counts)[:, 4:])


@pytest.mark.parametrize("name", ["bst", "hstu"])
def test_sequence_models_do_not_depend_on_other_samples_padding(name):
    model = build_model(name, scale=TINY)
    a = raw_batch(model, 4, seed=3)
    with torch.no_grad():
        e = model.sparse_arch(model.feature_processing(a))
        seq = model.seq_names[0] if name == "bst" else model.seq_name
        lengths = model.feature_processing(a).seq_lengths[seq]
        if name == "bst":
            behaviours = sum(e[n] for n in model.seq_names)
            target = sum(e[n] for n in model.target_names)
            full = model.transformer(target, behaviours, lengths)
            alone = model.transformer(target[:1], behaviours[:1, : int(lengths[0])], lengths[:1])
        else:
            full = model.encoder(e[seq], lengths)
            alone = model.encoder(e[seq][:1, : int(lengths[0])], lengths[:1])
    torch.testing.assert_close(full[:1], alone, rtol=1e-4, atol=1e-5)


def test_dlrmv2_full_size_is_refused_with_a_scale_that_fits(monkeypatch):
    monkeypatch.setenv("RECSTACK_MEMORY_LIMIT", str(24 * 2**30))
    with pytest.raises(MemoryPreflightError) as info:
        build_model("dlrmv2", scale=1.0)
    fit = float(str(info.value).rsplit("--scale ", 1)[1].split()[0])
    assert 0.05 < fit < 0.25  # 104.5 GB of tables into 24 GiB
    check_fits(memory_estimate(resolve_config("dlrmv2", fit), BuildOptions()), model="dlrmv2", scale=fit)


def test_hstu_attention_is_in_the_memory_estimate():
    cfg = resolve_config("hstu")
    opts = BuildOptions(batch_size=1, mode="train")
    eight, four = memory_estimate(cfg, opts), memory_estimate(cfg.model_copy(update={"blocks": 4}), opts)
    # four more layers of dense attention saved for backward: at least 4 x heads x n^2 fp32 values per sample
    # (n = mean length 100); in inference one layer's matrices are live at a time
    assert eight.activations - four.activations >= 4 * 2 * 100 * 100 * 4
    inference = memory_estimate(cfg, BuildOptions(batch_size=1, mode="inference"))
    assert inference.activations >= 2 * 2 * 100 * 100 * 4
    train = memory_estimate(cfg, BuildOptions(batch_size=1024, mode="train"))
    assert train.activations > 8 * 2 * 100 * 100 * 4 * 1024  # saved for backward: grows with the batch


def test_production_workload_gives_multi_hot_and_sequence_length_distributions():
    spec = load_workload("production")
    dlrm = build_model("dlrmv2", scale=1e-4)
    bound = bind(spec, dlrm.features(), dlrm.num_dense, dlrm.num_tasks)
    batch = bound.batch(64)
    for i, hot in enumerate(MLPERF_HOT):
        assert (batch.sparse[f"t_{i}"].lengths == hot).all()  # MLPerf multi-hot sizes: fixed per table
    hstu = build_model("hstu", scale=TINY)
    bound = bind(spec, hstu.features(), hstu.num_dense, hstu.num_tasks)
    lens = bound.batch(256).sparse["history"].lengths
    assert 1 <= int(lens.min()) and int(lens.max()) <= 128 and len(set(lens.tolist())) > 10
    with torch.no_grad():
        assert hstu(bound.batch(16)).shape == (16, 16)


def test_in_batch_scores_grow_with_the_square_of_the_batch():
    cfg = resolve_config("twotower", TINY)
    small = memory_estimate(cfg, BuildOptions(batch_size=1024)).activations
    large = memory_estimate(cfg, BuildOptions(batch_size=65536)).activations
    assert large - 64 * small >= (65536**2 - 64 * 1024**2) * 4  # the [B, B] fp32 score matrix
