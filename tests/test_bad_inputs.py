"""Bad inputs, table-driven (issue 12): every kind of bad input gets one clear error line, exit 2, no traceback.

Each case runs the real CLI in-process through ``recstack.cli.main(argv)`` (or, for
the Python API, a real call); about twenty paths that need a process of their own
(signals, lazy import, exit codes, ``--debug``) run as real subprocesses at the end.

Assertions for every CLI case: the table's exit code (2 unless said), exactly one
``error:`` line on stderr (a user-code error may add the user's own frames after it,
never recstack's), no ``Traceback``, and no output damaged: a pre-existing output file
keeps its bytes and no temporary file is left beside it.

Every case must pass: there are no expected failures.

Placeholders in argv: ``{D}`` the module's data folder (bad files, a good profile
``{D}/good.json``, a machine file ``{D}/machine.json``, a tiny model ``{D}/tiny.yaml``),
``{T}`` the test's own tmp folder (outputs).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _machines import synthetic_machine

import recstack
from recstack.cli import main
from recstack.errors import ConfigError, RecstackError

REPO = Path(__file__).resolve().parents[1]
# recstack's own source folder as a traceback names it (not a bare "/recstack/": the checkout may be named so)
RECSTACK_SRC = tuple({str(Path(recstack.__file__).parent) + os.sep, str(Path(recstack.__file__).resolve().parent) + os.sep})
KEEP = b"KEEP: a result from an earlier run\n"
RUN = ["--batch-size", "4", "--iters", "2", "--warmup", "0", "--op-iters", "1", "--machine", "none"]
MEMORY_LIMIT = str(4 * 2**30)  # preflight verdicts must not depend on the host's free memory




@dataclass
class Case:
    id: str
    kind: str
    argv: list[str] = field(default_factory=list)
    code: int = 2
    match: str | None = None  # regex the error line must contain
    keep: str | None = None  # an output path that already exists and must keep its bytes
    user: bool = False  # a user-code error: the user's frames may follow the error line
    stderr: str | None = None  # for exit-0 cases: regex stderr must contain (a warning)
    api: Callable[[Path], Any] | None = None  # Python API case: a call that must raise RecstackError
    field: str | None = None  # API case: the field the ConfigError must name
    absent: str | None = None  # a path the failed command must not leave behind


def _param(case: Case) -> Any:
    return pytest.param(case, id=f"{case.kind}:{case.id}")


# =====================================================================================================
# Files the cases read (written once per module into {D})
# =====================================================================================================
TINY = """\
name: tiny
arch: dlrm
embedding_dim: 4
dense_features: 4
tables: [{name: t, rows: 50, count: 2}]
bottom_mlp: [4, 4]
top_mlp: [12, 1]
"""


def _cfg(**changes: Any) -> str:
    """The tiny config with top-level keys replaced (None: removed), as YAML text."""
    import yaml

    d = yaml.safe_load(TINY)
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return yaml.safe_dump(d, sort_keys=False)


def _alias_bomb(levels: int = 8) -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


MODEL_FILES: dict[str, str | bytes] = {
    "tiny.yaml": TINY,
    "cfg_no_name.yaml": _cfg(name=None),
    "cfg_no_arch.yaml": _cfg(arch=None),
    "cfg_no_dim.yaml": _cfg(embedding_dim=None),
    "cfg_no_tables.yaml": _cfg(tables=None),
    "cfg_dim_str.yaml": _cfg(embedding_dim="eight"),
    "cfg_dim_list.yaml": _cfg(embedding_dim=[4]),
    "cfg_dim_float.yaml": _cfg(embedding_dim=4.5),
    "cfg_dim_bool.yaml": TINY.replace("embedding_dim: 4", "embedding_dim: true"),
    "cfg_tables_int.yaml": _cfg(tables=5),
    "cfg_tables_empty.yaml": _cfg(tables=[]),
    "cfg_rows_str.yaml": _cfg(tables=[{"name": "t", "rows": "many"}]),
    "cfg_mlp_str.yaml": _cfg(bottom_mlp="wide"),
    "cfg_pooling_list.yaml": _cfg(tables=[{"name": "t", "rows": 50, "pooling": [1]}]),
    "cfg_dim_neg.yaml": _cfg(embedding_dim=-4),
    "cfg_dim_zero.yaml": _cfg(embedding_dim=0),
    "cfg_rows_neg.yaml": _cfg(tables=[{"name": "t", "rows": -5}]),
    "cfg_count_neg.yaml": _cfg(tables=[{"name": "t", "rows": 5, "count": -1}]),
    "cfg_dense_neg.yaml": _cfg(dense_features=-1),
    "cfg_width_neg.yaml": _cfg(bottom_mlp=[4, -4]),
    "cfg_pooling_neg.yaml": _cfg(tables=[{"name": "t", "rows": 5, "pooling": -2}]),
    "cfg_dim_huge.yaml": TINY.replace("embedding_dim: 4", "embedding_dim: 1.0e+29"),
    "cfg_dim_1e29.yaml": TINY.replace("embedding_dim: 4", "embedding_dim: 1e29"),
    "cfg_rows_huge.yaml": _cfg(tables=[{"name": "t", "rows": 10**13}]),
    "cfg_rows_1e10.yaml": _cfg(tables=[{"name": "t", "rows": 10**10}]),
    "cfg_count_huge.yaml": _cfg(tables=[{"name": "t", "rows": 5, "count": 10**7}]),
    "cfg_width_huge.yaml": _cfg(bottom_mlp=[4, 10**9]),
    "cfg_tasks_huge.yaml": _cfg(arch="mtwnd", tasks=10**6),
    "cfg_dim_nan.yaml": TINY.replace("embedding_dim: 4", "embedding_dim: .nan"),
    "cfg_pooling_inf.yaml": _cfg(tables=[{"name": "t", "rows": 5}]).replace("rows: 5", "rows: 5\n  pooling: .inf"),
    "cfg_unknown_top.yaml": _cfg(embeding_dim=4),
    "cfg_unknown_table.yaml": _cfg(tables=[{"name": "t", "rows": 5, "rowz": 5}]),
    "cfg_bad_arch.yaml": _cfg(arch="transformer"),
    "cfg_dup_tables.yaml": _cfg(tables=[{"name": "t", "rows": 5}, {"name": "t", "rows": 6}]),
    "cfg_width_mismatch.yaml": _cfg(top_mlp=[99, 1]),
    "cfg_seq_no_max.yaml": _cfg(tables=[{"name": "t", "rows": 5, "kind": "sequence"}]),
    "cfg_pool_over_max.yaml": _cfg(
        tables=[{"name": "t", "rows": 5, "kind": "sequence", "max_length": 3, "pooling": 9}]
    ),
    "cfg_python_object.yaml": "!!python/object/apply:os.system ['touch {D}/PWNED']\n",
    "cfg_python_name.yaml": "name: !!python/name:os.system\narch: dlrm\n",
    "cfg_python_new.yaml": "x: !!python/object/new:subprocess.Popen [['touch', '{D}/PWNED2']]\n",
    "cfg_empty.yaml": "",
    "cfg_comments.yaml": "# nothing here\n# at all\n",
    "cfg_list.yaml": "- name: tiny\n- arch: dlrm\n",
    "cfg_scalar.yaml": "just a string\n",
    "cfg_binary.yaml": bytes(range(256)) * 8,
    "cfg_nul.yaml": b"name: ti\x00ny\narch: dlrm\n",
    "cfg_latin1.yaml": "name: caf\u00e9\n".encode("latin-1"),
    "cfg_syntax.yaml": "name: [unclosed\narch: dlrm\n",
    "cfg_tabs.yaml": "name: tiny\n\tarch: dlrm\n",
    "cfg_two_docs.yaml": TINY + "---\n" + TINY,
    "cfg_alias_bomb.yaml": _alias_bomb(),
    "cfg_alias_cycle.yaml": "name: &a [*a]\n",
    "cfg_deep.yaml": "a: " + "[" * 3000 + "]" * 3000 + "\n",
    "cfg_huge.yaml": "description: '" + "x" * (9 * 2**20) + "'\n",
    "cfg_long_key.yaml": TINY + '"bad\\nkey' + "k" * 500 + '": 1\n',
    "cfg_date_name.yaml": _cfg().replace("name: tiny", "name: 2020-01-01"),
    "cfg_unhashable.yaml": "? [a, b]\n: 1\n",
}

WORKLOAD_FILES: dict[str, str | bytes] = {
    "wl_normal_huge.yaml": "name: w\nfeatures: [{name: a, pooling: {kind: normal, mean: 1.0e+308, std: 1.0e+308}}]\n",
    "wl_pool_1e8.yaml": "name: w\nfeatures: [{name: a, pooling: 100000000}]\n",
    "wl_pool_neg.yaml": "name: w\nfeatures: [{name: a, pooling: -3}]\n",
    "wl_pool_nan.yaml": "name: w\nfeatures: [{name: a, pooling: .nan}]\n",
    "wl_pool_above_int32.yaml": "name: w\nfeatures: [{name: a, pooling: 1.0e+12}]\n",
    "wl_lognormal_overflow.yaml": "name: w\nfeatures: [{name: a, pooling: {kind: lognormal, mu: 1000, sigma: 1}}]\n",
    "wl_uniform_overflow.yaml": (
        "name: w\nfeatures: [{name: a}]\ndense: {default: {kind: uniform, low: -1.0e+308, high: 1.0e+308}}\n"
    ),
    "wl_no_name.yaml": "features: [{name: a}]\n",
    "wl_both.yaml": "name: w\nfeatures: [{name: a}]\npopulation: {rows: 10, pooling: 1, ids: {kind: uniform}}\n",
    "wl_neither.yaml": "name: w\n",
    "wl_unknown.yaml": "name: w\nfeatures: [{name: a}]\nbogus: 1\n",
    "wl_bad_kind.yaml": "name: w\nfeatures: [{name: a, pooling: {kind: cauchy, loc: 1}}]\n",
    "wl_probs.yaml": "name: w\nfeatures: [{name: a, pooling: {kind: empirical, values: [1, 2], probs: [0.5, 0.9]}}]\n",
    "wl_zipf_zero.yaml": "name: w\nfeatures: [{name: a, ids: {kind: zipf, s: 0}}]\n",
    "wl_zipf_huge.yaml": "name: w\nfeatures: [{name: a, ids: {kind: zipf, s: 100}}]\n",
    "wl_seed_neg.yaml": "name: w\nseed: -1\nfeatures: [{name: a}]\n",
    "wl_seed_huge.yaml": "name: w\nseed: 99999999999999999999999\nfeatures: [{name: a}]\n",
    "wl_hot_sum.yaml": "name: w\nfeatures: [{name: a, ids: {kind: heavy_hitters, hot: [0.7, 0.6]}}]\n",
    "wl_two_locations.yaml": "name: w\nfeatures: [{name: a, pooling: {kind: lognormal, mu: 1, median: 2, sigma: 1}}]\n",
    "wl_low_high.yaml": "name: w\nfeatures: [{name: a, pooling: {kind: uniform, low: 5, high: 1}}]\n",
    "wl_min_max.yaml": "name: w\nfeatures: [{name: a, pooling: {kind: fixed, value: 2, min: 5, max: 1}}]\n",
    "wl_empty_features.yaml": "name: w\nfeatures: []\n",
    "wl_dup_features.yaml": "name: w\nfeatures: [{name: a}, {name: a}]\n",
    "wl_cardinality_zero.yaml": "name: w\nfeatures: [{name: a, cardinality: 0}]\n",
    "wl_query_neg.yaml": "name: w\nfeatures: [{name: a}]\nquery_sizes: -5\n",
    "wl_rows_below_one.yaml": "name: w\npopulation: {rows: {kind: uniform, low: 0, high: 5}, pooling: 1, ids: {kind: uniform}}\n",
    "wl_rows_huge.yaml": "name: w\npopulation: {rows: 1.0e+15, pooling: 1, ids: {kind: uniform}}\n",
    "wl_tables_huge.yaml": "name: w\npopulation: {tables: 10000000, rows: 10, pooling: 1, ids: {kind: uniform}}\n",
    "wl_click_rate.yaml": "name: w\nfeatures: [{name: a}]\nlabels: {click_rate: 1.5}\n",
    "wl_arrival_rate.yaml": "name: w\nfeatures: [{name: a}]\narrivals: {rate: 0}\n",
    "wl_alias_bomb.yaml": _alias_bomb(),
    "wl_binary.yaml": bytes(range(256)) * 4,
    "wl_empty.yaml": "",
    "wl_python_tag.yaml": "name: !!python/object/apply:os.getcwd []\nfeatures: [{name: a}]\n",
    "wl_version.yaml": "version: 2\nname: w\nfeatures: [{name: a}]\n",
}

CSV_FILES: dict[str, str | bytes] = {
    "ok.csv": "label,user,item\n1,u1,i1\n0,u2,i2\n0,u1,i3\n",
    "bin.csv": bytes(range(256)) * 16,
    "empty.csv": "",
    "header_only.csv": "user,item\n",
    "no_header.csv": "1,2,3\n4,5,6\n",
    "nul.csv": b"user,item\nu\x001,i1\n",
    "huge_field.csv": "user,item\nu1," + "i" * 200_000 + "\n",
    "ragged.csv": "user,item\nu1,i1\nu2\n",
    "dup_header.csv": "user,user\nu1,i1\n",
    "empty_header.csv": "user,,item\nu1,x,i1\n",
    "latin1.csv": "user,item\ncaf\u00e9,i1\n".encode("latin-1"),
    "only_label.csv": "label\n1\n0\n",
    "only_dense.csv": "x\n1.5\n2.5\n",
    "quote.csv": 'user,item\n"u1,i1\n',
}

PROFILE_VARIANTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "root_str": lambda d: {**d, "root": "hello"},
    "run_list": lambda d: {**d, "run": [1, 2]},
    "time_str": lambda d: {**d, "root": {**d["root"], "time_s": "fast"}},
    "children_dict": lambda d: {**d, "root": {**d["root"], "children": {}}},
    "time_nan": lambda d: {**d, "root": {**d["root"], "time_s": math.nan}},
    "version_0": lambda d: {**d, "schema_version": 0},
    "version_neg": lambda d: {**d, "schema_version": -7},
    "no_root": lambda d: {k: v for k, v in d.items() if k != "root"},
    "wrong_schema": lambda d: {**d, "schema": "something.else"},
    "top_list": lambda d: [d],
}


def _deep_profile(good: dict[str, Any], depth: int) -> str:
    """JSON text of ``good`` with a chain ``depth`` nodes deep under the root (built as text: no recursion)."""
    root = {k: v for k, v in good["root"].items() if k != "children"}
    head = json.dumps({**good, "root": {**root, "children": "@@"}}).split('"@@"')
    opens, closes = [], []
    for i in range(depth):
        node = json.dumps({**root, "name": f"n{i}", "path": f"p{i}", "level": "module", "children": "@@"})
        pre, post = node.split('"@@"')
        opens.append(pre + "[")
        closes.append("]" + post)
    return head[0] + "[" + "".join(opens) + "".join(reversed(closes)) + "]" + head[1]


PROFILE_RAW: dict[str, str | bytes] = {
    "prof_empty.json": "",
    "prof_binary.json": bytes(range(256)) * 4,
    "prof_not_json.json": "{this is not json",
    "prof_truncated.json": '{"schema": "recstack.profile", "root": {"name": "x"',
    "prof_empty_obj.json": "{}",
    "prof_nested_2600.json": "[" * 2600 + "]" * 2600,
}

MACHINE_VARIANTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "m_no_gemm.json": lambda m: {k: v for k, v in m.items() if k != "gemm_flops"},
    "m_neg_peak.json": lambda m: _set_peak(m, -5.0),
    "m_zero_peak.json": lambda m: _set_peak(m, 0.0),
    "m_list.json": lambda m: [m],
    "m_version.json": lambda m: {**m, "schema_version": 99},
    "m_peak_str.json": lambda m: _set_peak(m, "fast"),
}


def _set_peak(m: dict[str, Any], value: Any) -> dict[str, Any]:
    m = json.loads(json.dumps(m))
    for st in m["gemm_flops"]["fp32"]["by_threads"].values():
        st.update({"median": value, "min": value, "max": value, "p10": value, "p90": value})
    return m


def _machine() -> dict[str, Any]:
    """A complete synthetic machine file (exact figures)."""
    return synthetic_machine()


# User factories: (batch_size, seed) -> (model, batch_fn). Each module is written into {D}.
_GOOD_MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        return self.lin(x)


def batches(i):
    return torch.randn(4, 4)
"""
FACTORIES: dict[str, str] = {
    "uf_raises.py": "def make(batch_size, seed):\n    raise RuntimeError('my factory is broken')\n",
    "uf_returns_int.py": "def make(batch_size, seed):\n    return 42\n",
    "uf_three_tuple.py": _GOOD_MODEL + "\ndef make(batch_size, seed):\n    return Net(), batches, 3\n",
    "uf_forward_raises.py": _GOOD_MODEL
    + "\nclass Bad(Net):\n    def forward(self, x):\n        raise ValueError('my forward is broken')\n"
    + "\ndef make(batch_size, seed):\n    return Bad(), batches\n",
    "uf_batch_none.py": _GOOD_MODEL + "\ndef make(batch_size, seed):\n    return Net(), lambda i: None\n",
    "uf_batch_generator.py": _GOOD_MODEL
    + "\ndef gen(i):\n    yield torch.randn(4, 4)\n\ndef make(batch_size, seed):\n    return Net(), gen\n",
    "uf_float_indices.py": """\
import torch
from torch import nn


class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(10, 4)

    def forward(self, idx):
        return self.emb(idx)


def make(batch_size, seed):
    return Bag(), lambda i: torch.zeros(4, 2, dtype=torch.float64)
""",
    "uf_no_params.py": "import torch\nfrom torch import nn\n\ndef make(batch_size, seed):\n"
    "    return nn.Identity(), lambda i: torch.randn(4, 4)\n",
    "uf_meta.py": _GOOD_MODEL
    + "\ndef make(batch_size, seed):\n    with torch.device('meta'):\n        net = Net()\n"
    "    return net, lambda i: torch.empty(4, 4, device='meta')\n",
    "uf_syntax.py": "def make(batch_size, seed)\n    return 1\n",
    "uf_import_error.py": "import no_such_module_recstack_test\n",
    "uf_not_callable.py": "make = 42\n",
    "uf_ok.py": _GOOD_MODEL + "\ndef make(batch_size, seed):\n    return Net(), batches\n",
}


