"""The verdict on a compile report: a silent fallback to eager, or numerics past the tolerance, is an error
of the config (exit 2), raised after the report is printed."""

from __future__ import annotations

from typing import Any

from recstack.errors import ConfigError


def check_report(report: dict[str, Any]) -> None:
    """ConfigError naming the first fallback, else the numerics that differ; nothing when the report holds."""
    if report["fallbacks"]:
        f = report["fallbacks"][0]
        raise ConfigError(f"silent fallback to eager in {f.get('region') or f.get('function')}: {f['error']}; "
                          f"last guard: {f.get('last_reason')}", field="recompile_limit")
    n = report["numerics"]
    if not n["ok"]:
        raise ConfigError(f"compiled output differs from eager: max abs err {n['max_abs_err']:.3g}, rel "
                          f"{n['max_rel_err']:.3g} (tolerance atol {n['atol']}, rtol {n['rtol']}; worst "
                          f"{n['worst']})", field="numerics")


__all__ = ["check_report"]
