"""Request-side compute sharing: request-aware batches, provenance, the shared execution, `recstack share`.

Tiny real zoo models (scale 0.001) and a two-tower model defined here; no timing is asserted, only
what the mechanism guarantees (agreeing outputs, exact FLOP accounting, where sharing stops).
"""

from __future__ import annotations

import json

import pytest
import torch
from test_report import _open, browser  # noqa: F401  (the headless-Chromium fixture)
from torch import nn

from recstack.cli import main
from recstack.report.sharing import write_share_report
from recstack.sharing import Sides, analyse_sharing
from recstack.sharing.analysis import curve
from recstack.sharing.execute import trace_batched
from recstack.workload import bind, load_workload
from recstack.workload.batch import FeatureRequest, RawBatch, SparseInput
from recstack.workload.requests import request_batch, select_rows
from recstack.workload.spec import WorkloadSpec
from recstack.zoo import BuildOptions, build_model

STAGE_KEYS = {"batched_s", "shared_s", "saved_s", "flops_saved_per_request", "bytes_saved_per_request"}


def _zoo(name: str, requests: int, candidates: int, backend: str = "torch"):
    spec = load_workload("uniform")
    net = build_model(name, scale=0.001, options=BuildOptions(backend=backend, batch_size=requests * candidates),
                      workload=spec)
    bound = bind(spec, net.features(), net.num_dense, net.num_tasks)
    sides = Sides(frozenset(f.name for f in bound.features if f.side == "request"))
    return net, request_batch(bound, requests, candidates), sides


# -- request-aware workloads -------------------------------------------------------------------------
def test_select_rows_matches_a_python_loop():
    lengths = torch.tensor([2, 0, 3, 1], dtype=torch.int32)
    values = torch.arange(6, dtype=torch.int64) * 10
    rows = torch.tensor([2, 2, 0, 1, 3])
    got = select_rows(SparseInput(values, lengths), rows)
    segs = [values[int(lengths[:i].sum()) : int(lengths[: i + 1].sum())] for i in range(4)]
    assert got.values.tolist() == torch.cat([segs[r] for r in rows.tolist()]).tolist()
    assert got.lengths.tolist() == lengths[rows].tolist()


def test_request_batch_repeats_request_values_and_keeps_candidates():
    spec = load_workload("uniform")
    feats = [FeatureRequest("user", 1000, 4.0, side="request"), FeatureRequest("item", 1000, 2.0)]
    bound = bind(spec, feats, 3)
    b = request_batch(bound, 3, 4, index=1)
    assert b.request_sizes.tolist() == [4, 4, 4] and b.batch_size == 12
    user = b.sparse["user"]
    offs = torch.cumsum(user.lengths.long(), 0) - user.lengths.long()
    rows = [user.values[o : o + n].tolist() for o, n in zip(offs.tolist(), user.lengths.tolist(), strict=True)]
    for r in range(3):
        assert all(rows[r * 4 + c] == rows[r * 4] for c in range(4))
    base = bound.batch(12, 1)
    assert torch.equal(b.sparse["item"].values, base.sparse["item"].values)  # candidates: the workload's own
    # The user rows are the base batch's first row of every request, repeated.
    assert rows[4] == base.sparse["user"].values[int(base.sparse["user"].lengths[:4].sum()):][
        : int(base.sparse["user"].lengths[4])].tolist()
    # Candidate counts from the query-size distribution when C is not given.
    drawn = request_batch(bound, 5, None)
    assert drawn.request_sizes.numel() == 5 and drawn.batch_size == int(drawn.request_sizes.sum())


def test_sides_default_to_candidate_and_specs_can_override():
    old = WorkloadSpec.model_validate({"name": "x", "features": [{"name": "a"}]})
    assert old.features[0].side is None and old.dense.side == "candidate"
    spec = WorkloadSpec.model_validate({"name": "x", "features": [{"name": "a", "side": "request"}]})
    bound = bind(spec, [FeatureRequest("f", 10, 1.0)], 0)
    assert bound.features[0].side == "request" and bound.describe()["features"][0]["side"] == "request"
    with pytest.raises(Exception, match="side"):
        WorkloadSpec.model_validate({"name": "x", "features": [{"name": "a", "side": "user"}]})
    net = build_model("rmc2", scale=0.001)
    sides = [f.side for f in net.features()]
    assert sides == ["request"] * 16 + ["candidate"] * 16  # the documented first half


# -- provenance and the shared execution ------------------------------------------------------------
R2, C5 = 2, 5
_CACHE: dict[str, tuple] = {}


def _analysed(name: str):
    """(model, batch, sides, result) of a zoo model at 2 requests x 5 candidates, computed once per session."""
    if name not in _CACHE:
        net, batch, sides = _zoo(name, R2, C5)
        _CACHE[name] = (net, batch, sides, analyse_sharing(net, batch, sides, iters=2, warmup=0, op_passes=1))
    return _CACHE[name]