def _write(path: Path, content: str | bytes, d: Path) -> None:
    if isinstance(content, str):
        path.write_text(content.replace("{D}", str(d)), encoding="utf-8")
    else:
        path.write_bytes(content)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad_inputs")
    for name, content in {**MODEL_FILES, **WORKLOAD_FILES, **CSV_FILES, **PROFILE_RAW, **FACTORIES}.items():
        _write(d / name, content, d)
    machine = _machine()
    (d / "machine.json").write_text(json.dumps(machine))
    for name, fn in MACHINE_VARIANTS.items():
        (d / name).write_text(json.dumps(fn(machine)))
    (d / "m_not_json.json").write_text("{oops")
    (d / "m_empty.json").write_text("")
    (d / "m_nan.json").write_text(json.dumps(_set_peak(machine, math.nan)))
    (d / "rules_bad.yaml").write_text("rules: [{match: 5}]\n")
    (d / "readonly").mkdir()
    (d / "a_file").write_text("a file, not a folder\n")
    # One real profile of the tiny model; the bad profiles are variants of it.
    rc = main(["profile", str(d / "tiny.yaml"), *RUN, "-o", str(d / "good.json")])
    assert rc == 0 and (d / "good.json").is_file()
    good = json.loads((d / "good.json").read_text())
    for name, fn in PROFILE_VARIANTS.items():
        (d / f"prof_{name}.json").write_text(json.dumps(fn(good)))
    (d / "prof_deep.json").write_text(_deep_profile(good, 3000))
    other = {**good, "run": {**good["run"], "model": "other"}, "root": {**good["root"], "name": "other", "children": []}}
    (d / "prof_other_model.json").write_text(json.dumps(other))
    (d / "prof_big.json").write_text(json.dumps({**good, "padding": "x" * (20 * 2**20)}))
    return d


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RECSTACK_MEMORY_LIMIT", MEMORY_LIMIT)
    monkeypatch.setenv("RECSTACK_CACHE_DIR", str(tmp_path / "cache"))


