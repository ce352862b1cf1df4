"""YAML loading and pydantic validation with one-line, field-naming errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

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


def load_yaml_file(path: str | Path) -> Any:
    """Read a YAML file; unreadable files and YAML syntax errors become ConfigError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found; pass an existing YAML file", source=str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read file ({exc.__class__.__name__}: {exc})", source=str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"invalid YAML{where}: {problem}", source=str(p)) from None
    if data is None:
        raise ConfigError("file is empty; expected a YAML mapping", source=str(p))
    return data


def validation_message(exc: ValidationError) -> tuple[str, str]:
    """The first error of a pydantic ValidationError as (dotted field, message)."""
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err.get("loc", ()) if part != "__root__") or "(top level)"
    msg = err.get("msg", "invalid value")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if err.get("type") == "extra_forbidden":
        msg = "unknown field; remove it or check its spelling"
    elif err.get("type") == "missing":
        msg = "required field is missing"
    inp = err.get("input")
    if err.get("type") not in ("missing", "extra_forbidden") and not isinstance(inp, (dict, list)):
        msg += f" (got {inp!r})"
    return loc, msg


def parse_config(model_cls: type[M], data: Any, *, source: str | None = None) -> M:
    """Validate ``data`` against ``model_cls``; the first error becomes a ConfigError naming the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping at the top level, got {type(data).__name__}", source=source)
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        field, msg = validation_message(exc)
        raise ConfigError(msg, source=source, field=field) from None
