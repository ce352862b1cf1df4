"""The run session: a RunConfig resolved once into typed parts, every file checked before a model is built.

No model is built here: resolving reads files only (fast), and the layering is read from the import graph.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_imports import import_graph

from recstack.compilation.config import CompileConfig
from recstack.config.build import BuildOptions
from recstack.config.run import RunConfig
from recstack.distributed.sharding import PlanFile
from recstack.errors import ConfigError, RecstackError
from recstack.profiling.rules import StageRules
from recstack.session import resolve


def test_resolve_parses_every_section_into_its_type(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("tables:\n  t0: {sharding: row_wise}\n")
    cfg = RunConfig(model="rmc1", mode="train", seed=3, machine=None, nproc=2, sharding=str(plan),
                    stage_rules={"rules": [{"match": "over_arch*", "stage": "head"}]},
                    compile={"defaults": {"backend": "eager"}})
    parts = resolve(cfg)
    assert parts.source.kind == "zoo" and parts.source.name == "rmc1"
    assert isinstance(parts.rules, StageRules) and parts.rules.rules[0].stage == "head"
    assert isinstance(parts.compile, CompileConfig) and parts.compile.defaults.backend == "eager"
    assert isinstance(parts.sharding_plan, PlanFile) and parts.sharding_plan.tables["t0"].sharding == "row_wise"
    assert parts.build == BuildOptions.of(cfg) and parts.build.mode == "train" and parts.build.seed == 3
    assert parts.machine is None and parts.machine_file is None
    assert resolve(RunConfig(model="pkg.mod:make", machine=None)).source.kind == "factory"


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("compile", {"defaults": {"backend": "no_such_backend"}}, "backend"),
        ("stage_rules", {"rules": [{"match": "x", "stage": "no_such_stage"}]}, "no_such_stage"),
        ("machine", "no_such_machine.json", "no_such_machine.json"),
    ],
)
def test_a_bad_section_fails_at_resolve(field: str, value: object, named: str) -> None:
    with pytest.raises(RecstackError, match=named) as info:
        resolve(RunConfig(model="rmc1", **{"machine": None, field: value}))
    assert info.value.exit_code == 2


def test_the_build_section_is_read_from_the_config_in_one_place() -> None:
    """BuildOptions' defaults are RunConfig's, and an override (a serving worker's batch) changes only itself."""
    cfg = RunConfig(model="rmc1", backend="tbe", table_dtype="fp16", batch_size=64)
    assert BuildOptions() == BuildOptions.of(RunConfig())
    served = BuildOptions.of(cfg, mode="inference", batch_size=512)
    assert (served.backend, served.table_dtype, served.batch_size) == ("tbe", "fp16", 512)
    with pytest.raises(ConfigError, match="--backend"):
        BuildOptions(backend="nope").validate()


def test_no_commands_module_imports_the_api_and_the_session_sits_below_it() -> None:
    """Commands call the session; the API is the users' facade over it, and nothing under it imports it."""
    graph = import_graph()
    uses_api = sorted(m for m, deps in graph.items() if "recstack.api" in deps and m != "recstack")
    assert uses_api == [], f"modules importing recstack.api: {uses_api}"
    assert "recstack.session.run" in graph["recstack.api"]
    up = sorted(m for m, deps in graph.items() if m.startswith("recstack.session")
                for d in deps if d in ("recstack.api", "recstack.cli") or d.endswith(".commands"))
    assert up == [], f"the session imports the interface: {up}"
