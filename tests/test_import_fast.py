"""``recstack import`` without torch: the same profile as the in-process import with torch loaded.

The command prices recorded shapes from the trace's dtype names (:mod:`recstack.costmodel.dtypes`) and
picks cost sites from a table generated from torch's dispatcher (:mod:`recstack.costmodel.op_kernels`),
so it never imports torch; these tests hold it to the torch path's results on traces recorded here.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule

import recstack
from recstack.costmodel import dtypes
from recstack.traceimport import import_trace
from recstack.workload import bind, load_workload
from recstack.zoo import BuildOptions, build_model

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys
from recstack.cli import main
rc = main(["--quiet", "import", *sys.argv[1:]])
# start-up the command does not need: torch, pydantic (schema and config models), yaml, other commands' parsers,
# numpy.ma (np.unique and np.percentile load it), multiprocessing (only a plain trace read in parts forks)
heavy = ("torch", "pandas", "ray", "pydantic", "yaml")
print(json.dumps({"rc": rc, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in heavy
                                            or m in ("recstack.commands", "recstack.config.run", "numpy.ma",
                                                     "multiprocessing"))}))
"""


def _record(path: Path, step: Any, steps: int = 2) -> Path:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An annotated inference trace of zoo rmc1, and one of an MLP with ops that have no formula."""
    d = tmp_path_factory.mktemp("traces")
    net = build_model("rmc1", scale=0.001, options=BuildOptions(mode="inference", batch_size=8))
    batch = bind(load_workload("uniform"), net.features(), net.num_dense, net.num_tasks).batch(8)
    net.eval()

    def infer() -> None:
        with torch.inference_mode():
            net(batch)

    with recstack.annotate(net):
        zoo = _record(d / "rmc1.json", infer)
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.LayerNorm(32))
    x = torch.randn(8, 16)

    def ops() -> None:  # einsum, cosine_similarity: no formula and CompositeImplicit (the kernel table decides)
        with torch.no_grad():
            h = mlp(x)
            torch.einsum("bi,bi->b", h, h) + torch.nn.functional.cosine_similarity(h, h)

    return {"zoo": zoo, "ops": _record(d / "ops.json", ops)}


def _differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two saved profiles differ (floats to a relative 1e-9; run id and environment ignored)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted((set(a) | set(b)) - ({"run_id", "environment"} if where == "" else set()))
        return [d for k in keys for d in (_differences(a.get(k), b.get(k), f"{where}/{k}")
                                           if k in a and k in b else [f"{where}/{k}: missing on one side"])]
    if isinstance(a, list) and isinstance(b, list):
        head = [f"{where}: {len(a)} vs {len(b)} items"] if len(a) != len(b) else []
        return head + [d for i, (x, y) in enumerate(zip(a, b, strict=False)) for d in _differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9)
        return [] if ok else [f"{where}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


@pytest.mark.parametrize("name", ["zoo", "ops"])
def test_cli_imports_no_torch_and_prices_as_the_torch_path(traces: dict[str, Path], tmp_path: Path,
                                                           name: str) -> None:
    out = tmp_path / "cli.json"
    r = subprocess.run([sys.executable, "-c", CHILD, str(traces[name]), "-o", str(out)], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    assert r.returncode == 0, r.stderr
    child = json.loads(r.stdout.strip().splitlines()[-1])
    assert child == {"rc": 0, "heavy": []}, "recstack import loaded torch, pydantic or other commands' modules"
    cli = json.loads(out.read_text())
    live = json.loads(json.dumps(import_trace(traces[name]).to_dict()))  # torch loaded: its dispatcher decides
    assert "torch" in sys.modules
    assert _differences(live, cli) == []
    priced = [n for n in _walk(cli["root"]) if n["level"] == "op" and n.get("flops")]
    assert priced, "the trace's recorded shapes priced no op"
    assert cli["cost_model"] == live["cost_model"]


def _walk(n: dict[str, Any]) -> list[dict[str, Any]]:
    return [n, *(x for c in n.get("children", []) for x in _walk(c))]


def test_dtype_table_is_torchs() -> None:
    """Sizes, kinds and promotion of the torch-free dtypes are torch's, pair by pair."""
    for a in dtypes.BY_NAME.values():
        ta = getattr(torch, a.name)
        assert (a.itemsize, a.is_floating_point, a.is_complex) == (ta.itemsize, ta.is_floating_point, ta.is_complex)
        assert dtypes.as_dtype(ta) is a
        for b in dtypes.BY_NAME.values():
            assert dtypes.promote(a, b) == dtypes.as_dtype(torch.promote_types(ta, getattr(torch, b.name))), (a, b)
    assert dtypes.as_dtype(torch.float8_e4m3fn).itemsize == 1  # outside the table: from torch's attributes