# =====================================================================================================
# The table
# =====================================================================================================
def _profile(model: str, *extra: str) -> list[str]:
    return ["profile", model, *RUN, *extra]


CASES: list[Case] = []


def add(kind: str, id: str, argv: list[str], **kw: Any) -> None:
    CASES.append(Case(id=id, kind=kind, argv=argv, **kw))


TINY_P = "{D}/tiny.yaml"

# -- CLI flags and choices ----------------------------------------------------------------------------
for flag, value, _owner in (
    ("--batch-size", "0", None),
    ("--batch-size", "-1", None),
    ("--batch-size", "abc", None),
    ("--batch-size", "1e3", None),
    ("--scale", "0", None),
    ("--scale", "-1", None),
    ("--scale", "nan", None),
    ("--scale", "inf", None),
    ("--scale", "abc", None),
    ("--iters", "1", None),
    ("--iters", "0", None),
    ("--warmup", "-1", None),
    ("--op-iters", "0", None),
    ("--threads", "0", None),
    ("--seed", "abc", None),
    ("--seed", "-5", None),
    ("--seed", "99999999999999999999999", None),
    ("--mode", "bogus", None),
    ("--backend", "bogus", None),
    ("--table-dtype", "fp64", None),
    ("--dtype", "fp64", None),
    ("--optimizer", "adam", None),
    ("--tasks", "0", None),
    ("--depth", "-1", None),
    ("--top", "0", None),
):
    add("cli", f"profile{flag}={value}", _profile(TINY_P, flag, value))
