"""The profile contract: typed models, the committed JSON Schema, validation on load, atomic outputs."""

from __future__ import annotations

import contextlib
import copy
import csv
import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _machines import synthetic_machine
from pydantic import BaseModel

import recstack
from recstack.cli import main
from recstack.errors import DataError, RecstackError
from recstack.schema import (
    MAX_TREE_DEPTH,
    SCHEMA_VERSION,
    ProfileModel,
    committed_json_schema,
    docgen,
    json_schema,
    json_schema_text,
)
from recstack.tree import Node, Profile
from recstack.zoo import builtin_names

REPO = Path(__file__).resolve().parents[1]
TINY = 0.0005
PERF_DATA = Path(__file__).parent / "data" / "perf"


def _machine() -> dict[str, Any]:
    """The shared synthetic machine file with a trusted (native) latency, so the profile carries it."""
    m = synthetic_machine()
    m["schema_version"] = 2
    m["latency_ns"].update(method="native", trusted=True)
    return m


def _with_counters(p: Profile) -> None:
    """Attach a recorded perf session as per-stage counters (the producer's real code path)."""
    from recstack.hardware.perf_stat import derived, parse_perf_stat_csv
    from recstack.profiling.counters_replay import attach_counters

    parsed = parse_perf_stat_csv((PERF_DATA / "intel_icx_topdown_events.txt").read_text())
    stage = {"roots": ["sparse_arch"], "root_calls_per_step": 1, **derived(parsed, 5)}
    attach_counters(p, {"available": True, "method": "recorded", "perf": "perf 6.1",
                        "stages": {"embedding": stage, "dense": {"available": False, "reason": "not called"}}})


@pytest.fixture(scope="session")
def zoo_profiles() -> dict[str, dict[str, Any]]:
    """Every zoo model profiled once (tiny, 2 steps) and classified; plus rmc1 in train mode. As saved JSON."""
    machine = _machine()
    out: dict[str, dict[str, Any]] = {}
    kw = dict(scale=TINY, batch_size=16, iters=2, warmup=0, op_iters=1, num_batches=1, machine=machine)
    for name in builtin_names():
        p = recstack.profile_zoo(name, counters=name == "rmc1", **kw)
        if name == "rmc1":
            _with_counters(p)
        out[name] = json.loads(json.dumps(p.to_dict(), allow_nan=False))
    train = recstack.profile_zoo("rmc1", mode="train", optimizer="adagrad", counters=False, **kw)
    out["rmc1-train"] = json.loads(json.dumps(train.to_dict(), allow_nan=False))
    return out


@pytest.fixture(scope="session")
def validator() -> jsonschema.Draft202012Validator:
    """A JSON-Schema validator of the committed schema (built once: checking the schema itself is slow)."""
    return jsonschema.Draft202012Validator(committed_json_schema())


# -- the committed schema and doc ------------------------------------------------------------------------
def test_committed_schema_is_generated_from_the_models() -> None:
    path = REPO / "src" / "recstack" / "schema" / "profile.schema.json"
    assert path.read_text(encoding="utf-8") == json_schema_text(), "run: python -m recstack.schema"
    assert committed_json_schema() == json_schema()
    jsonschema.Draft202012Validator.check_schema(json_schema())


def test_doc_tables_are_current() -> None:
    doc = (REPO / "docs" / "profile-schema.md").read_text(encoding="utf-8")
    assert docgen.MARKER in doc
    assert doc == docgen.current(doc), "run: python -m recstack.schema.docgen docs/profile-schema.md"


def test_every_declared_field_has_a_description() -> None:
    for _heading, model, _where in docgen.SECTIONS:
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name}"


# -- real profiles against the contract ----------------------------------------------------------------
def _undeclared(m: BaseModel, where: str = "") -> list[str]:
    """Keys no model declares, anywhere in a validated document (free-form dict fields aside)."""
    found = [f"{where}.{k}".lstrip(".") for k in (m.__pydantic_extra__ or {})]
    for name in type(m).model_fields:
        v = getattr(m, name)
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else [(None, v)]
        for k, x in items:
            if isinstance(x, BaseModel):
                sub = f"{where}.{name}" + ("" if k is None else f"[{k}]" if isinstance(k, int) else f".{k}")
                found += _undeclared(x, sub)
    return found


