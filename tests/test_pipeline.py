"""The analysis pipeline: a saved profile re-analysed against another machine file, without re-running.

One real tiny profile (rmc1 at scale 0.001, cost model on, no machine) is
saved once; the machine files are two real measurements of one Intel
Sapphire Rapids guest fifty minutes apart (tests/data/machines/README.md),
whose roofs differ by 2.7x (GEMM) and 1.5x (stream).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from torch import nn

import recstack
from recstack.analysis.pipeline import (
    CLASSIFICATION_KEYS,
    STEPS,
    analyse,
    clear_classification,
    is_classified,
    register_analysis,
    select_steps,
    stage_bound_finding,
)
from recstack.analysis.roofline import OVERHEAD_ROOF_FRACTION
from recstack.cli import main
from recstack.errors import ConfigError, DataError
from recstack.hardware import counters as ctr
from recstack.hardware.bench import ROOF_STATISTIC
from recstack.profiling.counters_replay import attach_counters
from recstack.tree import Node, Profile

DATA = Path(__file__).resolve().parent / "data"
FAST = DATA / "machines" / "machine-full-fast-period.json"
SLOW = DATA / "machines" / "machine-full-slow-period.json"
KEPT = {"kind": "bf16_speedup", "stage": "dense", "text": "measured elsewhere", "value": 1.4}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real tiny profile with cost figures and no classification, saved to a file."""
    prof = recstack.profile_zoo(
        "rmc1", scale=0.001, batch_size=64, iters=3, warmup=1, op_iters=1, counters=False
    )
    return prof.save(tmp_path_factory.mktemp("pipeline") / "rmc1.json")


def _figures(path: Path) -> dict:
    return json.loads(path.read_text())


def _roofs(machine: dict, threads: int) -> tuple[float, float]:
    """(fp32 GEMM peak, stream bandwidth) the file gives at a measured thread count."""
    peak = machine["gemm_flops"]["fp32"]["by_threads"][str(threads)][ROOF_STATISTIC]
    kinds = machine["stream_bandwidth"]["by_threads"][str(threads)]
    return float(peak), max(float(kinds["copy"][ROOF_STATISTIC]), float(kinds["triad"][ROOF_STATISTIC]))


def _densest_op(p: Profile) -> Node:
    ops = [n for n in p.nodes() if n.level == "op" and n.flops and n.bytes and n.time_s > 0]
    return max(ops, key=lambda n: n.flops / n.bytes)


# -- re-analysis ---------------------------------------------------------------------------------------------
def test_runner_runs_the_pipeline(saved: Path) -> None:
    assert not is_classified(Profile.load(saved))  # profiled without a machine
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    p = recstack.profile(
        model,
        lambda i: torch.randn(16, 32),
        batch_size=16,
        iters=2,
        warmup=1,
        op_iters=1,
        counters=False,
        machine=_figures(FAST),
    )
    assert is_classified(p) and p.extra["machine"]["file"] is None  # a dict, from no file
    assert p.extra["machine"]["sha256"] == analyse(copy.deepcopy(p), FAST).extra["machine"]["sha256"]
    assert [f["stage"] for f in p.extra["findings"]] == [s.name for s in p.root.children if s.extra["bound"]]
    from_file = recstack.profile(model, lambda i: torch.randn(16, 32), batch_size=16, iters=2, warmup=1,
                                 op_iters=1, counters=False, cost_model=False, machine=str(FAST))
    assert from_file.extra["machine"]["file"] == str(FAST.resolve())  # the file the figures came from