@pytest.mark.parametrize("name", ["din", "dien", "rmc2"])
def test_shared_execution_agrees_and_saves_the_request_only_work(name):
    R, C = R2, C5
    _, _, _, r = _analysed(name)
    assert r["sharing"]["status"] == "shared", r["sharing"]
    assert r["outputs_equal"] is True and r["tolerance"] == {"rtol": 1e-5, "atol": 1e-6}
    assert all(set(v) == STAGE_KEYS for v in r["stages"].values())
    emb = r["share_by_stage"]["embedding"]
    assert emb["request"]["bytes"] > 0 and emb["candidate"]["bytes"] > 0
    # Request-only lookups run once per request instead of once per candidate: exactly (1 - 1/C) of their
    # FLOPs saved (pooling sums scale with rows; bytes count unique rows, which repetition does not add).
    saved = r["stages"]["embedding"]["flops_saved_per_request"] * R
    assert emb["request"]["flops"] > 0
    assert saved == pytest.approx(emb["request"]["flops"] * (1 - 1 / C), rel=1e-9)
    assert 0 < r["stages"]["embedding"]["bytes_saved_per_request"] * R <= emb["request"]["bytes"]
    assert any(p.startswith("sparse_arch.") for p in r["request_only_modules"])
    assert not any("ad" == p.rsplit(".", 1)[-1] for p in r["request_only_modules"])  # candidate tables are not
    assert r["mixers"] and set(r["expansions"]) <= set(r["mixers"])
    assert 0 < r["request_only_share"]["bytes"] < 1


def test_dien_interest_extractor_is_request_only_and_its_flops_are_saved():
    R, C = R2, C5
    net, batch, sides, r = _analysed("dien")
    assert "interest_extractor" in r["request_only_modules"]
    assert "attention" in r["mixers"]  # the ad query meets the interest states: sharing stops there
    trace, _ = trace_batched(net, batch, sides)
    gru = sum(t.flops for p, by in trace.by_module.items() if p.startswith("interest_extractor") for t in by.values())
    saved = r["stages"]["sequence"]["flops_saved_per_request"] * R
    # The GRU over the behaviours runs once per request. The AUGRU's input projection of the (request-only)
    # states is request-only too, but runs inside the mixing cell, whose inputs are expanded at its entry:
    # the provenance share counts it, the shared execution does not save it.
    assert gru > 0 and saved == pytest.approx(gru * (1 - 1 / C), rel=1e-9)
    assert r["share_by_stage"]["sequence"]["request"]["flops"] > gru
    assert set(r["unshared_request_modules"]) == {"attention.fc", "interest_evolution.cell.x2h"}
    assert r["request_only_share"]["flops"] > 0.1


def test_a_model_without_request_features_reports_zero_sharing():
    net, batch, sides = _zoo("ncf", 1, 3)
    assert not sides.any
    r = analyse_sharing(net, batch, sides, iters=2, warmup=0, op_passes=1)
    assert r["sharing"]["status"] == "none" and r["outputs_equal"] is True
    assert r["request_only_share"]["flops"] == 0 and r["request_only_share"]["time"] == 0
    assert all(v["saved_s"] == 0 and v["flops_saved_per_request"] == 0 for v in r["stages"].values())
    assert r["speedup"] == 1.0
    assert all(p["time_saved_share"] == 0 for p in r["curve"])


def test_sharing_stops_where_request_ids_are_concatenated_with_candidate_ids():
    net, batch, sides = _zoo("din", 1, 3, backend="tbe")
    r = analyse_sharing(net, batch, sides, iters=2, warmup=0, op_passes=1)
    assert r["sharing"]["status"] == "stopped"
    assert "sharing stops at" in r["sharing"]["reason"] and "feature_processing" in r["sharing"]["reason"]
    assert r["request_only_share"]["bytes"] > 0  # the analysis still says what is request-only