@pytest.mark.parametrize("name", [*builtin_names(), "rmc1-train"])
def test_zoo_profile_validates_against_schema_and_models(zoo_profiles, validator, name) -> None:
    d = zoo_profiles[name]
    validator.validate(d)
    model = ProfileModel.model_validate(d)
    assert _undeclared(model) == [], "a producer writes keys the contract does not declare"
    assert Profile.from_dict(d).to_dict() == d  # lossless
    assert d["schema_version"] == SCHEMA_VERSION and d["ranks"] == [{"rank": 0, "root": None, "shards": []}]
    if name == "rmc1":
        assert d["machine"]["dram_latency_s"] == pytest.approx(95e-9)
        assert d["root"]["bound"] in ("memory", "compute", "overhead")
        assert d["counters"]["stages"]["embedding"]["ipc"] > 0
    if name == "rmc1-train":
        assert d["memory"]["resident_by_stage"]["embedding"]["optimizer_state_bytes"] > 0
        assert {c["name"] for c in d["root"]["children"]} >= {"loss", "backward", "optimizer"}


# -- bad documents -------------------------------------------------------------------------------------
def _set(path: str, value: Any):
    def mutate(d: dict[str, Any]) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split("/")]
        tgt = d
        for k in keys[:-1]:
            tgt = tgt[k]
        if value is _DELETE:
            del tgt[keys[-1]]
        else:
            tgt[keys[-1]] = value

    return mutate