def test_reanalysis_follows_the_machine_file_and_leaves_nothing_stale(saved: Path) -> None:
    p = Profile.load(saved)
    p.extra["findings"] = [KEPT]  # a finding of a kind no analysis step writes
    analyse(p, FAST)
    fast = copy.deepcopy(p)
    analyse(p, SLOW)
    fresh = analyse(Profile.load(saved), SLOW)
    fresh.extra["findings"] = [KEPT, *fresh.extra["findings"]]
    # Classified against FAST and then SLOW is exactly what classifying against SLOW alone gives.
    assert p.to_dict() == fresh.to_dict()

    threads = int(p.run["threads"])
    for prof, path in ((fast, FAST), (p, SLOW)):
        m = prof.extra["machine"]
        peak, stream = _roofs(_figures(path), threads)
        assert m["file"] == str(path) and len(m["sha256"]) == 64
        assert m["peak_flops"] == pytest.approx(peak) and m["stream_bandwidth"] == pytest.approx(stream)
        for n in prof.nodes():
            r = n.extra["roofline"]
            assert r["peak_flops"] == pytest.approx(peak)
            if r.get("achieved_flops") is not None:
                assert r["compute_fraction"] == pytest.approx(r["achieved_flops"] / peak)
            if r["roof"] == "stream" and r.get("roof_bytes_per_s") is not None:
                assert r["roof_bytes_per_s"] == pytest.approx(stream)
        stages = [s.name for s in prof.root.children if s.extra["bound"] is not None]
        assert [f["stage"] for f in prof.extra["findings"] if f["kind"] == "stage_bound"] == stages
        assert KEPT in prof.extra["findings"]
    assert fast.extra["machine"]["sha256"] != p.extra["machine"]["sha256"]
    assert fast.extra["machine"]["peak_flops"] / p.extra["machine"]["peak_flops"] > 2


def test_bound_class_follows_the_machine_file(saved: Path) -> None:
    """An op timed to reach 60% of the overhead threshold of FAST's GEMM peak is overhead-bound
    against FAST and compute-bound against SLOW (2.7x lower peak), whichever file came first."""
    p = Profile.load(saved)
    op = _densest_op(p)
    peak_fast, stream_fast = _roofs(_figures(FAST), int(p.run["threads"]))
    op.calls = 1
    op.time_s = op.flops / (0.6 * OVERHEAD_ROOF_FRACTION * peak_fast)
    assert op.bytes / op.time_s < OVERHEAD_ROOF_FRACTION * stream_fast, (
        "the op moves too many bytes for this check"
    )
    for order in ((FAST, SLOW), (SLOW, FAST)):
        for machine in order:
            analyse(p, machine)
            want = "overhead" if machine == FAST else "compute"
            assert op.extra["bound"] == want, (machine.name, op.extra["bound_reason"])
            assert p.extra["machine"]["file"] == str(machine)


def test_bad_input_changes_nothing(saved: Path) -> None:
    p = analyse(Profile.load(saved), FAST)
    before = p.to_dict()
    p.run["device"] = "cuda"  # the machine files have no GPU figures
    with pytest.raises(DataError, match="GPU"):
        analyse(p, SLOW)
    p.run["device"] = "cpu"
    assert p.to_dict() == before
    with pytest.raises(ConfigError, match="machine"):
        analyse(p, None, steps=["roofline"])
    with pytest.raises(ConfigError, match="unknown analysis step"):
        analyse(p, FAST, steps=["nope"])
    with pytest.raises(DataError, match="not found"):
        analyse(p, DATA / "machines" / "absent.json")
    assert p.to_dict() == before
    assert select_steps(["roofline"], True) == ["roofline", "contention", "findings"]  # they read what it writes
    assert select_steps(None, False) == [n for n, s in STEPS.items() if not s.needs_machine]


def test_clear_classification_and_findings_without_it(saved: Path) -> None:
    p = analyse(Profile.load(saved), FAST)
    clear_classification(p)
    assert not is_classified(p)
    assert all(k not in n.extra for n in p.nodes() for k in CLASSIFICATION_KEYS)
    analyse(p, steps=["findings"])
    assert "findings" not in p.extra  # its only findings were about the classification


