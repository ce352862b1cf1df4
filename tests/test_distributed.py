"""Multi-rank profiles: real torchrun ranks on gloo with TorchRec's DistributedModelParallel (2 ranks, 1 thread each).

Structure only (ranks, shards, the communication stage, times that add up):
nothing here asserts a speed.
"""

from __future__ import annotations

import json
import os
import textwrap
import uuid
from pathlib import Path

import pytest

from recstack.cli import main
from recstack.schema.profile_model import Profile as ProfileModel
from recstack.tree import Profile

pytest.importorskip("torchrec")
from test_report import browser  # noqa: E402, F401, F811 (the headless Chromium fixture)

TINY = ["--scale", "0.001", "--batch-size", "16", "--iters", "3", "--warmup", "2", "--op-iters", "1",
        "--machine", "none", "--quiet"]
TABLES = {f"t_{i}" for i in range(8)}  # rmc1's tables
DIM = 32


def _undeclared(m, where: str = "") -> list[str]:
    from test_schema import _undeclared as undeclared

    return undeclared(m, where)


def _stages(tree: dict) -> dict[str, dict]:
    return {c["name"]: c for c in tree["children"] if c["level"] == "stage"}


def _check_adds_up(tree: dict) -> None:
    """Stage times sum to the run; every module/op subtree stays within its parent."""
    assert sum(c["time_s"] for c in tree["children"]) == pytest.approx(tree["time_s"], rel=1e-6, abs=1e-12)
    comm = _stages(tree)["communication"]
    assert sum(c["time_s"] for c in comm["children"]) == pytest.approx(comm["time_s"], rel=1e-9, abs=1e-12)
    for phase in comm["children"]:  # each phase: the collectives themselves and TorchRec's work around them
        parts = {c["name"]: c for c in phase["children"]}
        assert set(parts) == {"collective", "torchrec_overhead"}
        assert sum(c["time_s"] for c in parts.values()) == pytest.approx(phase["time_s"], rel=1e-9, abs=1e-12)
        assert all(_is_call(n["name"]) for n in parts["collective"]["children"])
        assert not any(_is_call(n["name"]) for n in _walk(parts["torchrec_overhead"]))
    paths = [n["path"] for n in _walk(tree)]
    assert len(paths) == len(set(paths)), "paths are unique"


def _is_call(name: str) -> bool:
    from recstack.distributed.communication import is_collective_call

    return is_collective_call(name)


def _walk(tree: dict):
    yield tree
    for c in tree["children"]:
        yield from _walk(c)


# Row-wise (a hand-built plan on CPU) is measured in benchmarks/bench_ranks.py; kept out of here for time.
RUNS = [("table_wise", "inference"), ("column_wise", "train")]
PLACEMENT = {RUNS[0]: "os", RUNS[1]: "pin"}  # --rank-placement of each run


@pytest.fixture(scope="module")
def collectives() -> dict:
    """The real gloo benchmark at 2 ranks (quick sizes)."""
    from recstack.hardware.collectives import measure_collectives

    return measure_collectives([2], quick=True)


@pytest.fixture(scope="module")
def profiles(tmp_path_factory, collectives) -> dict[tuple[str, str], Path]:
    """One 2-rank profile per RUNS entry; the first is classified against a machine with the benchmark."""
    from _machines import synthetic_machine

    folder = tmp_path_factory.mktemp("ranks")
    machine = folder / "machine.json"
    machine.write_text(json.dumps({**synthetic_machine(), "collectives": collectives}))
    out = {}
    for i, (sharding, mode) in enumerate(RUNS):
        path = folder / f"{sharding}-{mode}.json"
        extra = ["--machine", str(machine), "--trace", str(folder / "trace.json")] if i == 0 else []
        rc = main(["profile", "rmc1", "--nproc", "2", "--sharding", sharding, "--mode", mode, *TINY, *extra,
                   "--rank-placement", PLACEMENT[(sharding, mode)], "-o", str(path)])
        assert rc == 0
        out[(sharding, mode)] = path
    return out


def test_collective_benchmark_structure(collectives) -> None:
    rows = collectives["by_world_size"]["2"]
    # pinned like a profile's ranks (one core each) when two fit the usable cores
    assert collectives["placement"] == "pin" and rows["pinned"] == (len(os.sched_getaffinity(0)) >= 2)
    for name in ("all_to_all", "reduce_scatter", "all_reduce"):
        sizes = [r["bytes"] for r in rows[name]]
        assert sizes == sorted(sizes) and len(sizes) >= 3
        for r in rows[name]:
            assert 0 < r["min_s"] <= r["time_s"] <= r["max_s"]
            assert r["bandwidth_bytes_per_s"] == pytest.approx(r["bytes"] / r["time_s"])


