"""RunConfig: every option of one profiling run, typed, documented and validated in one place.

The CLI flags of ``recstack profile`` are generated from these fields
(:func:`recstack.cli_types.add_run_arguments`), the Python API takes them as
``config=`` or keyword overrides, ``recstack profile --config run.yaml`` loads
them from YAML, and the profile stores them whole as ``run.config``.

Adding an option means adding one field here: its type (``Literal`` gives the
CLI choices), default, ``description`` (the CLI help) and range (``ge``/``le``,
checked for the API, YAML and the CLI alike, the CLI's errors naming the
flag). Read it at run time as ``opts.<field>`` in the runner
(:class:`recstack.profiling.runner.ProfileOptions` forwards every field).

Field metadata (``json_schema_extra``):

* ``"file": True``: the value may name a file (a workload spec, stage rules, a
  machine file); :meth:`RunConfig.key` hashes the file's contents, not its
  path, and a name that is not a file (a preset, a zoo id) counts by name.
* ``"cli": {...}``: how the flag is generated: ``positional`` (the model),
  ``metavar``, ``default`` (a CLI default that differs from the API's), or
  ``"cli": False`` to keep a field off the command line.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from recstack.config.limits import BATCH_SIZE_MAX, SEED_MAX, TASKS_MAX  # shared with zoo and workload
from recstack.errors import ConfigError

ITERS_MAX = 100_000
SCALE_MAX = 1000.0
THREADS_MAX = 65_536
LEARNING_RATE_MAX = 1e6
SHARDING_TYPES = ("table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel")
NPROC_MAX = 64  # ranks launched on this host (shard-sim predicts beyond)


def _pathlike_to_str(value: Any) -> Any:
    """Accept ``pathlib.Path`` (any os.PathLike) where a file name is expected."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _none_word(value: Any) -> Any:
    """``none`` (any case) on the command line or in YAML means no value."""
    value = _pathlike_to_str(value)
    return None if isinstance(value, str) and value.strip().lower() == "none" else value


def _rules_to_dict(value: Any) -> Any:
    """Stage rules given as a pydantic object (``StageRules``) are kept inline as their dict."""
    value = _pathlike_to_str(value)
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return value.model_dump(mode="json")
    return value