def test_a_registered_analysis_runs_like_the_built_in_ones(saved: Path) -> None:
    """A new analysis is one decorated function of the profile: analyse() runs it, by name or with all."""

    @register_analysis("stage_count_test")
    def count(profile: Profile, _machine: object) -> None:
        profile.extra["stage_count_test"] = len(profile.root.children)

    try:
        p = analyse(Profile.load(saved), steps=["stage_count_test"])
        assert p.extra["stage_count_test"] == len(p.root.children) > 0
        assert "stage_count_test" in select_steps(None, has_machine=False)
        with pytest.raises(ValueError, match="registered already"):
            register_analysis("roofline")(count)
    finally:
        STEPS.pop("stage_count_test")


def test_counters_step_puts_stored_counters_on_stage_nodes_only(saved: Path) -> None:
    p = Profile.load(saved)
    parsed = ctr.parse_perf_stat_csv((DATA / "perf" / "intel_icx_topdown_events.txt").read_text())
    attach_counters(
        p,
        {
            "available": True,
            "method": ctr.METHOD,
            "perf": "perf version 6.1",
            "stages": {
                "embedding": {"roots": ["x"], "root_calls_per_step": 1, **ctr.derived(parsed, calls=10)},
                "dense": {"available": False, "reason": "stage root was not called during the step"},
            },
        },
    )
    emb = p.stage("embedding").extra["counters"]
    assert emb["ipc"] == pytest.approx(
        parsed["events"]["instructions"]["value"] / parsed["events"]["cycles"]["value"]
    )
    stale = next(n for n in p.nodes() if n.level == "op")
    stale.extra["counters"] = {"ipc": 9.9}
    p.stage("dense").extra["counters"] = {"ipc": 9.9}
    analyse(p, steps=["counters"])
    assert [n.path for n in p.nodes() if "counters" in n.extra] == ["embedding"]
    assert p.stage("embedding").extra["counters"] == emb


# -- CLI ------------------------------------------------------------------------------------------------------
def test_cli_analyse_round_trip_and_roofline_draws_what_is_stored(
    saved: Path, tmp_path: Path, capsys
) -> None:
    once, twice = tmp_path / "fast.json", tmp_path / "slow.json"
    assert main(["analyse", str(saved), "--machine", str(FAST), "-o", str(once)]) == 0
    out = capsys.readouterr().out
    assert f"classified against {FAST}" in out and "embedding" in out and str(once) in out
    assert main(["analyse", str(once), "--machine", str(SLOW), "-o", str(twice)]) == 0
    capsys.readouterr()
    got = Profile.load(twice)
    assert got.to_dict() == analyse(Profile.load(saved), SLOW).to_dict()

    # roofline draws the stored classification (SLOW) unless told otherwise.
    chart, kept = tmp_path / "roof.svg", tmp_path / "kept.json"
    assert main(["roofline", str(twice), "-o", str(chart), "--save-profile", str(kept)]) == 0
    assert chart.read_text().lstrip().startswith("<?xml")
    assert Profile.load(kept).extra["machine"]["file"] == str(SLOW)
    assert (
        main(["roofline", str(twice), "-o", str(chart), "--machine", str(FAST), "--save-profile", str(kept)])
        == 0
    )
    assert Profile.load(kept).extra["machine"]["file"] == str(FAST)
    capsys.readouterr()

    # Bad input: exit 2, one line naming what to fix, nothing written.
    bad = tmp_path / "bad.json"
    assert main(["analyse", str(saved), "-o", str(bad)]) == 2
    assert "--machine" in capsys.readouterr().err
    assert main(["analyse", str(saved), "--machine", str(tmp_path / "absent.json"), "-o", str(bad)]) == 2
    assert main(["analyse", str(tmp_path / "absent.json"), "--machine", str(FAST), "-o", str(bad)]) == 2
    assert not bad.exists()
    assert main(["analyse", str(saved), "--machine", str(FAST), "--steps", "roofline,nope", "-o", str(bad)]) == 2
    assert "--steps" in capsys.readouterr().err
    assert main(["analyse", str(saved), "--steps", "counters", "-o", str(bad)]) == 0
    assert "(steps: counters)" in capsys.readouterr().out and not is_classified(Profile.load(bad))