_DELETE = object()
BAD = [
    ("root", "hello", "root: must be a JSON object (got 'hello')"),
    ("run", [1, 2], "run: must be a JSON object (got a list)"),
    ("root/children/1/time_s", "fast", "root.children[1].time_s: must be a number (got 'fast')"),
    ("root/children", {}, "root.children: must be a JSON list"),
    ("root/children/0/time_s", float("nan"), "root.children[0].time_s: must be a finite number"),
    ("root/time_s", -1.0, "root.time_s: must be >= 0"),
    ("root/children/1/children/0/self_time_s", float("inf"), "root.children[1].children[0].self_time_s: must be a finite"),
    ("schema_version", 0, "schema_version: must be an integer from 1 to 2 (got 0)"),
    ("schema_version", -7, "schema_version: must be an integer from 1 to 2 (got -7)"),
    ("schema_version", "2", "schema_version: must be an integer"),
    ("schema_version", 99, "schema_version 99 is newer than this recstack reads"),
    ("schema", "other", "not a recstack profile"),
    ("run_id", _DELETE, "run_id: required key is missing"),
    ("root/children/2/calls", _DELETE, "root.children[2].calls: required key is missing"),
    ("root/children/2/calls", True, "root.children[2].calls: must be an integer (got True)"),
    ("root/level", "planet", "root.level: Input should be 'run'"),
    ("run/batch_size", "16", "run.batch_size: must be an integer (got '16')"),
    ("ranks", [{"rank": 0, "root": "root"}], "ranks[0].root: must be a JSON object (got 'root')"),
    ("memory/resident_by_stage/embedding/parameters_bytes", -5, "memory.resident_by_stage.embedding.parameters_bytes"),
    ("root/bound", "fast", "root.bound: Input should be 'memory', 'compute' or 'overhead'"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD, ids=[f"{p}={v!r}"[:40] for p, v, _ in BAD])
def test_bad_profile_names_the_first_bad_field(zoo_profiles, tmp_path, capsys, path, value, message) -> None:
    d = copy.deepcopy(zoo_profiles["rmc1"])
    _set(path, value)(d)
    with pytest.raises(DataError) as exc:
        Profile.from_dict(d, source="p.json")
    assert str(exc.value).startswith("p.json: ") and message in str(exc.value)
    f = tmp_path / "p.json"
    f.write_text(json.dumps(d), encoding="utf-8")  # NaN/Infinity literals: Python's parser reads them
    for argv in (["validate", str(f)], ["show", str(f)], ["export", str(f)], ["report", str(f)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and message in err, (argv, err)
    assert main(["validate", str(f), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is False and message in out["error"]


def _chain(depth: int) -> dict[str, Any]:
    leaf: dict[str, Any] = {"name": "x", "path": "x", "level": "op", "stage": None, "time_s": 0.0,
                            "self_time_s": 0.0, "calls": 0, "flops": None, "bytes": None, "intensity": None,
                            "children": []}
    node = leaf
    for i in range(depth):
        node = dict(leaf, path=f"x{i}", children=[node])
    return node


def test_tree_depth_limit(zoo_profiles, tmp_path, capsys) -> None:
    d = copy.deepcopy(zoo_profiles["ncf"])
    d["root"]["children"][0]["children"] = [_chain(MAX_TREE_DEPTH - 2)]  # root -> stage -> 63 more: at the limit
    assert Profile.from_dict(d).root.children[0].children
    d["root"]["children"][0]["children"] = [_chain(MAX_TREE_DEPTH)]
    with pytest.raises(DataError, match=f"root: the tree is more than {MAX_TREE_DEPTH} levels deep"):
        Profile.from_dict(d)
    d["ranks"][0]["root"] = _chain(200)
    d["root"]["children"][0]["children"] = []
    with pytest.raises(DataError, match=r"ranks\[0\].root: the tree is more than"):
        Profile.from_dict(d)
    # JSON nested beyond Python's parser (about 2,500 levels): a DataError, never a traceback.
    f = tmp_path / "deep.json"
    f.write_text('{"schema": "recstack.profile", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(DataError, match="nested too deeply"):
        Profile.load(f)
    assert main(["validate", str(f)]) == 2
    assert "nested too deeply" in capsys.readouterr().err


def test_validate_cli_summary(zoo_profiles, tmp_path, capsys) -> None:
    f = tmp_path / "ok.json"
    f.write_text(json.dumps(zoo_profiles["din"]))
    assert main(["validate", str(f)]) == 0
    out = capsys.readouterr().out.strip()
    assert out.count("\n") == 0 and "valid recstack profile, schema version 2" in out and "model din" in out
    assert main(["validate", str(f), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["valid"] and info["model"] == "din" and info["nodes"] > 10 and info["stats_version"] == 2


# -- versions -------------------------------------------------------------------------------------------
def _as_v1(d: dict[str, Any], medians: bool = True) -> dict[str, Any]:
    """What recstack 0.1 wrote: version 1, a path string in ranks, unit-less resident keys, latency_ns;
    with ``medians``, stage times that do not add up to the run (medians of each), as before the change."""
    v1 = copy.deepcopy(d)
    v1["schema_version"] = 1
    if medians:
        v1["root"]["time_s"] *= 1.03
    v1["ranks"] = [{"rank": 0, "root": "root"}]
    old = {"parameters_bytes": "parameters", "buffers_bytes": "buffers", "optimizer_state_bytes": "optimizer_state"}
    v1["memory"]["resident_by_stage"] = {
        s: {old[k]: v for k, v in e.items()} for s, e in v1["memory"]["resident_by_stage"].items()
    }
    for st in v1["root"]["children"]:
        if "resident_bytes" in st:
            st["resident_bytes"] = {old[k]: v for k, v in st["resident_bytes"].items()}
    v1["machine"]["latency_ns"] = v1["machine"].pop("dram_latency_s") * 1e9
    return v1


def test_v1_profile_loads_upgraded_with_a_note(zoo_profiles, validator, tmp_path, capsys) -> None:
    v2 = zoo_profiles["rmc1"]
    f = tmp_path / "old.json"
    f.write_text(json.dumps(_as_v1(v2)))
    p = Profile.load(f)
    assert "schema version 1: its run and stage times are medians" in capsys.readouterr().err
    assert p.notes and p.stats_version == 1 and p.time_statistic == "median"
    d = p.to_dict()
    assert d["schema_version"] == 2 and d["ranks"] == v2["ranks"]
    assert d["memory"]["resident_by_stage"] == v2["memory"]["resident_by_stage"]
    assert d["machine"]["dram_latency_s"] == pytest.approx(v2["machine"]["dram_latency_s"])
    assert d["upgraded_from"]["schema_version"] == 1
    resaved = p.save(tmp_path / "resaved.json")
    again = Profile.load(resaved)  # saved again it is version 2, but still says its figures are version 1
    assert again.stats_version == 1 and again.time_statistic == "median" and not again.notes
    f.write_text(json.dumps(_as_v1(v2, medians=False)))  # version 1, but written after the change: means
    late = Profile.load(f)
    assert late.time_statistic == "interquartile mean" and "written after" in capsys.readouterr().err
    validator.validate(json.loads(resaved.read_text()))
    assert main(["validate", str(f)]) == 0
    assert "upgraded from version 1" in capsys.readouterr().out


def test_diff_notes_versions_and_refuses_two_models(zoo_profiles, tmp_path, capsys) -> None:
    from recstack.report.diff import diff_profiles

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_as_v1(zoo_profiles["rmc1"])))
    b.write_text(json.dumps(zoo_profiles["rmc1"]))
    # A contended test host adds a note of its own: find the version note among them.
    r = [n for n in diff_profiles(Profile.load(a), Profile.load(b)).notes if "version 1" in n]
    assert r and "medians" in r[0]
    assert main(["diff", str(a), str(b)]) == 0
    assert "different statistics" in " ".join(capsys.readouterr().out.split())
    # same version on both sides: no version note (a contended test host may add its own note)
    assert not [n for n in diff_profiles(Profile.load(b), Profile.load(b)).notes if "profile schema version" in n]
    a.write_text(json.dumps(_as_v1(zoo_profiles["rmc1"], medians=False)))
    late = [n for n in diff_profiles(Profile.load(a), Profile.load(b)).notes if "version 1" in n]
    assert late and "both sides' run and stage times are interquartile means" in late[0]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(zoo_profiles["ncf"]))
    assert main(["diff", str(b), str(other)]) == 2
    err = capsys.readouterr().err
    assert "'rmc1'" in err and "'ncf'" in err and "--allow-different-models" in err
    assert main(["diff", str(b), str(other), "--allow-different-models"]) == 0


# -- atomic outputs ------------------------------------------------------------------------------------
def _writers(prof: Profile) -> dict[str, Any]:
    from recstack.export import write_csv, write_parquet
    from recstack.hardware.machine import save_machine
    from recstack.render.roofline_chart import render_roofline
    from recstack.report.build import write_report
    from recstack.workload import load_workload

    spec = load_workload("production")
    return {
        "profile.json": prof.save,
        "report.html": lambda p: write_report(prof, p),
        "nodes.csv": lambda p: write_csv(prof, p),
        "nodes.parquet": lambda p: write_parquet(prof, p),
        "roofline.png": lambda p: render_roofline(prof, p),
        "spec.yaml": spec.to_yaml,
        "machine.json": lambda p: save_machine(_machine() | {"padding": "x" * 70_000}, p),
    }


def _fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` to the last block; returns the filler file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0")
    return filler


def _assert_old_kept(folder: Path, writers: dict[str, Any], full: bool = False) -> None:
    """Each writer, over an existing file, fails (disk full) and leaves that file and nothing else."""
    for name, write in writers.items():
        target = folder / name
        target.write_bytes(b"OLD " + name.encode())
        filler = _fill(folder) if full else None
        with pytest.raises((OSError, RecstackError)):
            write(target)
        assert target.read_bytes() == b"OLD " + name.encode(), name
        left = sorted(x.name for x in folder.iterdir() if x != filler)
        assert left == [name], (name, left)
        target.unlink()
        if filler is not None:
            filler.unlink()


def _mount_tiny_tmpfs(folder: Path) -> str | None:
    """Mount a 64 KiB tmpfs on ``folder``; None when done, else why not (not root, not permitted)."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    return None if res.returncode == 0 else res.stderr.decode(errors="replace").strip() or "mount failed"


def test_full_disk_leaves_the_old_file_intact(zoo_profiles, tmp_path, monkeypatch) -> None:
    """A real full disk (a tiny tmpfs) when the tests may mount one; else every fsync fails with ENOSPC."""
    writers = _writers(Profile.from_dict(zoo_profiles["rmc1"]))
    folder = tmp_path / "out"
    folder.mkdir()
    why_not = _mount_tiny_tmpfs(folder)
    if why_not is None:
        try:
            _assert_old_kept(folder, writers, full=True)
        finally:
            subprocess.run(["umount", str(folder)], check=False)
        return

    def no_space(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)  # the flush to disk fails as on a full disk
    _assert_old_kept(folder, writers)


# -- CSV export ----------------------------------------------------------------------------------------
def test_csv_cells_that_look_like_formulas_are_quoted(zoo_profiles, tmp_path) -> None:
    from recstack.export import spreadsheet_safe, write_csv

    prof = Profile.from_dict(zoo_profiles["wnd"])
    names = ['=HYPERLINK("http://x")', "+1+2", "-cmd", "@SUM(A1)", "\tx", "\rx", "plain"]
    for n, name in zip(list(prof.nodes())[1:], names, strict=False):
        n.name = name
    prof.root.extra["neg"] = -1.5
    out = write_csv(prof, tmp_path / "n.csv")
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    got = {r["name"] for r in rows}
    assert {"'" + n for n in names[:-1]} <= got and "plain" in got
    assert not any(v.startswith(("=", "+", "@")) for r in rows for v in r.values())
    assert rows[0]["neg"] == "-1.5" and spreadsheet_safe(-2) == -2 and spreadsheet_safe("-2.5") == "-2.5"


def test_node_from_dict_is_plain(zoo_profiles) -> None:
    d = zoo_profiles["rmc2"]["root"]
    assert Node.from_dict(d).to_dict() == d


def test_sections_are_the_schemas_optional_keys() -> None:
    """The typed accessors name every optional node key and top-level section the models declare, and no other."""
    from recstack.schema.profile_model import Node as NodeModel
    from recstack.schema.sections import NodeSections, ProfileSections, sections
    from recstack.tree import NODE_KEYS

    def keys(model: type[BaseModel], fixed: set[str]) -> set[str]:
        return {f.alias or k for k, f in model.model_fields.items()} - fixed

    assert set(sections(NodeSections).values()) == keys(NodeModel, {*NODE_KEYS, "children"})
    top = {"schema", "schema_version", "run_id", "run", "environment", "overhead", "ranks", "root"}
    assert set(sections(ProfileSections).values()) == keys(ProfileModel, top)
    assert sections(ProfileSections)["import_"] == "import"


def test_sections_read_and_write_what_is_saved(zoo_profiles) -> None:
    """An accessor reads the saved key (None when absent); writing and deleting change exactly that key."""
    from recstack.schema.sections import NodeSections, ProfileSections, sections

    d = zoo_profiles["rmc1"]
    p = Profile.from_dict(d)
    for attr, key in sections(ProfileSections).items():
        assert getattr(p, attr) == d.get(key)
    for n in p.nodes():
        for attr, key in sections(NodeSections).items():
            assert getattr(n, attr) == n.extra.get(key)
    op = next(n for n in p.nodes() if n.level == "op" and n.bound is not None)
    op.rule = None  # a null is saved as null, not left out
    del op.bound
    del op.bound  # deleting an absent key is a no-op
    op.label = "renamed"
    saved = op.to_dict()
    assert saved["rule"] is None and "bound" not in saved and saved["label"] == "renamed"
    assert op.pick("rule", "bound", "label") == {"rule": None, "label": "renamed"}  # absent keys left out
    op.drop("rule", "label", "bound")
    assert not {"rule", "label"} & set(op.to_dict())
    p.import_ = {"files": []}
    assert p.to_dict()["import"] == {"files": []}
    assert Profile.from_dict(d).to_dict() == d


def test_schema_import_is_light() -> None:
    code = "import sys, recstack.schema, recstack.tree; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    assert out.stdout.strip() == "False"


def test_result_document_schemas_and_doc_are_generated_from_the_models() -> None:
    from recstack.schema import documents

    for name in documents.DOCUMENTS:
        path = REPO / "src" / "recstack" / "schema" / documents.schema_file(name)
        assert path.read_text(encoding="utf-8") == documents.json_schema_text(name), "run: python -m recstack.schema"
        assert documents.committed_json_schema(name) == documents.json_schema(name)
        jsonschema.Draft202012Validator.check_schema(documents.json_schema(name))
    doc = (REPO / "docs" / "result-documents.md").read_text(encoding="utf-8")
    assert doc == docgen.current(doc), "run: python -m recstack.schema.docgen docs/result-documents.md"


def test_a_written_document_that_misses_its_model_is_refused(tmp_path) -> None:
    from recstack.schema.documents import check
    from recstack.schema.zoo_model import ZooRow
    from recstack.zoo.build import summary

    row = summary("ncf", 0.01)
    assert check(ZooRow, row) is row
    with pytest.raises(ValueError, match="ZooRow written with rows: Input should be greater than or equal to 1"):
        check(ZooRow, {**row, "rows": 0})
    with pytest.raises(DataError, match=r"^x.json: surprise: Extra inputs are not permitted"):
        check(ZooRow, {**row, "surprise": 1}, source="x.json")