class TwoTower(nn.Module):
    """A two-tower retrieval model: user tower over user features, item tower over item features, dot."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.user_emb = nn.EmbeddingBag(100, dim, mode="sum")
        self.item_emb = nn.EmbeddingBag(100, dim, mode="sum")
        self.user_tower = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, dim))
        self.item_tower = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, dim))
        self.score = Dot()

    def _bag(self, bag: nn.EmbeddingBag, f: SparseInput) -> torch.Tensor:
        offsets = torch.cumsum(f.lengths.long(), 0) - f.lengths.long()
        return bag(f.values, offsets)

    def forward(self, batch: RawBatch) -> torch.Tensor:
        u = self.user_tower(self._bag(self.user_emb, batch.sparse["user"]))
        v = self.item_tower(self._bag(self.item_emb, batch.sparse["item"]))
        return self.score(u, v)


class Dot(nn.Module):
    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return (u * v).sum(dim=1, keepdim=True)


def test_two_tower_user_tower_runs_once_per_request():
    torch.manual_seed(0)
    spec = load_workload("uniform")
    bound = bind(spec, [FeatureRequest("user", 100, 5.0, side="request"), FeatureRequest("item", 100, 2.0)], 0)
    R, C = 3, 6
    batch = request_batch(bound, R, C)
    model = TwoTower()
    r = analyse_sharing(model, batch, Sides(frozenset({"user"})), iters=2, warmup=0)
    assert r["sharing"]["status"] == "shared" and r["outputs_equal"] is True
    assert {"user_emb", "user_tower"} <= set(r["request_only_modules"])
    assert r["expansions"] == ["score"]  # the user vector is repeated where it meets the item vector
    tower_flops = 2 * (8 * 16 + 16 * 8)  # two Linear layers, per row (the biases priced apart)
    flops_saved = sum(v["flops_saved_per_request"] for v in r["stages"].values()) * R
    assert flops_saved >= tower_flops * R * (C - 1)


def test_curve_follows_the_stated_formula():
    pts = curve(0.5, 0.4)
    assert pts[0] == {"candidates": 1, "flops_saved_share": 0.0, "time_saved_share": 0.0, "speedup_bound": 1.0}
    last = pts[-1]
    assert last["candidates"] == 1000 and last["time_saved_share"] == pytest.approx(0.4 * 0.999)
    assert last["speedup_bound"] == pytest.approx(1 / (1 - 0.4 * 0.999))


# -- the command ---------------------------------------------------------------------------------
def test_cli_json_interface(capsys, tmp_path):
    out = tmp_path / "share.json"
    rc = main(["share", "din", "--scale", "0.001", "--candidates", "3", "--requests", "2", "--iters", "2",
               "--warmup", "0", "--json", "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(text)
    assert doc == json.loads(out.read_text())
    assert doc["outputs_equal"] is True and doc["model"] == "din" and doc["rows"] == 6
    assert {"flops", "time"} <= set(doc["request_only_share"])
    assert {"embedding", "sequence", "head"} <= set(doc["stages"])
    assert all({"batched_s", "shared_s", "saved_s"} <= set(v) for v in doc["stages"].values())
    assert doc["speedup"] > 0


@pytest.mark.parametrize(
    "argv, field",
    [
        (["share", "din", "--candidates", "0"], "--candidates"),
        (["share", "din", "--candidates", "2", "--batch-size", "8"], "--batch-size"),
        (["share", "din", "--candidates", "2", "--mode", "train"], "--mode"),
        (["share", "din", "--candidates", "100000", "--requests", "10000"], "--requests"),
    ],
)
def test_cli_bad_input_names_the_flag(argv, field, capsys):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and "error:" in err and field in err


def test_inline_stage_rules_are_used_not_ignored():
    """share_config resolves the config's stage rules as profile does: inline ones too (a bad one is refused)."""
    from recstack.config.run import RunConfig
    from recstack.errors import ConfigError
    from recstack.sharing.run import share_config

    cfg = RunConfig(model="din", scale=0.001, iters=2, warmup=0,
                    stage_rules={"rules": [{"match": "over_arch*", "stage": "no_such_stage"}]})
    with pytest.raises(ConfigError, match="no_such_stage"):
        share_config(cfg, requests=2, candidates=3)


# -- the report page -----------------------------------------------------------------------------
def test_share_report_draws_shares_and_the_curve(browser, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    results = []
    for c in (2, 4):
        net, batch, sides = _zoo("rmc2", 1, c)
        r = analyse_sharing(net, batch, sides, iters=2, warmup=0, op_passes=1)
        r["model"] = "rmc2"
        results.append(r)
    page = write_share_report(results, tmp_path / "share.html")
    text = page.read_text()
    assert "<script" in text and "http" not in text.split("<script>")[-1][:200]
    _open(browser, page)
    rows = browser.find_elements(By.CSS_SELECTOR, "#share-table-rmc2 tbody tr")
    assert len(rows) == len(results[-1]["share_by_stage"])
    assert browser.find_elements(By.CSS_SELECTOR, '#share-table-rmc2 [data-cls="request"]')
    labels = [s.text for s in browser.find_elements(By.CSS_SELECTOR, "#share-table-rmc2 .stack span")]
    assert labels and all(t.endswith("%") for t in labels)  # the bars carry their numbers
    assert len(browser.find_elements(By.CSS_SELECTOR, "#curve-rmc2 circle")) == 2
    assert len(browser.find_elements(By.CSS_SELECTOR, "#curve-rmc2 path")) == 2
    assert "C=4" in browser.find_element(By.ID, "measured-rmc2").text


class MixesInForward(TwoTower):
    """The dot product in the model's own forward: no module boundary to expand the user vector at."""

    def forward(self, batch: RawBatch) -> torch.Tensor:
        u = self.user_tower(self._bag(self.user_emb, batch.sparse["user"]))
        v = self.item_tower(self._bag(self.item_emb, batch.sparse["item"]))
        return (u * v).sum(dim=1, keepdim=True)


def test_sharing_stops_at_a_mix_in_the_models_own_forward():
    bound = bind(load_workload("uniform"), [FeatureRequest("user", 100, 5.0, side="request"),
                                            FeatureRequest("item", 100, 2.0)], 0)
    r = analyse_sharing(MixesInForward(), request_batch(bound, 2, 3), Sides(frozenset({"user"})), iters=2, warmup=0)
    assert r["sharing"]["status"] == "stopped" and "aten::mul in module <model>" in r["sharing"]["reason"]
    assert "user_tower" in r["request_only_modules"] and r["speedup"] > 0