def test_op_kernel_table_matches_the_installed_torch() -> None:
    r = subprocess.run([sys.executable, str(REPO / "scripts/gen_op_kernels.py"), "--check"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr


COLLECTED = ("names", "kinds", "threads", "thread_names", "shapes", "types", "paths", "path_types", "name_path",
             "events", "torch_events", "annotate_ranges", "nn_events", "step_events", "categories", "device_us",
             "range_us", "bad_times")
COLUMNS = ("ts", "end", "thr", "nid", "aux", "ty", "ext", "seq", "k_corr", "k_nid", "k_dur", "k_ts", "k_kind", "k_ext",
           "f_ts", "f_id")


def _state(c: Any) -> dict[str, Any]:
    cols = {k: getattr(c.cols, k).tolist() for k in COLUMNS}
    return {**cols, **{k: getattr(c, k) for k in COLLECTED}}


def _truncated(src: Path, dst: Path) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) * 3 // 4])
    return dst


@pytest.mark.parametrize("which", ["whole", "truncated"])
def test_a_trace_read_in_parts_collects_as_one_pass(traces: dict[str, Path], tmp_path: Path, which: str) -> None:
    from recstack.traceimport.decode import plan_parts
    from recstack.traceimport.parallel import collect_trace

    path = traces["zoo"] if which == "whole" else _truncated(traces["zoo"], tmp_path / "cut.json")
    part = path.stat().st_size // 5
    assert len(plan_parts(path, 3, part)) == 3, "the golden trace did not split: the test would test nothing"
    one, header1, trunc1 = collect_trace(path, None, None, parts=1)
    three, header3, trunc3 = collect_trace(path, None, None, parts=3, min_part=part)
    assert _state(three) == _state(one)
    assert header3 == header1 and trunc3 == trunc1
    assert (trunc1 is not None) == (which == "truncated") and one.annotate_ranges > 0


def test_ops_after_a_stage_in_the_same_step_stay_in_the_tree(tmp_path: Path) -> None:
    """zero_grad opens the optimizer stage at a step's start; the forward ops after it, outside every stage,
    are the backward stage's caller code (they were lost when the step's segment had been merged)."""
    import numpy as np

    from recstack.traceimport import collect, decode, fold

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randn(8, 1)

    def train() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(mlp(x), y).backward()
        opt.step()

    c = collect.Collector()
    decode.stream_events(_record(tmp_path / "train.json", train), c.add)
    kinds = np.array(c.kinds)[np.frombuffer(c.cols.nid, dtype=np.int32)]
    recorded = int(np.isin(kinds, (collect.OP, collect.RUNTIME, collect.PSEUDO_STAGE)).sum())
    f = fold.fold(c, None)

    def op_calls(n: Any) -> int:
        return (n.calls if n.level == "op" else 0) + sum(op_calls(k) for k in n.children.values())

    assert f.outside_steps == 0
    assert op_calls(f.folder.root) + sum(op_calls(r) for r in f.folder.callers.values()) == recorded
    forward = f.folder.callers["backward"].children
    assert ("op", "aten::linear") in forward and ("op", "aten::mse_loss") in forward


def test_damage_inside_the_array_reads_as_one_pass_does(traces: dict[str, Path], tmp_path: Path) -> None:
    from recstack.traceimport.parallel import collect_trace

    data = bytearray(traces["zoo"].read_bytes())
    at = data.index(b'"ts"', len(data) * 7 // 10)
    data[at: at + 4] = b"@@@@"  # not JSON: the part holding it does not decode
    path = tmp_path / "damaged.json"
    path.write_bytes(bytes(data))

    def outcome(**kw: Any) -> Any:
        try:
            c, header, trunc = collect_trace(path, None, None, **kw)
        except Exception as exc:  # noqa: BLE001 (the same error either way is what is checked)
            return repr(exc)
        return _state(c), header, trunc

    one = outcome(parts=1)
    assert outcome(parts=3, min_part=path.stat().st_size // 5) == one
    assert not isinstance(one, str) and one[2] is not None  # one pass: a partial import up to the damage


def test_a_saved_profile_is_json_dumps_indent_1_text(traces: dict[str, Path], tmp_path: Path) -> None:
    prof = import_trace(traces["ops"])
    prof.extra["text"] = "é \u2028 \"q\" \\ \n"  # escapes as json writes them
    prof.extra["numbers"] = [1e-05, 1e16, -0.0, 2**70, 0.1 + 0.2, [], {}]
    path = prof.save(tmp_path / "p.json")
    assert path.read_text() == json.dumps(prof.to_dict(), indent=1, allow_nan=False) + "\n"
    prof.extra["numbers"].append(math.nan)
    with pytest.raises(ValueError):  # no NaN in a profile file, as before
        prof.save(tmp_path / "nan.json")


@pytest.mark.parametrize("key", ["[]", "[[32, 64], [64], []]", "[1e-05, -2, 1E5, 100000000000000000000000]", "[1.]",
                                 "[.5]", "[01]", "[null]", "[NaN]", "['float', None]", "(1, 2)", "null", "x[1]"])
def test_shape_keys_read_as_python_literals(key: str) -> None:
    import ast

    from recstack.profiling.assemble import eval_shape

    try:
        want = ast.literal_eval(key)
    except (ValueError, SyntaxError):
        want = key
    got = eval_shape(key)
    assert (type(got), repr(got)) == (type(want), repr(want))


def test_percentile_is_numpys_to_the_bit() -> None:
    """stats.percentile works short lists out without numpy (start-up): the same float as np.percentile."""
    import numpy as np

    from recstack.profiling.stats import percentile

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5, 8, 13, 40):
        for xs in (rng.random(n) * 1e-3, rng.integers(0, 4, n).astype(float), rng.lognormal(0, 3, n)):
            for q in (0, 1, 10, 12.5, 25, 33.3, 50, 75, 90, 99, 100):
                assert repr(percentile(xs.tolist(), q)) == repr(float(np.percentile(xs, q)))
    assert percentile([], 50) == 0.0