def test_reanalysis_judges_the_stored_probe_against_the_new_machine(saved: Path) -> None:
    from recstack.hardware.probe import MIN_MARGIN, probe_settings

    def machine_with_probe(gemm: float, stream: float) -> dict:
        m = json.loads(FAST.read_text())
        fig = {"gemm_flops": {"min": gemm, "max": gemm, "median": gemm, "spread": 0.0},
               "stream_bytes_per_s": {"min": stream, "max": stream, "median": stream, "spread": 0.0}}
        m["probe"] = {**probe_settings(), "by_threads": {"2": fig}}
        return m

    p = Profile.load(saved)
    run_probe = {"threads": 2, "gemm_flops": 170e9, "stream_bytes_per_s": 18e9,  # the Intel guest's slow period
                 "settings": probe_settings()}
    p.environment["contention"] = {
        "detected": False, "evidence": [], "notes": [],
        "probe": {"before": dict(run_probe), "after": dict(run_probe), "evidence": [], "notes": []},
    }
    analyse(p, machine_with_probe(453e9, 27e9))  # measured in the fast period: the run was on a slower host
    rec = p.environment["contention"]
    assert rec["detected"] and any("host slower" in e and "453 GFLOP/s" in e for e in rec["evidence"])
    analyse(p, machine_with_probe(160e9, 17e9))  # against a file measured in the slow period: nothing slower
    rec = p.environment["contention"]
    assert not rec["detected"] and not any("host slower" in e for e in rec["evidence"])
    assert rec["probe"]["floor"]["gemm_flops"] == pytest.approx((1 - MIN_MARGIN) * 160e9)


def test_stage_bound_finding_names_the_ceiling_it_is_against() -> None:
    compute = {"bound": "compute", "roofline": {"roof": "stream", "roof_key": "gemm.bf16", "ceiling_fraction": 0.37}}
    memory = {"bound": "memory", "roofline": {"roof": "gather", "roof_key": "gather", "ceiling_fraction": 0.52}}
    assert stage_bound_finding("head", compute)["text"] == "head is compute-bound at 37% of its bf16 GEMM ceiling"
    assert stage_bound_finding("embedding", memory)["text"].endswith("52% of its gather roofline ceiling")
    suspect = {"bound": "compute", "roofline": {**compute["roofline"], "ceiling_fraction": 1.88, "roof_suspect": True,
                                                "roof_suspect_reason": "above the measured roof"}}
    f = stage_bound_finding("head", suspect)
    assert f["roof_suspect"] and "188%?" in f["text"] and "188% " not in f["text"]


def test_a_machine_file_measured_under_contention_is_named_in_the_profile(saved: Path, tmp_path: Path) -> None:
    from recstack.errors import ContendedRunError
    from recstack.profiling.environment import strict_check

    contended = json.loads(FAST.read_text())
    contended["contention"] = {"detected": True, "evidence": ["load average 3.50 before the measurement on 2 "
                                                             "usable core(s): other work filled every core"]}
    mfile = tmp_path / "contended-machine.json"
    mfile.write_text(json.dumps(contended))
    from recstack.hardware.probe import probe_settings

    p = Profile.load(saved)
    run_probe = {"threads": 2, "gemm_flops": 170e9, "stream_bytes_per_s": 18e9, "settings": probe_settings()}
    p.environment["contention"] = {"detected": False, "evidence": [], "notes": [],  # a quiet run
                                   "probe": {"before": dict(run_probe), "after": dict(run_probe)}}
    analyse(p, str(mfile))
    assert p.extra["machine"]["contended"] is True
    notes = p.environment["contention"]["notes"]
    assert any(str(mfile) in n and "measured under contention" in n and "load average 3.50" in n for n in notes)
    with pytest.raises(ContendedRunError, match="measured under contention"):
        strict_check(p, None)
    analyse(p, FAST)  # against a quiet file: the note and the mark go
    assert p.extra["machine"]["contended"] is False
    assert not any("measured under contention" in n for n in p.environment["contention"]["notes"])
    strict_check(p, None)
