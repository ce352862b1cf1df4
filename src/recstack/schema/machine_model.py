"""The machine file as a pydantic model: what a machine file must hold for recstack to use it.

:func:`check_machine` validates a machine dict (schema versions 1 to
:data:`recstack.hardware.machine.SCHEMA_VERSION` all load) and raises

* :class:`~recstack.errors.DataError` naming the first missing key or
  malformed part (``machine file is missing key 'gemm_flops.fp32'``);
* :class:`~recstack.errors.ConfigError` naming the field when a value is
  impossible: a roof (GEMM FLOP/s, stream or gather bytes/s) that is zero,
  negative or not finite, or a negative latency.

Only what recstack reads is typed; every other key is kept as it is
(``extra="allow"``), so files from newer or older recstacks with more keys
still load. The validated dict itself is what callers keep (the model is a
check, not a conversion).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from recstack.errors import ConfigError, DataError

ThreadKey = Annotated[str, StringConstraints(pattern=r"^\d+$")]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]
VALUE_ERRORS = ("greater_than", "greater_than_equal", "finite_number")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Figure(_Open):
    """A roof figure (FLOP/s or bytes/s) with its spread; the roofs use ``max`` (the best repeat)."""

    median: Positive
    max: Positive


class LatencyFigure(_Open):
    """ns per dependent load (not a roof: 0 appears in old Python-loop measurements' minima)."""

    median: NonNegative
    max: NonNegative


class GemmEntry(_Open):
    by_threads: Annotated[dict[ThreadKey, Figure], Field(min_length=1)]


class GemmFlops(_Open):
    fp32: GemmEntry
    bf16: GemmEntry | None = None
    fp16: GemmEntry | None = None


class StreamKinds(_Open):
    copy_: Figure = Field(alias="copy")  # ``copy`` would shadow BaseModel.copy
    triad: Figure


class StreamBandwidth(_Open):
    by_threads: Annotated[dict[ThreadKey, StreamKinds], Field(min_length=1)]


class GatherCell(_Open):
    threads: int
    dist: str
    row_bytes: Annotated[int, Field(gt=0)]
    table_bytes: Annotated[int, Field(gt=0)]
    bandwidth: Figure


class GatherBandwidth(_Open):
    grid: Annotated[list[GatherCell], Field(min_length=1)]


class Latency(_Open):
    """``method`` ``native`` (trusted) or ``python-fallback`` (``trusted: false``); v1/v2 files lack both."""

    dram: LatencyFigure
    method: str | None = None
    trusted: bool | None = None


class MachineFile(_Open):
    """A machine file (``recstack machine``; read by every roofline): only what recstack reads is typed."""

    host: str
    cpu_model: str
    measured_at: str
    quick: bool
    gemm_flops: GemmFlops
    stream_bandwidth: StreamBandwidth
    gather_bandwidth: GatherBandwidth
    latency_ns: Latency
    caches: list[dict[str, Any]]
    schema_version: int | None = None
    mode: str | None = None
    gpu: dict[str, Any] | None = None


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc)


def _error(exc: ValidationError, source: str) -> Exception:
    """The first error as one line naming the key (DataError) or the bad field (ConfigError)."""
    e = exc.errors(include_url=False)[0]
    loc = tuple(e["loc"])
    if "[key]" in loc:
        i = loc.index("[key]")
        return DataError(f"{source}: {_where(loc[: i - 1])} key {loc[i - 1]!r} is not a thread count")
    where = _where(loc)
    if e["type"] == "missing":
        return DataError(f"{source}: machine file is missing key {where!r}")
    if e["type"] in VALUE_ERRORS:
        return ConfigError(
            f"{e['msg'].lower()} (got {e['input']!r}); a roof must be a positive measured figure: "
            "re-measure with `recstack machine --refresh`",
            source=source,
            field=where,
        )
    if e["type"] == "too_short":
        return DataError(f"{source}: {where} must be a non-empty list of measured cells (or map)")
    return DataError(f"{source}: {where}: {e['msg']} (got {e.get('input')!r})")


def check_machine(d: Any, source: str, newest: int) -> MachineFile:
    """The validated model of machine dict ``d`` (raises DataError/ConfigError, see the module docstring)."""
    if not isinstance(d, dict):
        raise DataError(f"{source}: a machine file must hold a JSON object")
    ver = d.get("schema_version", newest)
    if not isinstance(ver, int) or isinstance(ver, bool) or ver > newest:
        raise DataError(f"{source}: schema_version {ver!r} is newer than this recstack reads ({newest})")
    try:
        return MachineFile.model_validate(d)
    except ValidationError as exc:
        raise _error(exc, source) from None
