"""Preset workload specs shipped with recstack (``presets/*.yaml``) and :func:`load_workload`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from recstack.config import load_yaml_file, parse_config
from recstack.errors import ConfigError

if TYPE_CHECKING:
    from recstack.workload.spec import WorkloadSpec

PRESET_DIR = Path(__file__).resolve().parent / "presets"


def list_presets() -> list[str]:
    """Names of the shipped presets (file stems of ``presets/*.yaml``), sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def preset_path(name: str) -> Path:
    """Path of preset ``name``; ConfigError listing the presets when there is none."""
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"unknown workload preset {name!r}; presets: {', '.join(list_presets())}", field="preset"
        )
    return path


def load_spec_file(path: str | Path) -> WorkloadSpec:
    """Read and validate a workload spec YAML file (errors name the file and the field)."""
    from recstack.workload.spec import WorkloadSpec  # lazy: numpy (CLI start-up lists the presets)

    return parse_config(WorkloadSpec, load_yaml_file(path), source=str(path))


def load_workload(name_or_path: str | Path) -> WorkloadSpec:
    """A preset by name (``uniform``, ``production``) or a spec YAML file by path.

    Anything that looks like a path (has a YAML suffix or a path separator, or exists)
    is read as a file; otherwise it must name a preset.
    """
    text = str(name_or_path)
    path = Path(text)
    looks_like_path = path.suffix.lower() in (".yaml", ".yml") or "/" in text or "\\" in text or path.exists()
    if looks_like_path:
        return load_spec_file(path)
    return load_spec_file(preset_path(text))
