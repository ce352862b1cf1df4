"""YAML loading and pydantic validation with one-line, field-naming errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from recstack.config.limits import CONFIG_BYTES_MAX, YAML_DEPTH_MAX, YAML_NODES_MAX
from recstack.errors import ConfigError, DataError

M = TypeVar("M", bound=BaseModel)


def read_json_file(path: str | Path, what: str) -> Any:
    """Read a JSON file; a missing, unreadable or malformed file becomes DataError naming it and ``what`` it is."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{p}: {what} file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{p}: cannot read {what} JSON ({exc})") from None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_yaml_graph(root: yaml.Node, source: str) -> None:
    """Refuse a composed YAML document that is cyclic, nested too deeply or huge once aliases are expanded.

    Aliases make the composed graph a DAG whose expansion can be exponential in the
    file size (the "billion laughs" alias bomb); its expanded node count is computed
    here on the graph, memoised per node, before anything is constructed.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(sizes[id(c)] for c in _children(node))
            if total > YAML_NODES_MAX:
                raise ConfigError(
                    f"document expands to more than {YAML_NODES_MAX:,} values (aliases repeated); "
                    "write the config out without nested aliases",
                    source=source,
                )
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise ConfigError("an alias refers to a mapping or list that contains it (a cycle)", source=source)
        if depth > YAML_DEPTH_MAX:
            raise ConfigError(f"nested deeper than {YAML_DEPTH_MAX} levels", source=source)
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in _children(node) if id(c) not in sizes)


def parse_yaml_text(text: str, source: str) -> Any:
    """Safe-load one YAML document (no Python tags), checking its expanded size before constructing it."""
    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        check_yaml_graph(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"invalid YAML{where}: {_clean(problem, 200)}", source=source) from None
    except RecursionError:
        raise ConfigError(f"nested deeper than {YAML_DEPTH_MAX} levels", source=source) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml_file(path: str | Path) -> Any:
    """Read a YAML file; unreadable, oversized or malformed files and YAML syntax errors become ConfigError."""
    p = Path(path)
    try:
        if p.is_dir():
            raise ConfigError("is a folder; pass a YAML file", source=str(p))
        if p.exists() and not p.is_file():
            raise ConfigError("is not a regular file; pass a YAML file", source=str(p))
        with p.open("rb") as fh:
            raw = fh.read(CONFIG_BYTES_MAX + 1)
    except FileNotFoundError:
        raise ConfigError("file not found; pass an existing YAML file", source=str(p)) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read file ({exc.__class__.__name__}: {exc})", source=str(p)) from None
    if len(raw) > CONFIG_BYTES_MAX:
        raise ConfigError(f"file is larger than {CONFIG_BYTES_MAX // 2**20} MiB; not a config", source=str(p))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start}); expected YAML", source=str(p)) from None
    data = parse_yaml_text(text, str(p))
    if data is None:
        raise ConfigError("file is empty; expected a YAML mapping", source=str(p))
    return data


def _clean(text: str, limit: int = 80) -> str:
    """One printable line of at most ``limit`` characters (field names and values come from the user)."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def validation_message(exc: ValidationError) -> tuple[str, str]:
    """The first error of a pydantic ValidationError as (dotted field, message)."""
    err = exc.errors()[0]
    loc = ".".join(_clean(str(part), 40) for part in err.get("loc", ()) if part != "__root__") or "(top level)"
    msg = err.get("msg", "invalid value")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if err.get("type") == "extra_forbidden":
        msg = "unknown field; remove it or check its spelling"
    elif err.get("type") == "missing":
        msg = "required field is missing"
    inp = err.get("input")
    if err.get("type") not in ("missing", "extra_forbidden") and not isinstance(inp, (dict, list)):
        msg += f" (got {_clean(repr(inp))})"
    return loc, _clean(msg, 400)


def parse_config(model_cls: type[M], data: Any, *, source: str | None = None) -> M:
    """Validate ``data`` against ``model_cls``; the first error becomes a ConfigError naming the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping at the top level, got {type(data).__name__}", source=source)
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        field, msg = validation_message(exc)
        raise ConfigError(msg, source=source, field=field) from None
    except RecursionError:
        raise ConfigError("nested too deeply (or a cycle)", source=source) from None
