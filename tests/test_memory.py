"""recstack.memory: the prediction against real steps, the searches, the command, the cache simulators."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from recstack.errors import ConfigError
from recstack.memory import cache
from recstack.memory.search import largest_batch, largest_scale
from recstack.workload.presets import load_workload
from recstack.zoo.build import BuildOptions, memory_estimate, resolve_config
from recstack.zoo.config import Table
from recstack.zoo.footprint.predict import per_rank, predict, predict_config, row_bytes, shape_of, table_bytes

REPO = Path(__file__).resolve().parents[1]
# ../shared/data beside the repository (a worktree one level deeper finds it one level up)
STATS = next((p / "shared" / "data" / "dlrm_datasets_2022_locality_stats.txt" for p in (REPO.parent, REPO.parent.parent)
              if (p / "shared" / "data").is_dir()), REPO.parent / "shared" / "data" / "dlrm_datasets_2022_locality_stats.txt")
UNIFORM = load_workload("uniform")


def _pair(model: str, backend: str, mode: str, optimizer: str = "sgd", batch: int = 32, scale: float = 1e-3,
          workload: str = "uniform"):
    from recstack.memory.measure import measure

    m = measure(model, backend=backend, mode=mode, optimizer=optimizer, batch_size=batch, scale=scale,
                workload=workload)
    p = predict_config(model, scale=scale, batch_size=batch, backend=backend, mode=mode, optimizer=optimizer,
                       workload=load_workload(workload), num_batches=1)
    return p, m


@pytest.mark.parametrize(
    ("model", "backend", "mode", "optimizer", "batch"),
    [("rmc1", "torch", "train", "adagrad", 16), ("twotower", "torchrec", "train", "adagrad", 32),
     ("deepfm", "tbe", "train", "adagrad", 32), ("rmc3", "tbe", "inference", "sgd", 32),
     ("hstu", "torch", "inference", "sgd", 8)],
)
def test_prediction_against_a_real_step(model, backend, mode, optimizer, batch):
    """Resident bytes (parameters, FBGEMM's metadata, optimizer state, the batch) exactly; the step within 10%.

    hstu runs the production workload: histories of varying length, padded to the batch's longest (predicted
    as the length distribution's 1 - 1/(2B) quantile)."""
    workload = "production" if model == "hstu" else "uniform"
    p, m = _pair(model, backend, mode, optimizer, batch=batch, workload=workload)
    r = p.resident
    assert r["tables"] + r["dense_parameters"] == m.parameters_bytes
    assert r["optimizer_state"] == m.optimizer_state_bytes
    assert r["table_metadata"] + r["dense_buffers"] == m.buffers_bytes
    if workload == "uniform":  # fixed lengths: the batch is exactly the mean
        assert p.inputs == m.batch_bytes
    assert (r["optimizer_state"] > 0) == (optimizer == "adagrad" and mode == "train")
    assert abs(p.step_peak / m.step_peak_bytes - 1) <= 0.10, (p.stage_dynamic, m.stage_peak_bytes)
    assert abs(p.peak / m.peak_bytes - 1) <= 0.10


def test_fbgemm_int8_rows_are_padded_as_the_inference_kernel_lays_them_out():
    # int8: dim + 4 bytes of fp16 scale and bias; 16-byte row alignment on GPU, 1 on CPU; 128-byte table blocks
    assert row_bytes(30, "int8", backend="tbe", mode="inference") == 34
    assert row_bytes(30, "int8", backend="tbe", mode="inference", device="cuda") == 48
    assert row_bytes(30, "fp16", backend="tbe", mode="inference", device="cuda") == 64
    from recstack.zoo.embedding import TBEEmbeddings

    tables = [Table(name="a", rows=7, dim=30, feature="a", pooling=1.0),
              Table(name="b", rows=5, dim=12, feature="b", pooling=1.0)]
    for dtype in ("int8", "fp16", "fp32"):
        tbe = TBEEmbeddings(tables, mode="inference", table_dtype=dtype)
        real = sum(int(g.weights_host.numel()) for g in tbe.groups.values())
        assert real == sum(table_bytes(t, dtype, backend="tbe", mode="inference") for t in tables)


def test_optimizer_state_per_optimizer_and_backend():
    shape = shape_of(resolve_config("rmc1", 1e-3))
    tables = sum(t.rows * t.dim * 4 for t in shape.tables)
    rows = sum(t.rows for t in shape.tables)

    def state(backend: str, opt: str) -> int:
        return predict(shape, backend=backend, mode="train", optimizer=opt, batch_size=8).resident["optimizer_state"]

    dense = shape.dense_params * 4
    assert state("torch", "sgd") == 0
    assert state("torch", "adagrad") == tables + dense + 4 * (len(shape.tables) + shape.dense_tensors)
    assert state("tbe", "adagrad") == rows * 4 + dense + 4 * shape.dense_tensors  # FBGEMM's row-wise Adagrad
    assert state("torch", "adam") == 2 * tables + 2 * dense + 4 * (len(shape.tables) + shape.dense_tensors)
    assert predict(shape, backend="torch", mode="inference", optimizer="adam", batch_size=8).resident[
        "optimizer_state"] == 0


def test_largest_batch_and_scale_are_the_edges_of_the_prediction():
    shape = shape_of(resolve_config("twotower", 1e-2), UNIFORM)
    opts = {"backend": "torch", "mode": "train", "optimizer": "adagrad"}
    limit = predict(shape, batch_size=5000, **opts).peak
    b = largest_batch(shape, limit, **opts)
    assert predict(shape, batch_size=b, **opts).peak <= limit < predict(shape, batch_size=b + 1, **opts).peak
    assert abs(b - 5000) <= 1  # the in-batch score matrix makes the peak grow faster than linearly
    s = largest_scale(shape, 2 * limit, 5000, **opts)
    assert s is not None and s > 1
    assert predict(shape.scaled(s), batch_size=5000, **opts).peak <= 2 * limit
    step = 10.0 ** (np.floor(np.log10(s)) - 1)  # two significant digits, rounded down: the next one does not fit
    assert predict(shape.scaled(s + step), batch_size=5000, **opts).peak > 2 * limit
    assert largest_batch(shape, 1000, **opts) == 0


def test_per_rank_splits_tables_and_adds_all_to_all_buffers():
    shape = shape_of(resolve_config("rmc2", 1e-2), UNIFORM)
    one = predict(shape, backend="torchrec", batch_size=256)
    ranks = per_rank(shape, world_size=4, sharding="table_wise", batch_size=256)
    assert sum(p.resident["tables"] for p in ranks) == one.resident["tables"]
    assert all(any(c.what == "all_to_all" and c.bytes > 0 for c in p.consumers) for p in ranks)
    rows = per_rank(shape, world_size=4, sharding="row_wise", batch_size=256)
    assert max(p.resident["tables"] for p in rows) <= one.resident["tables"] // 4 + 32 * 64 * 4
    dp = per_rank(shape, world_size=2, sharding="data_parallel", batch_size=256)
    assert dp[0].resident["tables"] == one.resident["tables"]


def test_the_preflight_uses_the_same_prediction():
    cfg = resolve_config("rmc1", 1e-2)
    opts = BuildOptions(backend="torchrec", mode="train", optimizer="adagrad", batch_size=512)
    est = memory_estimate(cfg, opts)
    pred = predict(shape_of(cfg), backend="torchrec", mode="train", optimizer="adagrad", batch_size=512)
    assert est.tables == pred.resident["tables"]
    assert est.total - est.headroom == pred.resident_total + pred.inputs + pred.step_peak


def test_memory_command_json_and_bad_input(tmp_path, capsys):
    from recstack.cli import main

    out = tmp_path / "m.json"
    assert main(["memory", "dlrmv2", "--scale", "0.01", "--mode", "train", "--optimizer", "adagrad",
                 "--limit", "24GiB", "--json", "-o", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(out.read_text())
    from recstack.schema.memory_model import MemoryDocument

    MemoryDocument.model_validate(doc)
    assert doc["fits"] and doc["largest_batch_size"] > 1024 and doc["largest_scale"] > 0.01
    assert {s["stage"] for s in doc["stages"]} >= {"embedding", "backward", "optimizer"}
    assert doc["top_consumers"][0]["bytes"] >= doc["top_consumers"][-1]["bytes"]
    for bad, flag in ((["rmc1", "--limit", "24 GiBs"], "--limit"), (["nosuchmodel"], "model"),
                      (["rmc1", "--batch-size", "0"], "--batch-size")):
        assert main(["memory", *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error:") and flag in err, err
    assert main(["memory", "rmc1", "--limit", "1MiB"]) == 0
    text = capsys.readouterr().out
    assert "does NOT fit" in text and "largest batch that fits: none" in text
    assert main(["memory", "rmc1", "--limit", "2GiB", "--scale", "0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["largest_scale"] == 0.51  # the --scale value, two digits


def test_memory_command_sizes_each_tables_cache(capsys):
    from recstack.cli import main

    assert main(["memory", "dlrmv2", "--scale", "0.001", "--workload", "production", "--batch-size", "128",
                 "--cache-hit", "0.5", "--cache-batches", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    streams = cache.table_streams("dlrmv2", "production", batch_size=128, batches=2, scale=0.001)
    sized = [t for t in doc["cache"]["tables"] if t["lru_rows"] is not None]
    assert sized and len(sized) < len(doc["cache"]["tables"])  # some tables reach 50%, the largest do not
    for t in doc["cache"]["tables"]:
        s = streams[t["table"]]
        assert t["lookups"] == s.size and t["distinct_rows"] == np.unique(s).size
        for policy in cache.POLICIES:
            rows = t[f"{policy}_rows"]
            if rows is not None:
                assert 1 - cache.simulate(s, rows, policy=policy) >= 0.5
                assert t[f"{policy}_bytes"] == rows * 128 * 4
    assert main(["memory", "twotower", "--cache-hit", "1.5"]) == 2


def _zipf(n: int, rows: int, a: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.zipf(a, n) * 7919 % rows).astype(np.int64)


@pytest.mark.parametrize("policy", cache.POLICIES)
def test_set_associative_simulator_matches_the_exact_one_at_every_size(policy):
    for seed, (n, rows, a) in enumerate([(6000, 3000, 1.2), (4000, 800, 1.05), (3000, 50_000, 1.4)]):
        s = _zipf(n, rows, a, seed)
        for size in cache.default_sizes(s, ways=8, points=8) + [4]:
            fast = cache.simulate(s, size, policy=policy, ways=8)
            exact = cache.simulate_exact(s, size, policy=policy, ways=8)
            assert abs(fast - exact) <= 0.01, (policy, size, fast, exact)


def test_stack_distance_curve_is_exact_fully_associative_lru():
    s = _zipf(3000, 1000, 1.1, 3)
    sizes = [1, 5, 32, 100, 400, 1000]
    assert cache.lru_curve_fully_associative(s, sizes) == pytest.approx(
        [cache.simulate_exact(s, c, policy="lru", ways=c) for c in sizes], abs=1e-12)
    d = cache.stack_distances(np.array([1, 2, 1, 3, 2, 1]))
    assert d.tolist() == [-1, -1, 1, -1, 2, 2]


def test_size_for_hit_rate_reaches_the_target():
    s = _zipf(5000, 2000, 1.2, 5)
    size = cache.size_for_hit_rate(s, 0.6, ways=cache.ASSOC)
    assert size is not None and size % cache.ASSOC == 0
    assert 1 - cache.simulate(s, size) >= 0.6
    assert cache.size_for_hit_rate(s, 0.999) is None  # above what even all distinct rows give (cold misses)
    with pytest.raises(ConfigError):
        cache.simulate(np.array([[1, 2]]), 32)


def test_unbounded_cache_misses_only_first_touches_as_the_locality_counts():
    from recstack.workload.stats import locality_stats

    streams = cache.table_streams("dlrmv2", "production", batch_size=512, batches=1, scale=1e-3)
    stats = locality_stats(streams.values())
    # as many sets as distinct rows: no set overflows its 32 ways, so only first touches miss
    misses = sum(cache.simulate(s, 32 * int(np.unique(s).size)) * s.size for s in streams.values())
    assert misses == pytest.approx(stats["unique_rows"])
    assert sum(s.size for s in streams.values()) == stats["lookups"]


def test_simulator_against_the_published_2022_locality_statistics():
    if not STATS.exists():
        pytest.skip(f"{STATS} is absent (the shared data folder ../shared/data is not mounted here)")
    text = STATS.read_text().split("\n\n")[0]
    avg = float(re.search(r"Avg col size: ([0-9.]+)", text).group(1))
    rows_share = [float(x) for x in re.findall(r"[\]+]: ([0-9.]+)", text.split("Histogram of col sizes:")[1].split(
        "Ratio of index")[0])]
    look_share = [float(x) for x in re.findall(r"[\]+]: ([0-9.]+)", text.split("Ratio of index")[1])]
    # one batch rebuilt from the histograms: per bucket, its rows repeated their mean count (lookups / rows)
    n = 100_000
    rng = np.random.default_rng(0)
    parts, next_row = [], 0
    for rs, ls, low in zip(rows_share, look_share, [1] + [2**k + 1 for k in range(16)], strict=True):
        if ls == 0:
            continue
        count = max(low, round(avg * ls / rs)) if rs > 0 else max(low, 1)
        count = min(count, int(ls * n))
        k = max(1, round(ls * n / count))
        parts.append(np.repeat(np.arange(next_row, next_row + k), count))
        next_row += k
    s = rng.permutation(np.concatenate(parts))
    unbounded = 1 - cache.simulate(s, 32 * next_row)
    assert unbounded == pytest.approx(1 - 1 / avg, abs=0.01)  # the published within-batch re-use (avg col size)
    lru = cache.miss_ratio_curve(s, policy="lru", sizes=[256, 2048])
    lfu = cache.miss_ratio_curve(s, policy="lfu", sizes=[256, 2048])
    assert lru.miss_ratio == sorted(lru.miss_ratio, reverse=True)
    assert all(f <= r + 0.01 for f, r in zip(lfu.miss_ratio, lru.miss_ratio, strict=True))  # skew favours LFU
