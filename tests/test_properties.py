"""Property tests (hypothesis): the config, workload-spec and profile loaders never crash on arbitrary input.

Whatever JSON-like data (or YAML text) they get, the loaders either return a valid
object or raise a :class:`recstack.errors.RecstackError` subclass, which the CLI turns
into one line and exit 2; never a raw TypeError, OverflowError, RecursionError, ... .
Examples are few (``max_examples``) to keep the module fast; shapes are biased towards
the real schemas (known keys, plausible and extreme numbers) so that validators deep
inside are reached, not only the top-level type check.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstack.config.loading import parse_config, parse_yaml_text
from recstack.errors import RecstackError
from recstack.workload.batch import FeatureRequest
from recstack.workload.generate import bind
from recstack.workload.spec import WorkloadSpec
from recstack.zoo.config import ARCHS, ModelConfig

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

EXTREME_NUMBERS = st.sampled_from(
    [0, -1, 1, 2**31, 2**63, 2**64, 10**30, -(10**30), 0.5, 1e-300, 1e300, 1e308, -1e308, math.inf, -math.inf, math.nan]
)
NUMBERS = st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | EXTREME_NUMBERS
SCALARS = st.none() | st.booleans() | NUMBERS | st.text(max_size=12)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly plausible values, sometimes anything."""
    return st.one_of(strategy, strategy, JSONISH)


SIZES = _maybe(st.integers(min_value=-3, max_value=2**40) | EXTREME_NUMBERS)
WIDTHS = _maybe(st.lists(SIZES, min_size=0, max_size=4))
TABLE = st.fixed_dictionaries(
    {"name": _maybe(st.text(min_size=1, max_size=6)), "rows": SIZES},
    optional={
        "count": SIZES,
        "dim": SIZES,
        "pooling": _maybe(NUMBERS),
        "kind": _maybe(st.sampled_from(["pooled", "sequence"])),
        "max_length": SIZES,
        "fixed_length": _maybe(st.booleans()),
        "feature": _maybe(st.text(max_size=6)),
    },
)
MODEL_CONFIG = st.fixed_dictionaries(
    {
        "name": _maybe(st.text(min_size=1, max_size=6)),
        "arch": _maybe(st.sampled_from(ARCHS)),
        "embedding_dim": SIZES,
        "tables": _maybe(st.lists(TABLE, min_size=0, max_size=3)),
    },
    optional={
        "dense_features": SIZES,
        "bottom_mlp": WIDTHS,
        "top_mlp": WIDTHS,
        "mlp": WIDTHS,
        "tasks": SIZES,
        "scale": _maybe(NUMBERS),
        "interaction": _maybe(st.sampled_from(["concat", "dot"])),
        "bogus": JSONISH,
    },
)

DIST = st.one_of(
    NUMBERS,
    st.fixed_dictionaries({"kind": st.just("fixed"), "value": NUMBERS}, optional={"min": NUMBERS, "max": NUMBERS}),
    st.fixed_dictionaries({"kind": st.just("uniform"), "low": NUMBERS, "high": NUMBERS}),
    st.fixed_dictionaries({"kind": st.just("loguniform"), "low": NUMBERS, "high": NUMBERS}),
    st.fixed_dictionaries({"kind": st.just("normal"), "mean": NUMBERS, "std": NUMBERS}, optional={"max": NUMBERS}),
    st.fixed_dictionaries(
        {"kind": st.just("lognormal"), "sigma": NUMBERS}, optional={"mu": NUMBERS, "mean": NUMBERS, "median": NUMBERS}
    ),
    st.fixed_dictionaries(
        {"kind": st.just("empirical"), "values": st.lists(NUMBERS, max_size=3), "probs": st.lists(NUMBERS, max_size=3)}
    ),
    JSONISH,
)
IDS = st.one_of(
    st.fixed_dictionaries({"kind": st.just("uniform")}),
    st.fixed_dictionaries({"kind": st.just("zipf"), "s": NUMBERS}, optional={"q": NUMBERS}),
    st.fixed_dictionaries({"kind": st.just("heavy_hitters"), "hot": st.lists(NUMBERS, max_size=3)}),
    JSONISH,
)
FEATURE = st.fixed_dictionaries(
    {"name": _maybe(st.text(min_size=1, max_size=6))},
    optional={"cardinality": SIZES, "ids": IDS, "pooling": DIST, "scatter": _maybe(st.booleans())},
)
POPULATION = st.fixed_dictionaries(
    {"rows": DIST, "pooling": DIST, "ids": _maybe(st.fixed_dictionaries({"kind": st.just("uniform")}))},
    optional={"tables": SIZES, "length_sigma": _maybe(NUMBERS)},
)
WORKLOAD = st.fixed_dictionaries(
    {"name": _maybe(st.text(min_size=1, max_size=6))},
    optional={
        "seed": SIZES,
        "features": _maybe(st.lists(FEATURE, max_size=3)),
        "population": _maybe(POPULATION),
        "dense": _maybe(st.fixed_dictionaries({}, optional={"default": DIST})),
        "labels": _maybe(st.fixed_dictionaries({"click_rate": _maybe(NUMBERS)})),
        "query_sizes": DIST,
        "arrivals": _maybe(st.fixed_dictionaries({"rate": NUMBERS})),
    },
)
REQUESTS = [
    FeatureRequest(name="a", id_range=100, pooling=2.0),
    FeatureRequest(name="s", id_range=1000, pooling=5.0, kind="sequence", max_length=8),
]