add("cli", "profile--tasks-not-mtwnd", _profile(TINY_P, "--tasks", "2"), match="--tasks")
add("cli", "profile-unknown-flag", _profile(TINY_P, "--bogus"))
add("cli", "profile-no-model", ["profile"])
add("cli", "profile-unknown-model", _profile("rmc9"), match="unknown model")
add("cli", "profile--threads=1000-clamped", _profile(TINY_P, "--threads", "1000"), code=0, stderr="1000")
add("cli", "no-command", [])
add("cli", "unknown-command", ["frobnicate"])
add("cli", "zoo-no-subcommand", ["zoo"])
add("cli", "zoo-show-unknown", ["zoo", "show", "rmc9"], match="unknown model")
add("cli", "zoo-show--tasks=0", ["zoo", "show", "mtwnd", "--tasks", "0"])
add("cli", "zoo-show--tasks-huge", ["zoo", "show", "mtwnd", "--tasks", "100000"], match="--tasks")
add("cli", "zoo-show--depth=-1", ["zoo", "show", "rmc1", "--depth", "-1"])
add("cli", "zoo-list--scale=-1", ["zoo", "list", "--scale", "-1"])
add("cli", "workload-stats--batch-size=0", ["workload", "stats", "--preset", "uniform", "--batch-size", "0"])
add("cli", "workload-stats--seed=-5", ["workload", "stats", "--preset", "uniform", "--batch-size", "8", "--seed", "-5"])
add("cli", "workload-stats--tables=0", ["workload", "stats", "--preset", "uniform", "--batch-size", "8", "--tables", "0"])
add("cli", "workload-stats-unknown-preset", ["workload", "stats", "--preset", "nope", "--batch-size", "8"])
add("cli", "workload-stats-no-source", ["workload", "stats", "--batch-size", "8"])
add("cli", "workload-stats-two-sources", ["workload", "stats", "--preset", "uniform", "--spec", "x.yaml", "--batch-size", "8"])
add("cli", "workload-fit-no-output", ["workload", "fit", "{D}/ok.csv"])
add("cli", "workload-fit-empty-delimiter", ["workload", "fit", "{D}/ok.csv", "--delimiter", "", "-o", "{T}/s.yaml"])
add("cli", "diff-level-bogus", ["diff", "{D}/good.json", "{D}/good.json", "--level", "bogus"])
add("cli", "diff-fail-on-regression-abc", ["diff", "{D}/good.json", "{D}/good.json", "--fail-on-regression", "abc"])
add("cli", "diff-min-change-nan", ["diff", "{D}/good.json", "{D}/good.json", "--min-change", "nan"])
add("cli", "export-format-xlsx", ["export", "{D}/good.json", "--format", "xlsx"])
add("cli", "roofline-no-output", ["roofline", "{D}/good.json"])
add("cli", "show--depth=-1", ["show", "{D}/good.json", "--depth", "-1"])
add("cli", "machine-compare-missing", ["machine", "--compare", "{D}/absent.json"])

# -- model configs ------------------------------------------------------------------------------------
for name, match in (
    ("cfg_no_name", r"name: required"),
    ("cfg_no_arch", r"arch: required"),
    ("cfg_no_dim", r"embedding_dim: required"),
    ("cfg_no_tables", r"tables: required"),
    ("cfg_dim_str", r"embedding_dim"),
    ("cfg_dim_list", r"embedding_dim"),
    ("cfg_dim_float", r"embedding_dim"),
    ("cfg_dim_bool", r"embedding_dim"),
    ("cfg_tables_int", r"tables"),
    ("cfg_tables_empty", r"tables"),
    ("cfg_rows_str", r"tables\.0\.rows"),
    ("cfg_mlp_str", r"bottom_mlp"),
    ("cfg_pooling_list", r"tables\.0\.pooling"),
    ("cfg_dim_neg", r"embedding_dim"),
    ("cfg_dim_zero", r"embedding_dim"),
    ("cfg_rows_neg", r"tables\.0\.rows"),
    ("cfg_count_neg", r"tables\.0\.count"),
    ("cfg_dense_neg", r"dense_features"),
    ("cfg_width_neg", r"bottom_mlp\.1"),
    ("cfg_pooling_neg", r"tables\.0\.pooling"),
    ("cfg_dim_nan", r"embedding_dim"),
    ("cfg_pooling_inf", r"tables\.0\.pooling"),
    ("cfg_unknown_top", r"embeding_dim: unknown field"),
    ("cfg_unknown_table", r"tables\.0\.rowz: unknown field"),
    ("cfg_bad_arch", r"arch"),
    ("cfg_dup_tables", r"duplicate table name"),
    ("cfg_width_mismatch", r"top_mlp"),
    ("cfg_seq_no_max", r"max_length"),
    ("cfg_pool_over_max", r"exceeds max_length"),
    ("cfg_python_object", r"python/object"),
    ("cfg_python_name", r"python/name"),
    ("cfg_python_new", r"python/object/new"),
    ("cfg_empty", r"empty"),
    ("cfg_comments", r"empty"),
    ("cfg_list", r"mapping"),
    ("cfg_scalar", r"mapping"),
    ("cfg_nul", r"invalid YAML"),
    ("cfg_latin1", r"not UTF-8"),
    ("cfg_syntax", r"invalid YAML at line"),
    ("cfg_tabs", r"invalid YAML"),
    ("cfg_two_docs", r"invalid YAML"),
    ("cfg_alias_cycle", r"cycle"),
    ("cfg_long_key", r"unknown field"),
    ("cfg_date_name", r"name"),
    ("cfg_unhashable", r"invalid YAML"),
):
    add("model-config", name, ["zoo", "show", f"{{D}}/{name}.yaml"], match=match)
add("model-config", "missing-file", ["zoo", "show", "{D}/absent.yaml"], match="not found")
add("model-config", "folder", ["zoo", "show", "{D}/readonly"], match="folder")
add("model-config", "profile-bad-config", _profile("{D}/cfg_dim_neg.yaml"), match="embedding_dim")
add("model-config", "profile-python-tag", _profile("{D}/cfg_python_object.yaml"), match="python/object")

