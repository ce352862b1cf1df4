"""argparse pieces generated from RunConfig: the run options of a command, and the RunConfig of its arguments.

Each type names its flag in the error it raises. Kept apart from :mod:`recstack.cli`
so that command modules import them without importing the CLI (no cycle); the pieces that know
nothing of run options are in :mod:`recstack.cli_base` (re-exported here).
"""

from __future__ import annotations

import argparse
import contextlib
import types
import typing
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from recstack.cli_base import (
    DeprecatedAlias,
    Parser,
    add_command,
    add_profile_input,
    add_result_outputs,
    int_at_least,
    positive_float,
    print_document,
)
from recstack.errors import ConfigError

if TYPE_CHECKING:
    from recstack.config.run import RunConfig

# RunConfig (pydantic) and the zoo load when a command's arguments need them, not with the parser
# class: `recstack import` builds its parser without them (~0.1 s of start-up per trace).


@contextlib.contextmanager
def flags_named() -> Iterator[None]:
    """A ConfigError on a RunConfig field given on the command line names the flag the user typed instead."""
    try:
        yield
    except ConfigError as exc:
        from recstack.config.run import RunConfig

        if exc.field in RunConfig.model_fields and exc.source is None:
            raise ConfigError(exc.detail, field=cli_name(exc.field)) from exc
        raise


def config_type(field: str, flag: str) -> Callable[[str], Any]:
    """argparse type: a number checked by RunConfig's rule for ``field`` (one rule everywhere), named ``flag``."""
    from recstack.config.run import RunConfig, check_field

    kind = RunConfig.model_fields[field].annotation
    as_int = kind in (int, int | None)

    def parse(text: str) -> Any:
        try:
            value = int(text) if as_int else float(text)
        except ValueError:
            what = "an integer" if as_int else "a number"
            raise argparse.ArgumentTypeError(f"must be {what} (got {text!r})") from None
        return check_field(field, value, flag)

    return parse


# -- generated run options ----------------------------------------------------------
def flag_of(field: str) -> str:
    """The CLI flag of a RunConfig field: ``batch_size`` -> ``--batch-size``."""
    return "--" + field.replace("_", "-")


def cli_name(field: str) -> str:
    """How an error names a RunConfig field on the command line: its flag, or MODEL for the positional."""
    return "MODEL" if (_cli_meta(field) or {}).get("positional") else flag_of(field)


def _cli_meta(field: str) -> dict[str, Any] | None:
    from recstack.config.run import RunConfig

    extra = RunConfig.model_fields[field].json_schema_extra or {}
    cli = extra.get("cli", {}) if isinstance(extra, dict) else {}
    return None if cli is False else dict(cli)


def _kinds(annotation: Any) -> list[Any]:
    """The member types of an annotation (``int | None`` -> [int]); Literal stays whole."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [k for a in typing.get_args(annotation) for k in _kinds(a)]
    return [] if annotation is type(None) else [annotation]


def _parse_as(kind: Any, flag: str) -> Any:
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"must be {what} (got {text!r})") from None

    return parse


def cli_default(field: str) -> Any:
    """The default the CLI shows and uses: the field's, unless its ``cli`` metadata says otherwise."""
    from recstack.config.run import RunConfig

    meta = _cli_meta(field) or {}
    return meta["default"] if "default" in meta else RunConfig.model_fields[field].default


def add_run_arguments(parser: argparse.ArgumentParser, unused: frozenset[str] = frozenset()) -> None:
    """One argument per RunConfig field. Values not given stay absent (argparse.SUPPRESS),
    so that ``--config`` values are overridden only by flags really given.

    ``unused``: fields the command does not use: not offered (argparse refuses the flag), and refused
    in a ``--config`` YAML by :func:`run_config_from_args`, instead of being silently ignored.
    """
    from recstack.config.run import RunConfig, field_range
    from recstack.zoo.config import ZOO_IDS

    parser.set_defaults(_unused_run_fields=unused)
    for name, info in RunConfig.model_fields.items():
        meta = _cli_meta(name)
        if meta is None or name in unused:
            continue
        default = cli_default(name)
        extras = [f"default: {default}"] if default is not None else []
        allowed = field_range(name)
        if allowed:
            extras.append(f"allowed: {allowed}")
        desc = (info.description or "").replace("zoo id,", f"zoo id ({ZOO_IDS}),", 1)  # the ids from the zoo itself
        help_text = desc.replace("%", "%%") + (f" ({'; '.join(extras)})" if extras else "")
        if meta.get("positional"):
            parser.add_argument(name, nargs="?", default=argparse.SUPPRESS, metavar=meta.get("metavar"), help=help_text)
            continue
        kw: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": help_text}
        kinds = _kinds(info.annotation)
        literal = next((k for k in kinds if typing.get_origin(k) is Literal), None)
        if literal is not None:
            kw["choices"] = list(typing.get_args(literal))
        elif bool in kinds:
            kw["action"] = argparse.BooleanOptionalAction
        elif int in kinds:
            kw["type"] = _parse_as(int, flag_of(name))
        elif float in kinds:
            kw["type"] = _parse_as(float, flag_of(name))
        if "metavar" in meta:
            kw["metavar"] = meta["metavar"]
        parser.add_argument(flag_of(name), **kw)


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    """The RunConfig of a parsed command line: CLI defaults, then ``--config`` YAML, then the flags given."""
    from recstack.config.run import RunConfig
    from recstack.zoo.config import ZOO_IDS

    given = {n: getattr(args, n) for n in RunConfig.model_fields if hasattr(args, n)}
    base = {n: cli_default(n) for n in RunConfig.model_fields if "default" in (_cli_meta(n) or {})}
    if getattr(args, "config", None):
        loaded = RunConfig.from_yaml(args.config).model_dump(exclude_unset=True)
        unused = sorted(set(loaded) & set(getattr(args, "_unused_run_fields", ())))
        if unused:
            raise ConfigError(f"{', '.join(unused)}: not used by this command; remove "
                              f"{'it' if len(unused) == 1 else 'them'} from the file", source=args.config)
        base.update(loaded)
    cfg = RunConfig.build(base, given, name=cli_name)
    if cfg.model is None:
        raise ConfigError(f"give a zoo id ({ZOO_IDS}), a model YAML or package.module:factory, "
                          "or a --config whose model: names one", field="MODEL")
    return cfg


__all__ = [
    "DeprecatedAlias", "Parser", "add_command", "add_profile_input", "add_result_outputs", "flags_named", "print_document", "add_run_arguments", "cli_default", "cli_name", "config_type", "flag_of", "int_at_least",
    "positive_float", "run_config_from_args",
]