@SETTINGS
@given(MODEL_CONFIG)
def test_model_config_loader_only_raises_recstack_errors(data: dict[str, Any]) -> None:
    try:
        cfg = parse_config(ModelConfig, data, source="prop.yaml")
        cfg.resolved_tables()
        cfg.scaled(10.0)
    except RecstackError:
        pass


@SETTINGS
@given(JSONISH)
def test_model_config_loader_on_anything(data: Any) -> None:
    try:
        parse_config(ModelConfig, data, source="prop.yaml")
    except RecstackError:
        pass


@SETTINGS
@given(st.text(max_size=200))
def test_yaml_text_loader_only_raises_recstack_errors(text: str) -> None:
    try:
        data = parse_yaml_text(text, "prop.yaml")
        parse_config(ModelConfig, data, source="prop.yaml")
    except RecstackError:
        pass


@SETTINGS
@given(WORKLOAD)
def test_workload_spec_loader_only_raises_recstack_errors(data: dict[str, Any]) -> None:
    try:
        spec = parse_config(WorkloadSpec, data, source="prop.yaml")
        bound = bind(spec, REQUESTS, num_dense=2)
        bound.describe()
        assert math.isfinite(bound.ids_per_batch(4))
    except RecstackError:
        pass


def _node(children: st.SearchStrategy[Any] | None) -> st.SearchStrategy[Any]:
    from recstack.tree import NODE_KEYS

    plausible = {
        "name": st.text(max_size=6),
        "path": st.text(max_size=6),
        "level": st.sampled_from(["run", "stage", "module", "op"]),
        "stage": st.none() | st.text(max_size=6),
    }
    keys = {k: _maybe(plausible.get(k, NUMBERS)) for k in NODE_KEYS}
    optional = {} if children is None else {"children": _maybe(st.lists(children, max_size=2))}
    return st.fixed_dictionaries(keys, optional=optional)


def _profile_like() -> st.SearchStrategy[Any]:
    """Profiles with every required key present (so the loader reaches the nodes), values often wrong."""
    node = st.recursive(_node(None), _node, max_leaves=4)
    return st.fixed_dictionaries(
        {
            "schema": _maybe(st.just("recstack.profile")),
            "schema_version": _maybe(st.integers(min_value=-8, max_value=2)),
            "run_id": _maybe(st.text(max_size=6)),
            "run": _maybe(st.dictionaries(st.text(max_size=6), SCALARS, max_size=3)),
            "environment": _maybe(st.dictionaries(st.text(max_size=6), SCALARS, max_size=3)),
            "overhead": _maybe(st.dictionaries(st.text(max_size=6), SCALARS, max_size=3)),
            "root": _maybe(node),
        },
        optional={"ranks": JSONISH},
    )


@SETTINGS
@given(st.one_of(_profile_like(), JSONISH))
def test_profile_loader_only_raises_recstack_errors(data: Any) -> None:
    from recstack.tree import Profile

    try:
        prof = Profile.from_dict(data)
        list(prof.nodes())
        prof.stage_shares()
    except RecstackError:
        pass