# -- large inputs (sizes checked before allocating) ---------------------------------------------------
add("large", "cfg_dim_1e29", ["zoo", "show", "{D}/cfg_dim_1e29.yaml"], match="embedding_dim")
add("large", "cfg_dim_huge", ["zoo", "show", "{D}/cfg_dim_huge.yaml"], match="embedding_dim")
add("large", "cfg_rows_huge", ["zoo", "show", "{D}/cfg_rows_huge.yaml"], match=r"tables\.0\.rows")
add("large", "cfg_count_huge", ["zoo", "show", "{D}/cfg_count_huge.yaml"], match=r"tables\.0\.count")
add("large", "cfg_width_huge", ["zoo", "show", "{D}/cfg_width_huge.yaml"], match=r"bottom_mlp\.1")
add("large", "cfg_tasks_huge", ["zoo", "show", "{D}/cfg_tasks_huge.yaml"], match="tasks")
add("large", "cfg_huge_file", ["zoo", "show", "{D}/cfg_huge.yaml"], match="larger than")
add("large", "cfg_alias_bomb", ["zoo", "show", "{D}/cfg_alias_bomb.yaml"], match="expands")
add("large", "cfg_deep", ["zoo", "show", "{D}/cfg_deep.yaml"], match="nested deeper")
add("large", "cfg_binary", ["zoo", "show", "{D}/cfg_binary.yaml"], match="UTF-8")
add("large", "profile--scale=1e12", _profile("rmc1", "--scale", "1e12"), match="--scale")
add("large", "zoo-show--scale=1e300", ["zoo", "show", "rmc1", "--scale", "1e300"], match="--scale")
add("large", "zoo-show-rows-after-scale", ["zoo", "show", "{D}/cfg_rows_1e10.yaml", "--scale", "1000"], match="--scale 100 or less")
add("large", "zoo-list--scale=1e12", ["zoo", "list", "--scale", "1e12"], match="--scale")
add("large", "profile--batch-size=1e12", _profile(TINY_P, "--batch-size", str(10**12)), match="--batch-size")
add("large", "profile--batch-size=2**24", _profile(TINY_P, "--batch-size", str(2**24)), match="--batch-size \\d+ or less")
add("large", "profile-train--batch-size=2**24", _profile(TINY_P, "--mode", "train", "--batch-size", str(2**24)), match="or less")
add("large", "profile-pooling-1e8", _profile("rmc1", "--scale", "1e-4", "--workload", "{D}/wl_pool_1e8.yaml"), match="pooling")
add("large", "profile-rmc1-full-scale", _profile("rmc1", "--scale", "1"), match="--scale .* or less")
add("large", "workload-stats--batch-size=1e12", ["workload", "stats", "--preset", "production", "--batch-size", str(10**12)])
add("large", "workload-stats-pooling-1e8", ["workload", "stats", "--spec", "{D}/wl_rows_huge.yaml", "--batch-size", "8"], match="rows")
add("large", "workload-stats--seed-huge", ["workload", "stats", "--preset", "uniform", "--batch-size", "8", "--seed", str(2**64)], match="--seed")
add("large", "profile-deep-json", ["show", "{D}/prof_nested_2600.json"])
add("large", "profile-20MiB", ["show", "{D}/prof_big.json"], code=0)

# -- workload specs -----------------------------------------------------------------------------------
for name, match in (
    ("wl_normal_huge", r"features\.0\.pooling.*overflow"),
    ("wl_pool_neg", r"features\.0\.pooling"),
    ("wl_pool_nan", r"features\.0\.pooling"),
    ("wl_pool_above_int32", r"features\.0\.pooling"),
    ("wl_lognormal_overflow", r"features\.0\.pooling"),
    ("wl_uniform_overflow", r"dense\.default"),
    ("wl_no_name", r"name: required"),
    ("wl_both", r"exactly one"),
    ("wl_neither", r"exactly one"),
    ("wl_unknown", r"bogus: unknown field"),
    ("wl_bad_kind", r"features\.0\.pooling"),
    ("wl_probs", r"sum to 1"),
    ("wl_zipf_zero", r"features\.0\.ids"),
    ("wl_zipf_huge", r"features\.0\.ids"),
    ("wl_seed_neg", r"seed"),
    ("wl_seed_huge", r"seed"),
    ("wl_hot_sum", r"hot"),
    ("wl_two_locations", r"exactly one of mu"),
    ("wl_low_high", r"low"),
    ("wl_min_max", r"min"),
    ("wl_empty_features", r"at least one"),
    ("wl_dup_features", r"duplicate"),
    ("wl_cardinality_zero", r"cardinality"),
    ("wl_query_neg", r"query_sizes"),
    ("wl_rows_below_one", r"rows"),
    ("wl_rows_huge", r"rows"),
    ("wl_tables_huge", r"tables"),
    ("wl_click_rate", r"click_rate"),
    ("wl_arrival_rate", r"rate"),
    ("wl_alias_bomb", r"expands"),
    ("wl_binary", r"UTF-8"),
    ("wl_empty", r"empty"),
    ("wl_python_tag", r"python/object"),
    ("wl_version", r"version"),
):
    add("workload-spec", name, ["workload", "stats", "--spec", f"{{D}}/{name}.yaml", "--batch-size", "8"], match=match)
add("workload-spec", "profile-normal-huge", _profile(TINY_P, "--workload", "{D}/wl_normal_huge.yaml"), match="overflow")
add("workload-spec", "profile-seed-neg", _profile(TINY_P, "--workload", "{D}/wl_seed_neg.yaml"), match="seed")
add("workload-spec", "profile-unknown-preset", _profile(TINY_P, "--workload", "nope"), match="preset")
add("workload-spec", "profile-missing-spec", _profile(TINY_P, "--workload", "{D}/absent.yaml"), match="not found")

# -- workload CSVs (workload fit) ---------------------------------------------------------------------
for name, extra, match in (
    ("bin.csv", [], r"UTF-8|NUL|malformed"),
    ("empty.csv", [], r"empty file"),
    ("header_only.csv", [], r"no data rows"),
    ("no_header.csv", [], r"no header"),
    ("nul.csv", [], r"NUL|malformed"),
    ("huge_field.csv", [], r"malformed|field"),
    ("ragged.csv", [], r"line 3"),
    ("dup_header.csv", [], r"duplicate column"),
    ("empty_header.csv", [], r"empty column name"),
    ("latin1.csv", [], r"UTF-8"),
    ("only_label.csv", [], r"no categorical"),
    ("only_dense.csv", [], r"no categorical"),
    ("quote.csv", [], r"malformed|fields|no data"),
    ("absent.csv", [], r"not found"),
    ("ok.csv", ["--columns", "nope"], r"unknown columns 'nope'"),
    ("ok.csv", ["--dense", "nope"], r"unknown dense columns"),
    ("ok.csv", ["--dense", "user"], r"non-numeric"),
):
    cid = name + ("" if not extra else "".join(extra))
    add("workload-csv", cid, ["workload", "fit", f"{{D}}/{name}", *extra, "-o", "{T}/spec.yaml"], match=match, keep="{T}/spec.yaml")
