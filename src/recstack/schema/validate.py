"""Check a profile dict against the typed contract; upgrade older versions in memory.

:func:`check_profile` is what ``Profile.from_dict`` and ``recstack validate``
run: the header (``schema``, ``schema_version``), the tree depth (at most
:data:`MAX_TREE_DEPTH` levels below the root, checked without recursion), an
in-memory upgrade of an older version, then one pydantic pass over the whole
document. The first bad field becomes a :class:`~recstack.errors.DataError`
naming it as a path: ``out.json: root.children[2].time_s: ...``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from recstack.errors import DataError
from recstack.schema.profile_model import MAX_TREE_DEPTH, SCHEMA, SCHEMA_VERSION, Profile

MEDIAN, IQM = "median", "interquartile mean"
V1_NOTES = {
    MEDIAN: "schema version 1: its run and stage times are medians of the timed steps (they do not add up "
    "to the run; version 2 stores interquartile means, which do); upgraded in memory, figures unchanged",
    IQM: "schema version 1, written after stage times became interquartile means (they add up to the run, "
    "as in version 2); upgraded in memory, figures unchanged",
}


_PLAIN = {
    "finite_number": "must be a finite number",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "list_type": "must be a JSON list",
    "float_type": "must be a number",
    "int_type": "must be an integer",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "greater_than_equal": "must be >= {ge}",
}


def format_loc(loc: tuple[Any, ...]) -> str:
    """``("root", "children", 2, "time_s")`` -> ``root.children[2].time_s``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def first_error(exc: ValidationError) -> str:
    """The first error of a validation as ``path: message (got value)``."""
    err = exc.errors(include_url=False)[0]
    loc = format_loc(tuple(err.get("loc", ())))
    kind, msg = err.get("type", ""), err.get("msg", "invalid value")
    if kind == "missing":
        return f"{loc}: required key is missing"
    plain = _PLAIN.get(kind)
    if plain is not None:
        msg = plain.format(**(err.get("ctx") or {}))
    inp = err.get("input")
    if isinstance(inp, dict):
        got = " (got an object)"
    elif isinstance(inp, list):
        got = " (got a list)"
    else:
        got = f" (got {_short(inp)})"
    return f"{loc}: {msg}{got}"


