"""argparse pieces that know nothing of run options: the parser class, sub-command registration, argument
types, and how a command prints its JSON document.

A base module (argparse, errors, outputs only), so that the commands module of any package can use it
without an import cycle; the RunConfig-generated options are in :mod:`recstack.cli_types`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from recstack.errors import ConfigError


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are ConfigErrors: one line ``error: ...`` and exit 2, like all bad input."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise ConfigError(f"{message} (see {self.prog} --help)")


class DeprecatedAlias(argparse.Action):
    """An old flag name kept working (hidden from help) that says which name replaced it."""

    def __init__(self, option_strings: list[str], dest: str, new: str, **kw: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        import warnings

        warnings.warn(f"{option_string} is deprecated here: use {self.new}", FutureWarning, stacklevel=2)
        setattr(namespace, self.dest, values)


def add_command(sub: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], int], help: str,
                description: str | None = None) -> argparse.ArgumentParser:
    """A sub-command's parser, whose ``func`` runs it (the CLI calls ``args.func(args)``)."""
    p = sub.add_parser(name, help=help, description=description)
    p.set_defaults(func=func)
    return p


def print_document(doc: Any, render: Callable[[Any], str], out: Any, as_json: bool) -> str:
    """Write a command's JSON document to ``out`` (if any), print it (JSON or ``render``'s text); its JSON text."""
    from recstack.outputs import atomic_write_text

    text = json.dumps(doc, indent=1, allow_nan=False)
    if out is not None:
        atomic_write_text(out, text + "\n")
    print(text if as_json else render(doc))
    return text


def add_profile_input(p: argparse.ArgumentParser, output: str | None = None) -> None:
    """The saved profile a command reads (positional), and with ``output`` a required ``-o`` (its help)."""
    p.add_argument("profile", help="profile JSON (from recstack profile -o)")
    if output is not None:
        p.add_argument("-o", "--output", required=True, help=output)


def add_result_outputs(p: argparse.ArgumentParser, what: str = "result", config: bool = True) -> None:
    """``--config RUN.yaml`` (with ``config``), ``--json`` and ``-o``: how a run command takes its options and
    gives its JSON ``what``."""
    if config:
        p.add_argument("--config", default=None, metavar="RUN.yaml", help="load the run options from YAML")
    p.add_argument("--json", action="store_true", help=f"print the {what} as JSON")
    p.add_argument("-o", "--output", default=None, help=f"also write the JSON {what} here")


def positive_float(name: str, high: float | None = None, unit: str = "") -> Callable[[str], float]:
    """A number > 0 (and <= ``high`` when given: a bound the command can honour, named in the error)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number (got {text!r})") from None
        if not v > 0 or v != v or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a positive number (got {text!r})")
        if high is not None and v > high:
            raise argparse.ArgumentTypeError(f"{name} must be at most {high:g}{unit} (got {text})")
        return v

    return parse


def int_at_least(name: str, low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer >= ``low`` (and <= ``high`` when given)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer (got {text!r})") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{name} must be >= {low} (got {v})")
        if high is not None and v > high:
            raise argparse.ArgumentTypeError(f"{name} must be at most {high} (got {v})")
        return v

    return parse


__all__ = [
    "DeprecatedAlias", "Parser", "add_command", "add_profile_input", "add_result_outputs", "int_at_least", "positive_float",
    "print_document",
]