add("workload-csv", "folder", ["workload", "fit", "{D}/readonly", "-o", "{T}/spec.yaml"], match="not a file", keep="{T}/spec.yaml")

# -- profile JSON for every reading command -----------------------------------------------------------
READERS: dict[str, Callable[[str], list[str]]] = {
    "show": lambda p: ["show", p],
    "report": lambda p: ["report", p, "-o", "{T}/out.html"],
    "diff": lambda p: ["diff", "{D}/good.json", p],
    "export": lambda p: ["export", p, "-o", "{T}/out.csv"],
    "roofline": lambda p: ["roofline", p, "--machine", "{D}/machine.json", "-o", "{T}/out.svg"],
    "validate": lambda p: ["validate", p],
    "analyse": lambda p: ["analyse", p, "--machine", "{D}/machine.json", "-o", "{T}/out.json"],
}
READER_OUT = {"report": "{T}/out.html", "export": "{T}/out.csv", "roofline": "{T}/out.svg", "analyse": "{T}/out.json"}
# Profiles that parse but have the wrong shape: validation against the schema is H2's.
SHAPE_OWNER = None
for variant, _owner in (
    ("absent", None),
    ("prof_empty", None),
    ("prof_binary", None),
    ("prof_not_json", None),
    ("prof_truncated", None),
    ("prof_empty_obj", None),
    ("prof_top_list", None),
    ("prof_root_str", SHAPE_OWNER),
    ("prof_run_list", SHAPE_OWNER),
    ("prof_time_str", SHAPE_OWNER),
    ("prof_children_dict", SHAPE_OWNER),
    ("prof_time_nan", SHAPE_OWNER),
    ("prof_version_0", SHAPE_OWNER),
    ("prof_version_neg", SHAPE_OWNER),
    ("prof_no_root", None),
    ("prof_wrong_schema", None),
    ("prof_deep", SHAPE_OWNER),
):
    for cmd, argv_of in READERS.items():
        path = f"{{D}}/{variant}.json"
        add("profile-json", f"{cmd}:{variant}", argv_of(path), keep=READER_OUT.get(cmd))
add("profile-json", "show:folder", ["show", "{D}/readonly"])
add("profile-json", "diff:bad-a", ["diff", "{D}/prof_not_json.json", "{D}/good.json"])
add("profile-json", "diff:different-models", ["diff", "{D}/good.json", "{D}/prof_other_model.json"])

# -- machine files ------------------------------------------------------------------------------------
for name, _owner in (
    ("absent", None),
    ("m_not_json", None),
    ("m_empty", None),
    ("m_list", None),
    ("m_no_gemm", None),
    ("m_version", None),
    ("m_peak_str", None),
    ("m_neg_peak", None),
    ("m_zero_peak", None),
    ("m_nan", None),
):
    add("machine", f"profile:{name}", _profile(TINY_P, "--machine", f"{{D}}/{name}.json"))
    add("machine", f"roofline:{name}", ["roofline", "{D}/good.json", "--machine", f"{{D}}/{name}.json", "-o", "{T}/r.svg"], keep="{T}/r.svg")

# -- user factories and models ------------------------------------------------------------------------
for mod, _owner, user in (
    ("uf_raises", None, True),
    ("uf_returns_int", None, True),
    ("uf_three_tuple", None, True),
    ("uf_forward_raises", None, True),
    ("uf_batch_none", None, True),
    ("uf_batch_generator", None, True),
    ("uf_float_indices", None, True),
    ("uf_meta", None, True),
    ("uf_syntax", None, True),
    ("uf_import_error", None, False),
    ("uf_not_callable", None, False),
):
    add("user-code", mod, _profile(f"{mod}:make"), user=user)
add("user-code", "uf_no_params-train", _profile("uf_no_params:make", "--mode", "train"), user=True)
add("user-code", "missing-attribute", _profile("uf_ok:nothing"), match="no callable")
add("user-code", "missing-module", _profile("no_such_pkg_xyz.mod:make"), match="cannot import")
add("user-code", "empty-factory", _profile("uf_ok:"))

# -- output paths of every command --------------------------------------------------------------------
PROF_OUT = [*RUN]
for where, path, _owner in (
    ("folder", "{D}/readonly", None),
    ("proc", "/proc/version", None),
    ("under-a-file", "{D}/a_file/x.json", None),
):
    add("output", f"profile-o:{where}", _profile(TINY_P, "-o", path))
    add("output", f"report-o:{where}", ["report", "{D}/good.json", "-o", path])
    add("output", f"export-o:{where}", ["export", "{D}/good.json", "-o", path])
    add("output", f"diff-o:{where}", ["diff", "{D}/good.json", "{D}/good.json", "-o", path])
    add("output", f"roofline-o:{where}", ["roofline", "{D}/good.json", "--machine", "{D}/machine.json", "-o", path])
    add("output", f"workload-fit-o:{where}", ["workload", "fit", "{D}/ok.csv", "-o", path])
    add("output", f"analyse-o:{where}", ["analyse", "{D}/good.json", "--machine", "{D}/machine.json", "-o", path])
add("output", "profile--trace-missing-folder", _profile(TINY_P, "--trace", "{D}/a_file/t.json"))
add("output", "profile--trace-proc", _profile(TINY_P, "--trace", "/proc/version"))
add("output", "roofline--save-profile-folder", ["roofline", "{D}/good.json", "--machine", "{D}/machine.json", "-o", "{T}/r.svg", "--save-profile", "{D}/readonly"])
add("output", "demo--out-file", ["demo", "--out", "{D}/a_file", "--machine", "none"])
add("output", "demo--out-proc", ["demo", "--out", "/proc/recstack_demo", "--machine", "none"])
add("output", "demo-bad-model", ["demo", "--model", "rmc9", "--out", "{T}/demo", "--machine", "none"], absent="{T}/demo")
add("output", "workload-fit-keeps-old-spec", ["workload", "fit", "{D}/bin.csv", "-o", "{T}/spec.yaml"], keep="{T}/spec.yaml")
add("output", "profile-keeps-old-file", _profile(TINY_P, "--scale", "-1", "-o", "{T}/p.json"), keep="{T}/p.json")


# -- the Python API -----------------------------------------------------------------------------------
def _api(id: str, call: Callable[[Path], Any], field: str | None = None, owner: str | None = None) -> None:
    CASES.append(Case(id=id, kind="api", api=call, field=field))


def _recstack() -> Any:
    import recstack

    return recstack


def _tiny(d: Path) -> str:
    return str(d / "tiny.yaml")