FileName = Annotated[str, BeforeValidator(_pathlike_to_str)]


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask), not the host's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class RunConfig(BaseModel):
    """One profiling run's options (what to run and how), without output-only options."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, validate_default=False)

    model: str | None = Field(
        None,
        description="zoo id, a model YAML file, or package.module:factory",  # the CLI lists the ids (cli_types)
        json_schema_extra={"file": True, "cli": {"positional": True, "metavar": "MODEL"}},
    )
    scale: float = Field(
        1.0, gt=0, le=SCALE_MAX, allow_inf_nan=False,
        description="multiply every table's rows by this factor (zoo models)",
    )
    batch_size: int = Field(1024, ge=1, le=BATCH_SIZE_MAX, description="samples per batch")
    workload: FileName = Field(
        "uniform",
        description="workload preset (uniform, production) or a workload spec YAML (zoo models)",
        json_schema_extra={"file": True},
    )
    mode: Literal["inference", "train"] = Field("inference", description="forward only, or a full training step")
    optimizer: Literal["sgd", "adagrad"] = Field("sgd", description="optimizer of train mode")
    learning_rate: float = Field(
        0.01, gt=0, le=LEARNING_RATE_MAX, allow_inf_nan=False, description="optimizer learning rate (train mode)"
    )
    threads: int | None = Field(
        None, ge=1, le=THREADS_MAX,
        description="intra-op CPU threads (default: torch's choice); more than the usable cores is clamped",
    )
    backend: Literal["torch", "torchrec", "tbe"] = Field(
        "torch", description="embedding backend of zoo models"
    )
    table_dtype: Literal["fp32", "fp16", "int8"] = Field(
        "fp32", description="embedding table dtype (fp16/int8: tbe inference only)"
    )
    dtype: Literal["fp32", "bf16"] = Field("fp32", description="dense-layer compute dtype")
    tasks: int | None = Field(None, ge=1, le=TASKS_MAX, description="prediction tasks (mtwnd only)")
    iters: int = Field(20, ge=2, le=ITERS_MAX, description="timed steps per pass")
    warmup: int = Field(5, ge=0, le=ITERS_MAX, description="untimed steps before the passes")
    op_iters: int = Field(3, ge=1, le=ITERS_MAX, description="steps in the op pass (torch.profiler)")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="seed of weights, batches and labels")
    stage_rules: str | dict[str, Any] | None = Field(
        None,
        description="YAML with rules: [{match: <glob>, stage: <stage>}] (API: also inline rules)",
        json_schema_extra={"file": True, "cli": {"metavar": "RULES.yaml"}},
    )
    machine: str | dict[str, Any] | None = Field(
        None,
        description="machine file for the roofline and bound classes (recstack machine --json > m.json); "
        "'auto' uses this host's cached measurement if present, 'none' skips",
        json_schema_extra={"file": True, "cli": {"default": "auto", "metavar": "FILE|auto|none"}},
    )

    device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu", description="where the model runs: cpu, cuda (needs torch.cuda), auto (cuda if available)"
    )
    workload_batches: Literal["fixed", "query"] = Field(
        "fixed",
        description="fixed: every batch has batch-size samples; query: batches as serving forms them "
        "(queries from the workload's query sizes split into batches of at most batch-size)",
    )
    nproc: int = Field(
        1, ge=1, le=NPROC_MAX,
        description="ranks: more than 1 launches them with torchrun (gloo on CPU) under TorchRec's "
        "DistributedModelParallel (torchrec backend)",
    )
    sharding: FileName = Field(
        "table_wise",
        description="embedding sharding of --nproc > 1: table_wise, row_wise, column_wise, table_row_wise, "
        "data_parallel, auto (TorchRec's planner) or a plan YAML (see docs/distributed.md)",
        json_schema_extra={"file": True, "cli": {"metavar": "TYPE|auto|PLAN.yaml"}},
    )
    rank_placement: Literal["os", "pin"] = Field(
        "pin",
        description="CPUs of --nproc > 1 ranks: pin (each rank on its own cores, when ranks x threads fit the "
        "usable cores; else unpinned, recorded) or os (the scheduler places them)",
    )
    compile: str | dict[str, Any] | None = Field(
        None,
        description="compile config YAML (torch.compile settings kept apart from the model: defaults + rules; "
        "docs/compile.md)",
        json_schema_extra={"file": True, "cli": {"metavar": "COMPILE.yaml"}},
    )

    _normalise_stage_rules = field_validator("stage_rules", mode="before")(_rules_to_dict)
    _normalise_compile = field_validator("compile", mode="before")(_rules_to_dict)
    _normalise_machine = field_validator("machine", mode="before")(_none_word)

    @field_validator("sharding")
    @classmethod
    def _sharding_known(cls, v: str) -> str:
        if v in SHARDING_TYPES or v == "auto" or Path(v).is_file():
            return v
        raise ValueError(f"must be one of {', '.join(SHARDING_TYPES)}, auto, or a plan YAML file")

    @field_validator("threads")
    @classmethod
    def _clamp_threads(cls, v: int | None) -> int | None:
        cores = usable_cores()
        if v is not None and v > cores:
            warnings.warn(
                f"threads: {v} requested but only {cores} cores are usable by this process; using {cores}",
                UserWarning,
                stacklevel=2,
            )
            return cores
        return v

    @field_validator("device")
    @classmethod
    def _check_device(cls, v: str) -> str:
        if v == "cuda":
            import torch  # only for cuda: the CLI's start-up and every CPU run stay torch-free here

            if not torch.cuda.is_available():
                raise ValueError("cuda is not available to torch on this host; use cpu (or auto)")
        return v

    def resolved_device(self) -> str:
        """``cpu`` or ``cuda``: ``auto`` resolved against this host's torch."""
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    # -- building --------------------------------------------------------------
    @classmethod
    def build(
        cls,
        base: RunConfig | dict[str, Any] | None = None,
        overrides: dict[str, Any] | None = None,
        *,
        name: Any = None,
        source: str | None = None,
    ) -> RunConfig:
        """``base`` (a RunConfig or a dict) with ``overrides`` applied, validated.

        Errors are :class:`ConfigError` naming the field as ``name(field)``
        (e.g. the CLI flag), and ``source`` (e.g. a YAML file).
        """
        if base is not None and not isinstance(base, (RunConfig, dict)):
            raise ConfigError(f"must be a recstack.RunConfig or a dict (got {type(base).__name__})", field="config")
        # Only the fields set: RunConfig.model_fields_set keeps saying which were given.
        data = base.model_dump(exclude_unset=True) if isinstance(base, RunConfig) else dict(base or {})
        data.update(overrides or {})
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise config_error(exc, name=name, source=source) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> RunConfig:
        """Load a run config YAML; relative file names in it are relative to the YAML's folder."""
        from recstack.config.loading import load_yaml_file

        data = load_yaml_file(path)
        if not isinstance(data, dict):
            raise ConfigError(f"expected a mapping of options, got {type(data).__name__}", source=str(path))
        base = Path(path).parent
        for fname in file_fields():
            v = data.get(fname)
            if isinstance(v, str) and not Path(v).is_absolute() and (base / v).is_file():
                data[fname] = str(base / v)
        return cls.build(data, source=str(path))

    def updated(self, **overrides: Any) -> RunConfig:
        """A validated copy with ``overrides`` (field names) applied."""
        return RunConfig.build(self, overrides)

    # -- identity -----------------------------------------------------------------
    def key(self) -> str:
        """A stable sha256 (hex) of the options; referenced files count by contents, names by name."""
        data = self.model_dump(mode="json")
        for fname in file_fields():
            data[fname] = _identity(fname, data[fname])
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def file_fields() -> list[str]:
    """Fields whose value may name a file (hashed by contents in :meth:`RunConfig.key`)."""
    return [n for n, f in RunConfig.model_fields.items() if (f.json_schema_extra or {}).get("file")]


