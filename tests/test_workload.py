"""Tests of recstack.workload: specs, generation, fitting, locality statistics and the CLI glue.

Real files, real numpy/torch, small sizes. The shared data samples live in
<repo>/../shared/data; tests that need them skip when that folder is absent.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from recstack.errors import ConfigError, DataError, RecstackError
from recstack.workload import (
    BUCKET_BOUNDS,
    FeatureRequest,
    WorkloadSpec,
    bind,
    fit_csv,
    list_presets,
    load_workload,
    locality_stats,
    workload_stats,
)
from recstack.workload.commands import register
from recstack.workload.ids import RankDistribution
from recstack.workload.stats import PUBLISHED_2022, bucket_index

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
CSVS = {"criteo": "criteo_sample.csv", "avazu": "avazu_sample.csv", "taobao": "taobao_ad_sample.csv"}


def need_data(name: str) -> Path:
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"shared data sample {path} is missing (expected <repo>/../shared/data/{name})")
    return path


def spec_from(data: dict) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"name": "t", **data})


def one_feature_spec(ids: dict, **extra) -> WorkloadSpec:
    return spec_from({"features": [{"name": "f", "ids": ids, **extra}]})


def write_yaml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(text, encoding="utf-8")
    return p


MODEL = [
    FeatureRequest("a", id_range=1000, pooling=4.0),
    FeatureRequest("b", id_range=50_000, pooling=1.0, fixed_length=True),
    FeatureRequest("hist", id_range=20_000, pooling=20.0, kind="sequence", max_length=40),
    FeatureRequest("seq", id_range=300, pooling=10.0, kind="sequence", max_length=10, fixed_length=True),
]


# ---------------------------------------------------------------------------------------------------------
# Determinism and batch contract
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["uniform", "production"])
def test_same_seed_same_batches_and_index_independence(preset: str) -> None:
    spec = load_workload(preset)
    w1 = bind(spec, MODEL, num_dense=5, num_tasks=2)
    w2 = bind(spec, MODEL, num_dense=5, num_tasks=2)
    late = w2.batch(64, index=3)  # asked first: must not depend on earlier calls
    for i in range(3):
        w2.batch(64, index=i)
    b1 = w1.batch(64, index=3)
    for name in b1.sparse:
        assert torch.equal(b1.sparse[name].values, late.sparse[name].values)
        assert torch.equal(b1.sparse[name].lengths, late.sparse[name].lengths)
    assert torch.equal(b1.dense, late.dense) and torch.equal(b1.labels, late.labels)
    other = w1.batch(64, index=4)
    assert not torch.equal(other.sparse["a"].values[:50], b1.sparse["a"].values[:50])
    reseeded = bind(spec, MODEL, num_dense=5, num_tasks=2, seed=spec.seed + 1).batch(64, index=3)
    assert not torch.equal(reseeded.dense, b1.dense)


def test_batch_contract_shapes_dtypes_and_bounds() -> None:
    spec = load_workload("production")
    w = bind(spec, MODEL, num_dense=7, num_tasks=3)
    b = w.batch(500, index=1)
    assert b.batch_size == 500
    assert b.dense is not None and b.dense.dtype == torch.float32 and tuple(b.dense.shape) == (500, 7)
    assert b.labels is not None and b.labels.dtype == torch.float32 and tuple(b.labels.shape) == (500, 3)
    assert set(b.sparse) == {f.name for f in MODEL}
    for req in MODEL:
        feat = b.sparse[req.name]
        assert feat.values.dtype == torch.int64 and feat.lengths.dtype == torch.int32
        assert feat.lengths.shape == (500,)
        assert int(feat.lengths.sum()) == feat.values.numel()
        assert int(feat.values.min()) >= 0 and int(feat.values.max()) < req.id_range
    assert torch.all(b.sparse["b"].lengths == 1)  # fixed_length: exactly pooling
    assert torch.all(b.sparse["seq"].lengths == 10)
    hist = b.sparse["hist"].lengths
    assert int(hist.min()) >= 1 and int(hist.max()) <= 40  # sequences in [1, max_length]
    assert len(set(hist.tolist())) > 5  # production lengths vary around the mean
    assert bind(spec, MODEL, num_dense=0).batch(8).dense is None


def test_pooling_distributions_and_bounds() -> None:
    spec = one_feature_spec(
        {"kind": "uniform"}, pooling={"kind": "lognormal", "mean": 30, "sigma": 1.0, "max": 60}
    )
    pooled = FeatureRequest("p", id_range=100, pooling=3.0)
    lengths = bind(spec, [pooled], num_dense=0).batch(4000).sparse["p"].lengths
    assert int(lengths.min()) >= 0 and int(lengths.max()) <= 60
    capped = FeatureRequest("p", id_range=100, pooling=3.0, max_length=25)
    assert int(bind(spec, [capped], num_dense=0).batch(4000).sparse["p"].lengths.max()) <= 25
    emp = one_feature_spec(
        {"kind": "uniform"}, pooling={"kind": "empirical", "values": [0, 2, 5], "probs": [0.5, 0.3, 0.2]}
    )
    lens = bind(emp, [pooled], num_dense=0).batch(20000).sparse["p"].lengths.numpy()
    assert set(np.unique(lens).tolist()) == {0, 2, 5}
    assert abs((lens == 0).mean() - 0.5) < 0.02
    default = one_feature_spec({"kind": "uniform"})  # no pooling: the model's, fixed (fractional: mean kept)
    frac = FeatureRequest("p", id_range=100, pooling=2.5)
    lens = bind(default, [frac], num_dense=0).batch(20000).sparse["p"].lengths.numpy()
    assert set(np.unique(lens).tolist()) == {2, 3} and abs(lens.mean() - 2.5) < 0.02
    seq = FeatureRequest("s", id_range=100, pooling=5.0, kind="sequence", max_length=8)
    lens = bind(emp, [seq], num_dense=0).batch(5000).sparse["s"].lengths.numpy()
    assert lens.min() == 1 and lens.max() <= 8  # empty sequences become length 1


# ---------------------------------------------------------------------------------------------------------
# ID distributions
# ---------------------------------------------------------------------------------------------------------
def _counts(values: torch.Tensor, n: int) -> np.ndarray:
    return np.bincount(values.numpy(), minlength=n)


def test_zipf_top_share_matches_exponent() -> None:
    n, s = 100_000, 1.0
    spec = one_feature_spec({"kind": "zipf", "s": s}, cardinality=n, scatter=False)
    values = (
        bind(spec, [FeatureRequest("f", id_range=n, pooling=100.0)], num_dense=0)
        .batch(5000)
        .sparse["f"]
        .values
    )
    counts = _counts(values, n)
    k = np.arange(1, n + 1, dtype=np.float64)
    exact = k**-s / np.sum(k**-s)
    top = n // 100
    expected = exact[:top].sum()  # ~0.61 for s = 1
    measured = np.sort(counts)[::-1][:top].sum() / counts.sum()
    assert abs(measured - expected) < 0.01
    assert abs(counts[0] / counts.sum() - exact[0]) < 0.003  # rank 0 is the hottest without scatter
    dist = RankDistribution.zipf(n, s)
    assert abs(float(dist.top_share(top)) - expected) < 1e-6


def test_heavy_hitters_masses() -> None:
    spec = one_feature_spec(
        {"kind": "heavy_hitters", "hot": [0.3, 0.1], "tail": {"kind": "zipf", "s": 1.2}},
        cardinality=1000,
        scatter=False,
    )
    values = (
        bind(spec, [FeatureRequest("f", id_range=1000, pooling=100.0)], num_dense=0)
        .batch(4000)
        .sparse["f"]
        .values
    )
    counts = _counts(values, 1000) / values.numel()
    assert abs(counts[0] - 0.3) < 0.005 and abs(counts[1] - 0.1) < 0.005
    assert counts[2] > counts[10] > counts[500]


def test_uniform_is_flat() -> None:
    n = 2000
    spec = load_workload("uniform")
    values = (
        bind(spec, [FeatureRequest("u", id_range=n, pooling=50.0)], num_dense=0).batch(4000).sparse["u"].values
    )
    counts = _counts(values, n)
    assert counts.min() > 0
    top_share = np.sort(counts)[::-1][: n // 100].sum() / counts.sum()
    assert top_share < 0.013  # uniform: top 1% of rows ~ 1% of lookups
    assert counts.std() / counts.mean() < 0.1


def test_hot_rows_are_scattered() -> None:
    n = 1_000_000
    req = [FeatureRequest("f", id_range=n, pooling=50.0)]
    scattered = (
        bind(one_feature_spec({"kind": "zipf", "s": 1.1}), req, num_dense=0).batch(2000).sparse["f"].values
    )
    counts = np.unique(scattered.numpy(), return_counts=True)
    hot = counts[0][np.argsort(counts[1])[::-1][:200]]
    assert (hot < n // 10).mean() < 0.3  # not clustered at low ids
    assert np.quantile(hot, 0.9) - np.quantile(hot, 0.1) > n // 2
    plain = (
        bind(one_feature_spec({"kind": "zipf", "s": 1.1}, scatter=False), req, num_dense=0)
        .batch(2000)
        .sparse["f"]
    )
    counts = np.unique(plain.values.numpy(), return_counts=True)
    assert set(counts[0][np.argsort(counts[1])[::-1][:20]].tolist()) <= set(range(40))


def test_huge_id_range_and_fitted_cardinality() -> None:
    big = 1 << 40
    spec = one_feature_spec({"kind": "zipf", "s": 0.9})
    v = (
        bind(spec, [FeatureRequest("f", id_range=big, pooling=10.0)], num_dense=0)
        .batch(1000)
        .sparse["f"]
        .values
    )
    assert int(v.min()) >= 0 and int(v.max()) < big and int(v.max()) > 1 << 32
    small = one_feature_spec({"kind": "uniform"}, cardinality=50)
    v = (
        bind(small, [FeatureRequest("f", id_range=10**6, pooling=10.0)], num_dense=0)
        .batch(1000)
        .sparse["f"]
        .values
    )
    assert len(torch.unique(v)) == 50 and int(v.max()) > 10**5  # 50 rows, spread over the id range


# ---------------------------------------------------------------------------------------------------------
# Serving: query sizes and arrivals
# ---------------------------------------------------------------------------------------------------------
def test_mlperf_query_sizes_and_arrivals() -> None:
    w = bind(load_workload("production"), MODEL, num_dense=1)
    sizes = w.query_sizes(100_000, rng_seed=1)
    assert sizes.dtype == np.int64
    assert abs(sizes.mean() - 270) < 3
    assert set(np.unique(sizes).tolist()) == {100, 200, 300, 400, 500, 600, 700}
    assert abs((sizes == 200).mean() - 0.6) < 0.01
    assert np.array_equal(sizes, w.query_sizes(100_000, rng_seed=1))
    t = w.arrival_times(50_000, rate=500.0)
    assert np.all(np.diff(t) > 0) and abs(np.diff(t).mean() - 1 / 500) < 1e-4


def test_query_size_clamps() -> None:
    spec = spec_from(
        {
            "features": [{"name": "f"}],
            "query_sizes": {"kind": "lognormal", "mu": 5.1, "sigma": 0.2, "min": 1, "max": 180},
        }
    )
    sizes = bind(spec, [FeatureRequest("f", 10, 1.0)], num_dense=0).query_sizes(20_000)
    assert sizes.max() <= 180 and sizes.min() >= 1 and 140 < np.median(sizes) < 170


# ---------------------------------------------------------------------------------------------------------
# Presets and binding
# ---------------------------------------------------------------------------------------------------------
def test_presets_roundtrip_and_describe(tmp_path: Path) -> None:
    assert {"uniform", "production"} <= set(list_presets())
    for name in list_presets():
        spec = load_workload(name)
        again = load_workload(str(spec.to_yaml(tmp_path / f"{name}.yaml")))
        assert again == spec
        desc = bind(spec, MODEL, num_dense=3).describe()
        json.dumps(desc)
        assert [f["name"] for f in desc["features"]] == [f.name for f in MODEL]


def test_production_bind_keeps_range_and_pooling_and_draws_skew() -> None:
    reqs = [FeatureRequest(f"t{i}", id_range=500_000, pooling=12.0) for i in range(12)]
    w = bind(load_workload("production"), reqs, num_dense=0)
    desc = w.describe()["features"]
    assert all(f["id_range"] == 500_000 and f["rows_used"] == 500_000 for f in desc)
    assert len({f["ids"]["s"] for f in desc}) == 12  # seeded per feature
    assert all(abs(f["mean_length"] - 12.0) < 0.5 for f in desc)
    lens = w.batch(4000).sparse["t0"].lengths.numpy()
    assert abs(lens.mean() - 12.0) < 0.6 and lens.std() > 1
    again = bind(load_workload("production"), reqs[:1], num_dense=0).describe()["features"][0]
    assert again["ids"] == desc[0]["ids"]  # depends on (seed, name) only


def test_mapping_for_fitted_specs() -> None:
    spec = spec_from(
        {
            "features": [
                {"name": "x", "cardinality": 3, "ids": {"kind": "uniform"}},
                {"name": "y", "cardinality": 1000, "ids": {"kind": "zipf", "s": 1.0}},
            ]
        }
    )
    reqs = [
        FeatureRequest("m1", 10_000, 1.0),
        FeatureRequest("m2", 10_000, 1.0),
        FeatureRequest("m3", 10_000, 1.0),
    ]
    desc = bind(spec, reqs, num_dense=0).describe()["features"]
    assert [d["source"] for d in desc] == ["spec feature 'x'", "spec feature 'y'", "spec feature 'x'"]
    desc = bind(spec, reqs, num_dense=0, mapping={"m1": "y"}).describe()["features"]
    assert desc[0]["source"] == "spec feature 'y'" and desc[0]["rows_used"] == 1000
    with pytest.raises(ConfigError, match=r"mapping\.nope"):
        bind(spec, reqs, num_dense=0, mapping={"nope": "x"})
    with pytest.raises(ConfigError, match=r"mapping\.m1"):
        bind(spec, reqs, num_dense=0, mapping={"m1": "zzz"})
    with pytest.raises(ConfigError, match="mapping"):
        bind(load_workload("uniform"), reqs, num_dense=0, mapping={"m1": "x"})


def test_bind_and_batch_argument_errors() -> None:
    spec = load_workload("uniform")
    with pytest.raises(ConfigError, match="num_dense"):
        bind(spec, MODEL, num_dense=-1)
    with pytest.raises(ConfigError, match=r"features\[1\]"):
        bind(spec, [MODEL[0], MODEL[0]], num_dense=0)
    with pytest.raises(ConfigError, match="batch_size"):
        bind(spec, MODEL, num_dense=0).batch(0)


# ---------------------------------------------------------------------------------------------------------
# Validation: errors name the field
# ---------------------------------------------------------------------------------------------------------
BASE = "version: 1\nname: bad\n"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("features:\n  - name: f\n    ids: {kind: zipf, s: 0}\n", "features.0.ids.zipf.s"),
        ("features:\n  - name: f\n    pooling: {kind: fixed, value: -3}\n", "features.0.pooling"),
        ("features: [{name: f}]\nquery_sizes: {kind: fixed, value: -5}\n", "query_sizes"),
        (
            "features: [{name: f}]\nquery_sizes: {kind: empirical, values: [], probs: []}\n",
            "query_sizes.empirical.values",
        ),
        (
            "features: [{name: f}]\nquery_sizes: {kind: empirical, values: [1, 2], probs: [0.5, 0.4]}\n",
            "query_sizes",
        ),
        ("features:\n  - name: f\n    cardinality: -2\n", "features.0.cardinality"),
        ("features: [{name: f, colour: red}]\n", "features.0.colour"),
        (
            "population:\n  rows: 1000\n  pooling: 2\n  ids: {kind: zipf, s: {kind: normal, mean: 1, std: 0.5}}\n",
            "population.ids.zipf",
        ),
        ("features: [{name: f}]\nlabels: {click_rate: 1.5}\n", "labels.click_rate"),
        ("features: [{name: f}]\narrivals: {kind: poisson, rate: 0}\n", "arrivals.rate"),
        ("seed: 1\n", "(top level)"),
    ],
)
def test_invalid_specs_name_the_field(tmp_path: Path, body: str, field: str) -> None:
    path = write_yaml(tmp_path, BASE + body)
    with pytest.raises(ConfigError) as err:
        load_workload(str(path))
    assert field in str(err.value)
    assert str(path) in str(err.value)


def test_invalid_yaml_and_unknown_preset(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "name: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_workload(str(path))
    with pytest.raises(ConfigError, match="unknown workload preset 'nope'"):
        load_workload("nope")
    with pytest.raises(ConfigError, match="file not found"):
        load_workload(str(tmp_path / "missing.yaml"))


# ---------------------------------------------------------------------------------------------------------
# Fitting from CSV
# ---------------------------------------------------------------------------------------------------------
def test_fit_criteo(tmp_path: Path) -> None:
    spec = fit_csv(need_data(CSVS["criteo"]))
    assert spec.features is not None
    assert [f.name for f in spec.features] == [f"C{i}" for i in range(1, 27)]
    assert [d.name for d in spec.dense.features] == [
        f"I{i}" for i in range(1, 14)
    ]  # I2 (integer) joins its family
    assert spec.fitted_from is not None and spec.fitted_from.label_column == "label"
    assert 0 < float(spec.labels.click_rate) < 1  # type: ignore[arg-type]
    c9 = next(f for f in spec.features if f.name == "C9")
    assert c9.cardinality == 2 and c9.ids.kind == "heavy_hitters" and abs(sum(c9.ids.hot) - 1) < 1e-3  # type: ignore[union-attr]
    c1 = next(f for f in spec.features if f.name == "C1")
    assert c1.observed is not None and c1.observed.zipf_s is not None and c1.observed.zipf_s > 0.5
    assert all(f.pooling is None for f in spec.features)  # one value per row: the model's pooling
    out = spec.to_yaml(tmp_path / "criteo.yaml")
    assert load_workload(str(out)) == spec
    reqs = [FeatureRequest(f"c{i}", 10_000, 1.0, fixed_length=True) for i in range(26)]
    batch = bind(spec, reqs, num_dense=13).batch(256)
    assert batch.dense is not None and tuple(batch.dense.shape) == (256, 13)
    assert int(batch.sparse["c8"].values.unique().numel()) <= 2  # C9: two values


def test_fit_avazu_and_columns() -> None:
    path = need_data(CSVS["avazu"])
    spec = fit_csv(path, columns=["site_id", "C14", "device_type"])
    assert spec.features is not None and [f.name for f in spec.features] == ["site_id", "C14", "device_type"]
    assert spec.fitted_from is not None and spec.fitted_from.label_column == "click"
    full = fit_csv(path)
    assert full.features is not None and "id" in [
        f.name for f in full.features
    ]  # 64-bit ids stay categorical
    assert all(f.cardinality and f.cardinality >= 1 for f in full.features)


def test_fit_taobao_multi_hot() -> None:
    spec = fit_csv(need_data(CSVS["taobao"]))
    assert spec.features is not None
    seq = next(f for f in spec.features if f.name == "click_sequence")
    assert seq.pooling is not None and seq.pooling.kind == "empirical"
    assert 0.0 in seq.pooling.values and max(seq.pooling.values) >= 2  # type: ignore[union-attr]
    assert [d.name for d in spec.dense.features] == ["price"]
    assert "pid" in [f.name for f in spec.features]  # '430548_1007' is not a number
    assert spec.fitted_from is not None and "new_user_class_level" in spec.fitted_from.skipped
    lens = bind(spec, [FeatureRequest("h", 1000, 1.0)], num_dense=0, mapping={"h": "click_sequence"}).batch(
        3000
    )
    assert (lens.sparse["h"].lengths == 0).float().mean() > 0.5  # most rows have no clicks


def test_fit_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found"):
        fit_csv(tmp_path / "nope.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match="empty file"):
        fit_csv(empty)
    noheader = tmp_path / "noheader.csv"
    noheader.write_text("1,2,3\n4,5,6\n")
    with pytest.raises(DataError, match="no header row"):
        fit_csv(noheader)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b\nx,y\nz\n")
    with pytest.raises(DataError, match=r"ragged\.csv: line 3: 1 fields, but the header has 2"):
        fit_csv(ragged)
    good = tmp_path / "good.csv"
    good.write_text("a,b\nx,1\ny,2\n")
    with pytest.raises(DataError, match=r"good\.csv: unknown columns 'c'"):
        fit_csv(good, columns=["a", "c"])
    headonly = tmp_path / "head.csv"
    headonly.write_text("a,b\n")
    with pytest.raises(DataError, match="no data rows"):
        fit_csv(headonly)


# ---------------------------------------------------------------------------------------------------------
# Locality statistics
# ---------------------------------------------------------------------------------------------------------
def test_locality_stats_by_hand() -> None:
    table_a = np.array([1, 1, 1, 2, 3, 3])  # rows: 1 x3, 2 x1, 3 x2
    table_b = torch.tensor([5] * 40 + [6])  # rows: 5 x40, 6 x1 (other table: other rows)
    st = locality_stats([table_a, table_b], batch_size=2)
    assert st["lookups"] == 47 and st["unique_rows"] == 5 and st["tables"] == 2
    assert st["avg_reuse"] == pytest.approx(47 / 5) and st["avg_pooling"] == pytest.approx(47 / 4)
    assert st["buckets"] == BUCKET_BOUNDS and BUCKET_BOUNDS[-1] is None and len(BUCKET_BOUNDS) == 17
    rows = [0.0] * 17
    rows[0], rows[1], rows[2], rows[6] = 2 / 5, 1 / 5, 1 / 5, 1 / 5  # counts 1,1 | 2 | 3 | 40 in (32, 64]
    looks = [0.0] * 17
    looks[0], looks[1], looks[2], looks[6] = 2 / 47, 2 / 47, 3 / 47, 40 / 47
    assert st["rows_share"] == pytest.approx(rows) and st["lookups_share"] == pytest.approx(looks)
    assert sum(st["rows_share"]) == pytest.approx(1) and sum(st["lookups_share"]) == pytest.approx(1)
    big = locality_stats([np.zeros(40_000, dtype=np.int64)])
    assert big["lookups_share"][-1] == 1.0 and big["avg_pooling"] is None
    assert bucket_index(np.array([1, 2, 3, 4, 5, 32768, 32769])).tolist() == [0, 1, 2, 2, 3, 15, 16]


def test_published_constants_match_the_data_file() -> None:
    path = need_data("dlrm_datasets_2022_locality_stats.txt")
    lines = path.read_text().splitlines()[:45]
    shares = [float(line.split(":")[1]) for line in lines if line.startswith("(")]
    assert shares[:17] == PUBLISHED_2022["rows_share"]
    assert shares[17:34] == PUBLISHED_2022["lookups_share"]
    assert f"Avg # of indices: {PUBLISHED_2022['lookups']}" in lines


def test_production_stats_have_published_shape() -> None:
    spec = load_workload("production")
    st = workload_stats(spec, batch_size=16_384, tables=16, seed=0)
    rows, looks = st["rows_share"], st["lookups_share"]
    assert rows[0] == max(rows) and rows[0] > 0.3  # many rows touched once
    assert sum(looks[6:]) > 0.2  # rows re-used more than 32 times take a large share of lookups ...
    assert sum(rows[6:]) < 0.05  # ... though they are few
    assert st["max_reuse"] > 1000
    assert st["avg_pooling"] == pytest.approx(PUBLISHED_2022["avg_pooling"], rel=0.05)
    bigger = workload_stats(spec, batch_size=65_536, tables=16, seed=0)
    assert bigger["avg_reuse"] > 1.5 * st["avg_reuse"]  # hot rows re-used more at bigger batches
    assert bigger["rows_share"][0] < rows[0]
    assert len(st["per_table"]) == 16


def test_workload_stats_fitted_and_errors() -> None:
    spec = spec_from({"features": [{"name": "x", "cardinality": 100, "ids": {"kind": "zipf", "s": 1.2}}]})
    st = workload_stats(spec, batch_size=1000, seed=3)
    assert st["tables"] == 1 and st["lookups"] == 1000 and st["unique_rows"] <= 100
    with pytest.raises(ConfigError, match="batch_size"):
        workload_stats(spec, batch_size=0)
    with pytest.raises(ConfigError, match="tables"):
        workload_stats(spec, batch_size=10, tables=0)
    no_card = spec_from({"features": [{"name": "x"}]})
    with pytest.raises(ConfigError, match=r"features\.0\.cardinality"):
        workload_stats(no_card, batch_size=10)


# ---------------------------------------------------------------------------------------------------------
# CLI glue (called directly; the main CLI prints RecstackError messages and exits 2)
# ---------------------------------------------------------------------------------------------------------
def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="recstack")
    register(parser.add_subparsers(dest="cmd", required=True))
    return parser.parse_args(argv)


def test_cli_stats_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(
        ["workload", "stats", "--preset", "production", "--batch-size", "2048", "--tables", "3", "--json"]
    )
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tables"] == 3 and out["batch_size"] == 2048 and math.isclose(sum(out["lookups_share"]), 1.0)
    args = parse(["workload", "stats", "--preset", "uniform", "--batch-size", "512", "--tables", "2"])
    assert args.func(args) == 0
    assert "rows share" in capsys.readouterr().out


def test_cli_argument_errors(tmp_path: Path) -> None:
    args = parse(["workload", "stats", "--preset", "uniform", "--batch-size", "0"])
    with pytest.raises(RecstackError, match="--batch-size"):
        args.func(args)
    args = parse(["workload", "stats", "--preset", "uniform", "--batch-size", "8", "--tables", "0"])
    with pytest.raises(RecstackError, match="--tables"):
        args.func(args)
    args = parse(["workload", "stats", "--spec", str(tmp_path / "none.yaml"), "--batch-size", "8"])
    with pytest.raises(ConfigError, match="file not found"):
        args.func(args)


def test_cli_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = need_data(CSVS["taobao"])
    out = tmp_path / "taobao.yaml"
    args = parse(["workload", "fit", str(src), "--columns", "userid,click_sequence,price", "-o", str(out)])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "click_sequence" in text and "multi-hot" in text
    spec = load_workload(str(out))
    assert spec.features is not None and [f.name for f in spec.features] == ["userid", "click_sequence"]
    args = parse(["workload", "stats", "--spec", str(out), "--batch-size", "100", "--json"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["tables"] == 2
    bad = parse(["workload", "fit", str(src), "--columns", "nope", "-o", str(out)])
    with pytest.raises(DataError, match="unknown columns 'nope'"):
        bad.func(bad)