_api("profile-str-model", lambda d: _recstack().profile("x", lambda i: None, batch_size=4), field="model")
_api("profile-int-inputs", lambda d: _recstack().profile(_nn(), 42, batch_size=4), field="inputs")
_api("profile_zoo-batch-str", lambda d: _recstack().profile_zoo(_tiny(d), batch_size="16"), field="batch_size")
_api("profile_zoo-batch-neg", lambda d: _recstack().profile_zoo(_tiny(d), batch_size=-1), field="batch")
_api("profile_zoo-scale-str", lambda d: _recstack().profile_zoo(_tiny(d), scale="big"), field="scale")
_api("profile_zoo-seed-neg", lambda d: _recstack().profile_zoo(_tiny(d), batch_size=4, seed=-5), field="seed")
_api("profile_zoo-seed-huge", lambda d: _recstack().profile_zoo(_tiny(d), batch_size=4, seed=2**64), field="seed")
_api("profile_zoo-unknown-model", lambda d: _recstack().profile_zoo("rmc9", batch_size=4), field="model")
_api("profile_zoo-workload-int", lambda d: _recstack().profile_zoo(_tiny(d), batch_size=4, workload=123), field="workload")
_api("profile_zoo-backend", lambda d: _recstack().profile_zoo(_tiny(d), batch_size=4, backend="gpu"), field="backend")
_api("build_model-seed-neg", lambda d: _zoo().build_model(_tiny(d), seed=-1), field="seed")
_api("build_model-batch-str", lambda d: _zoo().build_model(_tiny(d), batch_size="8"), field="batch-size")
_api("build_model-tasks-huge", lambda d: _zoo().build_model("mtwnd", scale=1e-6, tasks=10**6), field="tasks")
_api("preflight-batch-1e12", lambda d: _zoo().preflight(_tiny(d), batch_size=10**12))
_api("preflight-scale-inf", lambda d: _zoo().preflight(_tiny(d), scale=math.inf), field="scale")
_api("load_workload-unknown", lambda d: _workload().load_workload("nope"), field="preset")
_api("load_workload-bad", lambda d: _workload().load_workload(str(d / "wl_normal_huge.yaml")), field="pooling")
_api("fit_csv-binary", lambda d: _workload().fit_csv(d / "bin.csv"))
_api("bind-seed-huge", lambda d: _workload().bind(_workload().load_workload("uniform"), [], 0, seed=2**64), field="seed")
_api("Profile.load-bad", lambda d: _tree().Profile.load(d / "prof_not_json.json"))
_api("Profile.from_dict-root-str", lambda d: _tree().Profile.from_dict({"schema": "recstack.profile", "root": 5}))


def _zoo() -> Any:
    import recstack.zoo

    return recstack.zoo


def _workload() -> Any:
    import recstack.workload

    return recstack.workload


def _tree() -> Any:
    import recstack.tree

    return recstack.tree


def _nn() -> Any:
    import torch

    return torch.nn.Linear(4, 1)


# =====================================================================================================
# Running a case
# =====================================================================================================
def _expand(argv: list[str], d: Path, t: Path) -> list[str]:
    return [a.replace("{D}", str(d)).replace("{T}", str(t)) for a in argv]


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | None, str, str, BaseException | None]:
    exc: BaseException | None = None
    code: int | None
    try:
        code = main(argv)
    except SystemExit as e:  # argparse
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except Exception as e:  # noqa: BLE001 - a traceback escaping main is what the case checks for
        code, exc = None, e
    out, err = capsys.readouterr()
    return code, out, err, exc


def _stderr_lines(err: str) -> list[str]:
    # torch's profiler prints USDT trace markers on stderr; they are not recstack's output
    return [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("USDT:")]


def check_outcome(case: Case, code: int | None, err: str, exc: BaseException | None) -> None:
    assert exc is None, f"a raw {type(exc).__name__} escaped main: {exc}"
    lines = _stderr_lines(err)
    assert "Traceback" not in err or case.user, f"traceback on stderr:\n{err}"
    assert code == case.code, f"exit {code}, want {case.code}; stderr:\n{err}"
    errors = [ln for ln in lines if "error:" in ln]
    if case.code == 0:
        assert not errors, err
        if case.stderr:
            assert re.search(case.stderr, err), err
        return
    assert len(errors) == 1, f"want exactly one error line, got {len(errors)}:\n{err}"
    if case.kind != "cli":
        assert "invalid choice" not in errors[0], errors[0]
    if case.match:
        assert re.search(case.match, errors[0]), f"{case.match!r} not in {errors[0]!r}"
    if case.user:
        after = "\n".join(lines[lines.index(errors[0]) + 1 :])
        assert not any(f'File "{src}' in after for src in RECSTACK_SRC), f"recstack's own frames after the error line:\n{after}"
    else:
        assert "Traceback" not in err


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.api is None])
def test_cli_bad_input(
    case: Case, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(data_dir))
    keep = Path(_expand([case.keep], data_dir, tmp_path)[0]) if case.keep else None
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_bytes(KEEP)
    before = set(os.listdir(tmp_path))
    code, _out, err, exc = _run_cli(_expand(case.argv, data_dir, tmp_path), capsys)
    check_outcome(case, code, err, exc)
    if keep is not None:
        assert keep.read_bytes() == KEEP, f"{keep} was overwritten by a failed command"
    if case.absent:
        assert not Path(_expand([case.absent], data_dir, tmp_path)[0]).exists(), f"{case.absent} left behind"
    leftovers = [n for n in set(os.listdir(tmp_path)) - before if n.startswith(".recstack-tmp-")]
    assert not leftovers, f"temporary files left behind: {leftovers}"
    assert not (data_dir / "PWNED").exists() and not (data_dir / "PWNED2").exists(), "YAML executed code"


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.api is not None])
def test_api_bad_input(case: Case, data_dir: Path) -> None:
    assert case.api is not None
    with pytest.raises(RecstackError) as info:
        case.api(data_dir)
    msg = str(info.value)
    assert "\n" not in msg, msg
    if case.field:
        assert isinstance(info.value, ConfigError), f"{type(info.value).__name__}: {msg}"
        assert case.field in msg or case.field in str(info.value.field), msg


def test_case_count() -> None:
    """Issue 12 asks for at least 180 bad inputs; every kind is covered."""
    kinds = {c.kind for c in CASES} | {s.kind for s in SUBPROCESS_CASES} | {"signal"}
    assert len(CASES) + len(SUBPROCESS_CASES) + LAZY_CASES + SIGNAL_CASES >= 180
    assert kinds >= {
        "cli", "model-config", "workload-spec", "workload-csv", "profile-json", "machine",
        "user-code", "output", "api", "signal", "large", "process",
    }


# =====================================================================================================
# Real processes: signals, lazy import, exit codes, --debug
# =====================================================================================================
@dataclass
class Proc:
    id: str
    kind: str
    argv: list[str]
    code: int
    traceback: bool = False  # --debug: the full traceback is wanted
    owner: str | None = None
    stdout_head: bool = False  # stdout closed early (| head -1)