def _identity(fname: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, dict):
        canon = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
        return {"inline_sha256": hashlib.sha256(canon.encode("utf-8")).hexdigest()}
    p = Path(value)
    if p.is_file():
        try:
            return {"file_sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        except OSError as exc:
            raise ConfigError(f"cannot read {p} ({exc.strerror or exc})", field=fname) from None
    return value


def field_range(fname: str) -> str | None:
    """The allowed range of a numeric field as text (``1..16777216``, ``> 0 and <= 1000``), from its constraints."""
    ge = gt = le = None
    for m in RunConfig.model_fields[fname].metadata:
        ge = getattr(m, "ge", ge)
        gt = getattr(m, "gt", gt)
        le = getattr(m, "le", le)
    if ge is not None and le is not None:
        return f"{_fmt(ge)}..{_fmt(le)}"
    parts = [f"> {_fmt(gt)}" if gt is not None else None, f">= {_fmt(ge)}" if ge is not None else None,
             f"<= {_fmt(le)}" if le is not None else None]
    text = " and ".join(p for p in parts if p)
    return text or None


def config_error(exc: ValidationError, *, name: Any = None, source: str | None = None) -> ConfigError:
    """The first pydantic error as a one-line ConfigError; ``name(field)`` says how to name the field."""
    from recstack.config.loading import validation_message

    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ())]
    fname = loc[0] if loc else ""
    label, msg = validation_message(exc)
    kind = err.get("type", "")
    allowed = field_range(fname) if fname in RunConfig.model_fields else None
    if kind == "extra_forbidden":
        msg = f"unknown option; the options are {', '.join(RunConfig.model_fields)}"
    elif allowed and kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"):
        within = f"within {allowed}" if ".." in allowed else allowed
        msg = f"must be {within} (got {err.get('input')!r})"
    elif allowed:
        msg += f"; allowed: {allowed}"
    shown = name(fname) if (name and fname in RunConfig.model_fields) else label
    return ConfigError(msg, source=source, field=shown)


def _fmt(v: float) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v)


def check_field(fname: str, value: Any, flag: str | None = None) -> Any:
    """Validate one value against RunConfig's rule for ``fname`` (e.g. ``workload stats --seed``)."""
    try:
        RunConfig.model_validate({fname: value})
    except ValidationError as exc:
        raise config_error(exc, name=lambda _n: flag or fname) from None
    return value


__all__ = ["RunConfig", "check_field", "config_error", "field_range", "file_fields", "usable_cores"]