@pytest.mark.parametrize(("sharding", "mode"), RUNS)
def test_two_ranks_profile(profiles, sharding: str, mode: str) -> None:
    d = json.loads(profiles[(sharding, mode)].read_text())
    collectives = sharding == RUNS[0][0]
    if collectives:  # --trace: one trace per rank, the top level names the critical rank's
        folder = profiles[(sharding, mode)].parent
        assert all(json.loads((folder / f"trace.rank{r}.json").read_text())["traceEvents"] for r in (0, 1))
        assert d["run"]["trace"] == str(folder / f"trace.rank{d['distributed']['critical_rank']}.json")
    assert _undeclared(ProfileModel.model_validate(d)) == []
    assert Profile.from_dict(d).to_dict() == d
    # the ranks' timed phases are communication's phases, not stages the compute roofline classifies
    assert not any(str(f.get("stage", "")).startswith("communication.") for f in d.get("findings") or [])
    ranks = d["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    dist = d["distributed"]
    assert dist["world_size"] == 2 and d["run"]["nproc"] == 2 and d["run"]["sharding"] == sharding
    # placement (the second run pins): each rank on a core of its own when two fit the usable cores
    usable = sorted(os.sched_getaffinity(0))
    pin = PLACEMENT[(sharding, mode)] == "pin"
    for r, pl in enumerate(dist["placement"]):
        assert pl["rank"] == r and pl["mode"] == PLACEMENT[(sharding, mode)] and pl["usable_cpus"] == usable
        assert pl["pinned"] == (pin and len(usable) >= 2) and pl["interop_threads"] == 1
        assert pl["cpus"] == ([usable[r]] if pl["pinned"] else usable)
    # the op pass sees the rank blocked in a collective's wait, under that phase's collective part
    from recstack.distributed.collective_timing import WAIT_RANGE

    waits = [n for r in ranks for ph in _stages(r["root"])["communication"]["children"] for c in ph["children"]
             if c["name"] == "collective" for n in c["children"] if n["name"] == WAIT_RANGE]
    assert waits and all(w["time_s"] > 0 for w in waits)
    # the top-level tree is the critical rank's
    crit = dist["critical_rank"]
    assert d["root"] == ranks[crit]["root"]
    for r in ranks:
        _check_adds_up(r["root"])
        stages = _stages(r["root"])
        phases = {c["name"] for c in stages["communication"]["children"]}
        assert {"input_dist", "output_dist"} <= phases, phases
        # the forward phases were timed as stages of their own on the rank; backward ones come from the op pass
        assert not any(s.startswith("communication.") for s in stages)
        by_name = {c["name"]: c for c in stages["communication"]["children"]}
        for name in ("input_dist", "output_dist"):
            ph = by_name[name]
            assert ph["source"] == "timing pass" and ph["measured_s"] > 0, ph  # TorchRec's range around it stays
            assert ph["time_s"] == pytest.approx(ph["measured_s"] + ph.get("moved_s", 0.0), rel=1e-9)
            assert ph["op_pass_time_s"] > 0  # the op pass opened the phase's stage range too
        if mode == "train":
            assert {"backward_all_to_all", "dense_all_reduce"} <= phases, phases
            assert {"loss", "backward", "optimizer"} <= set(stages)
            assert d["run"]["loss"]["function"] == "model.loss"  # the zoo model's own, through DMP's .module
            assert by_name["backward_all_to_all"]["source"] == "op pass, apportioned"
        for n in _walk(stages["communication"]):
            assert n["stage"] == "communication" and n["path"].startswith("communication")
    # shards: table-wise puts each whole table on one rank; column-wise splits every table's columns
    held: dict[str, list[list[int]]] = {}
    for r in ranks:
        for s in r["shards"]:
            assert s["sharding"] == sharding
            held.setdefault(s["table"], []).append(s["size"])
            assert s["lookups"] > 0 and s["bytes_requested"] == pytest.approx(s["lookups"] * s["columns"] * 4)
    assert set(held) == TABLES
    for sizes in held.values():
        if sharding == "table_wise":
            assert len(sizes) == 1 and sizes[0][1] == DIM
        elif sharding == "column_wise":
            assert sum(sz[1] for sz in sizes) == DIM and all(sz[0] == sizes[0][0] for sz in sizes)
        else:  # row-wise: the rows split over both ranks, every column kept
            assert len(sizes) == 2 and all(sz[1] == DIM for sz in sizes)
    # per-rank figures add up; waiting is measured against the fastest rank's communication
    per_rank = dist["per_rank"]
    for pr, r in zip(per_rank, ranks, strict=True):
        assert pr["compute_s"] + pr["communication_s"] == pytest.approx(r["root"]["time_s"])
        assert pr["communication_s"] == pytest.approx(_stages(r["root"])["communication"]["time_s"])
        assert pr["transfer_s"] + pr["wait_s"] == pytest.approx(pr["communication_s"])
    assert min(pr["wait_s"] for pr in per_rank) == 0.0
    # each rank's threads over its timing pass: gloo's threads worked there (schedstat, where the kernel has it)
    if os.path.exists(f"/proc/self/task/{os.getpid()}/schedstat"):
        for pr in per_rank:
            names = [t["name"] for t in pr["threads"]]
            assert any(n.startswith(("gloo", "pt_gloo")) for n in names), names
            assert pr["comm_thread_cores"] > 0 and pr["waiting_cores"] >= 0
    assert dist["imbalance"]["totals"]["time_s"] >= 1.0
    # every table-wise or column-wise shard serves the global batch: the lookups of both ranks' batches
    assert sum(pr["lookups"] for pr in per_rank) == pytest.approx(
        sum(s["lookups"] for r in ranks for s in r["shards"]))
    planner = dist["planner"]
    if sharding == "row_wise":  # a plan built by hand (TorchRec's planner has no row-wise kernel for CPU)
        assert planner is None
    else:
        assert set(planner["error_by_sharding"]) == {sharding}
        assert len(planner["shards"]) == sum(len(r["shards"]) for r in ranks)
        # the planner's communication estimate: its own bandwidth (TorchRec's intra-host default, bytes/ms in
        # TorchRec) beside the replay's, and the estimate re-scaled to the replay's bandwidth
        from torchrec.distributed.planner.constants import INTRA_NODE_BANDWIDTH

        rep = dist["collective_replay"]
        replay_s = sum(p["replay_s"] for p in rep["phases"].values())
        assert planner["comms_bandwidth_bytes_per_s"] == pytest.approx(INTRA_NODE_BANDWIDTH * 1e3)
        assert planner["replay_bandwidth_bytes_per_s"] == pytest.approx(
            sum(max(r["bytes"]) for r in rep["per_collective"]) / replay_s)
        for row in planner["communication_by_rank"]:
            assert row["replay_s"] == pytest.approx(replay_s)
            assert row["estimated_at_replay_bandwidth_s"] == pytest.approx(
                row["estimated_s"] * planner["comms_bandwidth_bytes_per_s"] / planner["replay_bandwidth_bytes_per_s"])
    if collectives:
        classes = {c["phase"]: c for c in dist["communication_roofline"]}
        assert {"input_dist", "output_dist"} <= set(classes)
        for c in classes.values():
            assert c["bytes"] > 0 and c["benchmark_s"] > 0
            assert c["ratio"] == pytest.approx(c["measured_s"] / c["benchmark_s"])
        for c in (classes["input_dist"], classes["output_dist"]):  # the transfer alone, at its own bytes
            assert c["transfer_s"] > 0 and c["transfer_benchmark_s"] > 0
            assert c["transfer_ratio"] == pytest.approx(c["transfer_s"] / c["transfer_benchmark_s"])
            assert c["collective_s"] + c["torchrec_overhead_s"] == pytest.approx(c["measured_s"])
            assert c["collective_ratio"] == pytest.approx(c["collective_s"] / c["transfer_benchmark_s"])
    else:
        assert dist["communication_roofline"] is None
    assert set(dist["communication_bytes"]) >= {"input_dist", "output_dist"}
    _check_collective_split(dist, ranks, mode)


def _check_collective_split(dist: dict, ranks: list[dict], mode: str) -> None:
    """The collective pass: every rank's split adds up, and the bytes it saw are the formula's."""
    split = dist["collective_split"]
    assert split["steps"] >= 1 and [r["rank"] for r in split["per_rank"]] == [0, 1]
    for sp, pr, r in zip(split["per_rank"], dist["per_rank"], ranks, strict=True):
        comm = {c["name"]: c["time_s"] for c in _stages(r["root"])["communication"]["children"]}
        phases = sp["phases"]
        assert {"input_dist", "output_dist"} <= set(phases)
        if mode == "train":
            assert phases["backward_all_to_all"]["collectives"] >= 1
        nodes = {c["name"]: c for c in _stages(r["root"])["communication"]["children"]}
        for name, ph in phases.items():
            assert ph["stage_s"] == pytest.approx(comm.get(name, 0.0))
            if ph["transfer_s"] is None:  # a phase the pass does not see (DDP's all-reduce is issued in C++)
                continue
            col = next(c for c in nodes[name]["children"] if c["name"] == "collective")
            assert (col["collective_pass_wait_s"], col["collective_pass_transfer_s"]) == pytest.approx(
                (ph["wait_s"], ph["transfer_s"]))
            assert ph["wait_s"] >= 0 and ph["transfer_s"] > 0
            assert ph["other_s"] == pytest.approx(max(0.0, ph["stage_s"] - ph["wait_s"] - ph["transfer_s"]))
        assert pr["peer_wait_s"] == pytest.approx(sum(p["wait_s"] for p in phases.values() if p["wait_s"] is not None))
        assert pr["transfer_measured_s"] == pytest.approx(sum(p["transfer_s"] for p in phases.values()
                                                              if p["transfer_s"] is not None))
        assert pr["communication_other_s"] == pytest.approx(max(0.0, pr["communication_s"] - pr["transfer_measured_s"]
                                                                - max(pr["peer_wait_s"], pr["wait_s"])))
        # the KJT all-to-alls (splits, lengths, IDs) and the pooled-embedding all-to-all, as TorchRec issues them
        assert phases["input_dist"]["collectives"] == 3 and phases["output_dist"]["collectives"] == 1
    crit = dist["critical_rank"]
    out = split["per_rank"][crit]["phases"]["output_dist"]
    assert out["bytes"] == pytest.approx(dist["communication_bytes"]["output_dist"])  # B x W x columns x 4
    _check_collective_replay(dist)


_ELEMENT = {"int64": 8, "int32": 4, "float32": 4, "float16": 2, "bfloat16": 2}


def _check_collective_replay(dist: dict) -> None:
    """The replay: one entry per collective the pass recorded in a step, in order, with the recorded sizes."""
    rep = dist["collective_replay"]
    split = dist["collective_split"]["per_rank"]
    rows = rep["per_collective"]
    assert [r["index"] for r in rows] == list(range(len(rows)))
    for phase in rep["phases"]:  # as many entries per phase as the pass saw collectives in a step
        n = [r for r in rows if r["phase"] == phase]
        assert len(n) == rep["phases"][phase]["collectives"] == round(split[0]["phases"][phase]["collectives"])
    for r in rows:
        assert len(r["bytes"]) == len(split) and r["replay_s"] > 0 and r["transfer_s"] >= 0
        for nbytes, splits in zip(r["bytes"], r["in_splits"], strict=True):
            if splits is not None:  # per-peer splits in elements: their sum is the input
                assert len(splits) == len(split) and sum(splits) * _ELEMENT[r["dtype"]] == nbytes
    out = [r for r in rows if r["phase"] == "output_dist"]
    for rank, sp in enumerate(split):  # the output all-to-all's bytes do not change between steps
        assert sum(r["bytes"][rank] for r in out) == pytest.approx(sp["phases"]["output_dist"]["bytes"])
    for ph in rep["phases"].values():
        assert ph["ratio"] == pytest.approx(ph["transfer_s"] / ph["replay_s"])
    assert rep["total"]["replay_s"] == pytest.approx(sum(ph["replay_s"] for ph in rep["phases"].values()))
    assert rep["total"]["transfer_s"] == pytest.approx(sum(ph["transfer_s"] for ph in rep["phases"].values()))
    for row in dist["communication_roofline"] or []:
        if row.get("replay_s"):
            assert row["transfer_benchmark"].startswith("size sweep: ")
            assert row["replay_ratio"] == pytest.approx(row["transfer_s"] / row["replay_s"])
            assert row["replay_s"] == rep["phases"][row["phase"]]["replay_s"]


def test_shard_sim_predicts_every_rank_and_compares_at_the_measured_size(profiles, capsys) -> None:
    path = profiles[("table_wise", "inference")]
    assert main(["shard-sim", str(path), "--ranks", "2", "--machine", "none", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    pred = out["prediction"]
    assert pred["ranks"] == 2 and len(pred["per_rank"]) == 2
    for r in pred["per_rank"]:
        assert r["compute_s"] == pytest.approx(r["embedding_s"] + r["dense_s"])
        assert r["time_s"] == pytest.approx(pred["step_s"])
    # the step: the slowest compute, the slowest transfer, and the measured communication that is neither
    d = json.loads(path.read_text())["distributed"]
    # the transfer at the measured world size is the replay of the model's own collectives; fixed is what the
    # least-waiting rank's communication holds beyond it
    replay_s = sum(p["replay_s"] for p in d["collective_replay"]["phases"].values())
    assert sum(r["transfer_s"] for r in pred["per_rank"]) == pytest.approx(2 * replay_s)
    fixed = max(0.0, min(r["communication_s"] for r in d["per_rank"]) - replay_s)
    assert pred["communication_fixed_s"] == pytest.approx(fixed) and fixed >= 0
    assert pred["comm_model"] == "the profile's replay of its own collectives"
    assert pred["step_s"] == pytest.approx(max(r["compute_s"] for r in pred["per_rank"])
                                           + max(r["transfer_s"] for r in pred["per_rank"]) + fixed)
    assert len(out["measured_vs_predicted"]["per_rank"]) == 2
    # 1,024 ranks: the 8 tables land on 8 ranks, the global batch's bytes are all looked up somewhere
    assert main(["shard-sim", str(path), "--ranks", "1024", "--machine", "none", "--json"]) == 0
    big = json.loads(capsys.readouterr().out)["prediction"]
    inputs = out["inputs"]
    want = sum(t["lookups_per_sample"] * inputs["batch_size"] * 1024 * t["dim"] * 4 for t in inputs["tables"])
    assert sum(r["embedding_bytes"] for r in big["per_rank"]) == pytest.approx(want)
    assert sum(r["shards"] for r in big["per_rank"]) == 8 and big["imbalance_compute"] > 1
    assert main(["shard-sim", str(path), "--ranks", "1025", "--machine", "none"]) == 2
    assert "--ranks: must be within 1..1024" in capsys.readouterr().err


def test_plan_file_names_unknown_tables(tmp_path: Path, capsys) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("tables:\n  t_9: {sharding: table_wise, ranks: [1]}\n")
    rc = main(["profile", "rmc1", "--nproc", "2", "--sharding", str(plan), *TINY])
    assert rc == 2
    assert "tables.t_9: table 't_9' is not in the model" in capsys.readouterr().err


FACTORY = '''
import os
import torch
from torch import nn
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor


class Model(nn.Module):
    def __init__(self, rank):
        super().__init__()
        self.rank, self.calls = rank, 0
        self.ebc = EmbeddingBagCollection(tables=[
            EmbeddingBagConfig(name=f"t{i}", embedding_dim=8, num_embeddings=100, feature_names=[f"f{i}"])
            for i in range(2)], device=torch.device("cpu"))
        self.head = nn.Linear(16, 1)

    def forward(self, kjt):
        self.calls += 1
        if self.rank == 1 and self.calls == 3:
            os._exit(7)  # this rank dies mid-run, inside the warm-up, while rank 0 waits in a collective
        return self.head(self.ebc(kjt).values())


def factory(batch_size, seed, *, rank, world_size, device):
    g = torch.Generator().manual_seed(seed + rank)

    def batch(i):
        lengths = torch.ones(2 * batch_size, dtype=torch.int64)
        values = torch.randint(0, 100, (2 * batch_size,), generator=g)
        return KeyedJaggedTensor.from_lengths_sync(keys=["f0", "f1"], values=values, lengths=lengths)

    return Model(rank), batch
'''


def _processes_with(marker: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if marker.encode() in (p / "environ").read_bytes():
                found.append(int(p.name))
        except OSError:
            continue
    return found


def test_a_rank_that_dies_fails_the_profile_naming_it_and_no_rank_is_left(tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    mod = f"dying_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{mod}.py").write_text(textwrap.dedent(FACTORY))
    marker = f"RECSTACK_TEST_MARK={uuid.uuid4().hex}"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(*marker.split("="))
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = main(["profile", f"{mod}:factory", "--nproc", "2", "--batch-size", "8", "--iters", "4", "--warmup", "3",
               "--op-iters", "1", "--machine", "none", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 4, err
    assert "rank 1 died (exited with code 7)" in err
    assert _processes_with(marker) == [], "a rank outlived the command"


def test_report_shows_ranks_and_switches_the_tree(browser, profiles, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    from test_report import _open

    from recstack.report import write_report

    prof = Profile.load(profiles[("table_wise", "inference")])
    page = write_report(prof, tmp_path / "r.html")
    drv = browser
    _open(drv, page)
    card = drv.find_element(By.ID, "ranks").text.lower()  # headings may be styled upper case
    assert "ranks (2, table_wise)" in card and "critical" in card and "imbalance" in card
    assert "planner against measurement" in card and "communication against the collective benchmark" in card
    crit = prof.extra["distributed"]["critical_rank"]
    other = 1 - crit
    Select(drv.find_element(By.ID, "rank-select")).select_by_value(str(other))
    assert drv.execute_script("return document.getElementById('app').dataset.state") == "ready"
    assert f"now: rank {other}" in drv.find_element(By.ID, "ranks").text
    shown = drv.find_element(By.ID, "stages").text
    want = prof.ranks[other]["root"]
    assert any(c["name"] == "communication" for c in want["children"]) and "communication" in shown


def test_replay_issues_every_recorded_collective_again_with_its_kind_and_sizes(tmp_path: Path) -> None:
    """In a one-rank gloo group: the pass's recorder sees each kind, the replay issues each again."""
    import torch
    import torch.distributed as dist

    from recstack.distributed.collective_timing import recording
    from recstack.distributed.replay import MODES, build, replay

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        records: list[dict] = []
        with recording(records):
            dist.all_to_all_single(torch.empty(6, dtype=torch.int32), torch.arange(6, dtype=torch.int32), [6], [6])
            dist.reduce_scatter_tensor(torch.empty(4), torch.ones(4), async_op=True).wait()
            dist.all_gather_into_tensor(torch.empty(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64))
            dist.all_reduce(torch.ones(5, dtype=torch.float64), op=dist.ReduceOp.MAX)
        assert [r["collective"] for r in records] == ["all_to_all_single", "reduce_scatter_tensor",
                                                      "all_gather_into_tensor", "all_reduce"]
        assert [r["dtype"] for r in records] == ["int32", "float32", "int64", "float64"]
        assert [r["async"] for r in records] == [False, True, False, False]
        assert records[0]["in_splits"] == [6] and records[0]["out_numel"] == [6]
        assert [r["bytes"] for r in records] == [24, 16, 24, 40] and records[3]["op"] == "MAX"
        for rec in records:  # each rebuilt call issues a real collective that completes
            build(rec)().wait()
        for mode in MODES:
            got = replay([records], mode, repeats=2, delays=[[0.0] * 4] if mode == "skewed" else None)
            assert len(got) == 1 and len(got[0]) == 2  # one rank; two repeats of the one step
            for step in got[0]:
                assert [(r["collective"], r["bytes"]) for r in step] == [(r["collective"], r["bytes"]) for r in records]
                assert all(r["finish"] >= r["issued"] >= r["start"] for r in step)
    finally:
        dist.destroy_process_group()


def test_comm_regions_mark_torchrec_distribution_and_undo_everything(tmp_path: Path) -> None:
    """A one-rank DMP: the regions mark its input and output distribution, never nested, close on an
    exception, and undo every patch (restoring a wrapper that was there before)."""
    import torch
    import torch.distributed as dist
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.types import Awaitable

    from recstack.distributed.comm_regions import TorchRecCommRegions, _dist_modules
    from recstack.distributed.sharding import make_plan

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ebc = EmbeddingBagCollection(tables=[EmbeddingBagConfig(
                name=f"t{i}", embedding_dim=8, num_embeddings=50, feature_names=[f"f{i}"]) for i in range(2)])

        def forward(self, kjt: KeyedJaggedTensor) -> torch.Tensor:
            return self.ebc(kjt).values().sum()

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        net = Net()
        plan, _ = make_plan(net, "table_wise", world_size=1, batch_size=4, pooling={"t0": 1.0, "t1": 1.0},
                            device="cpu", pg=dist.GroupMember.WORLD)
        dmp = DistributedModelParallel(net, device=torch.device("cpu"), plan=plan,
                                       sharders=[EmbeddingBagCollectionSharder()])
        kjt = KeyedJaggedTensor.from_lengths_sync(keys=["f0", "f1"], values=torch.arange(8) % 50,
                                                  lengths=torch.ones(8, dtype=torch.int32))
        sharded, outs = _dist_modules(dmp)
        assert sharded and outs
        wait, sentinel = Awaitable.wait, outs[0].forward  # an instance wrapper already there (as the op pass's)
        outs[0].forward = sentinel
        events: list[str] = []
        regions = TorchRecCommRegions()
        undo = regions.install(dmp, lambda s: events.append(s), lambda: events.append("leave"))
        with torch.no_grad():
            dmp(kjt)
        entered = [e for e in events if e != "leave"]
        assert {"communication.input_dist", "communication.output_dist"} <= set(entered), entered
        assert events == [x for e in entered for x in (e, "leave")]  # each closed before the next: none nested
        events.clear()
        with pytest.raises(Exception):  # noqa: B017 - whatever TorchRec raises on a bad input
            sharded[0].input_dist(sharded[0].create_context(), "not a KeyedJaggedTensor")
        assert events == ["communication.input_dist", "leave"]
        undo()  # the pass is over: the marks pass through, the patches stay until close
        events.clear()
        with torch.no_grad():
            dmp(kjt)
        assert events == [] and Awaitable.wait is not wait
        undo = regions.install(dmp, lambda s: events.append(s), lambda: events.append("leave"))  # patched once
        with torch.no_grad():
            dmp(kjt)
        assert {"communication.input_dist", "communication.output_dist"} <= set(events)
        events.clear()
        import threading

        other = threading.Thread(target=lambda: dmp(kjt))  # another thread's calls are not this pass's stages
        with torch.no_grad():
            other.start()
            other.join()
        assert events == []
        with pytest.raises(RuntimeError, match="close it first"):  # a second patcher would undo out of order
            TorchRecCommRegions().install(dmp, print, print)
        undo()

        def refuse(stage: str) -> None:
            raise ValueError("enter failed")

        undo = regions.install(dmp, refuse, lambda: events.append("leave"))
        with pytest.raises(ValueError, match="enter failed"), torch.no_grad():
            dmp(kjt)
        undo = regions.install(dmp, lambda s: events.append(s), lambda: events.append("leave"))
        with torch.no_grad():
            dmp(kjt)  # a failed enter left nothing open: the marks still work
        assert "communication.input_dist" in events and "leave" == events[-1]
        undo()
        regions.close()
        regions.close()  # idempotent
        assert Awaitable.wait is wait and "input_dist" not in sharded[0].__dict__
        assert outs[0].__dict__["forward"] is sentinel and all("forward" not in d.__dict__ for d in outs[1:])
    finally:
        dist.destroy_process_group()


def test_collective_split_takes_waiting_until_the_last_rank_and_counts_overlap_once() -> None:
    from recstack.distributed.collective_timing import split

    def rec(phase: str, start: float, finish: float) -> dict:
        return {"collective": "all_to_all_single", "phase": phase, "bytes": 100, "start": start, "finish": finish}

    # rank 0 calls both collectives first; rank 1 arrives 2 s later at the first, at once at the second;
    # rank 0's second collective overlaps its first
    r0 = [[rec("input_dist", 0.0, 3.0), rec("input_dist", 1.0, 4.0)]]
    r1 = [[rec("input_dist", 2.0, 3.0), rec("input_dist", 1.0, 4.0)]]
    got = split([r0, r1])
    p0, p1 = (got["per_rank"][r]["phases"]["input_dist"] for r in (0, 1))
    assert p0["wait_s"] == pytest.approx(1.0) and p0["transfer_s"] == pytest.approx(3.0)  # [0,1] wait, [1,4] moving
    assert p1["wait_s"] == pytest.approx(0.0) and p1["transfer_s"] == pytest.approx(3.0)
    assert p0["collectives"] == 2 and p0["bytes"] == 200
    # the phase's transfer: from the last call (2 s, 1 s) to the slowest finish (3 s, 4 s), overlap once
    assert got["phases"]["input_dist"]["transfer_s"] == pytest.approx(3.0)
    assert [c["bytes"] for c in got["phases"]["input_dist"]["collectives"]] == [[100, 100], [100, 100]]
    with pytest.raises(ValueError, match="different collectives"):
        split([r0, [r1[0][:1]]])


def test_diff_page_shows_ranks_and_its_selector_switches_the_rank(browser, profiles, tmp_path: Path,  # noqa: F811
                                                                  capsys) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    from test_report import _open

    a, b = profiles[("table_wise", "inference")], profiles[("column_wise", "train")]
    page = tmp_path / "d.html"
    assert main(["diff", str(a), str(b), "-o", str(page)]) == 0
    capsys.readouterr()
    pa, pb = Profile.load(a), Profile.load(b)
    drv = browser
    _open(drv, page)
    card = drv.find_element(By.ID, "ranks").text.lower()
    assert "table_wise" in card and "column_wise" in card and "imbalance" in card and "waiting for the last rank" in card
    shown = drv.find_element(By.ID, "diff-rank-stages")
    assert shown.get_attribute("data-view") == "critical"
    Select(drv.find_element(By.ID, "diff-rank-select")).select_by_value("rank1")
    shown = drv.find_element(By.ID, "diff-rank-stages")
    assert shown.get_attribute("data-view") == "rank1"
    stages = {e.get_attribute("data-stage") for e in shown.find_elements(By.CSS_SELECTOR, "tr[data-stage]")}
    want = set(pa.extra["distributed"]["per_rank"][1]["stages"]) | set(pb.extra["distributed"]["per_rank"][1]["stages"])
    assert stages == want | {"run"}
    assert "backward" in stages  # B trained, A did not: a stage only one side has is listed


def test_communication_split_keeps_the_run_and_moves_time_out_of_its_stage() -> None:
    from recstack.distributed.communication import split_communication
    from recstack.tree import Node

    def op(name: str, t: float, *kids: Node) -> Node:
        return Node(name=name, path=name, level="op", stage="embedding", time_s=t, children=list(kids))

    a2a = op("[splits_dist]_[sparse_arch.ebc]_[table_wise]", 0.002, op("c10d::alltoall_base_", 0.0015))
    a2a.extra["op_pass_time_s"], a2a.children[0].extra["op_pass_time_s"] = 0.004, 0.003  # the op pass's own
    lookup = op("fbgemm::split_embedding_codegen_forward_cpu", 0.003)
    mod = Node(name="sparse_arch", path="embedding/sparse_arch", level="module", stage="embedding", time_s=0.005,
               children=[a2a, lookup])
    emb = Node(name="embedding", path="embedding", level="stage", stage="embedding", time_s=0.006, children=[mod],
               extra={"time_s_p10": 0.0055, "time_s_p90": 0.007})
    bw_ar = op("autograd::engine::evaluate_function: AccumulateGrad", 0.0, op("c10d::allreduce_", 0.001))
    bw = Node(name="backward", path="backward", level="stage", stage="backward", time_s=0.004, children=[bw_ar])
    root = Node(name="m", path="run", level="run", stage=None, time_s=0.010, children=[emb, bw])
    comm = split_communication(root)
    assert root.time_s == 0.010 and sum(c.time_s for c in root.children) == pytest.approx(0.010)
    assert emb.time_s == pytest.approx(0.004) and mod.time_s == pytest.approx(0.003)
    assert emb.extra["communication_moved_s"] == pytest.approx(0.002) and emb.extra["time_s_p10"] == pytest.approx(0.0035)
    assert bw.time_s == pytest.approx(0.003)
    assert {c.name: c.time_s for c in comm.children} == pytest.approx({"input_dist": 0.002, "dense_all_reduce": 0.001})
    # each phase: its collective calls taken out of TorchRec's ranges, and the ranges with what is left
    parts = {c.name: c for c in comm.child("input_dist").children}
    assert {k: c.time_s for k, c in parts.items()} == pytest.approx({"collective": 0.0015, "torchrec_overhead": 0.0005})
    assert parts["collective"].children[0].path == "communication/input_dist/collective/c10d::alltoall_base_"
    kept = parts["torchrec_overhead"].children[0]
    assert kept.path == "communication/input_dist/torchrec_overhead/[splits_dist]_[sparse_arch.ebc]_[table_wise]"
    assert kept.time_s == pytest.approx(0.0005) and kept.children == []
    assert kept.extra["op_pass_time_s"] == pytest.approx(0.001)  # without the call taken out of it
    assert parts["collective"].children[0].extra["op_pass_time_s"] == pytest.approx(0.003)
    dense = {c.name: c.time_s for c in comm.child("dense_all_reduce").children}  # a call found on its own
    assert dense == pytest.approx({"collective": 0.001, "torchrec_overhead": 0.0})


def test_collective_model_interpolates_the_measured_points() -> None:
    from recstack.distributed.comm_model import collective_time

    rows = [{"bytes": 1024, "time_s": 1e-4}, {"bytes": 4096, "time_s": 2e-4}, {"bytes": 16384, "time_s": 8e-4}]
    coll = {"by_world_size": {"2": {"all_to_all": rows, "all_reduce": rows}}}
    for r in rows:
        assert collective_time(coll, "all_to_all", r["bytes"], 2) == pytest.approx(r["time_s"])
    assert collective_time(coll, "all_to_all", 10, 2) == pytest.approx(1e-4)  # latency below the smallest
    assert collective_time(coll, "all_to_all", 32768, 2) == pytest.approx(16e-4)  # the largest's bandwidth above
    assert 1e-4 < collective_time(coll, "all_to_all", 2048, 2) < 2e-4
    assert collective_time(coll, "all_to_all", 4096, 5) == pytest.approx(2e-4 * 4)  # 4 peers instead of 1


def test_machine_collectives_world_sizes_are_checked_before_measuring(capsys) -> None:
    assert main(["machine", "--collectives", "--world-sizes", "1,2"]) == 2
    assert "--world-sizes: must be world sizes within 2..64 (got '1,2')" in capsys.readouterr().err


def test_show_prints_the_ranks(profiles, capsys) -> None:
    path = profiles[("column_wise", "train")]
    capsys.readouterr()
    assert main(["show", str(path), "--depth", "1"]) == 0
    out = capsys.readouterr().out
    crit = json.loads(path.read_text())["distributed"]["critical_rank"]
    assert "2 ranks (column_wise, gloo)" in out and f"critical path: rank {crit}" in out
    assert "communication" in out and "imbalance (max/mean over ranks)" in out


def test_pinning_leaves_an_oversubscribed_host_unpinned_and_says_so() -> None:
    """More ranks than usable cores: no rank is pinned, and the record names why (a fresh process: pinning
    and the inter-op thread count are per process)."""
    import subprocess
    import sys

    usable = sorted(os.sched_getaffinity(0))
    code = ("import json; from recstack.hardware.placement import place_rank; "
            f"print(json.dumps([place_rank('pin', r, {len(usable) + 1}, 1) for r in (0, 1)]))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=True)
    for rec in json.loads(out.stdout):
        assert rec["mode"] == "pin" and not rec["pinned"] and rec["cpus"] == usable == rec["usable_cpus"]
        assert "oversubscribed" in rec["reason"] and rec["interop_threads"] == 1