SUBPROCESS_CASES: list[Proc] = [
    Proc("help", "process", ["--help"], 0),
    Proc("version", "process", ["--version"], 0),
    Proc("no-command", "process", [], 2),
    Proc("bad-flag", "process", ["zoo", "list", "--bogus"], 2),
    Proc("bad-config", "process", ["zoo", "show", "{D}/cfg_dim_neg.yaml"], 2),
    Proc("bad-profile", "process", ["show", "{D}/prof_not_json.json"], 2),
    Proc("zoo-list-ok", "process", ["zoo", "list", "--json"], 0),
    Proc("scale-1e12", "process", ["zoo", "show", "rmc1", "--scale", "1e12"], 2),
    Proc("batch-1e12", "process", ["profile", "{D}/tiny.yaml", "--batch-size", str(10**12), "--machine", "none"], 2),
    Proc("debug-before", "process", ["--debug", "zoo", "show", "{D}/cfg_dim_neg.yaml"], 2, traceback=True),
    Proc("debug-after", "process", ["zoo", "show", "{D}/cfg_dim_neg.yaml", "--debug"], 2, traceback=True),
    Proc("user-code-debug", "process", ["--debug", *_profile("uf_raises:make")], 2, traceback=True),
    Proc("broken-pipe", "process", ["zoo", "list"], 0, stdout_head=True),
    Proc("python-m", "process", ["zoo", "list", "--json"], 0),
]


def _env(d: Path, tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(d), env.get("PYTHONPATH", "")])
    env["RECSTACK_MEMORY_LIMIT"] = MEMORY_LIMIT
    env["RECSTACK_CACHE_DIR"] = str(tmp / "cache")
    return env


@pytest.mark.parametrize(
    "proc",
    [
        pytest.param(p, id=p.id)
        for p in SUBPROCESS_CASES
    ],
)
def test_process_exit_codes(proc: Proc, data_dir: Path, tmp_path: Path) -> None:
    argv = _expand(proc.argv, data_dir, tmp_path)
    cmd = [sys.executable, "-m", "recstack.cli" if proc.id != "python-m" else "recstack", *argv]
    if proc.stdout_head:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(data_dir, tmp_path))
        assert p.stdout is not None and p.stderr is not None
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
        code = p.wait(timeout=120)
    else:
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env(data_dir, tmp_path), timeout=180)
        code, err = r.returncode, r.stderr
    assert code == proc.code, f"exit {code}, want {proc.code}:\n{err}"
    if proc.traceback:
        assert "Traceback" in err, err
    else:
        assert "Traceback" not in err, err
        if proc.code == 2:
            assert len([ln for ln in _stderr_lines(err) if "error:" in ln]) == 1, err


LAZY_SCRIPT = textwrap.dedent(
    """
    import sys
    from recstack.cli import main
    for argv in ({argvs}):
        try:
            main(argv)
        except SystemExit:
            pass
    print("TORCH" if "torch" in sys.modules else "NO-TORCH")
    """
)


LAZY_ARGVS = [
    pytest.param([["--help"]], id="help"),
    pytest.param([["--version"]], id="version"),
    pytest.param([["profile", "--help"]], id="profile-help"),
    pytest.param([["zoo", "show", "/nonexistent.yaml"]], id="bad-config-path"),
    pytest.param([["zoo", "show", "{D}/cfg_dim_neg.yaml"]], id="bad-config"),
]
LAZY_CASES = len(LAZY_ARGVS)
SIGNAL_CASES = 4


@pytest.mark.parametrize("argvs", LAZY_ARGVS)
def test_lazy_import(argvs: list[list[str]], data_dir: Path, tmp_path: Path) -> None:
    argvs = [_expand(a, data_dir, tmp_path) for a in argvs]
    script = LAZY_SCRIPT.replace("{argvs}", repr(tuple(argvs)))
    r = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=_env(data_dir, tmp_path), timeout=120
    )
    assert r.stdout.strip().splitlines()[-1] == "NO-TORCH", r.stdout + r.stderr


SIGNAL_FACTORY = """\
import os
import time

import torch
from torch import nn

STARTED = os.environ["RECSTACK_TEST_STARTED"]


class Slow(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        if not os.path.exists(STARTED):
            open(STARTED, "w").close()
        time.sleep(0.05)
        return self.lin(x)


def make(batch_size, seed):
    return Slow(), lambda i: torch.randn(4, 4)
"""


@pytest.mark.parametrize(
    ("sig", "code"),
    [
        pytest.param(signal.SIGINT, 130, id="SIGINT"),
        pytest.param(signal.SIGTERM, 143, id="SIGTERM"),
    ],
)
@pytest.mark.parametrize("output", ["new", "existing"])
def test_signal_leaves_no_partial_file(
    sig: signal.Signals, code: int, output: str, data_dir: Path, tmp_path: Path
) -> None:
    assert _signal_exit(sig, data_dir, tmp_path, output) == code


def _signal_exit(sig: signal.Signals, data_dir: Path, tmp_path: Path, output: str) -> int:
    (tmp_path / "slowfactory.py").write_text(SIGNAL_FACTORY)
    started = tmp_path / "started"
    out = tmp_path / "p.json"
    if output == "existing":
        out.write_bytes(KEEP)
    env = _env(data_dir, tmp_path)
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    env["RECSTACK_TEST_STARTED"] = str(started)
    p = subprocess.Popen(
        [sys.executable, "-m", "recstack.cli", "profile", "slowfactory:make", "--batch-size", "4", "--iters", "2000",
         "--warmup", "0", "--machine", "none", "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        # a shell's background job starts with SIGINT ignored, and Python keeps it so: give the child the default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120  # a generous bound on start-up, not a timing assertion
        while not started.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the profiled model never ran"
        p.send_signal(sig)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert b"Traceback" not in err, err.decode()
    if output == "existing":
        assert out.read_bytes() == KEEP
    else:
        assert not out.exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".recstack-tmp-")]
    return p.returncode


# =====================================================================================================
# The memory preflight's suggestions really fit
# =====================================================================================================
@pytest.mark.parametrize(("mode", "backend"), [("inference", "torch"), ("train", "torch"), ("train", "torchrec")])
def test_preflight_suggested_batch_size_fits(mode: str, backend: str, data_dir: Path) -> None:
    from recstack.errors import MemoryPreflightError
    from recstack.zoo import BuildOptions, preflight

    opts = BuildOptions(mode=mode, backend=backend, optimizer="adagrad")
    avail = 2 * 2**30
    with pytest.raises(MemoryPreflightError) as info:
        preflight(str(data_dir / "tiny.yaml"), options=opts, batch_size=2**24, available=avail)
    fit = int(re.search(r"--batch-size (\d+) or less", str(info.value)).group(1))  # type: ignore[union-attr]
    assert 1 <= fit < 2**24
    est = preflight(str(data_dir / "tiny.yaml"), options=opts, batch_size=fit, available=avail)
    assert est.batches > 0 and est.activations > 0 and est.total <= avail


def test_preflight_counts_the_workload(data_dir: Path) -> None:
    from recstack.workload import load_workload
    from recstack.zoo import BuildOptions, preflight

    opts = BuildOptions(batch_size=64)
    plain = preflight("rmc1", scale=1e-4, options=opts, available=2**40)
    heavy = preflight(
        "rmc1", scale=1e-4, options=opts, workload=load_workload(str(data_dir / "wl_pool_1e8.yaml")), available=2**50
    )
    assert heavy.batches > 1000 * plain.batches  # pooling 1e8 instead of the config's 80 per table
