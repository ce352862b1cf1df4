"""The profile contract: typed models, the generated JSON Schema, validation and upgrades.

    from recstack.schema import json_schema, check_profile
    d, notes = check_profile(json.load(f), source="out.json")   # DataError names the first bad field

The models (:mod:`recstack.schema.profile_model`) are the source of truth;
``profile.schema.json`` (committed, shipped as package data) and
docs/profile-schema.md are generated from them (:mod:`recstack.schema.docgen`).
"""

from __future__ import annotations

import importlib
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstack.schema.profile_model import LEVELS, MAX_TREE_DEPTH, SCHEMA, SCHEMA_VERSION
    from recstack.schema.profile_model import Node as NodeModel
    from recstack.schema.profile_model import Profile as ProfileModel
    from recstack.schema.validate import check_profile, stats_version

SCHEMA_FILE = "profile.schema.json"

# Lazy: `recstack validate` is registered at CLI start-up (its module lives in this package), and
# building the models costs ~50-100 ms that --help and zoo list must not pay.
_WHERE = {
    "LEVELS": ("profile_model", "LEVELS"),
    "MAX_TREE_DEPTH": ("profile_model", "MAX_TREE_DEPTH"),
    "SCHEMA": ("profile_model", "SCHEMA"),
    "SCHEMA_VERSION": ("profile_model", "SCHEMA_VERSION"),
    "NodeModel": ("profile_model", "Node"),
    "ProfileModel": ("profile_model", "Profile"),
    "check_profile": ("validate", "check_profile"),
    "stats_version": ("validate", "stats_version"),
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        module, attr = _WHERE[name]
        return getattr(importlib.import_module(f"recstack.schema.{module}"), attr)
    raise AttributeError(f"module 'recstack.schema' has no attribute {name!r}")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a profile document, generated from the models."""
    from recstack.schema.profile_model import SCHEMA, SCHEMA_VERSION
    from recstack.schema.profile_model import Profile as ProfileModel

    schema = ProfileModel.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://recstack.invalid/schema/{SCHEMA}/v{SCHEMA_VERSION}.json",
        **schema,
    }


def json_schema_text() -> str:
    """The schema as the committed file holds it (sorted keys, indented, trailing newline)."""
    return json.dumps(json_schema(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def committed_json_schema() -> dict[str, Any]:
    """The schema file shipped with the package."""
    return json.loads(resources.files("recstack.schema").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


__all__ = [
    "LEVELS",
    "MAX_TREE_DEPTH",
    "SCHEMA",
    "SCHEMA_VERSION",
    "NodeModel",
    "ProfileModel",
    "check_profile",
    "committed_json_schema",
    "json_schema",
    "json_schema_text",
    "stats_version",
]