def tree_depth(root: Any) -> int:
    """Levels below ``root`` (0 for a leaf), without recursion; non-dict nodes end a branch."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        kids = node.get("children") if isinstance(node, dict) else None
        if isinstance(kids, list):
            stack.extend((c, depth + 1) for c in kids if isinstance(c, dict))
            if depth + 1 > MAX_TREE_DEPTH and kids:
                return depth + 1
    return deepest


def _check_header(d: Any, source: str) -> int:
    if not isinstance(d, dict):
        raise DataError(f"{source}: not a recstack profile (expected a JSON object, got {type(d).__name__})")
    if d.get("schema") != SCHEMA:
        raise DataError(f"{source}: not a recstack profile (schema must be {SCHEMA!r})")
    ver = d.get("schema_version")
    if not isinstance(ver, int) or isinstance(ver, bool) or ver < 1:
        raise DataError(f"{source}: schema_version: must be an integer from 1 to {SCHEMA_VERSION} (got {ver!r})")
    if ver > SCHEMA_VERSION:
        raise DataError(
            f"{source}: schema_version {ver} is newer than this recstack reads (<= {SCHEMA_VERSION}); "
            "upgrade recstack"
        )
    return ver


def _check_depth(d: dict[str, Any], source: str) -> None:
    trees = [("root", d.get("root"))]
    ranks = d.get("ranks")
    if isinstance(ranks, list):
        trees += [(f"ranks[{i}].root", r.get("root")) for i, r in enumerate(ranks) if isinstance(r, dict)]
    for where, tree in trees:
        depth = tree_depth(tree)
        if depth > MAX_TREE_DEPTH:
            raise DataError(
                f"{source}: {where}: the tree is more than {MAX_TREE_DEPTH} levels deep; recstack profiles "
                f"have at most {MAX_TREE_DEPTH} levels below the root"
            )


def _rename_resident(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    return {(f"{k}_bytes" if k in ("parameters", "buffers", "optimizer_state") else k): v for k, v in entry.items()}


def v1_time_statistic(root: Any) -> str:
    """Which statistic a version-1 profile's stage times are: interquartile means add up to the run time
    (recstack wrote them so, still as version 1, before the bump), medians do not."""
    try:
        total = sum(float(c["time_s"]) for c in root["children"])
        run = float(root["time_s"])
    except (TypeError, KeyError, ValueError):
        return MEDIAN
    return IQM if root["children"] and abs(total - run) <= 1e-6 * max(run, 1e-12) else MEDIAN


def upgrade_v1(d: dict[str, Any]) -> dict[str, Any]:
    """A version-1 profile as version 2 (a copy): ranks entries, unit-suffixed keys, ``upgraded_from``."""
    d = copy.deepcopy(d)
    d["schema_version"] = SCHEMA_VERSION
    d["ranks"] = [{"rank": 0, "root": None, "shards": []}]
    mem = d.get("memory")
    if isinstance(mem, dict) and isinstance(mem.get("resident_by_stage"), dict):
        mem["resident_by_stage"] = {k: _rename_resident(v) for k, v in mem["resident_by_stage"].items()}
    root = d.get("root")
    if isinstance(root, dict) and isinstance(root.get("children"), list):
        for st in root["children"]:
            if isinstance(st, dict) and "resident_bytes" in st:
                st["resident_bytes"] = _rename_resident(st["resident_bytes"])
    mach = d.get("machine")
    if isinstance(mach, dict) and "latency_ns" in mach:
        ns = mach.pop("latency_ns")
        mach["dram_latency_s"] = ns * 1e-9 if isinstance(ns, (int, float)) and not isinstance(ns, bool) else ns
    stat = v1_time_statistic(d.get("root"))
    d["upgraded_from"] = {"schema_version": 1, "time_statistic": stat, "notes": [V1_NOTES[stat]]}
    return d


def read_profile_json(path: str | Path) -> Any:
    """The JSON of a profile file, unchecked; a file nested too deeply to parse is a DataError."""
    from recstack.config.loading import read_json_file

    try:
        return read_json_file(path, "profile")
    except RecursionError:
        raise DataError(
            f"{path}: JSON nested too deeply to read; a profile tree has at most {MAX_TREE_DEPTH} levels"
        ) from None


def check_profile(d: Any, source: str = "profile") -> tuple[dict[str, Any], list[str]]:
    """Validate a profile dict; return it (upgraded to the current version if older) and notes.

    Raises DataError naming the first bad field. The returned dict is ``d``
    itself for a current profile, a copy for an upgraded one.
    """
    ver = _check_header(d, source)
    _check_depth(d, source)
    notes: list[str] = []
    if ver == 1:
        d = upgrade_v1(d)
        notes.append(f"{source}: {d['upgraded_from']['notes'][0]}")
    try:
        Profile.model_validate(d)
    except ValidationError as exc:
        raise DataError(f"{source}: {first_error(exc)}") from None
    return d, notes


def stats_version(d: dict[str, Any]) -> int:
    """The schema version a profile's figures were written under (``upgraded_from`` when upgraded)."""
    up = d.get("upgraded_from")
    if isinstance(up, dict) and isinstance(up.get("schema_version"), int):
        return int(up["schema_version"])
    return int(d.get("schema_version", SCHEMA_VERSION))


def time_statistic(d: dict[str, Any]) -> str:
    """``interquartile mean`` (version 2) or ``median`` (older version-1 files): what run and stage times are."""
    up = d.get("upgraded_from")
    if isinstance(up, dict):
        return str(up.get("time_statistic") or MEDIAN)
    return IQM


def summary(path: str) -> dict[str, Any]:
    """Validate the file at ``path``; a dict describing it (DataError when it is not a valid profile)."""
    data = read_profile_json(path)
    d, notes = check_profile(data, source=path)
    stack, nodes = [d["root"]], 0
    while stack:
        n = stack.pop()
        nodes += 1
        stack.extend(n["children"])
    return {
        "file": path,
        "valid": True,
        "schema_version": SCHEMA_VERSION,
        "file_schema_version": data["schema_version"],
        "stats_version": stats_version(d),
        "model": d["run"]["model"],
        "nodes": nodes,
        "depth": tree_depth(d["root"]),
        "stages": [c["name"] for c in d["root"]["children"]],
        "ranks": len(d["ranks"]),
        "notes": notes,
    }
